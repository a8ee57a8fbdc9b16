using System.Collections.Concurrent;
using System.Diagnostics;
using System.Globalization;
using System.Net;
using System.Text.Json;
using System.Text.Json.Nodes;
using FaaST.ScaleController.Deploy;
using FaaST.ScaleController.Platform;

namespace FaaST.Bench;

/// <summary>
/// ./faast bench scaling: a load ramp (up, plateau, down) against the platform process (frontend + scale controller
/// + local instances) serving bench/apps/scale-bench, whose function holds one of an instance's 4 worker threads
/// for 50 ms. Records, each second, the offered and served rate, p50/p99 latency, the instances and the
/// controller's votes and decisions, and draws them (bench/results/scaling.png). Beside it, in the same run: the
/// frontend hop, a no-op GET through the frontend against the same GET straight to the instance, interleaved.
/// </summary>
public static class ScalingScenario
{
    private const int WorkMs = 50;

    public static async Task RunAsync(string home, bool quick)
    {
        var report = new Report("scaling", quick);
        using var state = new TempDir("faast-bench-scaling-");
        var platformDll = Path.Combine(home, "src", "ScaleController", "bin", "Release", "net10.0", "FaaST.ScaleController.dll");
        var port = PlatformProcess.FreePort();
        var info = new ProcessStartInfo("dotnet") { RedirectStandardOutput = true, RedirectStandardError = true, UseShellExecute = false };
        foreach (var a in new[] { platformDll, "platform", "--port", port.ToString(CultureInfo.InvariantCulture), "--state", state.Path, "--azurite-in-memory", "--isolation", "off" })
            info.ArgumentList.Add(a);
        info.Environment["FAAST_HOME"] = home;
        info.Environment.Remove("AzureWebJobsStorage");
        var log = new ConcurrentQueue<string>();
        using var platform = Process.Start(info)!;
        platform.OutputDataReceived += (_, e) => { if (e.Data is not null) log.Enqueue(e.Data); };
        platform.ErrorDataReceived += (_, e) => { if (e.Data is not null) log.Enqueue(e.Data); };
        platform.BeginOutputReadLine();
        platform.BeginErrorReadLine();
        var baseUri = new Uri($"http://127.0.0.1:{port}/");
        using var handler = new SocketsHttpHandler { MaxConnectionsPerServer = 512, PooledConnectionLifetime = TimeSpan.FromMinutes(5) };
        using var http = new HttpClient(handler) { Timeout = TimeSpan.FromSeconds(60) };
        // The platform's admin API needs its admin key (STATE/keys/admin): made here or by the platform, whichever
        // comes first, and read by both. Only admin requests carry it (the app's requests go through `http`).
        using var admin = new HttpClient { Timeout = TimeSpan.FromSeconds(60) };
        admin.DefaultRequestHeaders.Authorization = new System.Net.Http.Headers.AuthenticationHeaderValue("Bearer", PlatformKeys.LoadOrCreate(state.Path).AdminKey);
        try
        {
            await WaitForAsync(() => TryGetAsync(admin, new Uri(baseUri, "admin/platform")), TimeSpan.FromSeconds(90), "the platform to answer", log);

            using var app = new TempDir("faast-bench-scaling-app-");
            var appDir = Path.Combine(app.Path, "scale-bench");
            CopyDirectory(Path.Combine(home, "bench", "apps", "scale-bench"), appDir);
            async Task DeployAsync(string policy)
            {
                File.WriteAllText(Path.Combine(appDir, "faast.json"), policy);
                using var zip = new MemoryStream();
                Packager.Zip(appDir, zip, includeSettings: true);
                zip.Position = 0;
                using var put = await admin.PutAsync(new Uri(baseUri, "admin/platform/apps/scale-bench"), new StreamContent(zip));
                if (!put.IsSuccessStatusCode)
                    throw new InvalidOperationException($"deploy failed: {(int)put.StatusCode} {await put.Content.ReadAsStringAsync()}");
            }
            // First pinned to one instance (minInstances = maxInstances = 1): the hop and the 8-connection throughput
            // compare the frontend with that one instance, so the platform must not scale out under wrk's load.
            await DeployAsync("""{ "scale": { "minInstances": 1, "maxInstances": 1, "keepAlive": "01:00:00" } }""");
            var work = new Uri(baseUri, $"scale-bench/api/work/{WorkMs}");
            var noop = new Uri(baseUri, "scale-bench/api/Noop");

            // The frontend's hop beside a direct call to the one instance, interleaved (same moments of a noisy machine).
            var status = await PlatformStatusAsync(admin, baseUri);
            var instance = status.Apps.Single().Instances.Single();
            var direct = new Uri(instance.Address, "api/Noop");
            using var load = new LoadGenerator();
            var p50s = await LoadGenerator.InterleavedP50Async([load.Get(noop), load.Get(direct)],
                TimeSpan.FromSeconds(quick ? 1.5 : 5), TimeSpan.FromSeconds(quick ? 4 : 20));
            report.Add("frontend_p50_ms", p50s[0], "no-op GET through the frontend");
            report.Add("direct_p50_ms", p50s[1], "the same GET straight to the instance");
            report.Add("frontend_overhead_p50_ms", p50s[0] - p50s[1], "goal <= 0.1");
            // The same two GETs from an external client (wrk), frontend and direct alternating (three rounds, two in a
            // quick run); each side's median. On a shared machine a round can land in another's build: the median of
            // alternating rounds is what both sides saw alike.
            var rounds = quick ? 2 : 3;
            var wrkWindow = TimeSpan.FromSeconds(quick ? 1 : 5);
            // Beside them, nginx in front of the same instance: what a hop costs a mature C proxy on this machine.
            var (nginx, nginxMissing) = await NginxProxy.StartAsync(direct);
            using var nginxProxy = nginx;
            var nginxNoop = nginx is null ? null : new Uri(nginx.Address, "api/Noop");
            var runs = new List<(Wrk.Result Frontend, Wrk.Result Direct, Wrk.Result? Nginx)>();
            for (var i = 0; i < rounds; i++)
                runs.Add((await Wrk.RunAsync(noop, wrkWindow), await Wrk.RunAsync(direct, wrkWindow),
                    nginxNoop is null ? null : await Wrk.RunAsync(nginxNoop, wrkWindow)));
            var wrkFrontend = Median(runs.Select(r => r.Frontend.P50Ms));
            var wrkDirect = Median(runs.Select(r => r.Direct.P50Ms));
            report.Add("wrk_frontend_p50_ms", wrkFrontend, "wrk -t1 -c1 --latency through the frontend");
            report.Add("wrk_direct_p50_ms", wrkDirect, "wrk straight to the instance");
            report.Add("wrk_frontend_overhead_p50_ms", Median(runs.Select(r => r.Frontend.P50Ms - r.Direct.P50Ms)),
                "the hop as an external client sees it (median of the rounds' differences); goal <= 0.1");
            if (nginxNoop is not null)
                report.Add("wrk_nginx_overhead_p50_ms", Median(runs.Select(r => r.Nginx!.Value.P50Ms - r.Direct.P50Ms)),
                    "nginx in front of the same instance, same rounds: a C proxy's hop here");
            else
                report.Config("wrk_nginx", nginxMissing!);
            report.Add("wrk_frontend_p99_ms", Median(runs.Select(r => r.Frontend.P99Ms)));
            report.Add("wrk_direct_p99_ms", Median(runs.Select(r => r.Direct.P99Ms)));
            // Throughput at 8 connections on the one instance, frontend and direct alternating; the ratio per round
            // (both sides of a round saw the same machine), its median reported.
            const int loadConnections = 8;
            var loaded = new List<(Wrk.Result Frontend, Wrk.Result Direct)>();
            for (var i = 0; i < rounds; i++)
                loaded.Add((await Wrk.RunAsync(noop, wrkWindow, loadConnections), await Wrk.RunAsync(direct, wrkWindow, loadConnections)));
            report.Add("wrk_frontend_rps_c8", Median(loaded.Select(r => r.Frontend.RequestsPerSecond)), "wrk -t1 -c8 through the frontend, one instance");
            report.Add("wrk_direct_rps_c8", Median(loaded.Select(r => r.Direct.RequestsPerSecond)), "wrk -t1 -c8 straight to the instance");
            report.Add("wrk_frontend_rps_ratio_c8", Median(loaded.Select(r => r.Frontend.RequestsPerSecond / r.Direct.RequestsPerSecond)),
                "frontend / direct requests per second, median of the rounds' ratios; goal >= 0.9");
            report.Config("wrk_rounds", rounds);
            report.Config("wrk_window_s", wrkWindow.TotalSeconds);

            // Then the ramp's policy, short cool-downs (the defaults are minutes-scale; a benchmark has seconds): a new
            // version, the pinned instance rolled to it; the ramp starts once that one instance is all there is.
            await DeployAsync($$"""
                { "scale": { "minInstances": 1, "maxInstances": 4, "interval": "00:00:01",
                             "scaleOutCooldown": "00:00:0{{(quick ? 2 : 3)}}", "scaleInCooldown": "00:00:{{(quick ? "04" : "10")}}",
                             "scaleInRounds": {{(quick ? 2 : 3)}}, "keepAlive": "01:00:00" } }
                """);
            await WaitForAsync(async () => (await PlatformStatusAsync(admin, baseUri)).Apps.Single() is { Version: 2, Instances: [{ Version: "v2", State: "ready" }] },
                TimeSpan.FromSeconds(90), "the app's second version on one instance", log);

            // The ramp: (seconds, requests per second at the start, at the end).
            (double Seconds, double From, double To)[] ramp = quick
                ? [(4, 10, 10), (8, 10, 150), (14, 150, 150), (4, 150, 10), (16, 5, 5)]
                : [(10, 10, 10), (30, 10, 240), (40, 240, 240), (10, 240, 10), (60, 5, 5)];
            var timeline = await RunRampAsync(http, admin, baseUri, work, ramp);
            var total = timeline.Sum(t => t.Sent);
            var failed = timeline.Sum(t => t.Failed);
            report.Add("requests", total);
            report.Add("failed_requests", failed, "5xx or transport errors during the whole ramp");
            report.Add("max_instances", timeline.Max(t => t.Instances));
            report.Add("final_instances", timeline[^1].Instances, "after the load went down");
            var plateau = timeline.Where(t => t.Offered >= ramp.Max(r => r.To) * 0.95).ToArray();
            if (plateau.Length > 0)
            {
                report.Add("plateau_p50_ms", Median(plateau.Select(t => t.P50Ms)), $"work {WorkMs} ms");
                report.Add("plateau_p99_ms", Median(plateau.Select(t => t.P99Ms)));
                report.Add("plateau_instances", Median(plateau.Select(t => (double)t.Instances)));
            }
            var final = await PlatformStatusAsync(admin, baseUri);
            var decisions = final.Apps.Single().Decisions;
            report.Add("scale_out_decisions", decisions.Count(d => d.Kind == "out"));
            report.Add("scale_in_decisions", decisions.Count(d => d.Kind == "in"));
            report.Config("work_ms", WorkMs);
            report.Config("worker_threads_per_instance", 4);
            report.Config("ramp", new JsonArray(ramp.Select(r => (JsonNode)new JsonArray(r.Seconds, r.From, r.To)).ToArray()));
            report.Config("network", "loopback (the frontend, the instances and Azurite on one machine)");
            report.Config("timeline", new JsonArray(timeline.Select(t => (JsonNode)new JsonObject
            {
                ["t"] = Math.Round(t.Second, 1),
                ["offered"] = Math.Round(t.Offered, 1),
                ["served"] = t.Served,
                ["failed"] = t.Failed,
                ["p50_ms"] = Math.Round(t.P50Ms, 2),
                ["p99_ms"] = Math.Round(t.P99Ms, 2),
                ["instances"] = t.Instances,
                ["desired"] = t.Desired,
            }).ToArray()));
            report.Config("decisions", JsonSerializer.SerializeToNode(decisions.Select(d => new { at = d.At, kind = d.Kind, from = d.From, to = d.To, reason = d.Reason }).ToArray()));
            report.Config("last_votes", JsonSerializer.SerializeToNode(final.Apps.Single().LastVotes.Select(v => new { instance = v.Instance, policy = v.Policy, delta = v.Delta, reason = v.Reason }).ToArray()));
            var file = report.Write(home);
            Plot(home, file);
        }
        catch
        {
            foreach (var line in log.TakeLast(40))
                Console.Error.WriteLine(line);
            throw;
        }
        finally
        {
            Process.Start("kill", ["-TERM", platform.Id.ToString(CultureInfo.InvariantCulture)])?.WaitForExit();
            if (!platform.WaitForExit(60_000))
                platform.Kill(entireProcessTree: true);
        }
    }

    private sealed record Sample(double Second, double Offered, int Sent, int Served, int Failed, double P50Ms, double P99Ms, int Instances, int Desired);

    /// <summary>
    /// Open-loop load (requests leave on schedule whatever the latency, as users' requests would), one bucket per
    /// second; the platform's instance count sampled each second from /admin/platform.
    /// </summary>
    private static async Task<List<Sample>> RunRampAsync(HttpClient http, HttpClient admin, Uri baseUri, Uri work, (double Seconds, double From, double To)[] ramp)
    {
        var duration = ramp.Sum(r => r.Seconds);
        var buckets = new ConcurrentBag<(int Bucket, double Ms, bool Ok)>[(int)Math.Ceiling(duration) + 1];
        for (var i = 0; i < buckets.Length; i++)
            buckets[i] = [];
        var sent = new int[buckets.Length];
        var offered = new double[buckets.Length];
        var instances = new int[buckets.Length];
        var desired = new int[buckets.Length];
        var inFlight = new List<Task>();
        var clock = Stopwatch.StartNew();
        using var sampling = new CancellationTokenSource();
        var sampler = Task.Run(async () =>
        {
            while (!sampling.IsCancellationRequested)
            {
                var b = Math.Min((int)clock.Elapsed.TotalSeconds, buckets.Length - 1);
                try
                {
                    var app = (await PlatformStatusAsync(admin, baseUri)).Apps.Single();
                    instances[b] = app.Instances.Count(i => i.State == "ready");
                    desired[b] = app.Desired;
                }
                catch (HttpRequestException)
                {
                    // a missed sample stays 0 and is filled from its neighbour below
                }
                try
                {
                    await Task.Delay(1000, sampling.Token);
                }
                catch (OperationCanceledException)
                {
                    return;
                }
            }
        });
        double next = 0;
        var phaseStart = 0.0;
        foreach (var (seconds, from, to) in ramp)
        {
            while (next < phaseStart + seconds)
            {
                var f = (next - phaseStart) / seconds;
                var rate = from + ((to - from) * f);
                var wait = next - clock.Elapsed.TotalSeconds;
                if (wait > 0.001)
                    await Task.Delay(TimeSpan.FromSeconds(wait));
                var bucket = (int)next;
                sent[bucket]++;
                offered[bucket] = rate;
                inFlight.Add(SendAsync(http, work, bucket, buckets));
                next += 1.0 / rate;
            }
            phaseStart += seconds;
        }
        await Task.WhenAll(inFlight);
        await sampling.CancelAsync();
        await sampler;
        var result = new List<Sample>();
        for (var b = 0; b < (int)duration; b++)
        {
            var done = buckets[b].ToArray();
            var ok = done.Where(d => d.Ok).Select(d => d.Ms).Order().ToArray();
            if (instances[b] == 0 && b > 0)
                (instances[b], desired[b]) = (instances[b - 1], desired[b - 1]);
            result.Add(new Sample(b, offered[b], sent[b], ok.Length, done.Count(d => !d.Ok),
                ok.Length > 0 ? ok[ok.Length / 2] : 0, ok.Length > 0 ? ok[Math.Min(ok.Length - 1, (int)(ok.Length * 0.99))] : 0,
                instances[b], desired[b]));
        }
        return result;
    }

    private static async Task SendAsync(HttpClient http, Uri url, int bucket, ConcurrentBag<(int, double, bool)>[] buckets)
    {
        var start = Stopwatch.GetTimestamp();
        bool ok;
        try
        {
            using var response = await http.GetAsync(url);
            ok = response.IsSuccessStatusCode;
        }
        catch (Exception e) when (e is HttpRequestException or TaskCanceledException)
        {
            ok = false;
        }
        buckets[bucket].Add((bucket, Stopwatch.GetElapsedTime(start).TotalMilliseconds, ok));
    }

    private static double Median(IEnumerable<double> values)
    {
        var sorted = values.Order().ToArray();
        if (sorted.Length == 0)
            return 0;
        var middle = sorted.Length / 2;
        return sorted.Length % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
    }

    private static async Task<PlatformStatus> PlatformStatusAsync(HttpClient http, Uri baseUri)
    {
        var text = await http.GetStringAsync(new Uri(baseUri, "admin/platform"));
        return JsonSerializer.Deserialize(text, PlatformJsonContext.Default.PlatformStatus)!;
    }

    private static async Task<bool> TryGetAsync(HttpClient http, Uri url)
    {
        try
        {
            using var response = await http.GetAsync(url);
            return response.StatusCode == HttpStatusCode.OK;
        }
        catch (HttpRequestException)
        {
            return false;
        }
    }

    private static async Task WaitForAsync(Func<Task<bool>> condition, TimeSpan timeout, string what, ConcurrentQueue<string> log)
    {
        var end = DateTime.UtcNow + timeout;
        while (!await condition())
        {
            if (DateTime.UtcNow > end)
                throw new TimeoutException($"waited {timeout.TotalSeconds:0} s for {what}; its output:\n{string.Join('\n', log)}");
            await Task.Delay(200);
        }
    }

    /// <summary>bench/results/scaling.png: offered and served load, instances, p50/p99 over time (matplotlib).</summary>
    private static void Plot(string home, string json)
    {
        var script = Path.Combine(home, "bench", "plots", "scaling.py");
        var png = Path.ChangeExtension(json, ".png");
        var info = new ProcessStartInfo("/usr/bin/python3") { UseShellExecute = false, RedirectStandardError = true };
        foreach (var a in new[] { script, json, png })
            info.ArgumentList.Add(a);
        using var p = Process.Start(info)!;
        var error = p.StandardError.ReadToEnd();
        p.WaitForExit();
        Console.WriteLine(p.ExitCode == 0 ? $"wrote {Path.GetRelativePath(home, png)}" : $"no plot (python3 matplotlib: {error.Trim()})");
    }

    private static void CopyDirectory(string from, string to)
    {
        foreach (var dir in Directory.EnumerateDirectories(from, "*", SearchOption.AllDirectories))
            Directory.CreateDirectory(Path.Combine(to, Path.GetRelativePath(from, dir)));
        Directory.CreateDirectory(to);
        foreach (var file in Directory.EnumerateFiles(from, "*", SearchOption.AllDirectories))
            if (!file.Contains($"{Path.DirectorySeparatorChar}.faast{Path.DirectorySeparatorChar}", StringComparison.Ordinal))
                File.Copy(file, Path.Combine(to, Path.GetRelativePath(from, file)));
    }

    private sealed class TempDir(string prefix) : IDisposable
    {
        public string Path { get; } = Directory.CreateTempSubdirectory(prefix).FullName;

        public void Dispose()
        {
            try
            {
                Directory.Delete(Path, recursive: true);
            }
            catch (IOException)
            {
                // an instance still closing a file: the OS cleans tmp
            }
        }
    }
}
