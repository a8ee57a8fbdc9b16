using FaaST.Storage;

namespace FaaST.Bench;

/// <summary>
/// ./faast bench runtime: the vanilla platform (--no-cache). No-op HTTP functions in Python and Node, and a
/// Python function that reads a 1 MB input blob, each beside its floor (the host's own HTTP
/// endpoint; a direct storage GET of the same blob) in the same run; and a HEAD through the SDK-based store beside
/// a raw HEAD on a SAS URL; and a queue pipeline beside a blob-trigger pipeline (<see cref="PipelineBench"/>).
/// With <c>--baseline-ref REF</c>, first the no-ops of this tree beside REF's, alternating (<see cref="BaselineComparison"/>).
/// </summary>
public static class RuntimeScenario
{
    public static async Task RunAsync(string home, bool quick, string? baselineRef = null)
    {
        var warmup = TimeSpan.FromSeconds(quick ? 0.5 : 3);
        var window = TimeSpan.FromSeconds(quick ? 2 : 10);
        const int workers = 2;
        const int throughputClients = 8;
        var report = new Report("runtime", quick);
        report.Config("python_workers", workers);
        report.Config("node_workers", workers);
        report.Config("latency_clients", 1);
        report.Config("throughput_clients", throughputClients);
        report.Config("window_s", window.TotalSeconds);
        report.Config("storage", "Azurite (loopback, in memory, unshaped)");

        Console.WriteLine("starting Azurite");
        await using var azurite = await AzuriteProcess.StartAsync(home, queues: true);
        using var store = new BlobStore(azurite.ConnectionString);
        await store.CreateContainerIfNotExistsAsync("bench");
        var payload = new byte[1024 * 1024];
        new Random(42).NextBytes(payload);
        await store.UploadAsync("bench", "1mb.bin", payload);
        var env = new Dictionary<string, string> { ["AzureWebJobsStorage"] = azurite.ConnectionString };
        using var load = new LoadGenerator();
        if (baselineRef is not null)
            await BaselineComparison.RunAsync(home, baselineRef, quick, env, load, warmup, window, workers, throughputClients, report);

        Console.WriteLine("storage HEAD: SDK-based store vs raw request, taking turns");
        var (sdkHead, rawHead) = await HeadPairAsync(store, azurite.ConnectionString, warmup, window);
        report.Add("storage_head_p50_ms", sdkHead, "HEAD of the 1 MB blob through BlobStore (Azure.Storage.Blobs, SharedKey), 1 client");
        report.Add("storage_raw_head_p50_ms", rawHead, "the same HEAD as a plain HttpClient request on a SAS URL, no SDK pipeline (baseline)");
        report.Add("storage_head_sdk_overhead_ms", sdkHead - rawHead, "goal: <= 0.1 ms");

        Console.WriteLine("host start: process start to the first answered no-op, python, 2 workers");
        var starts = new List<double>();
        for (var i = 0; i < (quick ? 1 : 5); i++)
        {
            var (started, ms) = await HostProcess.StartTimedAsync(home, Path.Combine(home, "bench", "apps", "python-bench"), workers, env, "/api/Noop", "--no-cache");
            await started.DisposeAsync();
            starts.Add(ms);
        }
        starts.Sort();
        report.Add("host_start_ms", starts[starts.Count / 2], $"median of {starts.Count}: `dotnet FaaST.Runtime.dll` started to the first answered Python no-op (2 workers, storage given)");

        Console.WriteLine("python host: 2 workers");
        await using (var python = await HostProcess.StartAsync(home, Path.Combine(home, "bench", "apps", "python-bench"), workers, env, "--no-cache"))
        {
            var floor = await load.RunAsync(new Uri(python.BaseAddress, "/admin/host/ping"), 1, warmup, window);
            report.Add("http_floor_p50_ms", floor.P50Ms, "host's own endpoint, no worker (baseline)");
            var noop = await load.RunAsync(new Uri(python.BaseAddress, "/api/Noop"), 1, warmup, window);
            report.Add("noop_python_p50_ms", noop.P50Ms, "1 client");
            report.Add("noop_python_p99_ms", noop.P99Ms, "1 client");
            var noopLoad = await load.RunAsync(new Uri(python.BaseAddress, "/api/Noop"), throughputClients, warmup, window);
            report.Add("noop_python_rps", noopLoad.Rps, $"{throughputClients} clients, closed loop");
            report.Add("noop_python_loaded_p50_ms", noopLoad.P50Ms, $"{throughputClients} clients");
            report.Add("noop_python_loaded_p99_ms", noopLoad.P99Ms, $"{throughputClients} clients");
            var blob = await load.RunAsync(new Uri(python.BaseAddress, "/api/read/1mb.bin"), 1, warmup, window,
                async r => await r.Content.ReadAsStringAsync() == "1048576");
            report.Add("blob1mb_vanilla_python_p50_ms", blob.P50Ms, "reads a 1 MB input blob, 1 client");
            report.Add("blob1mb_vanilla_python_p99_ms", blob.P99Ms, "1 client");
            var direct = await StorageGetAsync(store, warmup, window);
            report.Add("storage_get_1mb_p50_ms", direct, "same blob straight from storage (baseline)");
        }

        await TracedNoopAsync(home, workers, throughputClients, env, load, warmup, window, report);
        await PipelineBench.RunAsync(home, env, store, quick, report);

        Console.WriteLine("node host: 2 workers");
        await using (var node = await HostProcess.StartAsync(home, Path.Combine(home, "bench", "apps", "node-bench"), workers, env, "--no-cache"))
        {
            var noop = await load.RunAsync(new Uri(node.BaseAddress, "/api/Noop"), 1, warmup, window);
            report.Add("noop_node_p50_ms", noop.P50Ms, "1 client");
            report.Add("noop_node_p99_ms", noop.P99Ms, "1 client");
            var noopLoad = await load.RunAsync(new Uri(node.BaseAddress, "/api/Noop"), throughputClients, warmup, window);
            report.Add("noop_node_rps", noopLoad.Rps, $"{throughputClients} clients, closed loop");
            report.Add("noop_node_loaded_p50_ms", noopLoad.P50Ms, $"{throughputClients} clients");
        }

        // Issue 24: the same no-op in the worker-indexed models, beside the function.json one, request by request.
        Console.WriteLine("programming models: Python v1 vs v2 and Node v3 vs v4 no-ops, taking turns");
        // The v4 app with the real @azure/functions in its node_modules, as `npm install` leaves it (./faast setup installs it).
        var v4App = Directory.CreateTempSubdirectory("faast-bench-nodev4-").FullName;
        try
        {
            CopyTree(Path.Combine(home, "bench", "apps", "node-v4-bench"), v4App);
            CopyTree(Path.Combine(home, "workers", "node", "test-support", "v4-deps", "node_modules"), Path.Combine(v4App, "node_modules"));
            foreach (var (runtime, before, after, beforeName, afterName) in new[]
            {
                ("python", Path.Combine(home, "bench", "apps", "python-bench"), Path.Combine(home, "bench", "apps", "python-v2-bench"), "v1", "v2"),
                ("node", Path.Combine(home, "bench", "apps", "node-bench"), v4App, "v3", "v4"),
            })
            {
                var (oldP50, newP50) = await ModelPairAsync(home, before, after, workers, env, warmup, window);
                report.Add($"noop_{runtime}_{beforeName}_interleaved_p50_ms", oldP50, $"the function.json no-op ({beforeName}), taking turns with {afterName} (baseline)");
                report.Add($"noop_{runtime}_{afterName}_p50_ms", newP50, $"the same no-op declared in the {afterName} model (worker indexing), 1 client");
                report.Add($"noop_{runtime}_{afterName}_minus_{beforeName}_ms", newP50 - oldP50, "goal: <= 0.05 ms");
            }
        }
        finally
        {
            Directory.Delete(v4App, recursive: true);
        }
        await TimerSkewAsync(home, env, store, quick, report);
        report.Write(home);
    }

    /// <summary>
    /// timer_skew_p50_ms: a Python timer function every second (bench/apps/timer-bench) records when it started beside
    /// the occurrence it runs for; the skew is the function's own start minus the scheduled second, what a user's timer
    /// sees (the host's lease and status writes, the invocation, the worker).
    /// </summary>
    private static async Task TimerSkewAsync(string home, Dictionary<string, string> env, BlobStore store, bool quick, Report report)
    {
        Console.WriteLine("timer: a Python function every second, its start against its scheduled second");
        var runs = quick ? 10 : 60;
        await using (var host = await HostProcess.StartAsync(home, Path.Combine(home, "bench", "apps", "timer-bench"), 1, env, "--no-cache"))
        {
            var deadline = DateTime.UtcNow + TimeSpan.FromSeconds(runs + 30);
            while (await CountAsync(store, "timer-bench") < runs + 2 && DateTime.UtcNow < deadline)
                await Task.Delay(500);
        }
        var skews = new List<double>();
        await foreach (var item in store.ListAsync("timer-bench"))
        {
            var blob = await store.DownloadAsync("timer-bench", item.Name);
            using var run = System.Text.Json.JsonDocument.Parse(blob!.Data);
            if (run.RootElement.GetProperty("past_due").GetBoolean() || run.RootElement.GetProperty("scheduled").GetString() is not { } scheduled)
                continue; // the first run of an empty status has no occurrence to compare with
            var started = DateTime.Parse(run.RootElement.GetProperty("started").GetString()!, System.Globalization.CultureInfo.InvariantCulture).ToUniversalTime();
            skews.Add((started - DateTime.Parse(scheduled, System.Globalization.CultureInfo.InvariantCulture).ToUniversalTime()).TotalMilliseconds);
        }
        if (skews.Count < runs / 2)
            throw new InvalidOperationException($"the timer ran {skews.Count} times in {runs + 30} s; expected about {runs}");
        skews.Sort();
        report.Add("timer_skew_p50_ms", skews[skews.Count / 2], $"scheduled second to the function's start, median of {skews.Count} runs; goal <= 50 ms");
        report.Add("timer_skew_p99_ms", skews[Math.Min(skews.Count - 1, (int)Math.Ceiling(skews.Count * 0.99) - 1)], "the same, 99th percentile");

        static async Task<int> CountAsync(BlobStore store, string container)
        {
            var n = 0;
            try
            {
                await foreach (var _ in store.ListAsync(container))
                    n++;
            }
            catch (BlobStorageException e) when (e.Status == 404)
            {
                // not created yet: no run so far
            }
            return n;
        }
    }

    /// <summary>
    /// p50 of the no-op of two hosts (two programming models of one function) from one client, alternating request by
    /// request, so both see the same moments of a shared machine.
    /// </summary>
    private static async Task<(double Before, double After)> ModelPairAsync(string home, string beforeApp, string afterApp, int workers,
        Dictionary<string, string> env, TimeSpan warmup, TimeSpan window)
    {
        await using var before = await HostProcess.StartAsync(home, beforeApp, workers, env, "--no-cache");
        await using var after = await HostProcess.StartAsync(home, afterApp, workers, env, "--no-cache");
        using var client = new HttpClient(new SocketsHttpHandler { UseProxy = false, UseCookies = false, AllowAutoRedirect = false });
        var hosts = new[] { new Uri(before.BaseAddress, "/api/Noop"), new Uri(after.BaseAddress, "/api/Noop") };
        var samples = new[] { new List<double>(), new List<double>() };
        foreach (var (span, record) in new[] { (warmup, false), (window, true) })
        {
            var end = DateTime.UtcNow + span;
            for (var i = 0; DateTime.UtcNow < end; i++)
            {
                var which = i & 1;
                var clock = System.Diagnostics.Stopwatch.StartNew();
                using var response = await client.GetAsync(hosts[which]);
                var body = await response.Content.ReadAsStringAsync();
                var ms = clock.Elapsed.TotalMilliseconds;
                if (!response.IsSuccessStatusCode || body != "ok")
                    throw new InvalidOperationException($"{hosts[which]} answered {(int)response.StatusCode}: {body}");
                if (record)
                    samples[which].Add(ms);
            }
        }
        return (Median(samples[0]), Median(samples[1]));

        static double Median(List<double> values)
        {
            values.Sort();
            return values[values.Count / 2];
        }
    }

    private static void CopyTree(string from, string to)
    {
        foreach (var file in Directory.EnumerateFiles(from, "*", SearchOption.AllDirectories))
        {
            var target = Path.Combine(to, Path.GetRelativePath(from, file));
            Directory.CreateDirectory(Path.GetDirectoryName(target)!);
            File.Copy(file, target, overwrite: true);
        }
    }

    /// <summary>
    /// The Python no-op again, in a host whose OTLP exporter is on (to a loopback sink): what tracing
    /// costs (spans for the request, the invocation and the worker call, batched and exported), beside
    /// noop_python_p50_ms / noop_python_rps of the same run, which have metrics on and tracing off.
    /// </summary>
    private static async Task TracedNoopAsync(string home, int workers, int clients, Dictionary<string, string> env, LoadGenerator load,
        TimeSpan warmup, TimeSpan window, Report report)
    {
        Console.WriteLine("python host: 2 workers, OTLP exporter on");
        await using var sink = await OtlpSink.StartAsync();
        var traced = new Dictionary<string, string>(env)
        {
            ["OTEL_EXPORTER_OTLP_ENDPOINT"] = sink.Endpoint,
            ["OTEL_EXPORTER_OTLP_PROTOCOL"] = "http/protobuf",
        };
        await using var python = await HostProcess.StartAsync(home, Path.Combine(home, "bench", "apps", "python-bench"), workers, traced, "--no-cache");
        var noop = await load.RunAsync(new Uri(python.BaseAddress, "/api/Noop"), 1, warmup, window);
        report.Add("noop_python_traced_p50_ms", noop.P50Ms, "1 client, every request traced and exported over OTLP");
        var noopLoad = await load.RunAsync(new Uri(python.BaseAddress, "/api/Noop"), clients, warmup, window);
        report.Add("noop_python_traced_rps", noopLoad.Rps, $"{clients} clients, every request traced and exported");
        if (sink.Requests == 0)
            throw new InvalidOperationException("the traced host exported nothing to the OTLP sink; the traced rows would measure an untraced host");
    }

    /// <summary>
    /// p50 of a HEAD through the store and of a raw HEAD on a SAS URL, one after the other request by request,
    /// so both see the same moments of a shared machine.
    /// </summary>
    private static async Task<(double Sdk, double Raw)> HeadPairAsync(BlobStore store, string connectionString, TimeSpan warmup, TimeSpan window)
    {
        var sas = new Azure.Storage.Blobs.BlobClient(connectionString, "bench", "1mb.bin")
            .GenerateSasUri(Azure.Storage.Sas.BlobSasPermissions.Read, DateTimeOffset.UtcNow.AddHours(1));
        using var raw = new HttpClient(new SocketsHttpHandler { UseProxy = false, UseCookies = false, AllowAutoRedirect = false });
        var sdk = new List<double>();
        var plain = new List<double>();
        foreach (var (span, record) in new[] { (warmup, false), (window, true) })
        {
            var end = DateTime.UtcNow + span;
            while (DateTime.UtcNow < end)
            {
                var start = System.Diagnostics.Stopwatch.GetTimestamp();
                var props = await store.GetPropertiesAsync("bench", "1mb.bin") ?? throw new InvalidOperationException("bench/1mb.bin is missing");
                var sdkMs = System.Diagnostics.Stopwatch.GetElapsedTime(start).TotalMilliseconds;
                start = System.Diagnostics.Stopwatch.GetTimestamp();
                using (var request = new HttpRequestMessage(HttpMethod.Head, sas))
                using (var response = await raw.SendAsync(request, HttpCompletionOption.ResponseHeadersRead))
                {
                    if (!response.IsSuccessStatusCode || response.Content.Headers.ContentLength != props.Length)
                        throw new InvalidOperationException($"raw HEAD: {(int)response.StatusCode}");
                }
                var rawMs = System.Diagnostics.Stopwatch.GetElapsedTime(start).TotalMilliseconds;
                if (record)
                {
                    sdk.Add(sdkMs);
                    plain.Add(rawMs);
                }
            }
        }
        sdk.Sort();
        plain.Sort();
        return (sdk[sdk.Count / 2], plain[plain.Count / 2]);
    }

    private static async Task<double> StorageGetAsync(BlobStore store, TimeSpan warmup, TimeSpan window)
    {
        var latencies = new List<double>();
        var sink = new MemoryStream(1024 * 1024 + 4096);
        foreach (var (span, record) in new[] { (warmup, false), (window, true) })
        {
            var end = DateTime.UtcNow + span;
            while (DateTime.UtcNow < end)
            {
                sink.SetLength(0);
                var start = System.Diagnostics.Stopwatch.GetTimestamp();
                await store.DownloadToAsync("bench", "1mb.bin", sink);
                if (record)
                    latencies.Add(System.Diagnostics.Stopwatch.GetElapsedTime(start).TotalMilliseconds);
            }
        }
        latencies.Sort();
        return latencies[latencies.Count / 2];
    }
}
