using System.Diagnostics;
using System.Globalization;
using System.Net;
using System.Text;
using System.Text.Json.Nodes;
using FaaST.Cachelet;
using FaaST.Cachelet.Index;
using FaaST.Membership;
using FaaST.Peers;
using FaaST.Runtime.Hosting;
using FaaST.Scaling;
using FaaST.Storage;

namespace FaaST.Bench;

/// <summary>
/// ./faast bench bandwidth: Faa$T §6.5 / Fig. 12, bandwidth scaling. The download time of one fresh
/// object read through an app function (python-bench's shared/{name}, which touches every page of the
/// zero-copy view) at the instance that owns the key, with 1, 2 and 4 instances: running (the extra
/// instances already up) and cold (the time also includes starting them, as a scale-out would). With
/// several instances the owner fetches the object in parallel ranges, one per instance
/// (range_from_storage). Storage and instances come from an <see cref="IBandwidthNetwork"/>: the shaped
/// network (<see cref="ShapedNetwork"/>, bench/net/cloudnet.sh) where this machine can build it, else
/// loopback (unshaped: the JSON says so, and why).
/// </summary>
public static class BandwidthScenario
{
    private const string PeerSecret = "faast-bench-bandwidth";
    private const string AppName = "python-bench";
    private const string Container = "bench";
    /// <summary>The bench splits objects from 1 MiB on (the default threshold, 64 MiB, would leave 40 MB whole).</summary>
    private const long Threshold = 1 << 20;

    private static readonly (long Bytes, string Label)[] FullSizes = [(400_000, "400kb"), (40_000_000, "40mb"), (400_000_000, "400mb"), (800_000_000, "800mb")];
    private static readonly (long Bytes, string Label)[] QuickSizes = [(400_000, "400kb"), (8_000_000, "8mb"), (40_000_000, "40mb")];

    private static readonly Stopwatch Clock = Stopwatch.StartNew();

    private static void Say(string message) => Console.WriteLine($"[{Clock.Elapsed.TotalSeconds,5:0.0} s] {message}");

    /// <summary>
    /// On the shaped network (bench/net/cloudnet.sh, 4 instance namespaces) when this machine can build it
    /// (root, iproute2, namespaces permitted), else on loopback, and the JSON says which and why.
    /// --storage-mbps R / --peer-mbps R override cloudnet.sh's defaults (45 / 375 MB/s); --loopback skips the shaped network.
    /// </summary>
    public static async Task RunAsync(string home, bool quick, string[] args)
    {
        // --loopback: the unshaped fallback on purpose (to compare, or to check the fallback where root is available).
        var availability = args.Contains("--loopback")
            ? new Net.CloudNetworkAvailability(false, "--loopback asked for it")
            : await Net.CloudNetwork.AvailableAsync(home);
        if (!availability.IsAvailable)
        {
            Say($"shaped network unavailable: {availability.Reason}; running on loopback");
            await using var loopback = new LoopbackNetwork(home, availability.Reason);
            await RunAsync(home, quick, loopback);
            return;
        }
        var settings = new Net.CloudNetworkSettings();
        if (Option(args, "--storage-mbps") is { } storage)
            settings = settings with { StorageMbps = storage };
        if (Option(args, "--peer-mbps") is { } peer)
            settings = settings with { PeerMbps = peer };
        await using var shaped = await ShapedNetwork.UpAsync(home, 4, settings, CancellationToken.None);
        await RunAsync(home, quick, shaped);
    }

    private static int? Option(string[] args, string name)
    {
        var i = Array.IndexOf(args, name);
        return i >= 0 && i + 1 < args.Length ? int.Parse(args[i + 1], CultureInfo.InvariantCulture) : null;
    }

    public static async Task RunAsync(string home, bool quick, IBandwidthNetwork network, CancellationToken ct = default)
    {
        var sizes = quick ? QuickSizes : FullSizes;
        // Running reads: the median of this many (the machine may be shared); 3 from 400 MB on in the full run,
        // where every read also uploads a fresh blob of that size (about 20 s and 40 s here) to bound the run.
        int Repeats(long bytes) => quick || bytes >= 400_000_000 ? 3 : 5;
        var largest = sizes[^1];
        var logs = Path.Combine(Path.GetTempPath(), "faast-bench-bandwidth-" + DateTime.UtcNow.ToString("yyyyMMdd-HHmmss", CultureInfo.InvariantCulture));
        var report = new Report("bandwidth", quick);
        BandwidthNetworkReport.Write(report, network);
        if (!network.Shaped)
            report.Config("network_note", "unshaped loopback: storage and instances share this machine's memory bandwidth and 2 cores, so splitting a download gains far less than on the paper's VMs (90 MB/s to storage, 750 MB/s between instances)");
        report.Config("sizes", new JsonArray(sizes.Select(s => (JsonNode?)s.Label).ToArray()));
        report.Config("threshold_bytes", Threshold);
        report.Config("read", "GET /api/shared/{name} of python-bench at the instance that owns the key (touches every page of the zero-copy view); a fresh blob per read");
        report.Config("cold", quick ? $"{largest.Label} with 4 instances only (--quick)" : "every size with 2 and 4 instances");
        report.Config("running_reads", quick ? "median of 3 fresh blobs per size and instance count" : "median of 5 fresh blobs per size and instance count (3 for 400 MB and 800 MB)");
        report.Config("storage", "Azurite " + (network.Shaped ? "on the storage address" : "on 127.0.0.1") + ", blobs in a temporary directory on disk (its in-memory store keeps deleted blobs until its periodic GC and filled up)");
        report.Config("warmup", "before the running reads of each instance count: two unmeasured reads in ranges (JIT); the cold reads are not warmed");
        report.Config("cold_definition", "time to start the extra instances until every instance sees them all, plus the read (the upload of the fresh blob in between is not counted)");
        report.Config("instance_logs", logs);
        report.Config("loadavg_at_start", File.ReadAllText("/proc/loadavg").Trim());

        // The N the T_DR rule chooses for one running instance, with the paper's profile (the defaults).
        var paper = new ProfiledBandwidth().Snapshot();
        foreach (var (bytes, label) in sizes)
            report.Add($"tdr_n_{label}", BandwidthPlanner.PlanInstances(bytes, 1, paper, 8), "N the T_DR rule picks with 1 running instance and the paper's profile (T_Load 2 s, 90 MB/s, 750 MB/s), cap 8");

        Say($"starting storage ({network.Description})");
        var connection = await network.StartStorageAsync(ct);
        using var store = new BlobStore(connection);
        await store.CreateContainerIfNotExistsAsync(Container, ct);
        var contents = sizes.ToDictionary(s => s.Label, s => RandomBytes((int)s.Bytes, s.Label.Length));

        var app = HostProcess.CopyApp(Path.Combine(home, "bench", "apps", AppName),
            $$"""{ "cache": { "consistency": "local/sync/local", "memoryLimit": "{{(quick ? "1GiB" : "6GiB")}}" } }""");
        var environment = new Dictionary<string, string>
        {
            ["FAAST_PEER_SECRET"] = PeerSecret,
            ["FAAST_HOME"] = home,
            // PeerHostOptions.BandwidthMinObjectSizeVariable (internal to the runtime): the threshold, until the policy sets it.
            ["FAAST_BANDWIDTH_MIN_OBJECT_SIZE"] = Threshold.ToString(CultureInfo.InvariantCulture),
            ["Logging__LogLevel__Default"] = Environment.GetEnvironmentVariable("BENCH_INSTANCE_LOG_LEVEL") ?? "Warning",
        };
        InstanceGroupOptions Group(int count, int expected, string name) => new()
        {
            AppDirectory = app,
            Count = count,
            ExpectedMembers = expected,
            StorageConnectionString = connection,
            RuntimeDll = Path.Combine(home, "src", "Runtime", "bin", "Release", "net10.0", "FaaST.Runtime.dll"),
            Environment = environment,
            LogDirectory = Path.Combine(logs, name),
        };
        using var peers = new PeerClient(new PeerOptions { Credentials = new PeerAuth(Encoding.UTF8.GetBytes(PeerSecret), AppName), Timeout = TimeSpan.FromMinutes(1) });
        using var http = new HttpClient { Timeout = TimeSpan.FromMinutes(10) };
        var times = new Dictionary<(string Label, int Instances, string Mode), double>();
        var reader = new Reader(store, peers, http);

        Say("1 instance");
        await using var first = await network.StartInstancesAsync(Group(1, 1, "first"), ct);
        await first.WaitForWorkersAsync(1, logs);
        var origin = first[0];
        // One throwaway read: the first one also starts the worker's code paths.
        await reader.ReadAsync(origin, [origin], "warmup", contents[sizes[0].Label], ct);
        foreach (var (bytes, label) in sizes)
            times[(label, 1, "running")] = await MedianAsync(Repeats(bytes), () => reader.ReadAsync(origin, [origin], label, contents[label], ct, 1, "running"));

        // Cold: the extra instances are started for the read (a scale-out), and the time includes their
        // start. --quick measures the largest size with 4 instances only; the full run every size with 2 and 4.
        var colds = quick ? [] : sizes.SelectMany(s => new[] { (s.Label, 2), (s.Label, 4) }).Where(c => c != (largest.Label, 4)).ToArray();
        foreach (var (label, k) in colds)
        {
            Say($"cold: {label} with {k} instances");
            var started = Stopwatch.GetTimestamp();
            var extra = await network.StartInstancesAsync(Group(k - 1, k, $"cold-{label}-{k}"), ct);
            var startSeconds = Stopwatch.GetElapsedTime(started).TotalSeconds;
            try
            {
                var read = await reader.ReadAsync(origin, [origin, .. extra.Instances], label, contents[label], ct, k, "cold");
                times[(label, k, "cold")] = startSeconds + read;
                report.Add($"start_{k - 1}_instances_{label}_s", startSeconds, "part of the cold time: starting the extra instances until all see each other");
            }
            finally
            {
                await extra.DisposeAsync();
                await first.WaitForViewAsync(1, ct);
            }
        }

        // The last cold read (the largest size, 4 instances) starts the three instances the running reads
        // then use (4 running; then two of them stopped for 2 running).
        Say($"cold: {largest.Label} with 4 instances");
        var coldStart = Stopwatch.GetTimestamp();
        await using var extras = await network.StartInstancesAsync(Group(3, 4, "extra"), ct);
        var coldStartSeconds = Stopwatch.GetElapsedTime(coldStart).TotalSeconds;
        var four = new[] { origin, extras[0], extras[1], extras[2] };
        times[(largest.Label, 4, "cold")] = coldStartSeconds + await reader.ReadAsync(origin, four, largest.Label, contents[largest.Label], ct, 4, "cold");
        report.Add($"start_3_instances_{largest.Label}_s", coldStartSeconds, "part of the cold time: starting the extra instances until all see each other");

        // Running: each configuration is warmed with two unmeasured reads in ranges first (the processes'
        // first parallel fetches run code not yet compiled by the JIT's optimizing tier).
        Say("4 instances running");
        await WarmAsync(reader, origin, four, sizes, contents, ct);
        foreach (var (bytes, label) in sizes)
            times[(label, 4, "running")] = await MedianAsync(Repeats(bytes), () => reader.ReadAsync(origin, four, label, contents[label], ct, 4, "running"));

        // The N the instances' own rule picks on this network. Their profile (src/Scaling/ProfiledBandwidth.cs)
        // learned BW_BS from the reads above (every storage download of at least 1 MiB, ranges included);
        // BW_Inst comes only from remote hits, so the origin takes one (a 40 MB-class object another
        // instance owns and has cached) over the instance link; T_Load is this run's measured start of the
        // three extra instances, sent as the controller would (GetVote's instance_load_seconds).
        Say("profile: a remote hit at the origin, then its vote");
        await reader.RemoteHitAsync(extras[0], origin, four, contents["40mb"], ct);
        var profile = await VoteProfileAsync(origin, coldStartSeconds, ct);
        report.Config("profile_at_origin", new JsonObject
        {
            ["load_seconds"] = profile.LoadSeconds,
            ["storage_mb_per_s"] = profile.StorageBytesPerSecond / 1e6,
            ["instance_mb_per_s"] = profile.InstanceBytesPerSecond / 1e6,
            ["source"] = "GetVote's BandwidthProfile from the origin instance (BW_BS, BW_Inst observed by its read path; T_Load the measured start of 3 instances, sent in the vote request)",
        });
        var observed = new BandwidthSnapshot(profile.LoadSeconds, profile.StorageBytesPerSecond, profile.InstanceBytesPerSecond);
        foreach (var (bytes, label) in sizes)
        {
            // Below the threshold the read path never plans (one download); at or above it, the rule over the profile.
            var n = bytes < Threshold ? 1 : BandwidthPlanner.PlanInstances(bytes, 1, observed, 8);
            report.Add($"n_chosen_{label}", n, "N the instances' T_DR rule picks with 1 running instance on this network (the origin's observed profile, cap 8; 1 below the split threshold)");
            report.Add($"tdr_predicted_{label}_n{n}_s", BandwidthPlanner.DownloadSeconds(bytes, n, 1, observed), "T_DR of that choice, from the same profile");
        }

        Say("2 instances running");
        await extras.StopAsync(1);
        await extras.StopAsync(2);
        await first.WaitForViewAsync(2, ct);
        var two = new[] { origin, extras[0] };
        await WarmAsync(reader, origin, two, sizes, contents, ct);
        foreach (var (bytes, label) in sizes)
            times[(label, 2, "running")] = await MedianAsync(Repeats(bytes), () => reader.ReadAsync(origin, two, label, contents[label], ct, 2, "running"));

        foreach (var ((label, k, mode), seconds) in times.OrderBy(t => Array.FindIndex(sizes, s => s.Label == t.Key.Label)).ThenBy(t => t.Key.Mode).ThenBy(t => t.Key.Instances))
        {
            report.Add($"{label}_{k}inst_{mode}_s", seconds, $"download time through the app, {k} instance(s), {mode}");
            if (k > 1)
                report.Add($"speedup_{label}_{k}inst_{mode}", times[(label, 1, "running")] / seconds, $"1 instance's time / this one's");
        }
        foreach (var (key, ranges) in reader.Ranges)
            report.Add(key, ranges, "ranges the owner fetched the object in (1: one download)");
        if (quick)
            report.Config("speedup_note", "--quick measures no 400 MB or 800 MB objects: speedup_800mb_* are absent (run without --quick)");
        foreach (var (bytes, label) in sizes)
            report.Add($"storage_get_{label}_s", await StorageSecondsAsync(store, label, contents[label], ct), "the same size straight from storage into the bench process (baseline)");
        report.Config("loadavg_at_end", File.ReadAllText("/proc/loadavg").Trim());
        var path = report.Write(home);
        Plot(home, path);
    }

    private static async Task<double> MedianAsync(int repeats, Func<Task<double>> read)
    {
        var times = new double[repeats];
        for (var i = 0; i < repeats; i++)
            times[i] = await read();
        Array.Sort(times);
        return times[repeats / 2];
    }

    private static async Task WarmAsync(Reader reader, GroupInstance origin, GroupInstance[] members, (long Bytes, string Label)[] sizes,
        Dictionary<string, byte[]> contents, CancellationToken ct)
    {
        var warm = sizes.First(s => s.Bytes >= Threshold).Label;
        for (var i = 0; i < 2; i++)
            await reader.ReadAsync(origin, members, "warmup", contents[warm], ct);
    }

    /// <summary>Uploads fresh blobs owned by the origin, reads them through the app there and checks what the owner did.</summary>
    private sealed class Reader(BlobStore store, PeerClient peers, HttpClient http)
    {
        private int _sequence;

        /// <summary>The ranges the owner used per configuration (1: one download).</summary>
        public Dictionary<string, long> Ranges { get; } = [];

        public async Task<double> ReadAsync(GroupInstance origin, IReadOnlyList<GroupInstance> members, string label, byte[] content, CancellationToken ct,
            int instances = 0, string mode = "")
        {
            var name = OwnedBy(origin, members, label);
            await store.UploadAsync(Container, name, content, ct: ct);
            var before = await peers.StatsAsync(origin.PeerAddress, ct);
            var started = Stopwatch.GetTimestamp();
            using var response = await http.GetAsync(new Uri(origin.BaseAddress, $"api/shared/{name}"), ct);
            var body = await response.Content.ReadAsStringAsync(ct);
            var seconds = Stopwatch.GetElapsedTime(started).TotalSeconds;
            // The function answers the length and the sum of one byte per 4 KiB page it touched: a torn
            // or mixed object (a range in the wrong place, a missing one) shows in the sum.
            var expected = string.Create(CultureInfo.InvariantCulture, $"{content.Length} {PageSum(content)}");
            if (response.StatusCode != HttpStatusCode.OK || body.Trim() != expected)
                throw new InvalidOperationException($"reading {name} at instance {origin.Index}: {(int)response.StatusCode} \"{body}\" (expected \"{expected}\")");
            var after = await peers.StatsAsync(origin.PeerAddress, ct);
            await store.DeleteAsync(Container, name, ct: ct);
            if (instances > 0)
            {
                var fetches = after.ParallelFetches - before.ParallelFetches;
                var ranges = fetches == 0 ? 1 : 1 + after.ParallelRanges - before.ParallelRanges + after.ParallelRangeFallbacks - before.ParallelRangeFallbacks;
                // Every read of a configuration is checked; the table shows the most of them (all agree when nothing fell back).
                var key = $"ranges_{label}_{instances}inst_{mode}";
                Ranges[key] = Math.Max(Ranges.GetValueOrDefault(key), ranges);
                Say($"  {label}, {instances} instance(s) {mode}: {seconds * 1000:0} ms in {ranges} range(s)");
            }
            return seconds;
        }

        /// <summary>A fresh blob that <paramref name="owner"/> owns, read there (a miss it caches), then at <paramref name="at"/> (a remote hit from the owner).</summary>
        public async Task RemoteHitAsync(GroupInstance owner, GroupInstance at, IReadOnlyList<GroupInstance> members, byte[] content, CancellationToken ct)
        {
            var name = OwnedBy(owner, members, "remote");
            await store.UploadAsync(Container, name, content, ct: ct);
            var expected = string.Create(CultureInfo.InvariantCulture, $"{content.Length} {PageSum(content)}");
            foreach (var instance in new[] { owner, at })
            {
                var before = await peers.StatsAsync(at.PeerAddress, ct);
                var started = Stopwatch.GetTimestamp();
                using var response = await http.GetAsync(new Uri(instance.BaseAddress, $"api/shared/{name}"), ct);
                var body = await response.Content.ReadAsStringAsync(ct);
                if (response.StatusCode != HttpStatusCode.OK || body.Trim() != expected)
                    throw new InvalidOperationException($"reading {name} at instance {instance.Index}: {(int)response.StatusCode} \"{body}\" (expected \"{expected}\")");
                var after = await peers.StatsAsync(at.PeerAddress, ct);
                if (instance == at)
                    Say($"  remote hit at the origin: {content.Length / 1e6:0} MB in {Stopwatch.GetElapsedTime(started).TotalMilliseconds:0} ms (remote_hit reads {before.Reads.GetValueOrDefault("remote_hit")} -> {after.Reads.GetValueOrDefault("remote_hit")})");
            }
            await store.DeleteAsync(Container, name, ct: ct);
        }

        /// <summary>A fresh blob name that the ring of <paramref name="members"/> places on <paramref name="origin"/>.</summary>
        private string OwnedBy(GroupInstance origin, IReadOnlyList<GroupInstance> members, string label)
        {
            var ring = new HashRing(members.Select(m => new Member(m.Id, m.PeerAddress, DateTimeOffset.UtcNow)));
            while (true)
            {
                var name = $"bw-{label}-{Interlocked.Increment(ref _sequence)}-{Guid.NewGuid():N}";
                if (ring.OwnerOf(BlobCache.PlacementKey(new BlobKey(store.Endpoint.AbsoluteUri, Container, name))).Id == origin.Id)
                    return name;
            }
        }
    }

    /// <summary>The origin's bandwidth profile, asked as the scale controller asks (InstanceScaling.GetVote on the peer endpoint, signed with the peer secret).</summary>
    private static async Task<FaaST.Protos.Scale.BandwidthProfile> VoteProfileAsync(GroupInstance instance, double loadSeconds, CancellationToken ct)
    {
        using var channel = Grpc.Net.Client.GrpcChannel.ForAddress(instance.PeerAddress);
        var client = new FaaST.Protos.Scale.InstanceScaling.InstanceScalingClient(channel);
        var auth = new PeerAuth(Encoding.UTF8.GetBytes(PeerSecret), AppName);
        var headers = new Grpc.Core.Metadata { { PeerAuth.HeaderName, auth.SignCall("/faast.scale.v1.InstanceScaling/GetVote") } };
        var reply = await client.GetVoteAsync(new FaaST.Protos.Scale.VoteRequest { App = AppName, Instances = 4, InstanceLoadSeconds = loadSeconds },
            new Grpc.Core.CallOptions(headers, cancellationToken: ct));
        return reply.Profile;
    }

    private static async Task<double> StorageSecondsAsync(BlobStore store, string label, byte[] content, CancellationToken ct)
    {
        var name = $"bw-baseline-{label}-{Guid.NewGuid():N}";
        await store.UploadAsync(Container, name, content, ct: ct);
        var into = new MemoryStream(content.Length);
        var started = Stopwatch.GetTimestamp();
        await store.DownloadToAsync(Container, name, into, ct: ct);
        var seconds = Stopwatch.GetElapsedTime(started).TotalSeconds;
        await store.DeleteAsync(Container, name, ct: ct);
        return seconds;
    }

    /// <summary>Draws bench/results/bandwidth.png from the JSON (bench/plot_bandwidth.py, Debian's python3 with matplotlib).</summary>
    private static void Plot(string home, string json)
    {
        var png = Path.ChangeExtension(json, ".png");
        var info = new ProcessStartInfo("/usr/bin/python3") { UseShellExecute = false, RedirectStandardError = true };
        info.ArgumentList.Add(Path.Combine(home, "bench", "plot_bandwidth.py"));
        info.ArgumentList.Add(json);
        info.ArgumentList.Add(png);
        using var python = Process.Start(info)!;
        var errors = python.StandardError.ReadToEnd();
        python.WaitForExit();
        Console.WriteLine(python.ExitCode == 0 ? $"plot: {png}" : $"plot failed ({python.ExitCode}): {errors.Trim()}");
    }

    private static long PageSum(byte[] content)
    {
        long sum = 0;
        for (var i = 0; i < content.Length; i += 4096)
            sum += content[i];
        return sum;
    }

    private static byte[] RandomBytes(int n, int seed)
    {
        var data = GC.AllocateUninitializedArray<byte>(n);
        new Random(seed).NextBytes(data);
        return data;
    }
}
