using System.Buffers.Binary;
using System.Diagnostics;
using System.Globalization;
using System.Security.Cryptography;
using System.Text;
using System.Text.Json;
using System.Text.Json.Nodes;
using Azure.Storage.Blobs;
using Azure.Storage.Sas;
using FaaST.Cachelet;
using FaaST.Cachelet.Index;
using FaaST.Membership;
using FaaST.Runtime.Hosting;
using FaaST.Storage;

namespace FaaST.Bench;

/// <summary>
/// ./faast bench jupyterless: issue 23's measurements of JupyterLess (Faa$T §6.3, §6.4, §6.6), side by side in one
/// run: Table 4 (a no-op cell; the capacity-planning and characterization notebooks end to end beside Native IM, the
/// same cells in one local Python process), Fig. 10 (summing a 350 MB DataFrame column in 10 chunks: Native IM,
/// Native RS reading the chunks from storage, vanilla with the cache off, local hits, remote hits), and Table 6 (the
/// counting notebook with five instances under the six consistency presets). The executor app is
/// apps/jupyterless/executor, driven as the kernel drives it (<see cref="JupyterLessSession"/>). On the shaped network
/// (bench/net/cloudnet.sh) when this machine can build it, so that storage is as far as a cloud's; else on loopback,
/// and the JSON says which.
/// </summary>
public static class JupyterLessScenario
{
    private const string Container = "jupyterless";
    private const string PeerSecret = "faast-bench-jupyterless";
    private const int Chunks = 10;

    private static readonly string[] Presets =
        ["storage/sync/storage", "owner/sync/owner", "owner/async/owner", "owner/sync/local", "local/sync/local", "local/async/local"];

    private static readonly Stopwatch Clock = Stopwatch.StartNew();

    private static void Say(string message) => Console.WriteLine($"[{Clock.Elapsed.TotalSeconds,6:0.0} s] {message}");

    /// <summary>The parts `--only` may name (comma-separated); a run of some of them writes
    /// bench/results/jupyterless-PARTS.json, never the whole scenario's file.</summary>
    private static readonly string[] Parts = ["table4", "fig10", "table5", "table6"];

    public static async Task<int> RunAsync(string home, bool quick, string[] args)
    {
        var at = Array.IndexOf(args, "--only");
        string[] only = Parts;
        if (at >= 0)
        {
            only = at + 1 < args.Length ? args[at + 1].Split(',', StringSplitOptions.RemoveEmptyEntries | StringSplitOptions.TrimEntries) : [];
            if (only.Length == 0 || only.Any(p => !Parts.Contains(p)))
            {
                Console.Error.WriteLine($"bench jupyterless: --only takes a comma-separated list of {string.Join(", ", Parts)}; got '{(at + 1 < args.Length ? args[at + 1] : "")}'");
                return 2;
            }
        }
        return await RunAsync(home, quick, args, only);
    }

    private static async Task<int> RunAsync(string home, bool quick, string[] args, string[] only)
    {
        var availability = args.Contains("--loopback") || quick
            ? new Net.CloudNetworkAvailability(false, quick ? "--quick runs on loopback (the shaped network takes a minute to build)" : "--loopback asked for it")
            : await Net.CloudNetwork.AvailableAsync(home);
        if (!availability.IsAvailable)
        {
            Say($"shaped network not used: {availability.Reason}; running on loopback");
            await using var loopback = new LoopbackNetwork(home, availability.Reason);
            return await RunAsync(home, quick, loopback, only);
        }
        // Five namespaces: Table 6 runs five instances.
        await using var shaped = await ShapedNetwork.UpAsync(home, 5, new Net.CloudNetworkSettings(), CancellationToken.None);
        return await RunAsync(home, quick, shaped, only);
    }

    private static async Task<int> RunAsync(string home, bool quick, IBandwidthNetwork network, string[] only)
    {
        var executor = Path.Combine(home, "apps", "jupyterless", "executor");
        var notebooks = Path.Combine(home, "apps", "jupyterless", "notebooks");
        foreach (var required in (string[])[executor, Path.Combine(notebooks, "noop.ipynb"), Path.Combine(notebooks, "counter.ipynb")])
            if (!Path.Exists(required))
                throw new FileNotFoundException($"./faast bench jupyterless needs {Path.GetRelativePath(home, required)}");
        var logs = Path.Combine(Path.GetTempPath(), "faast-bench-jupyterless-" + DateTime.UtcNow.ToString("yyyyMMdd-HHmmss", CultureInfo.InvariantCulture));
        var report = new Report(only.Length == Parts.Length ? "jupyterless" : "jupyterless-" + string.Join('-', only), quick);
        BandwidthNetworkReport.Write(report, network);
        var columnBytes = quick ? 35L << 20 : 350L << 20;
        var counterAdds = quick ? 100 : 1000;
        report.Config("column_bytes", columnBytes);
        report.Config("column_chunks", Chunks);
        report.Config("counter_additions", counterAdds);
        report.Config("client", "the bench process posts cells to api/execute as the JupyterLess kernel does (JupyterLessSession): same JSON, same stale retry");
        report.Config("native", "bench/jupyterless/native.py: the same cells in one /usr/bin/python3 process (one namespace, last value rendered, figures rendered to PNG as %matplotlib inline does)");
        report.Config("instance_logs", logs);
        report.Config("loadavg_at_start", File.ReadAllText("/proc/loadavg").Trim());

        Say($"starting storage ({network.Description})");
        var connection = await network.StartStorageAsync(CancellationToken.None);
        using var store = new BlobStore(connection);
        await store.CreateContainerIfNotExistsAsync(Container);
        var key = network.MasterKey ?? Convert.ToHexString(RandomNumberGenerator.GetBytes(24));
        using var http = new HttpClient { Timeout = TimeSpan.FromMinutes(10) };
        var context = new Context(home, network, connection, store, executor, key, http, logs, quick);

        if (only.Contains("table4"))
            await Table4Async(context, report, notebooks);
        if (only.Contains("fig10"))
            await Figure10Async(context, report, columnBytes);
        if (only.Contains("table5"))
            await Table5Async(context, report, columnBytes);
        if (only.Contains("table6"))
            await Table6Async(context, report, Path.Combine(notebooks, "counter.ipynb"), counterAdds);

        report.Config("loadavg_at_end", File.ReadAllText("/proc/loadavg").Trim());
        report.Write(home);
        return 0;
    }

    private sealed record Context(string Home, IBandwidthNetwork Network, string Connection, BlobStore Store, string Executor, string Key,
        HttpClient Http, string Logs, bool Quick);

    /// <summary>A copy of the executor app with its faast.json's cache section changed by <paramref name="edit"/>.</summary>
    private static string ExecutorCopy(Context context, Action<JsonObject> edit)
    {
        var policy = JsonNode.Parse(File.ReadAllText(Path.Combine(context.Executor, "faast.json"))) as JsonObject ?? [];
        if (policy["cache"] is not JsonObject cache)
            policy["cache"] = cache = [];
        edit(cache);
        var copy = HostProcess.CopyApp(context.Executor, policy.ToJsonString(), "executor");
        if (context.Network.MasterKey is null)
        {
            // Keys are enforced (the app's FAAST_ENFORCE_KEYS): this run's master key, from the app's settings.
            var path = Path.Combine(copy, "local.settings.json");
            var settings = JsonNode.Parse(File.ReadAllText(path)) as JsonObject ?? [];
            if (settings["Values"] is not JsonObject values)
                settings["Values"] = values = [];
            values["AzureWebJobsSecretStorageType"] = "kubernetes";
            values["host.master"] = context.Key;
            File.WriteAllText(path, settings.ToJsonString());
        }
        return copy;
    }

    /// <summary>Both workers of each instance import what the cells use, so no measured cell pays a first import.</summary>
    private static async Task WarmAsync(Context context, IBandwidthGroup group)
    {
        const string warm = "import time, numpy, pandas, matplotlib.pyplot\ntime.sleep(0.3)";
        await Task.WhenAll(group.Instances.SelectMany(i => Enumerable.Range(0, 2).Select(_ =>
            new JupyterLessSession(context.Http, context.Key).RunAsync(i.BaseAddress, warm))));
    }

    private static async Task<IBandwidthGroup> StartAsync(Context context, string app, int count, string logName,
        Func<int, IReadOnlyList<string>>? wrapper = null)
    {
        var logDirectory = Path.Combine(context.Logs, logName);
        var group = await context.Network.StartInstancesAsync(new InstanceGroupOptions
        {
            AppDirectory = app,
            Count = count,
            StorageConnectionString = context.Connection,
            RuntimeDll = Path.Combine(context.Home, "src", "Runtime", "bin", "Release", "net10.0", "FaaST.Runtime.dll"),
            Environment = new Dictionary<string, string>
            {
                ["FAAST_PEER_SECRET"] = PeerSecret,
                ["FAAST_HOME"] = context.Home,
                ["Logging__LogLevel__Default"] = Environment.GetEnvironmentVariable("BENCH_INSTANCE_LOG_LEVEL") ?? "Warning",
            },
            LogDirectory = logDirectory,
            Wrapper = wrapper,
        }, CancellationToken.None);
        await WaitReadyAsync(context, group, logDirectory);
        await WarmAsync(context, group);
        return group;
    }

    // ---------------------------------------------------------------- Table 4

    /// <summary>A wrk Lua script posting <paramref name="json"/> with the function key, as the kernel does.</summary>
    private static string PostScript(string json, string key) =>
        "wrk.method = \"POST\"\n" +
        "wrk.headers[\"content-type\"] = \"application/json\"\n" +
        $"wrk.headers[\"x-functions-key\"] = \"{key}\"\n" +
        $"wrk.body = [==[{json}]==]\n";

    private static async Task Table4Async(Context context, Report report, string notebooks)
    {
        var noop = JupyterLessSession.CodeCells(Path.Combine(notebooks, "noop.ipynb"));
        var runs = context.Quick ? 30 : 200;
        foreach (var (preset, label) in new (string?, string)[] { (null, "default"), ("local/async/local", "fastest") })
        {
            Say($"Table 4: the no-op notebook's cells, {runs} times each, {(preset ?? "the app's default preset")}");
            var app = ExecutorCopy(context, cache => { if (preset is not null) cache["consistency"] = preset; });
            await using var group = await StartAsync(context, app, 1, "noop-" + label);
            var session = new JupyterLessSession(context.Http, context.Key);
            foreach (var cell in noop)
                await session.RunAsync(group[0].BaseAddress, cell); // warm: the state exists, the workers are warm
            var times = new List<double>(runs);
            for (var i = 0; i < runs; i++)
                foreach (var cell in noop)
                {
                    var started = Stopwatch.GetTimestamp();
                    await session.RunAsync(group[0].BaseAddress, cell);
                    times.Add(Stopwatch.GetElapsedTime(started).TotalMilliseconds);
                }
            times.Sort();
            var consistency = preset ?? await PresetAsync(context, group[0]);
            report.Add($"noop_cell_{label}_p50_ms", Percentile(times, 0.5), $"a no-op cell, posted and answered ({consistency}; goal under the default preset: <= 10 ms; the paper: 34.4 ms)");
            report.Add($"noop_cell_{label}_p99_ms", Percentile(times, 0.99));
            if (label == "default")
                report.Config("default_preset", consistency);
            // The external client: wrk posting the same cell of the same session (one connection, closed loop).
            if (Wrk.Available)
            {
                var seconds = TimeSpan.FromSeconds(context.Quick ? 5 : 15);
                var script = Path.Combine(context.Logs, $"noop-{label}.lua");
                Directory.CreateDirectory(context.Logs);
                await File.WriteAllTextAsync(script, PostScript(session.Body(noop[^1]).ToJsonString(), context.Key));
                var w = await Wrk.RunScriptAsync(new Uri(group[0].BaseAddress, "api/execute"), seconds, script, requireSuccess: true);
                report.Add($"noop_cell_{label}_wrk_p50_ms", w.P50Ms, $"wrk -t1 -c1 {seconds.TotalSeconds:0} s posting the no-op cell; p99 {w.P99Ms:0.0} ms, {w.RequestsPerSecond:0} cells/s");
            }
            else
                report.Config("wrk", "not installed (Debian package wrk): the external-client rows are absent");
        }
        var native = await NativeAsync(context, noop, [.. Enumerable.Range(0, noop.Count).Select(i => (i, runs))]);
        report.Add("noop_cell_native_im_p50_ms", Percentile([.. native.Select(r => r.Seconds * 1000).Order()], 0.5), "the same cells in one local Python process");

        foreach (var name in (string[])["capacity-planning", "characterization"])
        {
            var file = Path.Combine(notebooks, name + ".ipynb");
            if (!File.Exists(file))
                throw new FileNotFoundException($"./faast bench jupyterless needs {Path.GetRelativePath(context.Home, file)}");
            var cells = JupyterLessSession.CodeCells(file);
            var repeats = context.Quick ? 1 : 3;
            Say($"Table 4: {name}.ipynb end to end, {repeats} time(s), beside Native IM");
            var app = ExecutorCopy(context, _ => { });
            await using var group = await StartAsync(context, app, 1, name);
            var seconds = new List<double>();
            for (var r = 0; r < repeats; r++)
            {
                var session = new JupyterLessSession(context.Http, context.Key);
                var started = Stopwatch.GetTimestamp();
                foreach (var cell in cells)
                    await session.RunAsync(group[0].BaseAddress, cell);
                seconds.Add(Stopwatch.GetElapsedTime(started).TotalSeconds);
            }
            var nativeSeconds = new List<double>();
            for (var r = 0; r < repeats; r++)
                nativeSeconds.Add((await NativeAsync(context, cells, null)).Sum(x => x.Seconds));
            var metric = name.Replace('-', '_');
            report.Add($"{metric}_faast_s", Median(seconds), $"{name}.ipynb, {cells.Count} cells, a fresh session each run (median of {repeats})");
            report.Add($"{metric}_native_im_s", Median(nativeSeconds), "the same cells in one local Python process");
        }
    }

    private static async Task<string> PresetAsync(Context context, GroupInstance instance)
    {
        using var request = new HttpRequestMessage(HttpMethod.Get, new Uri(instance.BaseAddress, "admin/cache"));
        request.Headers.Add("x-functions-key", context.Key);
        using var response = await context.Http.SendAsync(request);
        using var doc = JsonDocument.Parse(await response.Content.ReadAsStringAsync());
        return doc.RootElement.TryGetProperty("consistency", out var c) ? c.GetString() ?? "?" : "?";
    }

    // ---------------------------------------------------------------- Fig. 10

    private static string SetupCell(long bytes) => $$"""
        import numpy as np
        import pandas as pd
        rows = {{bytes / 8 / Chunks}}
        chunks = [pd.DataFrame({"value": np.random.default_rng(i).random(rows)}) for i in range({{Chunks}})]
        """;

    private const string SumCell = """
        total = sum(float(chunk["value"].sum()) for chunk in chunks)
        total
        """;

    private static async Task Figure10Async(Context context, Report report, long bytes)
    {
        var repeats = context.Quick ? 2 : 3;
        var label = $"{bytes >> 20} MB";

        Say($"Fig. 10: Native IM (the {label} column in memory, summed {repeats} times)");
        var native = await NativeAsync(context, [SetupCell(bytes), SumCell], [(0, 1), (1, repeats)]);
        report.Add("fig10_native_im_s", Median([.. native.Where(r => r.Cell == 1).Select(r => r.Seconds)]), $"{label} in {Chunks} DataFrame chunks already in memory");

        Say("Fig. 10: Native RS (the chunks read from storage, then summed)");
        var urls = await UploadChunksAsync(context, bytes);
        var readAndSum = $$"""
            import io, urllib.request
            import numpy as np
            total = 0.0
            for url in {{JsonSerializer.Serialize(urls)}}:
                with urllib.request.urlopen(url) as response:
                    total += float(np.load(io.BytesIO(response.read())).sum())
            total
            """;
        var rs = await NativeAsync(context, [readAndSum], [(0, repeats)], besideInstances: true);
        report.Add("fig10_native_rs_s", Median([.. rs.Select(r => r.Seconds)]), "the chunks (.npy blobs) downloaded from storage by the same process, then summed");

        Say("Fig. 10: vanilla (the executor's blobs not cached: every cell reads the session's state from storage)");
        {
            // The app's blobs are not cached (doNotCache: every read and write goes to storage), as without Faa$T; the
            // cache itself stays on so the instance runs as the others do (cache.enabled false also turns its peers off).
            var app = ExecutorCopy(context, cache => cache["doNotCache"] = new JsonArray("jupyterless/**"));
            await using var group = await StartAsync(context, app, 1, "fig10-vanilla");
            var session = new JupyterLessSession(context.Http, context.Key);
            await session.RunAsync(group[0].BaseAddress, SetupCell(bytes));
            report.Add("fig10_vanilla_s", Median(await TimeCellAsync(session, group[0], SumCell, repeats)), "the session's blobs not cached (doNotCache): read from storage each cell");
        }

        Say("Fig. 10: local and remote hits (3 instances; instance 0 owns the session's blobs)");
        {
            var app = ExecutorCopy(context, _ => { });
            var count = context.Quick ? 2 : 3;
            await using var group = await StartAsync(context, app, count, "fig10-cached");
            var owner = group[0];
            var session = SessionOwnedBy(context, group, owner);
            await session.RunAsync(owner.BaseAddress, SetupCell(bytes));
            await session.RunAsync(owner.BaseAddress, SumCell); // the owner has read them once
            report.Add("fig10_lh_s", Median(await TimeCellAsync(session, owner, SumCell, repeats)), "at the instance that owns the state and the chunks: local hits");
            var remote = new List<double>();
            for (var i = 1; i < count; i++)
                remote.AddRange(await TimeCellAsync(session, group[i], SumCell, 1)); // the first read there: remote hits
            report.Add("fig10_rh_s", Median(remote), $"the first sum at each other instance ({count - 1}): every chunk a remote hit");
        }
        var vanilla = report.Metric("fig10_vanilla_s");
        var lh = report.Metric("fig10_lh_s");
        var rh = report.Metric("fig10_rh_s");
        report.Add("fig10_lh_faster_than_vanilla_pct", 100 * (1 - lh / vanilla), "goal >= 60 (the paper: 62)");
        report.Add("fig10_rh_faster_than_vanilla_pct", 100 * (1 - rh / vanilla), "the paper: 29");
    }

    /// <summary>A session whose state and large outputs hash to <paramref name="owner"/> in the group's view.</summary>
    private static JupyterLessSession SessionOwnedBy(Context context, IBandwidthGroup group, GroupInstance owner)
    {
        var ring = new HashRing(group.Instances.Select(i => new Member(i.Id, i.PeerAddress, default)));
        var account = context.Store.Endpoint.AbsoluteUri;
        bool Owned(string blob) => ring.OwnerOf(BlobCache.PlacementKey(new BlobKey(account, Container, blob))).Id == owner.Id;
        while (true)
        {
            var session = new JupyterLessSession(context.Http, context.Key);
            if (!Owned($"sessions/{session.Id}/state.pkl"))
                continue;
            var names = new string[JupyterLessSession.Slots];
            for (var slot = 0; slot < names.Length; slot++)
            {
                do
                    names[slot] = $"{Convert.ToHexStringLower(RandomNumberGenerator.GetBytes(8))}-{slot}";
                while (!Owned($"sessions/{session.Id}/large/{names[slot]}"));
            }
            // Each cell's outputs need fresh names: the next names are made owned the same way.
            session.OutputNames = slot =>
            {
                string name;
                do
                    name = $"{Convert.ToHexStringLower(RandomNumberGenerator.GetBytes(8))}-{slot}";
                while (!Owned($"sessions/{session.Id}/large/{name}"));
                return name;
            };
            return session;
        }
    }

    private static async Task<List<double>> TimeCellAsync(JupyterLessSession session, GroupInstance instance, string cell, int repeats)
    {
        var seconds = new List<double>();
        for (var i = 0; i < repeats; i++)
        {
            var started = Stopwatch.GetTimestamp();
            await session.RunAsync(instance.BaseAddress, cell);
            seconds.Add(Stopwatch.GetElapsedTime(started).TotalSeconds);
        }
        return seconds;
    }

    /// <summary>The column's chunks as .npy blobs (float64, the same values as the setup cell's), with read SAS URLs.</summary>
    private static async Task<string[]> UploadChunksAsync(Context context, long bytes)
    {
        var rows = (int)(bytes / 8 / Chunks);
        var service = new BlobServiceClient(context.Connection);
        var container = service.GetBlobContainerClient("fig10");
        await container.CreateIfNotExistsAsync();
        var urls = new string[Chunks];
        var random = new Random(10);
        for (var i = 0; i < Chunks; i++)
        {
            var header = Encoding.ASCII.GetBytes($"{{'descr': '<f8', 'fortran_order': False, 'shape': ({rows},), }}");
            var padded = (10 + header.Length + 1 + 63) / 64 * 64; // magic, version, length, header, newline: 64-byte aligned
            var data = new byte[padded + (long)rows * 8];
            ((ReadOnlySpan<byte>)[0x93, (byte)'N', (byte)'U', (byte)'M', (byte)'P', (byte)'Y']).CopyTo(data);
            data[6] = 1;
            BinaryPrimitives.WriteUInt16LittleEndian(data.AsSpan(8), (ushort)(padded - 10));
            header.CopyTo(data, 10);
            data.AsSpan(10 + header.Length, padded - 10 - header.Length).Fill((byte)' ');
            data[padded - 1] = (byte)'\n';
            for (var r = 0; r < rows; r++)
                BinaryPrimitives.WriteDoubleLittleEndian(data.AsSpan(padded + r * 8), random.NextDouble());
            var blob = container.GetBlobClient($"chunk-{i}.npy");
            await blob.UploadAsync(new BinaryData(data), overwrite: true);
            urls[i] = blob.GenerateSasUri(BlobSasPermissions.Read, DateTimeOffset.UtcNow.AddHours(2)).AbsoluteUri;
        }
        return urls;
    }

    // ---------------------------------------------------------------- Table 5

    /// <summary>
    /// Faa$T §6.4's memory scenario: each instance in a memory cgroup of its own (the instance's memory M); the column
    /// is summed, then a cell allocates an array of 96 % of what the runtime leaves the functions (M less the host's
    /// and the worker's own use, measured in the cgroup before the first cell), then sums again. (a) without the memory
    /// daemon (cache.memoryDaemon false), (b) with it and one instance, (c) with it and a second instance holding its
    /// share of the objects (the scale-out Faa$T's cache-size vote asks for after evictions; started here up front).
    /// Each case samples the cgroup (<see cref="CgroupMemoryProbe"/>) after the sum, while the cell allocates and after,
    /// and then, as a diagnostic, runs the allocation again in a new session's cell, which binds no state (the paper's
    /// cell binds the session's objects, so the cache cannot give them up while it runs: docs/jupyterless.md).
    /// </summary>
    private static async Task Table5Async(Context context, Report report, long bytes)
    {
        if (MemoryCgroup.Unavailable() is { } why)
        {
            report.Config("table5_skipped", why);
            Say($"Table 5 skipped: {why}");
            return;
        }
        // --quick: a 192 MB column in 1 GiB instances (the Fig. 10 column of --quick, 35 MB, is within the slack the
        // sizing below leaves, so the allocation would fit without the daemon and show nothing; and the setup cell
        // holds the chunks about three times over while it writes them, which must fit).
        var memory = context.Quick ? 1L << 30 : 2L << 30;
        bytes = context.Quick ? 192L << 20 : bytes;
        report.Config("table5_instance_memory_bytes", memory);
        report.Config("table5_column_bytes", bytes);
        var cases = new (string Label, bool Daemon, int Instances)[] { ("no_daemon", false, 1), ("daemon", true, 1), ("daemon_2_instances", true, 2) };
        foreach (var (label, daemon, instances) in cases)
        {
            Say($"Table 5 ({label}): {instances} instance(s) of {memory >> 20} MiB each, memory daemon {(daemon ? "on" : "off")}");
            var cgroups = Enumerable.Range(0, instances).Select(_ => MemoryCgroup.Create(memory)).ToArray();
            try
            {
                // The daemon samples every 10 ms here (default 0.5 s): the cell below grows its heap by 16 MiB steps at
                // memory speed, and an instance over its cgroup's limit is not warned, its largest process is killed.
                var app = ExecutorCopy(context, cache =>
                {
                    cache["memoryDaemon"] = daemon;
                    cache["memoryDaemonInterval"] = "00:00:00.01";
                });
                await using var group = await StartAsync(context, app, instances, "table5-" + label,
                    i => ["/bin/sh", "-c", "echo $$ > \"$0\" && exec \"$@\"", cgroups[i].ProcsFile]);
                var session = instances == 1 ? new JupyterLessSession(context.Http, context.Key) : SessionStateOwnedBy(context, group, group[0]);
                var at = group[0];
                try
                {
                    await session.RunAsync(at.BaseAddress, SetupCell(bytes));
                }
                catch (Exception e) when (e is InvalidOperationException or HttpRequestException)
                {
                    // The setup cell holds the column about three times over while it writes it (the chunks, their
                    // pickled parts, the files it hands the host); in 1 GiB it can meet the limit, which says nothing
                    // of the daemon: the case is reported as not run, and the others still run.
                    report.Config($"table5_{label}_not_run", "the setup cell failed: " + e.Message.Split('\n')[0][..Math.Min(300, e.Message.Split('\n')[0].Length)]);
                    Say($"Table 5 ({label}): the setup cell failed; case not run");
                    continue;
                }
                var first = await TimeCellAsync(session, at, SumCell, 1);
                // What the functions have: the instance's memory less the memory daemon's headroom (10 %: what it keeps
                // free for the kernel's own use, page cache and the like) and less what the runtime (host, workers with
                // numpy and pandas loaded) uses besides the cache, measured now, after the sum; the cell takes 96 % of it.
                var cached = await CachedBytesAsync(context, at);
                var runtimeBytes = cgroups[0].Usage - cached;
                var allocation = (long)(0.96 * (memory * 0.9 - runtimeBytes));
                var allocate = AllocationCell(allocation);
                var succeeded = false;
                string failure = "";
                // Where the memory goes: the cgroup sampled after the sum, every 50 ms while the cell allocates (the
                // sample at the peak of the charge kept whole), and after; written beside the instances' logs.
                var memoryLog = new JsonObject { ["after_sum"] = CgroupMemoryProbe.Sample(cgroups[0].Folder, cached, detail: true) };
                using var sampling = new CancellationTokenSource();
                var timeline = new JsonArray();
                var sampler = Task.Run(async () =>
                {
                    JsonObject? peak = null;
                    while (!sampling.IsCancellationRequested)
                    {
                        long? cache = null;
                        try
                        {
                            cache = await CachedBytesAsync(context, at);
                        }
                        catch (Exception e) when (e is HttpRequestException or TaskCanceledException)
                        {
                            // the host is gone (killed by the cgroup): the charge still says what is left
                        }
                        var sample = CgroupMemoryProbe.Sample(cgroups[0].Folder, cache);
                        if (peak is null || CgroupMemoryProbe.Usage(sample) > CgroupMemoryProbe.Usage(peak))
                            peak = sample;
                        timeline.Add(new JsonObject { ["usage_mib"] = CgroupMemoryProbe.Usage(sample) >> 20, ["cache_mib"] = cache >> 20,
                            ["anon_mib"] = (sample["total_rss"] ?? sample["anon"])?.GetValue<long>() >> 20,
                            ["shmem_mib"] = (sample["total_shmem"] ?? sample["shmem"])?.GetValue<long>() >> 20 });
                        try
                        {
                            await Task.Delay(50, sampling.Token);
                        }
                        catch (OperationCanceledException)
                        {
                            break;
                        }
                    }
                    return peak;
                });
                try
                {
                    var reply = await session.ExecuteAsync(at.BaseAddress, allocate);
                    succeeded = reply["status"]?.GetValue<string>() == "ok";
                    failure = succeeded ? "" : $"{reply["ename"]}: {reply["evalue"]}";
                }
                catch (Exception e) when (e is InvalidOperationException or HttpRequestException)
                {
                    failure = e.Message.Split('\n')[0];
                }
                await sampling.CancelAsync();
                memoryLog["peak_during_allocation"] = await sampler;
                memoryLog["during_allocation"] = timeline;
                memoryLog["after_allocation"] = CgroupMemoryProbe.Sample(cgroups[0].Folder);
                double? after = null;
                try
                {
                    after = (await TimeCellAsync(session, at, SumCell, 1))[0];
                }
                catch (Exception e) when (e is InvalidOperationException or HttpRequestException)
                {
                    failure += (failure.Length > 0 ? "; " : "") + "the sum after it failed: " + e.Message.Split('\n')[0];
                }
                memoryLog["after_second_sum"] = CgroupMemoryProbe.Sample(cgroups[0].Folder);
                // The gist in the results too (the log directory is under /tmp): MiB charged, anonymous, shared memory
                // and cached, after the sum and at the peak of the allocation.
                var gist = new JsonObject();
                foreach (var point in (string[])["after_sum", "peak_during_allocation", "after_allocation"])
                {
                    if (memoryLog[point] is not JsonObject sample)
                        continue;
                    gist[point] = new JsonObject
                    {
                        ["charged"] = CgroupMemoryProbe.Usage(sample) >> 20,
                        ["anonymous"] = (sample["total_rss"] ?? sample["anon"])?.GetValue<long>() >> 20,
                        ["shared_memory"] = (sample["total_shmem"] ?? sample["shmem"])?.GetValue<long>() >> 20,
                        ["cached"] = sample["cache_bytes"]?.GetValue<long>() >> 20,
                    };
                }
                report.Config($"table5_{label}_memory_mib", gist);
                var memoryFile = Path.Combine(context.Logs, $"table5-{label}-memory.json");
                File.WriteAllText(memoryFile, memoryLog.ToJsonString(new JsonSerializerOptions { WriteIndented = true }));
                Say($"Table 5 ({label}): the cgroup's memory during the run in {memoryFile}");
                report.Add($"table5_{label}_allocation_succeeded", succeeded ? 1 : 0,
                    $"{allocation >> 20} MiB allocated in a cell in 16 MiB steps (96 % of {memory >> 20} MiB less 10 % headroom and the runtime's {runtimeBytes >> 20} MiB; {cached >> 20} MiB cached){(failure.Length > 0 ? ": " + failure[..Math.Min(200, failure.Length)] : "")}");
                report.Add($"table5_{label}_sum_before_s", first[0], "the sum before the allocation (its chunks cached)");
                if (after is { } a)
                    report.Add($"table5_{label}_sum_after_s", a, "the sum after it (what was evicted is read again)");

                // A diagnostic beside the paper's scenario: the same allocation in a new session, whose cell binds no
                // state, while the column is cached again (the sum after read it back). The paper's cell binds the
                // session's state, so the column is pinned in the cache and copied into the worker for that cell and
                // the memory daemon cannot free it; here nothing the cell holds is cached, which is what the daemon's
                // eviction can make room for.
                if (after is not null)
                {
                    // Sized as the first, on the runtime now (a worker the cgroup killed was started again, smaller).
                    var fresh = new JupyterLessSession(context.Http, context.Key);
                    var freshCached = await CachedBytesAsync(context, at);
                    var freshRuntime = cgroups[0].Usage - freshCached;
                    var freshAllocation = (long)(0.96 * (memory * 0.9 - freshRuntime));
                    string freshFailure = "";
                    try
                    {
                        var reply = await fresh.ExecuteAsync(at.BaseAddress, AllocationCell(freshAllocation));
                        if (reply["status"]?.GetValue<string>() != "ok")
                            freshFailure = $"{reply["ename"]}: {reply["evalue"]}";
                    }
                    catch (Exception e) when (e is InvalidOperationException or HttpRequestException)
                    {
                        freshFailure = e.Message.Split('\n')[0];
                    }
                    report.Add($"table5_{label}_unbound_allocation_succeeded", freshFailure.Length == 0 ? 1 : 0,
                        $"diagnostic: {freshAllocation >> 20} MiB (sized as above on the runtime's {freshRuntime >> 20} MiB then) in a new session's cell, which binds no state; {freshCached >> 20} MiB cached before it{(freshFailure.Length > 0 ? ": " + freshFailure[..Math.Min(200, freshFailure.Length)] : "")}");
                }
            }
            finally
            {
                foreach (var cgroup in cgroups)
                    cgroup.Dispose();
            }
        }
    }

    /// <summary>A cell that allocates <paramref name="bytes"/> (rounded down to 16 MiB) in 16 MiB steps, then frees it.</summary>
    private static string AllocationCell(long bytes) => $$"""
        import numpy as np
        heap = [np.ones(2 * 1024 * 1024, dtype=np.float64) for _ in range({{bytes >> 24}})]  # 16 MiB each
        allocated = sum(float(part.sum()) for part in heap)
        del heap
        allocated
        """;

    private static async Task<long> CachedBytesAsync(Context context, GroupInstance instance)
    {
        using var request = new HttpRequestMessage(HttpMethod.Get, new Uri(instance.BaseAddress, "admin/cache"));
        request.Headers.Add("x-functions-key", context.Key);
        using var response = await context.Http.SendAsync(request);
        response.EnsureSuccessStatusCode();
        using var doc = JsonDocument.Parse(await response.Content.ReadAsStringAsync());
        return doc.RootElement.GetProperty("bytes").GetInt64();
    }

    /// <summary>A session whose small state (only) <paramref name="owner"/> owns: its large objects spread over the instances.</summary>
    private static JupyterLessSession SessionStateOwnedBy(Context context, IBandwidthGroup group, GroupInstance owner)
    {
        var ring = new HashRing(group.Instances.Select(i => new Member(i.Id, i.PeerAddress, default)));
        var account = context.Store.Endpoint.AbsoluteUri;
        while (true)
        {
            var session = new JupyterLessSession(context.Http, context.Key);
            if (ring.OwnerOf(BlobCache.PlacementKey(new BlobKey(account, Container, $"sessions/{session.Id}/state.pkl"))).Id == owner.Id)
                return session;
        }
    }

    /// <summary>A memory cgroup with a limit (v1 memory.limit_in_bytes, else v2 memory.max), removed when disposed.</summary>
    private sealed class MemoryCgroup : IDisposable
    {
        private readonly string _directory;
        private readonly bool _v1;

        private MemoryCgroup(string directory, bool v1)
        {
            _directory = directory;
            _v1 = v1;
        }

        public string ProcsFile => Path.Combine(_directory, "cgroup.procs");

        public string Folder => _directory;

        /// <summary>Bytes charged to the cgroup now.</summary>
        public long Usage => long.Parse(File.ReadAllText(Path.Combine(_directory, _v1 ? "memory.usage_in_bytes" : "memory.current")).Trim(), CultureInfo.InvariantCulture);

        public static string? Unavailable() =>
            Environment.UserName != "root" ? "making a memory cgroup needs root"
            : File.Exists("/sys/fs/cgroup/memory/memory.limit_in_bytes") || V2Delegates() ? null
            : "no writable memory cgroup: neither /sys/fs/cgroup/memory (v1) nor a v2 root that delegates the memory controller";

        private static bool V2Delegates() =>
            File.Exists("/sys/fs/cgroup/cgroup.subtree_control") && File.ReadAllText("/sys/fs/cgroup/cgroup.subtree_control").Split(' ', '\n').Contains("memory");

        public static MemoryCgroup Create(long limit)
        {
            var name = "faast-bench-" + Guid.NewGuid().ToString("N")[..8];
            var v1 = File.Exists("/sys/fs/cgroup/memory/memory.limit_in_bytes");
            var directory = Path.Combine(v1 ? "/sys/fs/cgroup/memory" : "/sys/fs/cgroup", name);
            Directory.CreateDirectory(directory);
            File.WriteAllText(Path.Combine(directory, v1 ? "memory.limit_in_bytes" : "memory.max"), limit.ToString(CultureInfo.InvariantCulture));
            return new MemoryCgroup(directory, v1);
        }

        public void Dispose()
        {
            // rmdir, not a recursive delete: a cgroup's files go with it. Its last processes may take a moment to leave.
            for (var i = 0; i < 50 && Directory.Exists(_directory); i++)
            {
                try
                {
                    Directory.Delete(_directory);
                }
                catch (IOException)
                {
                    Thread.Sleep(100);
                }
            }
        }
    }

    // ---------------------------------------------------------------- Table 6

    private static async Task Table6Async(Context context, Report report, string notebook, int additions)
    {
        // The counting notebook as it is: the cells before the one that adds one set it up (TARGET is then set to this
        // run's count), the adding cell runs `additions` times round robin over the instances, the last cell prints it.
        var cells = JupyterLessSession.CodeCells(notebook);
        var add = cells.ToList().FindIndex(c => c.Contains("+= 1", StringComparison.Ordinal));
        if (add < 0 || add == cells.Count - 1)
            throw new InvalidOperationException($"{notebook}: the bench needs a cell that adds one (\"+= 1\") and a last cell that prints the count");
        string[] presets = context.Quick ? ["owner/sync/owner", "local/sync/local"] : Presets;
        const int instances = 5;
        foreach (var preset in presets)
        {
            Say($"Table 6: counting to {additions} with {instances} instances, {preset}");
            var app = ExecutorCopy(context, cache => cache["consistency"] = preset);
            await using var group = await StartAsync(context, app, instances, "counter-" + preset.Replace('/', '-'));
            var session = new JupyterLessSession(context.Http, context.Key);
            foreach (var cell in cells.Take(add))
                await session.RunAsync(group[0].BaseAddress, cell);
            await session.RunAsync(group[0].BaseAddress, $"TARGET = {additions}");
            var times = new List<double>(additions);
            var conflicts = 0;
            string? firstConflict = null;
            var started = Stopwatch.GetTimestamp();
            for (var i = 0; i < additions; i++)
            {
                var one = Stopwatch.GetTimestamp();
                try
                {
                    await session.RunAsync(group[i % instances].BaseAddress, cells[add]);
                }
                catch (InvalidOperationException e) when (e.Message.Contains(" 409 ", StringComparison.Ordinal))
                {
                    conflicts++; // a conditional write refused: the addition is not made (and counted as lost)
                    firstConflict ??= e.Message;
                }
                times.Add(Stopwatch.GetElapsedTime(one).TotalMilliseconds);
            }
            var seconds = Stopwatch.GetElapsedTime(started).TotalSeconds;
            // The last cell commits the session's state too: a stale copy at instance 0 (the local presets) makes it
            // conflict once, after which that copy is dropped and it reads the current state.
            JsonObject final;
            for (var attempt = 1; ; attempt++)
            {
                try
                {
                    final = await session.RunAsync(group[0].BaseAddress, cells[^1]);
                    break;
                }
                catch (InvalidOperationException e) when (e.Message.Contains(" 409 ", StringComparison.Ordinal) && attempt < 3)
                {
                }
            }
            var printed = final["stdout"]?.GetValue<string>() ?? "";
            var match = System.Text.RegularExpressions.Regex.Match(printed, @"count = (\d+)");
            var value = match.Success ? long.Parse(match.Groups[1].Value, CultureInfo.InvariantCulture)
                : throw new InvalidOperationException($"{notebook}: its last cell should print \"count = N\"; it printed \"{printed}\"");
            times.Sort();
            var name = preset.Replace('/', '_');
            report.Add($"table6_{name}_e2e_s", seconds, $"{additions} cells, round robin over {instances} instances, one session");
            report.Add($"table6_{name}_per_req_ms", times.Average());
            report.Add($"table6_{name}_inconsistencies", Math.Abs(value - additions),
                $"final value {value}; {conflicts} additions refused as conflicts (409){(firstConflict is null ? "" : "; the first: " + firstConflict[..Math.Min(300, firstConflict.Length)])}");
        }
    }

    // ---------------------------------------------------------------- helpers

    /// <summary>Until every instance has its two workers ready (the admin API takes the key: the app enforces keys).</summary>
    private static async Task WaitReadyAsync(Context context, IBandwidthGroup group, string logDirectory)
    {
        var deadline = DateTime.UtcNow.AddSeconds(120);
        foreach (var instance in group.Instances)
        {
            while (true)
            {
                using var request = new HttpRequestMessage(HttpMethod.Get, new Uri(instance.BaseAddress, "admin/host/status"));
                request.Headers.Add("x-functions-key", context.Key);
                using var response = await context.Http.SendAsync(request);
                if (response.IsSuccessStatusCode)
                {
                    using var doc = JsonDocument.Parse(await response.Content.ReadAsStringAsync());
                    if (doc.RootElement.TryGetProperty("readyWorkers", out var ready) && ready.GetInt32() >= 2)
                        break;
                }
                else if (response.StatusCode == System.Net.HttpStatusCode.Unauthorized)
                {
                    throw new InvalidOperationException($"instance {instance.Index} refused this run's key (log: {logDirectory})");
                }
                if (DateTime.UtcNow > deadline)
                    throw new TimeoutException($"instance {instance.Index} has not 2 ready workers after 120 s (log: {logDirectory})");
                await Task.Delay(100);
            }
        }
    }

    /// <summary>Runs cells in bench/jupyterless/native.py (one local /usr/bin/python3 process); each run's seconds.</summary>
    private static async Task<List<(int Cell, double Seconds)>> NativeAsync(Context context, IReadOnlyList<string> cells, (int Cell, int Times)[]? runs,
        bool besideInstances = false)
    {
        var info = new ProcessStartInfo("/usr/bin/python3")
        {
            RedirectStandardInput = true, RedirectStandardOutput = true, RedirectStandardError = true, UseShellExecute = false,
            WorkingDirectory = Path.GetTempPath(),
        };
        info.ArgumentList.Add(Path.Combine(context.Home, "bench", "jupyterless", "native.py"));
        if (besideInstances)
            info = context.Network.WhereInstancesRun(info);
        using var process = Process.Start(info)!;
        var request = new JsonObject
        {
            ["cells"] = new JsonArray([.. cells.Select(c => (JsonNode?)c)]),
            ["runs"] = runs is null ? null : new JsonArray([.. runs.Select(r => (JsonNode?)new JsonArray(r.Cell, r.Times))]),
        };
        var stdout = process.StandardOutput.ReadToEndAsync();
        var stderr = process.StandardError.ReadToEndAsync();
        await process.StandardInput.WriteAsync(request.ToJsonString());
        process.StandardInput.Close();
        await process.WaitForExitAsync();
        if (process.ExitCode != 0)
            throw new InvalidOperationException($"bench/jupyterless/native.py failed ({process.ExitCode}): {await stderr}");
        using var doc = JsonDocument.Parse(await stdout);
        return [.. doc.RootElement.GetProperty("seconds").EnumerateArray().Select(e => (e[0].GetInt32(), e[1].GetDouble()))];
    }

    private static double Median(List<double> values)
    {
        if (values.Count == 0)
            throw new InvalidOperationException("no measurement");
        var sorted = values.Order().ToList();
        return sorted.Count % 2 == 1 ? sorted[sorted.Count / 2] : (sorted[sorted.Count / 2 - 1] + sorted[sorted.Count / 2]) / 2;
    }

    private static double Percentile(List<double> sorted, double p) => sorted[Math.Min(sorted.Count - 1, (int)Math.Floor(p * sorted.Count))];
}
