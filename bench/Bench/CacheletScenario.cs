using System.Diagnostics;
using System.Globalization;
using System.Net.Http.Json;
using FaaST.Storage;
using FaaST.Hosting.Status;

namespace FaaST.Bench;

/// <summary>
/// ./faast bench cachelet: the same unchanged functions (read the whole input with inblob.read(),
/// or use the Buffer in Node) on the vanilla platform and with the cachelet, side by side in one
/// run, at 1 MB and 256 MB, plus one HEAD round trip and the single-copy property.
/// </summary>
public static class CacheletScenario
{
    public static async Task RunAsync(string home, bool quick)
    {
        // A host's hot path is still tier-0 JIT code for the first second or so: with a 0.5 s warm-up the
        // quick run measured the strong preset 0.45 ms over no-op + HEAD where the full run, warmed 2 s,
        // measured 0.14 (2026-11-25). 1.5 s is enough for the latency rows and keeps --quick under a minute.
        var warmup = TimeSpan.FromSeconds(quick ? 1.5 : 2);
        var window = TimeSpan.FromSeconds(quick ? 2 : 8);
        var bigRuns = quick ? 3 : 7;
        var report = new Report("cachelet", quick);
        report.Config("storage", "Azurite (loopback, in memory, unshaped)");
        report.Config("latency_clients", 1);
        report.Config("window_s", window.TotalSeconds);
        report.Config("runs_256mb", bigRuns);

        Console.WriteLine("starting Azurite");
        await using var azurite = await AzuriteProcess.StartAsync(home);
        using var store = new BlobStore(azurite.ConnectionString);
        await store.CreateContainerIfNotExistsAsync("bench");
        await store.UploadAsync("bench", "1mb.bin", RandomBytes(1 << 20));
        var big256 = RandomBytes(256 << 20);
        await store.UploadAsync("bench", "256mb.bin", big256);
        await store.UploadAsync("bench", "256mb-shared.bin", big256); // read first by the two-worker measurement
        var env = new Dictionary<string, string> { ["AzureWebJobsStorage"] = azurite.ConnectionString };
        using var load = new LoadGenerator();
        var python = Path.Combine(home, "bench", "apps", "python-bench");
        var node = Path.Combine(home, "bench", "apps", "node-bench");
        const string big = """ "memoryLimit": "4GiB" """;

        double vanilla1, vanilla256, local1, local256;
        Console.WriteLine("vanilla (cache off)");
        await using (var host = await StartAsync(home, python, $$"""{ "cache": { "enabled": false, {{big}} } }""", 1, env))
        {
            vanilla1 = (await load.RunAsync(Url(host, "/api/read/1mb.bin"), 1, warmup, window, Expect(1 << 20))).P50Ms;
            report.Add("vanilla_1mb_python_p50_ms", vanilla1, "no cache: every read downloads");
            vanilla256 = await FixedRunsAsync(Url(host, "/api/read/256mb.bin"), bigRuns, 256 << 20);
            report.Add("vanilla_256mb_python_p50_ms", vanilla256, $"median of {bigRuns}");
        }

        // Latency goals compare a local hit with a no-op invocation of the same host, taking turns
        // request by request, so both see the same moments of this shared, noisy machine.
        Console.WriteLine("cachelet, default preset storage/sync/storage");
        await using (var host = await StartAsync(home, python, $$"""{ "cache": { {{big}} } }""", 1, env))
        {
            var p50 = await LoadGenerator.InterleavedP50Async(
            [
                load.Get(Url(host, "/api/Noop")),
                load.Get(Url(host, "/api/read/1mb.bin"), Expect(1 << 20)),
                async () => await store.GetPropertiesAsync("bench", "1mb.bin") is not null,
            ], warmup, window);
            report.Add("noop_default_host_python_p50_ms", p50[0], "no-op in the default-preset host (interleaved)");
            report.Add("head_p50_ms", p50[2], "one blob HEAD from the bench process (interleaved)");
            report.Add("lh_strong_1mb_python_p50_ms", p50[1], "local hit after one HEAD (interleaved)");
            report.Add("lh_strong_1mb_overhead_ms", p50[1] - p50[0] - p50[2], "over no-op + HEAD (goal <= 0.3)");
        }

        Console.WriteLine("cachelet, local-read preset local/sync/local, 2 workers");
        await using (var host = await StartAsync(home, python, $$"""{ "cache": { "consistency": "local/sync/local", {{big}} } }""", 2, env))
        {
            var p50 = await LoadGenerator.InterleavedP50Async(
            [
                load.Get(Url(host, "/api/Noop")),
                load.Get(Url(host, "/api/read/1mb.bin"), Expect(1 << 20)),
                load.Get(Url(host, "/api/shared/1mb.bin"), Expect(1 << 20)),
            ], warmup, window);
            local1 = p50[1];
            report.Add("noop_python_p50_ms", p50[0], "baseline: no bindings, same host (interleaved)");
            report.Add("lh_1mb_python_p50_ms", local1, "local hit, no HEAD (interleaved)");
            report.Add("lh_1mb_view_python_p50_ms", p50[2], "local hit through getbuffer(): no copy into bytes (interleaved)");
            report.Add("lh_1mb_overhead_ms", local1 - p50[0], "over no-op (goal <= 0.3)");
            await FixedRunsAsync(Url(host, "/api/read/256mb.bin"), 1, 256 << 20); // the miss that fills the cache
            local256 = await FixedRunsAsync(Url(host, "/api/read/256mb.bin"), bigRuns, 256 << 20);
            report.Add("lh_256mb_python_p50_ms", local256, $"median of {bigRuns}");
            report.Add("two_workers_256mb_extra_rss_mb", await TwoWorkersExtraAsync(host), "proportional RSS of host + workers, before vs after both read it");
        }
        report.Add("lh_speedup_1mb", vanilla1 / local1, "vanilla / local hit");
        report.Add("lh_speedup_256mb", vanilla256 / local256, "vanilla / local hit");

        Console.WriteLine("cachelet, node, local/sync/local");
        await using (var host = await StartAsync(home, node, $$"""{ "cache": { "consistency": "local/sync/local", {{big}} } }""", 1, env))
            report.Add("lh_1mb_node_p50_ms", (await load.RunAsync(Url(host, "/api/read/1mb.bin"), 1, warmup, window, Expect(1 << 20))).P50Ms, "local hit, one copy into a Buffer");
        Console.WriteLine("cachelet, a local miss under a prefetch flood (in-process)");
        await PrefetchFlood.RunAsync(store, report, quick);
        report.Write(home);
    }

    private static Uri Url(HostProcess host, string path) => new(host.BaseAddress, path);

    private static Func<HttpResponseMessage, Task<bool>> Expect(long length) =>
        async r => (await r.Content.ReadAsStringAsync()).StartsWith(length.ToString(CultureInfo.InvariantCulture), StringComparison.Ordinal);

    /// <summary>Copies the benchmark app to a temporary folder with the given faast.json. It keeps its
    /// name, which names the user its workers run as (as root), so runs reuse one user.</summary>
    private static Task<HostProcess> StartAsync(string home, string app, string faastJson, int workers, Dictionary<string, string> env) =>
        HostProcess.StartAsync(home, HostProcess.CopyApp(app, faastJson), workers, env);

    private static async Task<double> FixedRunsAsync(Uri url, int runs, long length)
    {
        using var client = new HttpClient { Timeout = TimeSpan.FromMinutes(5) };
        var times = new List<double>();
        for (var i = 0; i < runs; i++)
        {
            var sw = Stopwatch.StartNew();
            var body = await client.GetStringAsync(url);
            times.Add(sw.Elapsed.TotalMilliseconds);
            if (!body.StartsWith(length.ToString(CultureInfo.InvariantCulture), StringComparison.Ordinal))
                throw new InvalidOperationException($"{url} answered \"{body}\"");
        }
        times.Sort();
        return times[times.Count / 2];
    }

    /// <summary>
    /// Two workers read one 256 MB object, not cached before, at the same time through the zero-copy
    /// view: how much memory did that add? One cached copy, shared by all three processes, is ~256 MB.
    /// </summary>
    private static async Task<double> TwoWorkersExtraAsync(HostProcess host)
    {
        using var client = new HttpClient { Timeout = TimeSpan.FromMinutes(5) };
        var status = await client.GetFromJsonAsync(Url(host, "/admin/host/status"), StatusJsonContext.Default.HostStatus)
            ?? throw new InvalidOperationException("/admin/host/status answered null");
        var pids = status.WorkerProcessIds.Append(status.HostProcessId).ToArray();
        if (pids.Length < 3)
            throw new InvalidOperationException("expected two workers");
        var before = await SettledPssAsync(pids);
        var reads = await Task.WhenAll(client.GetStringAsync(Url(host, "/api/shared/256mb-shared.bin")), client.GetStringAsync(Url(host, "/api/shared/256mb-shared.bin")));
        if (reads.Any(r => !r.StartsWith("268435456", StringComparison.Ordinal)))
            throw new InvalidOperationException("a shared read failed: " + string.Join(" | ", reads));
        var after = pids.Sum(Pss);
        return (after - before) / (1024.0 * 1024.0);
    }

    /// <summary>
    /// The processes' summed PSS once it stops moving. Python workers hand a grown heap back to the
    /// system after 1 s idle (the 256 MB read() runs just before leave one per worker), and a baseline
    /// taken before that trim makes the shared read look like it freed memory.
    /// </summary>
    private static async Task<long> SettledPssAsync(int[] pids)
    {
        var last = pids.Sum(Pss);
        for (var i = 0; i < 14; i++)
        {
            await Task.Delay(1500); // longer than the workers' idle-trim delay, so one sample straddles it
            var now = pids.Sum(Pss);
            if (Math.Abs(now - last) < (4 << 20))
                return now;
            last = now;
        }
        throw new InvalidOperationException($"the RSS of processes {string.Join(", ", pids)} did not settle in 21 s");
    }

    /// <summary>Proportional set size: shared pages are split among the processes that map them, so a sum counts them once.</summary>
    private static long Pss(int pid)
    {
        foreach (var line in File.ReadLines($"/proc/{pid}/smaps_rollup"))
            if (line.StartsWith("Pss:", StringComparison.Ordinal))
                return long.Parse(line["Pss:".Length..].Trim().Split(' ')[0], CultureInfo.InvariantCulture) * 1024;
        return 0;
    }

    private static byte[] RandomBytes(int n)
    {
        var data = GC.AllocateUninitializedArray<byte>(n);
        new Random(7).NextBytes(data);
        return data;
    }
}
