using System.Diagnostics;
using System.Globalization;
using System.Net;
using System.Net.Sockets;
using System.Text;
using BenchmarkDotNet.Configs;
using BenchmarkDotNet.Jobs;
using BenchmarkDotNet.Running;
using BenchmarkDotNet.Toolchains.InProcess.Emit;
using FaaST.Cachelet.Peers;
using FaaST.Peers;
using FaaST.Protos.Peer;
using FaaST.Runtime.Hosting;
using FaaST.Storage;

namespace FaaST.Bench;

/// <summary>
/// ./faast bench distributed: the cooperative cache across instances of one app, side by side in one
/// run: owner lookup on the hash ring, remote hits (64 MB throughput, 1 KB operations per second) next
/// to a real Redis GET at the same concurrency, and the shared counter of Faa$T Table 6 under the six
/// consistency presets with five instances.
/// </summary>
public static class DistributedScenario
{
    private const string PeerSecret = "faast-bench-distributed";
    private const int Concurrency = 16;
    private const int SmallSize = 1024;
    private const int BigSize = 64 << 20;
    private const int CounterInstances = 5;

    private static readonly string[] Presets =
        ["storage/sync/storage", "owner/sync/owner", "owner/async/owner", "owner/sync/local", "local/sync/local", "local/async/local"];

    public static async Task RunAsync(string home, bool quick)
    {
        var warmup = TimeSpan.FromSeconds(quick ? 0.5 : 2);
        var window = TimeSpan.FromSeconds(quick ? 2 : 8);
        var requests = quick ? 100 : 1000;
        var smallObjects = quick ? 200 : 1000; // each is uploaded and fetched once first: fewer for --quick
        // Starting 5 instances per preset takes most of the time: --quick runs one strong and one local-read preset.
        string[] presets = quick ? ["owner/sync/owner", "local/sync/local"] : Presets;
        var logs = Path.Combine(Path.GetTempPath(), "faast-bench-distributed-" + DateTime.UtcNow.ToString("yyyyMMdd-HHmmss", CultureInfo.InvariantCulture));
        var report = new Report("distributed", quick);
        report.Config("storage", "Azurite on loopback (unshaped)");
        report.Config("remote_hit_instances", 2);
        report.Config("remote_hit_client", "PeerClient in the bench process, straight to the instance holding the objects: small objects on the Lookup stream (Grpc.Net.Client), 64 MB over the bulk framing");
        report.Config("concurrency", Concurrency);
        report.Config("small_objects", smallObjects);
        report.Config("window_s", window.TotalSeconds);
        report.Config("counter_instances", CounterInstances);
        report.Config("counter_requests", requests);
        report.Config("counter_presets", new System.Text.Json.Nodes.JsonArray(presets.Select(p => (System.Text.Json.Nodes.JsonNode?)p).ToArray()));
        if (quick)
            report.Config("counter_note", "--quick runs the counter under 2 of the 6 presets only, to finish in under a minute");
        report.Config("instance_logs", logs);
        // What was measured: the commit, and any uncommitted changes to the product under src/.
        report.Config("product_commit", Git(home, "rev-parse", "--short", "HEAD"));
        report.Config("product_uncommitted", Git(home, "status", "--porcelain", "--", "src").Replace('\n', ';'));
        // The machine may be shared: the load says how much the numbers can be trusted.
        report.Config("loadavg_at_start", File.ReadAllText("/proc/loadavg").Trim());

        RingLookups(report, quick);
        var warnings = new System.Text.Json.Nodes.JsonObject(); // warnings and errors in each group's instance logs

        Say("starting Azurite");
        await using var azurite = await AzuriteProcess.StartAsync(home);
        using var store = new BlobStore(azurite.ConnectionString);
        await store.CreateContainerIfNotExistsAsync("bench");
        await store.CreateContainerIfNotExistsAsync("counters");
        var big = RandomBytes(BigSize, 1);
        await store.UploadAsync("bench", "64mb.bin", big);
        var small = Enumerable.Range(0, smallObjects).Select(i => RandomBytes(SmallSize, 100 + i)).ToArray();
        await Parallel.ForEachAsync(Enumerable.Range(0, smallObjects), new ParallelOptions { MaxDegreeOfParallelism = Concurrency },
            async (i, ct) => await store.UploadAsync("bench", SmallName(i), small[i], ct: ct));

        Say("remote hits: 2 instances of python-bench, local/sync/local");
        double rh1kb;
        var app = HostProcess.CopyApp(Path.Combine(home, "bench", "apps", "python-bench"), """{ "cache": { "consistency": "local/sync/local", "memoryLimit": "4GiB" } }""");
        await using (var group = await StartGroupAsync(home, app, 2, azurite.ConnectionString, Path.Combine(logs, "remote-hits")))
        {
            // A long timeout: the first Get (fetch=true) waits for the instance's whole 64 MB download before the header.
            using var peers = new PeerClient(new PeerOptions
            {
                Credentials = new PeerAuth(Encoding.UTF8.GetBytes(PeerSecret), "python-bench"),
                Timeout = TimeSpan.FromMinutes(1),
            });
            var peer = group[0].PeerAddress;
            var account = store.Endpoint.AbsoluteUri;
            GetRequest Request(string blob, bool fetch) => new() { Blob = new BlobRef { Account = account, Container = "bench", Blob = blob }, Fetch = fetch };

            // The instance fetches and caches what it is asked for with fetch=true; check the bytes once.
            Say("  the instance fetches 64 MB from storage (a remote miss)");
            await WarmAsync(peers, peer, Request("64mb.bin", true), big);
            Say($"  ... and {smallObjects} x 1 KB");
            await Parallel.ForEachAsync(Enumerable.Range(0, smallObjects), new ParallelOptions { MaxDegreeOfParallelism = Concurrency },
                async (i, _) => await WarmAsync(peers, peer, Request(SmallName(i), true), small[i]));

            Say("  64 MB remote hits");
            var bigHits = await BigHitsAsync(peers, peer, Request("64mb.bin", false), group[0].Process, warmup, window);
            report.Add("rh_64mb_gbps", bigHits.Gbps, "1e9 bytes/s, one Get at a time over the bulk framing, into a reused 64 MB shared-memory extent (goal >= 1)");
            report.Add("rh_64mb_p50_ms", bigHits.P50Ms, "one 64 MB remote hit");
            report.Add("rh_64mb_client_cpu_ms", bigHits.ClientCpuMs, "CPU of the bench process (PeerClient) per 64 MB remote hit");
            report.Add("rh_64mb_server_cpu_ms", bigHits.ServerCpuMs, "CPU of the instance serving it per 64 MB remote hit");

            report.Add("storage_get_64mb_gbps", await StorageGbpsAsync(store), "the same object from Azurite into the same kind of buffer (baseline)");
            report.Add("memcpy_64mb_gbps", MemcpyGbps(big), "one in-process copy of 64 MB: this machine's memory speed now (baseline)");

            var requestsByKey = Enumerable.Range(0, smallObjects).Select(i => Request(SmallName(i), false)).ToArray();
            Task<LoopResult> SmallHitsAsync(PeerClient client) => ClosedLoopAsync(loop =>
            {
                // Each loop copies into its own 1 KB buffer.
                var destination = new MemoryStream(new byte[SmallSize], writable: true);
                var random = new Random(loop);
                return async () =>
                {
                    var header = await client.GetAsync(peer, requestsByKey[random.Next(smallObjects)], _ =>
                    {
                        destination.Position = 0;
                        return destination;
                    }, CancellationToken.None);
                    return header.Status == ObjectHeader.Types.Status.Ok && !header.Fetched && destination.Position == SmallSize;
                };
            }, group[0].Process, TimeSpan.FromSeconds(2), window); // even --quick: a shorter warm-up measured the JIT, not the path

            Say("  1 KB remote hits");
            var hits = await SmallHitsAsync(peers);
            if (hits.Errors > 0 || peers.LookupFailures > 0)
                Console.WriteLine($"warning: {hits.Errors} of the 1 KB remote hits failed, {peers.LookupFailures} lookups fell back to a Get");
            rh1kb = hits.Ops;
            report.Add("rh_1kb_ops", hits.Ops, $"{Concurrency} loops, random key of {smallObjects}: each a Get on the peer's Lookup stream (Grpc.Net.Client), served from shared memory");
            report.Add("rh_1kb_p50_ms", hits.P50Ms, $"at {Concurrency} concurrent");
            report.Add("rh_1kb_client_cpu_us_per_op", hits.ClientCpuUs, "CPU of the bench process (PeerClient) per remote hit");
            report.Add("rh_1kb_server_cpu_us_per_op", hits.ServerCpuUs, "CPU of the instance serving it per remote hit");
        }
        DeleteCopy(app);
        warnings["remote-hits"] = ReportLogWarnings(Path.Combine(logs, "remote-hits"));
        var fromStorage = await ClosedLoopAsync(loop =>
        {
            var destination = new MemoryStream(new byte[SmallSize], writable: true);
            var random = new Random(loop);
            return async () =>
            {
                destination.Position = 0;
                return await store.DownloadToAsync("bench", SmallName(random.Next(smallObjects)), destination) is not null && destination.Position == SmallSize;
            };
        }, null, warmup, window);
        report.Add("storage_get_1kb_ops", fromStorage.Ops, $"the same objects from Azurite, {Concurrency} loops (baseline: what a remote hit saves)");

        Say($"redis-server (Debian), the same {smallObjects} x 1 KB values");
        var redis = await RedisGetAsync(small, quick ? 100_000 : 500_000);
        report.Add("redis_get_1kb_ops", redis.Ops, $"redis-benchmark -t get -c {Concurrency} -r {smallObjects}: {Concurrency} connections, one in-memory GET over RESP in flight each (baseline)");
        report.Add("redis_get_1kb_p50_ms", redis.P50Ms, $"at {Concurrency} concurrent");
        report.Add("redis_get_1kb_client_cpu_us_per_op", redis.ClientCpuUs, "CPU of redis-benchmark per GET");
        report.Add("redis_get_1kb_server_cpu_us_per_op", redis.ServerCpuUs, "CPU of redis-server per GET");
        report.Add("rh_1kb_vs_redis", rh1kb / redis.Ops, "remote hits / Redis GETs per second (goal >= 0.5)");

        foreach (var preset in presets)
        {
            var mode = preset.Replace('/', '_');
            Say($"counter: {CounterInstances} instances, {preset}, {requests} additions");
            var dir = Path.Combine(logs, mode);
            var counter = HostProcess.CopyApp(Path.Combine(home, "apps", "counter"), $$"""{ "cache": { "consistency": "{{preset}}" } }""");
            var name = "c-" + preset.Replace('/', '-');
            await store.UploadAsync("counters", name, "0"u8.ToArray());
            await using (var group = await StartGroupAsync(home, counter, CounterInstances, azurite.ConnectionString, dir))
            {
                var result = await CountAsync(group, name, requests);
                report.Add($"counter_{mode}_e2e_s", result.Seconds, $"{requests} sequential additions, round robin over {CounterInstances} instances");
                report.Add($"counter_{mode}_per_req_ms", result.MeanMs, "mean");
                report.Add($"counter_{mode}_p50_ms", result.P50Ms);
                report.Add($"counter_{mode}_inconsistencies", Math.Abs(result.Final - requests), $"final value {result.Final}; each instance then reads {result.Views}");
            }
            DeleteCopy(counter);
            warnings[mode] = ReportLogWarnings(dir);
        }
        report.Config("instance_log_warnings", warnings);
        report.Config("loadavg_at_end", File.ReadAllText("/proc/loadavg").Trim());
        report.Write(home);
    }

    private static readonly Stopwatch Clock = Stopwatch.StartNew();

    private static void Say(string message) => Console.WriteLine($"[{Clock.Elapsed.TotalSeconds,5:0.0} s] {message}");

    private static string SmallName(int i) => $"1kb-{i:D4}.bin";

    // ---- ring ------------------------------------------------------------------------------------

    /// <summary>
    /// Runs RingBenchmarks (BenchmarkDotNet, 64 members x 100 virtual nodes) in process and reports
    /// its means: the lookup of a hashed position, the hashing of a key, and both together.
    /// </summary>
    private static void RingLookups(Report report, bool quick)
    {
        Say("ring: RingBenchmarks (BenchmarkDotNet, in process)");
        // Fixed iteration counts: on a busy machine the default job keeps adding iterations (minutes).
        var job = (quick ? Job.ShortRun.WithIterationTime(Perfolizer.Horology.TimeInterval.FromMilliseconds(100)) : Job.Default.WithWarmupCount(5).WithIterationCount(15))
            .WithToolchain(InProcessEmitToolchain.Instance);
        var config = DefaultConfig.Instance
            .WithArtifactsPath(Path.Combine(Path.GetTempPath(), "faast-bench-ring"))
            .AddJob(job);
        var means = BenchmarkRunner.Run<RingBenchmarks>(config).Reports
            .Where(r => r.ResultStatistics is not null)
            .ToDictionary(r => r.BenchmarkCase.Descriptor.WorkloadMethod.Name, r => r.ResultStatistics!.Mean);
        foreach (var (method, metric, note) in new[]
                 {
                     (nameof(RingBenchmarks.OwnerOfPosition), "ring_lookup_ns", "owner of a hashed key: binary search over 6,400 vnodes (mean)"),
                     (nameof(RingBenchmarks.Position), "ring_position_ns", "hashing a key: SHA-256, first 8 bytes (mean)"),
                     (nameof(RingBenchmarks.OwnerOfKey), "ring_owner_of_key_ns", "both: what finding a blob's owner costs (mean)"),
                 })
        {
            if (means.TryGetValue(method, out var mean))
                report.Add(metric, mean, note);
            else
                Say($"RingBenchmarks.{method} gave no result");
        }
    }

    // ---- remote hits -----------------------------------------------------------------------------

    private static async Task WarmAsync(PeerClient peers, Uri peer, GetRequest request, byte[] expected)
    {
        var received = new MemoryStream(expected.Length);
        var header = await peers.GetAsync(peer, request, _ => received, CancellationToken.None);
        if (header.Status != ObjectHeader.Types.Status.Ok || !received.GetBuffer().AsSpan(0, (int)received.Length).SequenceEqual(expected))
            throw new InvalidOperationException($"{peer} answered {request.Blob.Blob} with {header.Status}, {received.Length} bytes, not the {expected.Length} uploaded");
    }

    /// <summary>Remote hits of the 64 MB object, one after the other, each into the same shared-memory
    /// extent (what a requesting cachelet receives into).</summary>
    private static async Task<(double Gbps, double P50Ms, double ClientCpuMs, double ServerCpuMs)> BigHitsAsync(PeerClient peers, Uri peer, GetRequest request, Process server, TimeSpan warmup, TimeSpan window)
    {
        var directory = Path.Combine("/dev/shm", $"faast-bench-{Environment.ProcessId}");
        using var arena = new FaaST.Cachelet.Memory.SharedMemoryArena(directory, new FaaST.Cachelet.Memory.ArenaOptions { Capacity = 2L * BigSize });
        if (!arena.TryAllocate(BigSize, out var extent))
            throw new InvalidOperationException($"no {BigSize}-byte extent in {directory}");
        Stream? destination = null;
        var times = new List<double>();
        long bytes = 0;
        var measured = Stopwatch.StartNew();
        double client = 0, serving = 0;
        foreach (var (span, record) in new[] { (warmup, false), (window, true) })
        {
            measured.Restart();
            (client, serving) = (CpuSeconds(Process.GetCurrentProcess()), CpuSeconds(server));
            var end = Stopwatch.GetTimestamp() + (long)(span.TotalSeconds * Stopwatch.Frequency);
            do
            {
                var start = Stopwatch.GetTimestamp();
                var header = await peers.GetAsync(peer, request, _ => destination = extent.OpenWriteStream(), CancellationToken.None);
                if (header.Status != ObjectHeader.Types.Status.Ok || header.Fetched || destination?.Position != BigSize)
                    throw new InvalidOperationException($"64 MB Get: {header.Status}, fetched {header.Fetched}, {destination?.Position} bytes");
                if (record)
                {
                    times.Add(Stopwatch.GetElapsedTime(start).TotalMilliseconds);
                    bytes += BigSize;
                }
            }
            while (Stopwatch.GetTimestamp() < end);
        }
        var seconds = measured.Elapsed.TotalSeconds;
        (client, serving) = (CpuSeconds(Process.GetCurrentProcess()) - client, CpuSeconds(server) - serving);
        times.Sort();
        return (bytes / seconds / 1e9, times[times.Count / 2], client * 1e3 / times.Count, serving * 1e3 / times.Count);
    }

    private static async Task<double> StorageGbpsAsync(BlobStore store)
    {
        var destination = new MemoryStream(new byte[BigSize], writable: true);
        await store.DownloadToAsync("bench", "64mb.bin", destination); // warm
        var sw = Stopwatch.StartNew();
        const int runs = 3;
        for (var i = 0; i < runs; i++)
        {
            destination.Position = 0;
            await store.DownloadToAsync("bench", "64mb.bin", destination);
        }
        return runs * (double)BigSize / sw.Elapsed.TotalSeconds / 1e9;
    }

    private static double MemcpyGbps(byte[] source)
    {
        var destination = new byte[source.Length];
        source.CopyTo(destination, 0); // fault the pages in
        var sw = Stopwatch.StartNew();
        const int runs = 10;
        for (var i = 0; i < runs; i++)
            source.CopyTo(destination, 0);
        return runs * (double)source.Length / sw.Elapsed.TotalSeconds / 1e9;
    }

    private sealed record LoopResult(double Ops, double P50Ms, long Errors, double ClientCpuUs, double ServerCpuUs);

    /// <summary>
    /// Closed loop: <see cref="Concurrency"/> loops, each calling its own operation (made by
    /// <paramref name="newLoop"/>) back to back; false or a PeerException counts as an error. CPU per
    /// operation, of this process and of <paramref name="server"/>, is less sensitive to a busy machine than ops/s.
    /// </summary>
    private static async Task<LoopResult> ClosedLoopAsync(Func<int, Func<Task<bool>>> newLoop, Process? server, TimeSpan warmup, TimeSpan window)
    {
        long errors = 0;
        async Task<long[]> LoopsAsync(TimeSpan span)
        {
            var end = Stopwatch.GetTimestamp() + (long)(span.TotalSeconds * Stopwatch.Frequency);
            var latencies = new List<long>[Concurrency];
            await Task.WhenAll(Enumerable.Range(0, Concurrency).Select(loop => Task.Run(async () =>
            {
                var mine = latencies[loop] = new List<long>(1 << 16);
                var operation = newLoop(loop);
                while (Stopwatch.GetTimestamp() < end)
                {
                    var start = Stopwatch.GetTimestamp();
                    bool ok;
                    try
                    {
                        ok = await operation();
                    }
                    catch (PeerException)
                    {
                        ok = false;
                    }
                    if (ok)
                        mine.Add(Stopwatch.GetTimestamp() - start);
                    else
                        Interlocked.Increment(ref errors);
                }
            })));
            return latencies.SelectMany(l => l).ToArray();
        }
        await LoopsAsync(warmup);
        errors = 0;
        var (client, serving) = (CpuSeconds(Process.GetCurrentProcess()), CpuSeconds(server));
        var sw = Stopwatch.StartNew();
        var all = await LoopsAsync(window);
        var seconds = sw.Elapsed.TotalSeconds;
        (client, serving) = (CpuSeconds(Process.GetCurrentProcess()) - client, CpuSeconds(server) - serving);
        Array.Sort(all);
        return new LoopResult(all.Length / seconds, all[all.Length / 2] * 1000.0 / Stopwatch.Frequency, errors, client * 1e6 / all.Length, serving * 1e6 / all.Length);
    }

    private static double CpuSeconds(Process? process)
    {
        if (process is null)
            return 0;
        process.Refresh();
        return process.TotalProcessorTime.TotalSeconds;
    }

    // ---- redis -----------------------------------------------------------------------------------

    /// <summary>
    /// A real redis-server on a free loopback port, no persistence, loaded with the same values under the
    /// keys redis-benchmark -r picks (key:%012d), then redis-benchmark GET at the same concurrency.
    /// </summary>
    private static async Task<(double Ops, double P50Ms, double ClientCpuUs, double ServerCpuUs)> RedisGetAsync(byte[][] values, int requests)
    {
        var port = FreePort();
        var info = new ProcessStartInfo("redis-server") { RedirectStandardOutput = true, RedirectStandardError = true, UseShellExecute = false };
        foreach (var a in new[] { "--save", "", "--appendonly", "no", "--port", port.ToString(CultureInfo.InvariantCulture), "--bind", "127.0.0.1", "--daemonize", "no" })
            info.ArgumentList.Add(a);
        using var server = Process.Start(info) ?? throw new InvalidOperationException("redis-server did not start");
        var output = new StringBuilder();
        server.OutputDataReceived += (_, e) => { lock (output) output.AppendLine(e.Data); };
        server.ErrorDataReceived += (_, e) => { lock (output) output.AppendLine(e.Data); };
        server.BeginOutputReadLine();
        server.BeginErrorReadLine();
        try
        {
            using var tcp = await ConnectAsync(port, server, output);
            var connection = tcp.GetStream();
            // Pipelined SETs, then one +OK per SET.
            var load = new MemoryStream();
            for (var i = 0; i < values.Length; i++)
            {
                var key = $"key:{i:D12}";
                load.Write(Encoding.ASCII.GetBytes($"*3\r\n$3\r\nSET\r\n${key.Length}\r\n{key}\r\n${values[i].Length}\r\n"));
                load.Write(values[i]);
                load.Write("\r\n"u8);
            }
            await connection.WriteAsync(load.GetBuffer().AsMemory(0, (int)load.Length));
            var replies = new byte[5 * values.Length];
            await connection.ReadExactlyAsync(replies);
            if (Encoding.ASCII.GetString(replies) != string.Concat(Enumerable.Repeat("+OK\r\n", values.Length)))
                throw new InvalidOperationException("redis did not take every SET");

            // Through bash, whose "times" then prints the CPU its child redis-benchmark used.
            var bench = new ProcessStartInfo("bash") { RedirectStandardOutput = true, RedirectStandardError = true, UseShellExecute = false };
            foreach (var a in new[] { "-c", "redis-benchmark \"$@\"; status=$?; times >&2; exit $status", "bash",
                         "-h", "127.0.0.1", "-p", port.ToString(CultureInfo.InvariantCulture), "-t", "get", "-c", Concurrency.ToString(CultureInfo.InvariantCulture),
                         "-n", requests.ToString(CultureInfo.InvariantCulture), "-d", SmallSize.ToString(CultureInfo.InvariantCulture), "-r", values.Length.ToString(CultureInfo.InvariantCulture), "--csv" })
                bench.ArgumentList.Add(a);
            var serverCpu = CpuSeconds(server);
            using var run = Process.Start(bench) ?? throw new InvalidOperationException("redis-benchmark did not start");
            var stdout = run.StandardOutput.ReadToEndAsync();
            var stderr = await run.StandardError.ReadToEndAsync();
            await run.WaitForExitAsync();
            serverCpu = CpuSeconds(server) - serverCpu;
            // "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms",...
            var get = (await stdout).Split('\n').FirstOrDefault(l => l.StartsWith("\"GET\"", StringComparison.Ordinal))?.Split(',').Select(f => f.Trim().Trim('"')).ToArray()
                ?? throw new InvalidOperationException($"redis-benchmark printed no GET line (exit {run.ExitCode}):\n{await stdout}\n{stderr}");
            // The last line of "times": the children's user and system time, e.g. "0m1.234s 0m0.567s".
            var clientCpu = stderr.TrimEnd().Split('\n')[^1].Split(' ').Sum(t => double.Parse(t[..t.IndexOf('m', StringComparison.Ordinal)], CultureInfo.InvariantCulture) * 60
                + double.Parse(t[(t.IndexOf('m', StringComparison.Ordinal) + 1)..^1], CultureInfo.InvariantCulture));

            // Every GET must have found its 1 KB value, or Redis measured misses.
            var stats = await CommandAsync(connection, "INFO", "stats");
            var misses = stats.Split("\r\n").First(l => l.StartsWith("keyspace_misses:", StringComparison.Ordinal));
            if (misses != "keyspace_misses:0")
                throw new InvalidOperationException($"redis-benchmark GETs missed keys ({misses})");
            await connection.WriteAsync("*2\r\n$8\r\nSHUTDOWN\r\n$6\r\nNOSAVE\r\n"u8.ToArray());
            return (double.Parse(get[1], CultureInfo.InvariantCulture), double.Parse(get[4], CultureInfo.InvariantCulture), clientCpu * 1e6 / requests, serverCpu * 1e6 / requests);
        }
        finally
        {
            if (!server.WaitForExit(5000))
                server.Kill();
        }
    }

    private static async Task<TcpClient> ConnectAsync(int port, Process server, StringBuilder output)
    {
        for (var attempt = 0; ; attempt++)
        {
            var tcp = new TcpClient { NoDelay = true };
            try
            {
                await tcp.ConnectAsync(IPAddress.Loopback, port);
                if ((await CommandAsync(tcp.GetStream(), "PING")).StartsWith("+PONG", StringComparison.Ordinal))
                    return tcp;
            }
            catch (SocketException) when (attempt < 100 && !server.HasExited)
            {
            }
            catch (IOException) when (attempt < 100 && !server.HasExited)
            {
            }
            tcp.Dispose();
            if (server.HasExited || attempt >= 100)
                throw new InvalidOperationException($"redis-server did not answer on port {port}:\n{output}");
            await Task.Delay(50);
        }
    }

    /// <summary>One command; the reply as text (enough for PING and INFO, which fit one read here).</summary>
    private static async Task<string> CommandAsync(NetworkStream connection, params string[] words)
    {
        var command = new StringBuilder($"*{words.Length}\r\n");
        foreach (var w in words)
            command.Append(CultureInfo.InvariantCulture, $"${w.Length}\r\n{w}\r\n");
        await connection.WriteAsync(Encoding.ASCII.GetBytes(command.ToString()));
        var reply = new StringBuilder();
        var buffer = new byte[64 * 1024];
        do
            reply.Append(Encoding.ASCII.GetString(buffer, 0, await connection.ReadAsync(buffer)));
        while (connection.DataAvailable || !IsComplete(reply.ToString()));
        return reply.ToString();
    }

    /// <summary>A simple string, or a bulk string all of whose announced bytes arrived.</summary>
    private static bool IsComplete(string reply)
    {
        if (!reply.StartsWith('$'))
            return reply.EndsWith("\r\n", StringComparison.Ordinal);
        var newline = reply.IndexOf("\r\n", StringComparison.Ordinal);
        return newline > 0 && reply.Length >= newline + 2 + int.Parse(reply.AsSpan(1, newline - 1), CultureInfo.InvariantCulture) + 2;
    }

    // ---- counter (Table 6) -------------------------------------------------------------------------

    private sealed record CountResult(double Seconds, double MeanMs, double P50Ms, long Final, string Views);

    /// <summary>Sequential additions to one counter, round robin over the instances; the last answer is the final value.</summary>
    private static async Task<CountResult> CountAsync(InstanceGroup group, string counter, int requests)
    {
        using var http = new HttpClient { Timeout = TimeSpan.FromSeconds(60) };
        var instances = group.Instances;
        // As in the paper, the counter exists (0) and every instance has read it once: warm workers, and
        // the local-read presets then count on a copy each from 0.
        foreach (var instance in instances)
        {
            var start = await http.GetStringAsync(new Uri(instance.BaseAddress, "api/get/" + counter));
            if (start != "0")
                throw new InvalidOperationException($"instance {instance.Index} reads the new counter as {start}, not 0");
        }
        var times = new double[requests];
        long final = 0;
        var total = Stopwatch.StartNew();
        for (var i = 0; i < requests; i++)
        {
            var start = Stopwatch.GetTimestamp();
            using var response = await http.PostAsync(new Uri(instances[i % instances.Count].BaseAddress, "api/add/" + counter), null);
            var body = await response.Content.ReadAsStringAsync();
            times[i] = Stopwatch.GetElapsedTime(start).TotalMilliseconds;
            if (!response.IsSuccessStatusCode || !long.TryParse(body, CultureInfo.InvariantCulture, out final))
                throw new InvalidOperationException($"addition {i} on instance {i % instances.Count} answered {(int)response.StatusCode}: {body}");
        }
        var seconds = total.Elapsed.TotalSeconds;
        var mean = times.Average();
        Array.Sort(times);
        // What each instance reads at the end: explains where the inconsistencies come from.
        var views = new List<string>();
        foreach (var instance in instances)
            views.Add(await http.GetStringAsync(new Uri(instance.BaseAddress, "api/get/" + counter)));
        return new CountResult(seconds, mean, times[requests / 2], final, string.Join(' ', views));
    }

    // ---- helpers ---------------------------------------------------------------------------------

    /// <summary>Starts the instances with the peer secret and waits until each has its worker ready.</summary>
    private static async Task<InstanceGroup> StartGroupAsync(string home, string app, int count, string storage, string logDirectory)
    {
        var group = await InstanceGroup.StartAsync(new InstanceGroupOptions
        {
            AppDirectory = app,
            Count = count,
            StorageConnectionString = storage,
            RuntimeDll = Path.Combine(home, "src", "Runtime", "bin", "Release", "net10.0", "FaaST.Runtime.dll"),
            Environment = new Dictionary<string, string>
            {
                ["FAAST_PEER_SECRET"] = PeerSecret,
                ["FAAST_HOME"] = home,
                // BENCH_INSTANCE_LOG_LEVEL=Information puts more into the instance logs.
                ["Logging__LogLevel__Default"] = Environment.GetEnvironmentVariable("BENCH_INSTANCE_LOG_LEVEL") ?? "Warning",
            },
            LogDirectory = logDirectory,
        });
        await GroupReadiness.WaitForWorkersAsync(group, 1, logDirectory);
        return group;
    }

    /// <summary>Prints (and counts) the warnings and errors the instances logged, so that peer failures do not go unseen.</summary>
    private static int ReportLogWarnings(string directory)
    {
        var lines = Directory.EnumerateFiles(directory, "*.log").Order(StringComparer.Ordinal)
            .SelectMany(f => File.ReadLines(f).Select(l => (File: Path.GetFileName(f), Line: l)))
            .Where(x => GroupReadiness.LogProblem.IsMatch(x.Line))
            .ToArray();
        if (lines.Length > 0)
            Console.WriteLine($"  {lines.Length} warning(s)/error(s) in {directory}; first: ");
        foreach (var (file, line) in lines.Take(3))
            Console.WriteLine($"    {file}: {line}");
        return lines.Length;
    }

    private static void DeleteCopy(string app) => Directory.Delete(Path.GetDirectoryName(app)!, recursive: true);

    private static string Git(string home, params string[] args)
    {
        var info = new ProcessStartInfo("git") { RedirectStandardOutput = true, RedirectStandardError = true, UseShellExecute = false, WorkingDirectory = home };
        foreach (var a in args)
            info.ArgumentList.Add(a);
        using var git = Process.Start(info)!;
        var output = git.StandardOutput.ReadToEnd().Trim();
        git.WaitForExit();
        return git.ExitCode == 0 ? output : "unknown";
    }

    private static int FreePort()
    {
        using var l = new TcpListener(IPAddress.Loopback, 0);
        l.Start();
        return ((IPEndPoint)l.LocalEndpoint).Port;
    }

    private static byte[] RandomBytes(int n, int seed)
    {
        var data = GC.AllocateUninitializedArray<byte>(n);
        new Random(seed).NextBytes(data);
        return data;
    }
}
