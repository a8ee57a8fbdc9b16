using System.Diagnostics;
using System.Globalization;
using System.Net.Http.Json;
using System.Security.Cryptography;
using System.Text.Json.Nodes;
using FaaST.FlashBackend.Calibration;
using FaaST.Protos.Flash;
using FaaST.Runtime.Hosting;
using FaaST.Storage;
using Grpc.Core;
using Grpc.Net.Client;

namespace FaaST.Bench.Flash;

/// <summary>
/// The flash tier end to end (issue 22: "an app whose working set is 4× its cache reads evicted objects from flash,
/// <c>flash_hit_vs_storage_speedup</c> measured against blob storage on the shaped network"). Two instances of
/// samples/flash-app side by side in one run, each in its own namespace of bench/net/cloudnet.sh's network (storage at
/// 45 MB/s per instance, Faa$T's VM link halved; loopback when the machine cannot build it, and the JSON says so):
/// <list type="bullet">
/// <item><b>flash</b>: the sample's faast.json (8 MiB cache) with <c>flash.address</c> naming a flash server this run
/// starts (its own process, a file device in /var/tmp, O_DIRECT) on the unshaped platform address, the app registered
/// on it (FlashAdmin) and its token given as the app setting FAAST_FLASH_TOKEN, as an operator-run tier is
/// (docs/flash.md). Before the server starts, `fit` measures this disk (cost model C* and token rate, a short sweep)
/// and the server schedules with that profile: the i3.xlarge default prices a 4 KiB write at 7–10 reads, which on this
/// VM's host-cached virtio disk (writes as cheap as reads, docs/flash.md) made every demotion of a 1 MiB object cost
/// 2,560 tokens and starved the reads (the 98 ms hits measured by hand before this scenario existed).</item>
/// <item><b>storage</b>: the same app and cache with the flash tier off: every evicted object is read from storage.</item>
/// </list>
/// 32 objects of 1 MiB (4× the cache) are uploaded to storage, then each app reads them in order, round after round,
/// through its HTTP function (the app's own code reads the blob binding and hashes the bytes; the bench checks length
/// and SHA-256). A cyclic scan 4× the cache misses every time under the cache's eviction, so from the second round on
/// each read of the flash app is a flash hit (the object was demoted when it was evicted) and each of the other app's
/// is a storage read. Each flash-app read is classified by its instance's <c>/admin/flash</c> counters (hit, miss,
/// fallback, stale, skipped) before and after; rounds alternate between the apps so the machine's noise hits both.
/// Reported: p50/p95 of flash hits and of the baseline's storage reads from round 2 on, their ratio
/// (<c>flash_hit_vs_storage_speedup</c> = storage p50 / flash-hit p50), the same through wrk (an external client:
/// a Lua script walking the names, all reads of each app), and the app's server-side stats.
/// </summary>
internal static class FlashEndToEnd
{
    private const string Container = "objects";
    private const int ObjectBytes = 1 << 20;
    private const int Objects = 32;
    private const string Cache = "8MiB";

    private static readonly Stopwatch Clock = Stopwatch.StartNew();

    private static void Say(string message) => Console.WriteLine($"[{Clock.Elapsed.TotalSeconds,6:0.0} s] flash e2e: {message}");

    /// <summary>`./faast bench flash-e2e [--quick] [--loopback]`: this part alone, to bench/results/flash-e2e.json.</summary>
    public static async Task<int> RunScenarioAsync(string home, bool quick, string[] args)
    {
        var report = new Report("flash-e2e", quick);
        report.Config("loadavg_at_start", File.ReadAllText("/proc/loadavg").Trim());
        var series = await RunAsync(home, quick, args.Contains("--loopback"), report);
        report.Config("series", series);
        report.Write(home);
        return 0;
    }

    public static async Task<JsonObject> RunAsync(string home, bool quick, bool loopback, Report report)
    {
        var availability = loopback
            ? new Net.CloudNetworkAvailability(false, "--loopback asked for it")
            : await Net.CloudNetwork.AvailableAsync(home);
        if (!availability.IsAvailable)
        {
            Say($"shaped network unavailable: {availability.Reason}; running on loopback");
            await using var plain = new LoopbackNetwork(home, availability.Reason);
            return await RunAsync(home, quick, plain, report);
        }
        // Two namespaces (one per app); subnet 198.18.3.0/24 and its own prefix so a bandwidth run's network is untouched.
        await using var shaped = await ShapedNetwork.UpAsync(home, 2, new Net.CloudNetworkSettings { Prefix = "fcnfl", Subnet = 3 }, CancellationToken.None);
        return await RunAsync(home, quick, shaped, report);
    }

    private static async Task<JsonObject> RunAsync(string home, bool quick, IBandwidthNetwork network, Report report)
    {
        int rounds = quick ? 3 : 6;
        var work = Directory.CreateDirectory(Path.Combine("/var/tmp", $"faast-flash-e2e-{Environment.ProcessId}")).FullName;
        var logs = Path.Combine(Path.GetTempPath(), "faast-bench-flash-e2e-" + DateTime.UtcNow.ToString("yyyyMMdd-HHmmss", CultureInfo.InvariantCulture));
        report.Config("e2e_network", network.Description);
        report.Config("e2e_workload", $"{Objects} objects of {ObjectBytes >> 20} MiB read in order, {rounds} rounds, cache {Cache} (working set 4x); samples/flash-app's Read function (blob input binding, SHA-256 of the bytes)");
        report.Config("e2e_flash_server", $"its own process on {network.ServiceAddress} (unshaped: a tier beside the instances), file device in /var/tmp with O_DIRECT, scheduled with the profile `fit` measured on that disk in this run");
        report.Config("e2e_instance_logs", logs);
        var result = new JsonObject();
        try
        {
            Say($"storage ({network.Description})");
            var connection = await network.StartStorageAsync(CancellationToken.None);
            var names = Enumerable.Range(0, Objects).Select(i => $"o{i:00}").ToArray();
            var hashes = new Dictionary<string, string>();
            using (var store = new BlobStore(connection))
            {
                await store.CreateContainerIfNotExistsAsync(Container);
                var bytes = new byte[ObjectBytes];
                foreach (var name in names)
                {
                    RandomNumberGenerator.Fill(bytes);
                    hashes[name] = Convert.ToHexStringLower(SHA256.HashData(bytes));
                    await store.UploadAsync(Container, name, bytes);
                }
            }

            Say("fitting the cost model on the flash server's disk (DeviceFit, a short sweep)");
            string profile = Path.Combine(work, "device-profile.json");
            await DeviceFit.RunAsync(new DeviceFitOptions
            {
                Path = Path.Combine(work, "fit.dat"),
                SizeBytes = 256L << 20,
                PointDuration = TimeSpan.FromSeconds(quick ? 0.3 : 1),
                OutputPath = profile,
            }, TextWriter.Null);
            result["device_profile"] = JsonNode.Parse(await File.ReadAllTextAsync(profile))!;

            Say("flash server");
            await using var server = await FlashServerProcess.StartAsync(work, network.ServiceAddress, 512L << 20, "--ephemeral", "--device-profile", profile);
            using var adminChannel = GrpcChannel.ForAddress(server.Address);
            var admin = new FlashAdmin.FlashAdminClient(adminChannel);
            var adminAuth = new Metadata { { "authorization", "Bearer " + server.AdminKey } };
            // The app's SLO: 1 MiB reads and as many 1 MiB demotions, ~40 of each a second at most, are ~20K 4 KiB IOPS
            // each way; 40,000 IOPS at p95 5 ms covers both. Admission may refuse it on a slow disk: then the app is
            // registered best-effort (the whole device is its share, being alone) and the JSON says so.
            string tenant = "flash-app", token, tenantClass;
            try
            {
                var r = await admin.RegisterTenantAsync(new RegisterTenantRequest { Tenant = tenant, IopsSlo = 40_000, P95LatencyUs = 5_000 }, adminAuth);
                (token, tenantClass) = (r.Token, r.Class);
            }
            catch (RpcException e) when (e.StatusCode == StatusCode.ResourceExhausted)
            {
                Say($"admission refused the SLO ({e.Status.Detail}); registering best-effort");
                var r = await admin.RegisterTenantAsync(new RegisterTenantRequest { Tenant = tenant }, adminAuth);
                (token, tenantClass) = (r.Token, r.Class + " (LC SLO of 40,000 IOPS refused by admission)");
            }
            report.Config("e2e_tenant", $"{tenant}: requested LC 40,000 IOPS at p95 5 ms; class {tenantClass}");

            var sample = Path.Combine(home, "samples", "flash-app");
            string flashApp = HostProcess.CopyApp(sample,
                $$"""{ "cache": { "cacheCapacity": "{{Cache}}" }, "flash": { "enabled": true, "address": "{{server.Address}}", "timeoutMs": 1000 } }""", "flash-app");
            SetAppSetting(flashApp, "FAAST_FLASH_TOKEN", token);
            string storageApp = HostProcess.CopyApp(sample, $$"""{ "cache": { "cacheCapacity": "{{Cache}}" } }""", "storage-app");
            var environment = new Dictionary<string, string>
            {
                ["FAAST_PEER_SECRET"] = Convert.ToHexString(RandomNumberGenerator.GetBytes(16)),
                ["FAAST_HOME"] = home,
                ["Logging__LogLevel__Default"] = Environment.GetEnvironmentVariable("BENCH_INSTANCE_LOG_LEVEL") ?? "Warning",
            };
            InstanceGroupOptions Group(string app, string name) => new()
            {
                AppDirectory = app,
                Count = 1,
                StorageConnectionString = connection,
                RuntimeDll = Path.Combine(home, "src", "Runtime", "bin", "Release", "net10.0", "FaaST.Runtime.dll"),
                Environment = environment,
                LogDirectory = Path.Combine(logs, name),
            };
            Say("instances: flash-app (tier on) and storage-app (tier off)");
            await using var flash = await network.StartInstancesAsync(Group(flashApp, "flash"), CancellationToken.None);
            await using var plain = await network.StartInstancesAsync(Group(storageApp, "storage"), CancellationToken.None);
            await flash.WaitForWorkersAsync(1, Path.Combine(logs, "flash"));
            await plain.WaitForWorkersAsync(1, Path.Combine(logs, "storage"));

            using var http = new HttpClient { Timeout = TimeSpan.FromMinutes(2) };
            var reader = new Reader(http, flash[0].BaseAddress, plain[0].BaseAddress, network.MasterKey, hashes);
            var flashReads = new List<(int Round, string Kind, double Ms)>();
            var storageReads = new List<(int Round, double Ms)>();
            for (int round = 0; round < rounds; round++)
            {
                // Alternate which app goes first, so neither always follows the other's burst of work on the machine.
                for (int turn = 0; turn < 2; turn++)
                {
                    if ((round + turn) % 2 == 0)
                        foreach (var name in names)
                        {
                            var (kind, ms) = await reader.FlashReadAsync(name);
                            flashReads.Add((round, kind, ms));
                        }
                    else
                        foreach (var name in names)
                            storageReads.Add((round, await reader.StorageReadAsync(name)));
                }
                var kinds = flashReads.Where(r => r.Round == round).GroupBy(r => r.Kind).Select(g => $"{g.Key} {g.Count()}");
                Say($"round {round + 1}/{rounds}: flash-app {string.Join(", ", kinds)}; p50 flash-app {P(flashReads.Where(r => r.Round == round).Select(r => r.Ms), 0.5):0.0} ms, storage-app {P(storageReads.Where(r => r.Round == round).Select(r => r.Ms), 0.5):0.0} ms");
            }
            var hits = flashReads.Where(r => r.Round > 0 && r.Kind == "flash").Select(r => r.Ms).ToArray();
            var fromStorage = storageReads.Where(r => r.Round > 0).Select(r => r.Ms).ToArray();
            var flashAppStorage = flashReads.Where(r => r.Round > 0 && r.Kind != "flash" && r.Kind != "cache").Select(r => r.Ms).ToArray();
            double hitP50 = P(hits, 0.5), storageP50 = P(fromStorage, 0.5);
            report.Add("flash_hit_p50_ms", hitP50, $"{hits.Length} flash hits (rounds 2..{rounds}), p95 {P(hits, 0.95):0.0} ms");
            report.Add("storage_read_p50_ms", storageP50, $"{fromStorage.Length} storage reads of the tier-off app (rounds 2..{rounds}), p95 {P(fromStorage, 0.95):0.0} ms");
            report.Add("flash_hit_vs_storage_speedup", hitP50 > 0 ? storageP50 / hitP50 : 0, "storage read p50 / flash hit p50, same run, " + (network.Shaped ? "shaped network" : "loopback (unshaped)"));
            report.Add("flash_app_hit_fraction", hits.Length / (double)Math.Max(1, flashReads.Count(r => r.Round > 0)), "share of the flash app's reads from round 2 on that were flash hits");
            report.Add("flash_app_storage_reads", flashAppStorage.Length, "reads of the flash app from round 2 on that went to storage (miss, fallback, stale, skipped)");
            result["flash_reads"] = new JsonArray([.. flashReads.Select(r => (JsonNode)new JsonObject { ["round"] = r.Round, ["kind"] = r.Kind, ["ms"] = Math.Round(r.Ms, 2) })]);
            result["storage_reads"] = new JsonArray([.. storageReads.Select(r => (JsonNode)new JsonObject { ["round"] = r.Round, ["ms"] = Math.Round(r.Ms, 2) })]);
            result["instance_flash_status"] = await reader.FlashStatusAsync();

            // The external client: wrk walking the names (one connection, as the reads above), each app for the same time.
            if (Wrk.Available)
            {
                var seconds = TimeSpan.FromSeconds(quick ? 5 : 15);
                string script = Path.Combine(work, "walk.lua");
                await File.WriteAllTextAsync(script, WalkScript(names));
                foreach (var (label, address) in new[] { ("flash", flash[0].BaseAddress), ("storage", plain[0].BaseAddress) })
                {
                    var w = await Wrk.RunScriptAsync(new Uri(address, "api/read/"), seconds, script);
                    report.Add($"wrk_{label}_app_p50_ms", w.P50Ms, $"wrk -t1 -c1 {seconds.TotalSeconds:0} s walking the {Objects} names; p99 {w.P99Ms:0.0} ms, {w.RequestsPerSecond:0.0} reads/s");
                }
            }
            else
                report.Config("wrk", "not installed (Debian package wrk): the external-client rows are absent");
            result["server_stats"] = await ServerStatsAsync(admin, adminAuth);
        }
        finally
        {
            try
            {
                Directory.Delete(work, recursive: true);
            }
            catch (IOException)
            {
            }
        }
        return result;
    }

    private static double P(IEnumerable<double> values, double q)
    {
        var sorted = values.Order().ToArray();
        return sorted.Length == 0 ? 0 : sorted[(int)Math.Min(sorted.Length - 1, Math.Ceiling(q * sorted.Length) - 1)];
    }

    private static void SetAppSetting(string app, string name, string value)
    {
        var path = Path.Combine(app, "local.settings.json");
        var settings = JsonNode.Parse(File.ReadAllText(path))!.AsObject();
        settings["Values"]![name] = value;
        File.WriteAllText(path, settings.ToJsonString());
    }

    /// <summary>A Lua script for wrk: each request the next name, in order, round and round.</summary>
    private static string WalkScript(string[] names) =>
        "local names = {" + string.Join(",", names.Select(n => $"\"{n}\"")) + "}\n" +
        "local i = 0\n" +
        "request = function()\n  i = i % #names + 1\n  return wrk.format(\"GET\", wrk.path .. names[i])\nend\n";

    private static async Task<JsonNode> ServerStatsAsync(FlashAdmin.FlashAdminClient admin, Metadata auth)
    {
        var s = await admin.StatsAsync(new ServerStatsRequest(), auth);
        return JsonNode.Parse(Google.Protobuf.JsonFormatter.Default.Format(s))!;
    }

    /// <summary>The two apps' reads, timed from the request to the last byte of the answer, each answer checked.</summary>
    private sealed class Reader(HttpClient http, Uri flashApp, Uri storageApp, string? masterKey, IReadOnlyDictionary<string, string> hashes)
    {
        public async Task<(string Kind, double Ms)> FlashReadAsync(string name)
        {
            var before = await CountersAsync();
            double ms = await ReadAsync(flashApp, name);
            var after = await CountersAsync();
            string kind = Delta("hits") > 0 ? "flash"
                : Delta("stale") > 0 ? "stale"
                : Delta("fallbacks") > 0 ? "fallback"
                : Delta("skippedReads") > 0 ? "skipped"
                : Delta("misses") > 0 ? "miss"
                : "cache";
            return (kind, ms);

            long Delta(string counter) => after[counter]!.GetValue<long>() - before[counter]!.GetValue<long>();
        }

        public Task<double> StorageReadAsync(string name) => ReadAsync(storageApp, name);

        private async Task<double> ReadAsync(Uri instance, string name)
        {
            long start = Stopwatch.GetTimestamp();
            using var response = await http.GetAsync(new Uri(instance, "api/read/" + name));
            string body = await response.Content.ReadAsStringAsync();
            double ms = Stopwatch.GetElapsedTime(start).TotalMilliseconds;
            if (!response.IsSuccessStatusCode || body != $"{ObjectBytes} {hashes[name]}")
                throw new InvalidOperationException($"read of {name} at {instance}: {(int)response.StatusCode} '{body}', expected '{ObjectBytes} {hashes[name]}'");
            return ms;
        }

        public async Task<JsonNode> FlashStatusAsync()
        {
            using var request = new HttpRequestMessage(HttpMethod.Get, new Uri(flashApp, "admin/flash"));
            if (masterKey is not null)
                request.Headers.Add("x-functions-key", masterKey);
            using var response = await http.SendAsync(request);
            response.EnsureSuccessStatusCode();
            return (await response.Content.ReadFromJsonAsync<JsonNode>())!;
        }

        private async Task<JsonNode> CountersAsync() => (await FlashStatusAsync())["instance"]!;
    }
}
