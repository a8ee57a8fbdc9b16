using System.Buffers;
using System.Diagnostics;
using System.Globalization;
using System.Text;
using System.Text.Json.Nodes;
using FaaST.Cachelet;
using FaaST.Cachelet.Index;
using FaaST.Policy;
using FaaST.Storage;

namespace FaaST.Bench;

/// <summary>
/// ./faast bench latency: the read/write latency table the trace-driven simulator replays (Faa$T §6.2: "we measured read
/// and write latencies for 1B to 2GB object sizes using our Faa$T implementation"), by object size, side by side in one run:
/// <list type="bullet">
/// <item><c>storage_read</c> / <c>storage_write</c>: a whole-blob GET / PUT through <see cref="BlobStore"/> against Azurite on
/// bench/net's shaped network (45 MB/s to storage, as Fig. 12 was measured). The shaping applies to an instance namespace's
/// veth only, so these run in a small process of this benchmark inside that namespace (<see cref="ProbeFlag"/>), which the
/// scenario drives one PUT/GET pair at a time over its stdin/stdout;</item>
/// <item><c>storage_read_loopback</c> / <c>storage_write_loopback</c>: the same from this process, unshaped;</item>
/// <item><c>local_hit_read</c>: a cached object read from an in-process cachelet (<see cref="BlobCache"/>, real /dev/shm)
/// and copied into a pooled buffer; <c>cache_write</c>: an object put into that cachelet (local/async/local: the write
/// returns once the cache holds it, its upload runs in the background and is awaited, untimed, before the next write).</item>
/// </list>
/// After a warm-up, the sizes below 16 MiB go in rounds (each round, for every size still due, one operation of each kind;
/// a write and a read of each pair alternate), the larger ones size after size. The first operations are unrecorded; the p50 and p99 (nearest rank) go
/// to bench/results/latency.json as <c>KIND_p50_ms_BYTES</c> / <c>KIND_p99_ms_BYTES</c>, which the simulator reads by prefix.
/// </summary>
public static class LatencyScenario
{
    /// <summary>Runs this benchmark as the storage probe inside the shaped namespace (not a user-facing scenario option).</summary>
    private const string ProbeFlag = "--storage-probe";
    private const string StorageVariable = "FAAST_LATENCY_STORAGE";
    private const string Container = "latency";

    /// <summary>Sizes and measured repetitions: enough for a stable median; the largest at the shaped 45 MB/s take about 6 s a PUT.</summary>
    private static readonly (long Bytes, int Repetitions)[] FullSizes =
        [(1, 50), (1 << 10, 50), (16 << 10, 50), (256 << 10, 40), (1 << 20, 30), (16 << 20, 15), (64 << 20, 8), (256 << 20, 5)];
    private static readonly (long Bytes, int Repetitions)[] QuickSizes =
        [(1, 20), (1 << 10, 20), (16 << 10, 20), (256 << 10, 10), (1 << 20, 10), (16 << 20, 5)];

    private static readonly string[] Kinds =
        ["storage_read", "storage_write", "storage_read_loopback", "storage_write_loopback", "local_hit_read", "cache_write"];

    /// <summary>Unrecorded operations of each kind before the first size (about 1.5 s of each at 1 KiB).</summary>
    private const int WarmupOperations = 60;

    /// <summary>Sizes below this are measured in rounds together; the larger ones size after size.</summary>
    private const int RoundsBelow = 16 << 20;

    private static readonly Stopwatch Clock = Stopwatch.StartNew();

    private static void Say(string message) => Console.WriteLine($"[{Clock.Elapsed.TotalSeconds,6:0.0} s] {message}");

    public static async Task<int> RunAsync(string home, bool quick, string[] args)
    {
        if (args.Contains(ProbeFlag))
            return await StorageProbe.RunAsync();
        var sizes = quick ? QuickSizes : FullSizes;
        var report = new Report("latency", quick);
        report.Config("loadavg_at_start", File.ReadAllText("/proc/loadavg").Trim());

        // The shaped network when this machine can build it; else (or when it fails to come up) loopback only, said plainly.
        var availability = await Net.CloudNetwork.AvailableAsync(home);
        Net.CloudNetwork? network = null;
        var reason = availability.Reason;
        if (availability.IsAvailable)
        {
            try
            {
                network = await Net.CloudNetwork.UpAsync(home, 1, new Net.CloudNetworkSettings { Prefix = "fcnlat", Subnet = 23 });
            }
            catch (InvalidOperationException e)
            {
                reason = e.Message;
            }
        }
        if (network is null)
            Say($"THE SHAPED NETWORK IS NOT AVAILABLE ({reason}): measuring on loopback only; storage_read/storage_write are absent, network_shaped is false");
        await using var _ = network;
        Configure(report, network, reason, sizes);

        var data = Directory.CreateTempSubdirectory("faast-bench-latency-azurite-");
        try
        {
            Say($"starting Azurite{(network is null ? "" : " on the storage address " + network.StorageAddress)}");
            await using var azurite = await AzuriteProcess.StartAsync(home, dataDirectory: data.FullName, listenAddress: network?.StorageAddress);
            using var store = new BlobStore(azurite.ConnectionString);
            await store.CreateContainerIfNotExistsAsync(Container);
            var samples = Kinds.ToDictionary(k => k, _ => new Dictionary<long, List<double>>());
            await using var probe = network is null ? null : await StorageProbe.StartAsync(network, azurite.ConnectionString);
            await using var cache = new BlobCache($"bench-latency-{Environment.ProcessId}",
                new CachePolicy { Consistency = ConsistencyPreset.LocalAsyncLocal, MemoryLimit = 2L << 30 });
            // The first operations of each path run tier-0 JIT code (the first 1 B rows of a quick run measured twice the
            // 16 KiB ones): every path is warmed first, unrecorded, with operations of 1 KiB.
            Say($"warm-up: {WarmupOperations} operations of each kind at 1 KiB, not recorded");
            var warm = await SizeState.PrepareAsync(cache, store, 1 << 10, WarmupOperations, 0, "warm");
            for (var round = 0; round < WarmupOperations; round++)
                await MeasureRoundAsync(warm, round, null);
            // The sizes below 16 MiB in rounds, one operation of each kind for every size still due per round: a burst of load
            // from whatever else shares the machine lands on all of them alike (a first full run, size after size, measured
            // 1 B slower than 1 KiB). The larger sizes then size after size: in rounds, their operations slowed the others
            // (full runs measured 16 MiB loopback reads at 89-108 ms in rounds, 25-47 ms size after size). Large local hits
            // vary between runs on this shared VM either way (256 MiB: 33 ms in one full run, 74-116 ms in later ones).
            var states = new List<SizeState>();
            foreach (var (bytes, repetitions) in sizes)
                states.Add(await SizeState.PrepareAsync(cache, store, bytes, Warmup(repetitions), repetitions, "m"));
            var small = states.Where(s => s.Content.Length < RoundsBelow).ToArray();
            for (var round = 0; round < small.Max(s => s.Operations); round++)
            {
                var due = small.Where(s => round < s.Operations).ToArray();
                Say($"round {round + 1}: {string.Join(", ", due.Select(s => s.Content.Length))} B");
                foreach (var state in due)
                    await MeasureRoundAsync(state, round, round < state.Warmup ? null : samples);
            }
            foreach (var state in states.Where(s => s.Content.Length >= RoundsBelow))
            {
                Say($"{state.Content.Length} B: {state.Warmup} + {state.Operations - state.Warmup} operations of each kind");
                for (var round = 0; round < state.Operations; round++)
                    await MeasureRoundAsync(state, round, round < state.Warmup ? null : samples);
            }

            async Task MeasureRoundAsync(SizeState state, int round, Dictionary<string, Dictionary<long, List<double>>>? into)
            {
                var bytes = (long)state.Content.Length;
                var measured = new List<(string Kind, double Ms)>(6);
                if (probe is not null)
                {
                    var (read, write) = await probe.PairAsync(bytes, $"shaped-{state.Tag}-{bytes}", verify: round == 0);
                    measured.Add(("storage_read", read));
                    measured.Add(("storage_write", write));
                    Settle(bytes);
                }
                var (loopbackRead, loopbackWrite) = await StoragePairAsync(store, $"loopback-{state.Tag}-{bytes}", state.Content, state.ReadBuffer, verify: round == 0);
                measured.Add(("storage_read_loopback", loopbackRead));
                measured.Add(("storage_write_loopback", loopbackWrite));
                Settle(bytes);
                var (hit, cacheWrite) = await state.CachePairAsync(cache, store, round);
                measured.Add(("local_hit_read", hit));
                measured.Add(("cache_write", cacheWrite));
                Settle(bytes);
                if (into is not null)
                    foreach (var (kind, ms) in measured)
                        (into[kind].TryGetValue(bytes, out var list) ? list : into[kind][bytes] = []).Add(ms);
            }

            foreach (var kind in Kinds)
            {
                foreach (var (bytes, values) in samples[kind])
                {
                    values.Sort();
                    report.Add($"{kind}_p50_ms_{bytes}", Percentile(values, 50), $"{values.Count} samples");
                    report.Add($"{kind}_p99_ms_{bytes}", Percentile(values, 99), "nearest rank: the largest sample below 100 samples");
                }
            }
            report.Config("loadavg_at_end", File.ReadAllText("/proc/loadavg").Trim());
            report.Write(home);
            PrintTable(samples, sizes);
            return 0;
        }
        finally
        {
            data.Delete(recursive: true);
        }
    }

    private static void Configure(Report report, Net.CloudNetwork? network, string reason, (long Bytes, int Repetitions)[] sizes)
    {
        report.Config("network", network?.Description ?? Net.CloudNetwork.LoopbackDescription(reason));
        report.Config("network_shaped", network is not null);
        report.Config("storage_mb_per_s", network is null ? null : network.Settings.StorageMbps / 8.0);
        report.Config("peer_mb_per_s", network is null ? null : network.Settings.PeerMbps / 8.0);
        report.Config("rates_note", "per instance and per direction, HTB on both ends of the instance's veth (bench/net/cloudnet.sh): the paper's VMs' 90 MB/s to storage halved, as for Fig. 12");
        report.Config("sizes_bytes", new JsonArray(sizes.Select(s => (JsonNode?)s.Bytes).ToArray()));
        report.Config("repetitions", new JsonObject(sizes.Select(s => KeyValuePair.Create(s.Bytes.ToString(CultureInfo.InvariantCulture), (JsonNode?)s.Repetitions))));
        report.Config("warmup", $"first {WarmupOperations} unrecorded operations of each kind at 1 KiB (the JIT's optimizing tier); then the sizes below 16 MiB in rounds of one operation of each kind for every size still due, the larger ones size after size (in rounds their operations slowed the others' loopback reads); the first 3 operations of each kind and size (1 where fewer than 20 are measured) unrecorded");
        report.Config("storage", "Azurite (blobs in a temporary directory on disk; the page cache serves them; sync(2), untimed, after each pair of operations from 1 MiB on, so writeback does not run under the next one), one instance for both networks");
        report.Config("storage_read", "BlobStore.DownloadToAsync of the whole blob into a reused buffer, from a process of this benchmark inside the shaped instance namespace");
        report.Config("storage_write", $"BlobStore.UploadAsync of the whole blob (one PUT up to {new BlobStoreOptions().SingleUploadThreshold >> 20} MiB, else blocks), same process; alternating with the reads");
        report.Config("storage_loopback", network is null
            ? "from this process to Azurite on 127.0.0.1, unshaped"
            : "from this process in the root namespace to the same Azurite's storage address: a local address, so the kernel's loopback path, unshaped");
        report.Config("local_hit_read", "BlobCache.ReadAsync of a cached object (a local hit, checked; local/async/local makes no HEAD) and a copy of its bytes from /dev/shm into an ArrayPool buffer, in this process");
        report.Config("cache_write", "BlobCache.WriteAsync under local/async/local: the object copied into the cache's /dev/shm arena and indexed, the upload left to the background (awaited untimed before the next write, then the object dropped); alternating with the local hits");
        report.Config("remote_hit_read", "not measured: a remote hit needs a second instance serving the peer protocol, which bench distributed gets by starting runtime hosts of python-bench (its rh_64mb_p50_ms, and rh_1kb_p50_ms at 16 concurrent, on loopback); that is not cheap to reuse here");
        report.Config("percentiles", "nearest rank over the measured samples; values in ms, rounded by Report to 1 µs below 100 ms and to 1 ms from 100 ms on");
        report.Config("variance_note", "storage on the shaped network is bandwidth-bound and repeats within 2 % between full runs; loopback storage and local hits from 16 MiB on varied 2-3x between full runs on this shared 2-core VM (256 MiB local hit: 33 ms in one, 74-116 ms in later ones; memcpy here is about 10 GB/s, 25 ms for 256 MiB)");
    }

    [System.Runtime.InteropServices.DllImport("libc", EntryPoint = "sync")]
    private static extern void Sync();

    /// <summary>After a pair of operations from 1 MiB on, sync(2), untimed: Azurite keeps blobs on disk, and the page cache's
    /// writeback of its writes should not run under the next operation.</summary>
    private static void Settle(long bytes)
    {
        if (bytes >= 1 << 20)
            Sync();
    }

    private static int Warmup(int repetitions) => repetitions >= 20 ? 3 : 1;

    /// <summary>Seeded bytes of one size (random, so no layer can compress them); the probe makes the same ones.</summary>
    private static byte[] Content(long bytes)
    {
        var content = GC.AllocateUninitializedArray<byte>(checked((int)bytes));
        new Random((int)(bytes % int.MaxValue)).NextBytes(content);
        return content;
    }

    /// <summary>One PUT then one GET of a blob through <see cref="BlobStore"/>, their times in ms; the GET lands in
    /// <paramref name="buffer"/> (reused), compared with what was written when <paramref name="verify"/>.</summary>
    private static async Task<(double Read, double Write)> StoragePairAsync(BlobStore store, string blob, byte[] content, byte[] buffer, bool verify)
    {
        var started = Stopwatch.GetTimestamp();
        await store.UploadAsync(Container, blob, content);
        var wrote = Stopwatch.GetElapsedTime(started).TotalMilliseconds;
        var destination = new MemoryStream(buffer, writable: true);
        started = Stopwatch.GetTimestamp();
        var properties = await store.DownloadToAsync(Container, blob, destination);
        var read = Stopwatch.GetElapsedTime(started).TotalMilliseconds;
        if (properties?.Length != content.Length || destination.Position != content.Length || (verify && !buffer.AsSpan().SequenceEqual(content)))
            throw new InvalidOperationException($"{Container}/{blob}: read back {destination.Position} bytes (blob length {properties?.Length}), not the {content.Length} written");
        return (read, wrote);
    }

    /// <summary>One size's bytes and buffers, and its object in the cachelet (put in storage and fetched once, a local miss).</summary>
    private sealed class SizeState
    {
        private SizeState(byte[] content, int warmup, int repetitions, string tag)
        {
            Content = content;
            Warmup = warmup;
            Operations = warmup + repetitions;
            Tag = tag;
            ReadBuffer = GC.AllocateUninitializedArray<byte>(content.Length);
            // Rented once for the run: a buffer rented per read (a full run's second try) was often a fresh array, the
            // shared pool having dropped its large arrays at a gen-2 GC, and the read then timed first-touch page faults
            // of up to 256 MiB (1.4 s instead of 33 ms).
            PooledBuffer = ArrayPool<byte>.Shared.Rent(content.Length);
        }

        public byte[] Content { get; }
        public int Warmup { get; }
        public int Operations { get; }
        public string Tag { get; }
        public byte[] ReadBuffer { get; }
        private byte[] PooledBuffer { get; }
        private string HitBlob => $"hit-{Tag}-{Content.Length}";

        public static async Task<SizeState> PrepareAsync(BlobCache cache, BlobStore store, long bytes, int warmup, int repetitions, string tag)
        {
            var state = new SizeState(Content(bytes), warmup, repetitions, tag);
            await store.UploadAsync(Container, state.HitBlob, state.Content);
            using var miss = await cache.ReadAsync(store, Container, state.HitBlob, default);
            if (miss is not { Path: ReadPath.LocalMiss, Entry: not null })
                throw new InvalidOperationException($"{Container}/{state.HitBlob}: the first read was {miss?.Path}, not a local miss that cached it");
            return state;
        }

        /// <summary>A local hit copied into the size's pooled buffer, then a cache write of a new object, their times in ms.</summary>
        public async Task<(double Read, double Write)> CachePairAsync(BlobCache cache, BlobStore store, int round)
        {
            var buffer = PooledBuffer;
            var started = Stopwatch.GetTimestamp();
            using (var hit = await cache.ReadAsync(store, Container, HitBlob, default))
            {
                if (hit is not { Path: ReadPath.LocalHit, Entry: { } entry })
                    throw new InvalidOperationException($"{Container}/{HitBlob}: read {round} was {hit?.Path}, not a local hit");
                entry.Extent.Span.CopyTo(buffer);
            }
            var read = Stopwatch.GetElapsedTime(started).TotalMilliseconds;
            if (round == 0 && !buffer.AsSpan(0, Content.Length).SequenceEqual(Content))
                throw new InvalidOperationException($"{Container}/{HitBlob}: the local hit's bytes differ from the object in storage");

            var written = $"write-{Tag}-{Content.Length}-{round}";
            started = Stopwatch.GetTimestamp();
            await cache.WriteAsync(store, Container, written, Content, default);
            var wrote = Stopwatch.GetElapsedTime(started).TotalMilliseconds;
            var key = new BlobKey(store.Endpoint.AbsoluteUri, Container, written);
            if (!cache.Index.TryGet(key, out _))
                throw new InvalidOperationException($"{Container}/{written}: the write did not leave the object in the cache (uploaded past it)");
            await UploadedAsync(store, written, Content.Length);
            cache.Index.Remove(key);
            return (read, wrote);
        }
    }

    /// <summary>Waits (untimed) until the background upload of a cache write reached storage, so it does not share the
    /// machine with the next measured operation.</summary>
    private static async Task UploadedAsync(BlobStore store, string blob, long length)
    {
        var deadline = Stopwatch.GetTimestamp() + (120 * Stopwatch.Frequency);
        while ((await store.GetPropertiesAsync(Container, blob))?.Length != length)
        {
            if (Stopwatch.GetTimestamp() > deadline)
                throw new TimeoutException($"{Container}/{blob}: the write-behind upload of {length} bytes did not reach storage within 120 s");
            await Task.Delay(5);
        }
    }

    /// <summary>Nearest rank over sorted values.</summary>
    private static double Percentile(List<double> sorted, int percent) =>
        sorted[Math.Clamp((int)Math.Ceiling(percent / 100.0 * sorted.Count) - 1, 0, sorted.Count - 1)];

    private static void PrintTable(Dictionary<string, Dictionary<long, List<double>>> samples, (long Bytes, int Repetitions)[] sizes)
    {
        var kinds = Kinds.Where(k => samples[k].Count > 0).ToArray();
        Console.WriteLine($"\np50 latency, ms\n{"bytes",10}" + string.Concat(kinds.Select(k => $"  {k,22}")));
        foreach (var (bytes, _) in sizes)
            Console.WriteLine($"{bytes,10}" + string.Concat(kinds.Select(k => $"  {Percentile(samples[k][bytes], 50),22:0.000}")));
    }

    /// <summary>
    /// The measuring end inside the shaped namespace: this benchmark again (<c>dotnet FaaST.Bench.dll latency --storage-probe</c>),
    /// started with <c>ip netns exec</c>, so its connections to the storage address cross the shaped veth. For each
    /// <c>pair BYTES BLOB verify|-</c> line on stdin it times one PUT and one GET and answers <c>pair BYTES READ_MS WRITE_MS</c>.
    /// </summary>
    private sealed class StorageProbe : IAsyncDisposable
    {
        private readonly Process _process;
        private readonly StringBuilder _errors = new();

        private StorageProbe(Process process)
        {
            _process = process;
            process.ErrorDataReceived += (_, e) =>
            {
                if (e.Data is not null)
                    lock (_errors)
                        _errors.AppendLine(e.Data);
            };
            process.BeginErrorReadLine();
        }

        public static async Task<StorageProbe> StartAsync(Net.CloudNetwork network, string connectionString)
        {
            var info = new ProcessStartInfo("dotnet") { RedirectStandardInput = true, RedirectStandardOutput = true, RedirectStandardError = true, UseShellExecute = false };
            foreach (var a in new[] { typeof(LatencyScenario).Assembly.Location, "latency", ProbeFlag })
                info.ArgumentList.Add(a);
            info.Environment[StorageVariable] = connectionString;
            var probe = new StorageProbe(Process.Start(network.InNamespace(0, info)) ?? throw new InvalidOperationException("the storage probe did not start"));
            var line = await probe._process.StandardOutput.ReadLineAsync();
            if (line != "ready")
                throw probe.Failure($"the storage probe in {network.Namespace(0)} did not start (said \"{line}\")");
            return probe;
        }

        public async Task<(double Read, double Write)> PairAsync(long bytes, string blob, bool verify)
        {
            await _process.StandardInput.WriteLineAsync(string.Create(CultureInfo.InvariantCulture, $"pair {bytes} {blob} {(verify ? "verify" : "-")}"));
            await _process.StandardInput.FlushAsync();
            var line = await _process.StandardOutput.ReadLineAsync() ?? throw Failure($"the storage probe exited during a pair of {bytes} B");
            if (line.Split(' ') is not ["pair", var size, var read, var write] || size != bytes.ToString(CultureInfo.InvariantCulture))
                throw Failure($"the storage probe answered \"{line}\" to a pair of {bytes} B");
            return (double.Parse(read, CultureInfo.InvariantCulture), double.Parse(write, CultureInfo.InvariantCulture));
        }

        private InvalidOperationException Failure(string message)
        {
            lock (_errors)
                return new InvalidOperationException(_errors.Length == 0 ? message : $"{message}; its stderr:\n{_errors}");
        }

        /// <summary>The probe's side: measure what the scenario asks for, on the storage the environment names.</summary>
        public static async Task<int> RunAsync()
        {
            var connection = Environment.GetEnvironmentVariable(StorageVariable)
                ?? throw new InvalidOperationException($"{ProbeFlag}: {StorageVariable} is not set (the latency scenario starts the probe itself)");
            using var store = new BlobStore(connection);
            var output = Console.Out;
            await output.WriteLineAsync("ready");
            await output.FlushAsync();
            var sizes = new Dictionary<long, (byte[] Content, byte[] Buffer)>();
            while (await Console.In.ReadLineAsync() is { } line)
            {
                if (line.Split(' ') is not ["pair", var size, var blob, var verify] || !long.TryParse(size, CultureInfo.InvariantCulture, out var bytes))
                    throw new InvalidOperationException($"{ProbeFlag}: unexpected request \"{line}\" (want: pair BYTES BLOB verify|-)");
                if (!sizes.TryGetValue(bytes, out var state))
                {
                    var content = Content(bytes);
                    sizes[bytes] = state = (content, GC.AllocateUninitializedArray<byte>(content.Length));
                }
                var (read, write) = await StoragePairAsync(store, blob, state.Content, state.Buffer, verify == "verify");
                await output.WriteLineAsync(string.Create(CultureInfo.InvariantCulture, $"pair {bytes} {read} {write}"));
                await output.FlushAsync();
            }
            return 0;
        }

        /// <summary>Closing its stdin ends the probe; a kill after 10 s.</summary>
        public async ValueTask DisposeAsync()
        {
            _process.StandardInput.Close();
            using var grace = new CancellationTokenSource(TimeSpan.FromSeconds(10));
            try
            {
                await _process.WaitForExitAsync(grace.Token);
            }
            catch (OperationCanceledException)
            {
                _process.Kill(entireProcessTree: true);
            }
            _process.Dispose();
        }
    }
}
