using System.Diagnostics;
using System.Globalization;
using System.Text.Json;
using FaaST.Storage;

namespace FaaST.Bench.Fuzz;

/// <summary>
/// ./faast bench fuzz [--quick] [--seed N] [--only TARGET,...]: the seeded fuzzers over configuration
/// files (in process, and a sample of mutated apps on real host processes), HTTP requests to a real
/// host, the peer port (gRPC and bulk framing), the worker channel, and a platform process's deploy endpoint and admin API. Writes bench/results/fuzz.json
/// and prints a table. Every loop is bounded in count and time; all traffic is loopback.
/// </summary>
public static class FuzzScenario
{
    public static async Task<int> RunAsync(string home, bool quick, string[] args)
    {
        var seed = SeedFrom(args);
        var only = OptionValue(args, "--only")?.Split(',', StringSplitOptions.RemoveEmptyEntries | StringSplitOptions.TrimEntries);
        bool Wanted(string target) => only is null || only.Any(o => target.StartsWith(o, StringComparison.OrdinalIgnoreCase));
        var perTarget = quick ? 1_000 : 10_000;
        Console.WriteLine($"fuzz: seed {seed} (reproduce with --seed {seed}), {perTarget} inputs per target{(quick ? " (--quick)" : "")}");
        var clock = Stopwatch.StartNew();
        var results = new List<TargetResult>();

        using (var config = new ConfigFuzzer())
        {
            foreach (var target in ConfigFuzzer.Targets.Where(Wanted))
            {
                var r = FuzzRun.Config(config, target, seed, perTarget, TimeSpan.FromSeconds(quick ? 10 : 150), minimize: Environment.GetEnvironmentVariable("FAAST_FUZZ_NO_MINIMIZE") is null);
                Print(r);
                results.Add(r);
            }
        }

        var network = new[] { "http", "peer-grpc", "peer-bulk", "worker", "host-apps" }.Where(Wanted).ToArray();
        if (network.Length > 0)
        {
            Console.WriteLine("fuzz: starting Azurite (loopback, in memory) for the host processes");
            await using var azurite = await AzuriteProcess.StartAsync(home);
            var work = Path.Combine(Path.GetTempPath(), $"faast-fuzz-{Environment.ProcessId}");
            try
            {
                if (network.Any(n => n is "http" or "peer-grpc" or "peer-bulk"))
                    results.AddRange(await SampleHostTargetsAsync(home, work, azurite, network, seed, quick));
                if (network.Contains("host-apps"))
                    results.Add(Report(await AppHostFuzzer.RunAsync(home, Path.Combine(work, "host-apps"), azurite.ConnectionString, seed,
                        quick ? 12 : 200, TimeSpan.FromSeconds(quick ? 30 : 420))));
                if (network.Contains("worker"))
                    results.Add(Report(await WorkerTargetAsync(home, work, azurite, seed, quick)));
            }
            finally
            {
                if (Directory.Exists(work))
                    Directory.Delete(work, recursive: true);
            }
        }
        var platform = new[] { "platform-deploy", "platform-admin" }.Where(Wanted).ToArray();
        if (platform.Length > 0)
            results.AddRange(await PlatformTargetsAsync(home, platform, seed, quick));
        Write(home, seed, quick, results, clock.Elapsed);
        Console.WriteLine();
        Console.WriteLine($"{"target",-26} {"inputs",8} {"accepted",9} {"rejected",9} {"crashes",8} {"causes",7}");
        foreach (var r in results)
            Console.WriteLine($"{r.Target,-26} {r.Inputs,8} {r.Accepted,9} {r.Rejected,9} {r.Crashes,8} {r.Findings.Count,7}");
        Console.WriteLine($"fuzz: {results.Sum(r => r.Crashes)} crashes ({results.Sum(r => r.Findings.Count)} causes) in {clock.Elapsed.TotalSeconds:0} s; seed {seed}; bench/results/fuzz.json");
        return 0;
    }

    /// <summary>HTTP and the peer port against one real host serving bench/apps/fuzz-app.</summary>
    private static async Task<List<TargetResult>> SampleHostTargetsAsync(string home, string work, AzuriteProcess azurite, string[] wanted, int seed, bool quick)
    {
        var results = new List<TargetResult>();
        var app = CopyApp(Path.Combine(home, "bench", "apps", "fuzz-app"), Path.Combine(work, "sample", "fuzz-app"));
        Console.WriteLine("fuzz: starting a host on bench/apps/fuzz-app");
        await using var host = FuzzHost.Start(home, app, azurite.ConnectionString);
        if (!await host.WaitServingAsync(1, TimeSpan.FromSeconds(90)))
            throw new InvalidOperationException($"the fuzz app's host did not come up:\n{host.Output}");
        // The blob every check reads back (5 bytes), written through the app itself.
        using (var client = new HttpClient { BaseAddress = host.BaseAddress, Timeout = TimeSpan.FromSeconds(30) })
            (await client.PostAsync("/api/store/fuzzcheck", new StringContent("hello"))).EnsureSuccessStatusCode();
        var count = quick ? 1_000 : 10_000;
        var budget = TimeSpan.FromSeconds(quick ? 20 : 150);
        // The account as the host names its store (what a peer sends in BlobRef.account).
        string account;
        using (var store = new BlobStore(azurite.ConnectionString))
            account = store.Endpoint.AbsoluteUri;
        host.TakeNewErrors();
        if (wanted.Contains("http"))
            results.Add(Report(WithHostErrors(host, await HttpFuzzer.RunAsync(host, seed, count, budget))));
        if (wanted.Contains("peer-grpc"))
            results.Add(Report(WithHostErrors(host, await PeerFuzzer.RunGrpcAsync(host, "fuzz-app", account, seed, count, budget))));
        if (wanted.Contains("peer-bulk"))
            results.Add(Report(WithHostErrors(host, await PeerFuzzer.RunBulkAsync(host, "fuzz-app", account, seed, count, budget))));
        return results;
    }

    /// <summary>The platform's deploy endpoint and admin API, on a real platform process (its own Azurite), half the inputs with its admin key.</summary>
    private static async Task<List<TargetResult>> PlatformTargetsAsync(string home, string[] wanted, int seed, bool quick)
    {
        var results = new List<TargetResult>();
        var state = Path.Combine(Path.GetTempPath(), $"faast-fuzz-platform-{Environment.ProcessId}");
        Directory.CreateDirectory(state);
        Console.WriteLine("fuzz: starting a platform process");
        await using (var platform = new PlatformProcess(home, state, "--azurite-in-memory"))
        {
            await platform.StartAsync(TimeSpan.FromSeconds(180));
            var mark = platform.Mark;
            var target = new PlatformTarget(platform.Port, platform.AdminKey, () => platform.Process is { HasExited: false }, () =>
            {
                var errors = platform.ErrorsSince(mark);
                mark = platform.Mark;
                return errors;
            });
            var count = quick ? 1_000 : 10_000;
            if (wanted.Contains("platform-deploy"))
                results.Add(Report(await PlatformFuzzer.RunDeployAsync(target, seed, count, TimeSpan.FromSeconds(quick ? 60 : 900))));
            if (wanted.Contains("platform-admin"))
                results.Add(Report(await PlatformFuzzer.RunAdminAsync(target, seed, count, TimeSpan.FromSeconds(quick ? 30 : 300))));
        }
        Directory.Delete(state, recursive: true);
        return results;
    }

    /// <summary>The worker channel, from a fake worker dialing into a real host.</summary>
    private static async Task<TargetResult> WorkerTargetAsync(string home, string work, AzuriteProcess azurite, int seed, bool quick)
    {
        var app = CopyApp(Path.Combine(home, "bench", "apps", "fuzz-app"), Path.Combine(work, "worker", "fuzz-app"));
        var (fakeHome, reports) = WorkerFuzzer.MakeFakeHome(Path.Combine(work, "worker"));
        Console.WriteLine("fuzz: starting a host whose worker is the fuzzer");
        await using var host = FuzzHost.Start(home, app, azurite.ConnectionString, fakeHome: fakeHome);
        var result = await WorkerFuzzer.RunAsync(host, reports, seed, quick ? 1_000 : 10_000, TimeSpan.FromSeconds(quick ? 25 : 180), malformedSessions: quick ? 2 : 5);
        return WithHostErrors(host, result);
    }

    /// <summary>Adds what the host logged as unhandled during the target's run (one cause per exception type and place).</summary>
    internal static TargetResult WithHostErrors(FuzzHost host, TargetResult r)
    {
        foreach (var line in host.TakeNewErrors())
        {
            var m = System.Text.RegularExpressions.Regex.Match(line, @"([A-Za-z.]+(?:Exception|Error))[: ].*?\s+at ([A-Za-z0-9_.`<>]+)");
            var signature = m.Success ? $"the host logged an unhandled {m.Groups[1].Value} at {m.Groups[2].Value}" : "the host logged an unhandled exception";
            r.Count("host_logged_unhandled_exceptions");
            r.Add(Outcome.Crash(signature, line.Length > 3000 ? line[..3000] : line), -1);
        }
        return r;
    }

    private static TargetResult Report(TargetResult r)
    {
        Print(r);
        return r;
    }

    private static string CopyApp(string source, string target)
    {
        foreach (var file in Directory.EnumerateFiles(source, "*", SearchOption.AllDirectories))
        {
            var to = Path.Combine(target, Path.GetRelativePath(source, file));
            Directory.CreateDirectory(Path.GetDirectoryName(to)!);
            File.Copy(file, to);
        }
        return target;
    }

    private static void Print(TargetResult r)
    {
        Console.WriteLine($"fuzz: {r.Target}: {r.Inputs} inputs, {r.Accepted} accepted, {r.Rejected} rejected with a clear error, {r.Crashes} crashes in {r.Seconds:0.0} s{(r.Stopped is null ? "" : $" ({r.Stopped})")}");
        foreach (var (k, v) in r.Counters)
            Console.WriteLine($"        {k}: {v}");
        foreach (var f in r.Findings)
            Console.WriteLine($"    CRASH x{f.Count} (first at input {f.Index}): {f.Signature}\n        input: {Oneline(f.Input, 300)}\n        {Oneline(f.Detail, 400)}");
    }

    private static string Oneline(string s, int max)
    {
        var t = s.Replace("\r", "\\r", StringComparison.Ordinal).Replace("\n", "\\n", StringComparison.Ordinal);
        return t.Length > max ? t[..max] + "..." : t;
    }

    private static void Write(string home, int seed, bool quick, List<TargetResult> results, TimeSpan elapsed)
    {
        var dir = Path.Combine(home, "bench", "results");
        Directory.CreateDirectory(dir);
        var doc = new
        {
            scenario = "fuzz",
            date = DateTime.UtcNow.ToString("yyyy-MM-dd HH:mm 'UTC'", CultureInfo.InvariantCulture),
            quick,
            seed,
            seconds = Math.Round(elapsed.TotalSeconds, 1),
            machine = new { cores = Environment.ProcessorCount, os = System.Runtime.InteropServices.RuntimeInformation.OSDescription, dotnet = Environment.Version.ToString() },
            targets = results.Select(r => new
            {
                target = r.Target,
                inputs = r.Inputs,
                accepted = r.Accepted,
                rejected_with_clear_error = r.Rejected,
                crashes = r.Crashes,
                seed = r.Seed,
                seconds = Math.Round(r.Seconds, 1),
                stopped = r.Stopped,
                counters = r.Counters,
                findings = r.Findings.Select(f => new { signature = f.Signature, count = f.Count, first_index = f.Index, input = f.Input, detail = f.Detail }),
            }),
        };
        File.WriteAllText(Path.Combine(dir, "fuzz.json"), JsonSerializer.Serialize(doc, new JsonSerializerOptions { WriteIndented = true }));
    }

    private static int SeedFrom(string[] args)
    {
        if (OptionValue(args, "--seed") is { } text)
            return int.TryParse(text, NumberStyles.AllowLeadingSign, CultureInfo.InvariantCulture, out var s)
                ? s
                : throw new ArgumentException($"--seed must be a whole number, not \"{text}\"");
        return Random.Shared.Next(1, int.MaxValue);
    }

    private static string? OptionValue(string[] args, string name)
    {
        var i = Array.IndexOf(args, name);
        return i >= 0 && i + 1 < args.Length ? args[i + 1] : null;
    }
}
