using System.Collections.Concurrent;
using System.Diagnostics;
using System.Globalization;
using System.Net.Http.Json;
using System.Text;
using System.Text.Json.Nodes;
using FaaST.Cachelet;
using FaaST.Cachelet.Index;
using FaaST.Membership;
using FaaST.Runtime.Hosting;
using FaaST.Storage;
using FaaST.Hosting.Status;

namespace FaaST.Bench;

/// <summary>
/// ./faast bench faults: what the runtime does under faults, on real processes (hosts, workers, Azurite),
/// each experiment bounded in time: a worker killed under load, an instance killed under load in each of
/// the six consistency presets (wrong bytes, stale reads, lost acknowledged writes, failed requests,
/// recovery), storage stalled (SIGSTOP) and killed, a soak (RSS, fds, /dev/shm), and the machine back to
/// its baseline afterwards (/dev/shm entries, processes).
/// </summary>
public static class FaultsScenario
{
    private const string PeerSecret = "faast-bench-faults";
    private const string Container = "faults";

    // A request slower than this counts as not (yet) served when recovery is measured: a client
    // that waited this long saw an outage, whatever the status at the end.
    private static readonly TimeSpan Slow = TimeSpan.FromSeconds(1);

    // The membership heartbeat (src/Membership, Member.HeartbeatInterval): recovery is also given in these.
    private const double HeartbeatSeconds = 1.0;

    private static readonly string[] Presets =
        ["storage/sync/storage", "owner/sync/owner", "owner/async/owner", "owner/sync/local", "local/sync/local", "local/async/local"];

    // Reads are strong (never older than the last acknowledged write) in these; writes are durable
    // before the acknowledgement in the sync ones (README, the six presets).
    private static bool StrongReads(string preset) => preset is "storage/sync/storage" or "owner/sync/owner";

    private static bool SyncWrites(string preset) => preset.Contains("/sync/", StringComparison.Ordinal);

    /// <summary>The sizes and durations of one run: --quick is the same experiments, smaller and shorter.</summary>
    private sealed record Plan(
        int WorkerKillRate, TimeSpan WorkerKillBefore, TimeSpan WorkerKillAfter, int[] WorkerCounts,
        int Keys, int Readers, TimeSpan WritePause, TimeSpan ReadPause, TimeSpan InstanceKillBefore, TimeSpan InstanceKillAfter,
        int StorageRate, TimeSpan StorageStall, TimeSpan StorageDown, TimeSpan StorageAfter,
        TimeSpan Soak, TimeSpan SoakWarmup, TimeSpan SoakSample, int SoakRate);

    // The soak's warm-up is 10 s in both runs: the Python workers keep a grown heap (the glibc settings
    // the host gives them), which takes them about 10 s of this load to reach; measured from 3 s, a
    // 30 s soak read that plateau as +60 MB.

    private static Plan PlanFor(bool quick) => quick
        ? new Plan(60, TimeSpan.FromSeconds(1), TimeSpan.FromSeconds(3), [1],
            6, 2, TimeSpan.FromMilliseconds(100), TimeSpan.FromMilliseconds(40), TimeSpan.FromSeconds(1), TimeSpan.FromSeconds(5),
            30, TimeSpan.FromSeconds(2), TimeSpan.FromSeconds(1), TimeSpan.FromSeconds(3),
            TimeSpan.FromSeconds(30), TimeSpan.FromSeconds(10), TimeSpan.FromSeconds(1), 40)
        : new Plan(100, TimeSpan.FromSeconds(3), TimeSpan.FromSeconds(6), [1, 2],
            16, 4, TimeSpan.FromMilliseconds(100), TimeSpan.FromMilliseconds(20), TimeSpan.FromSeconds(4), TimeSpan.FromSeconds(10),
            50, TimeSpan.FromSeconds(5), TimeSpan.FromSeconds(3), TimeSpan.FromSeconds(10),
            TimeSpan.FromMinutes(5), TimeSpan.FromSeconds(10), TimeSpan.FromSeconds(5), 80);

    public static async Task RunAsync(string home, bool quick)
    {
        var plan = PlanFor(quick);
        var logs = Path.Combine(Path.GetTempPath(), "faast-bench-faults-" + DateTime.UtcNow.ToString("yyyyMMdd-HHmmss", CultureInfo.InvariantCulture));
        var report = new Report("faults", quick);
        report.Config("storage", "Azurite on loopback (unshaped); in memory, except the storage experiments (a data folder, so a killed Azurite restarts with its blobs)");
        report.Config("app", "bench/apps/faults-app (Python): Read returns the blob's bytes, Write writes the request body");
        report.Config("slow_request_s", Slow.TotalSeconds);
        report.Config("heartbeat_s", HeartbeatSeconds);
        report.Config("instance_kill", $"3 instances; one sequential writer per key ({plan.Keys} keys, 1 KiB and 96 KiB, versioned content), {plan.Readers} readers; requests round robin over the instances still in the load balancer's list; the instance owning most keys SIGKILLed (with its workers) and dropped from the list after {plan.InstanceKillBefore.TotalSeconds} s, load for {plan.InstanceKillAfter.TotalSeconds} s more");
        report.Config("instance_logs", logs);
        report.Config("product_commit", Git(home, "rev-parse", "--short", "HEAD"));
        report.Config("product_uncommitted", Git(home, "status", "--porcelain", "--", "src").Replace('\n', ';'));
        report.Config("loadavg_at_start", File.ReadAllText("/proc/loadavg").Trim());
        var total = Stopwatch.StartNew();
        var before = Baseline.Take(home);
        // Each experiment runs its own copy of the app under a name of its own: instances of one name in
        // one storage join one cooperative cache, and under --quick the soak runs beside the others.
        var app = Path.Combine(home, "bench", "apps", "faults-app");
        var goals = new List<string>();
        CheckTheChecker();
        // Starting three instances per preset takes most of the time: --quick runs the strong preset
        // with owners and the weakest one (the full run: all six).
        string[] presets = quick ? ["owner/sync/owner", "local/async/local"] : Presets;
        report.Config("instance_kill_presets", new JsonArray(presets.Select(p => (JsonNode?)p).ToArray()));
        if (quick)
            report.Config("instance_kill_note", "--quick kills an instance under 2 of the 6 presets only, to finish in about a minute");

        var phases = new JsonObject();
        async Task Phase(string phase, Func<Task> run)
        {
            var sw = Stopwatch.StartNew();
            await run();
            lock (phases)
                phases[phase] = Math.Round(sw.Elapsed.TotalSeconds, 1);
        }

        Say("starting Azurite (in memory)");
        await using (var azurite = await AzuriteProcess.StartAsync(home))
        {
            using var store = new BlobStore(azurite.ConnectionString);
            await store.CreateContainerIfNotExistsAsync(Container);
            // The soak adds its rows when it is done: under --quick it runs beside the other experiments.
            var soakRows = new Report("faults-soak", quick);
            var soakGoals = new List<string>();
            var soak = new JsonObject();
            async Task Faults()
            {
                foreach (var workers in plan.WorkerCounts)
                    await Phase($"worker_kill_{workers}w", () => WorkerKillAsync(home, report, goals, app, azurite.ConnectionString, store, workers, plan, Path.Combine(logs, $"worker-kill-{workers}w")));
                foreach (var preset in presets)
                    await Phase("instance_kill_" + preset.Replace('/', '_'), () => InstanceKillAsync(home, report, goals, app, azurite.ConnectionString, store, preset, plan, Path.Combine(logs, "instance-kill-" + preset.Replace('/', '_'))));
                await Phase("storage", () => StorageFaultsAsync(home, report, goals, app, plan, Path.Combine(logs, "storage")));
            }
            Task Soak() => Phase("soak", () => SoakAsync(home, soakRows, soakGoals, soak, app, azurite.ConnectionString, store, plan, Path.Combine(logs, "soak")));
            if (quick)
            {
                // A 30 s soak and the rest one after the other would not fit in a minute.
                report.Config("soak_concurrent", "--quick runs the soak at the same time as the other experiments (the full run: after them)");
                await Task.WhenAll(Faults(), Soak());
            }
            else
            {
                await Faults();
                await Soak();
            }
            report.Append(soakRows);
            goals.AddRange(soakGoals);
            foreach (var (key, value) in soak.ToArray())
            {
                soak.Remove(key);
                report.Config(key, value);
            }
        }
        report.Config("phase_s", phases);

        HostProcess.DeleteAppCopies();
        var after = await Baseline.SettleAsync(home, before);
        report.Add("baseline_shm_entries_before", before.ShmEntries.Count, "entries in /dev/shm before the run (all users)");
        report.Add("baseline_shm_entries_after", after.ShmEntries.Count, "... and after it");
        var leftShm = after.ShmEntries.Except(before.ShmEntries).Where(e => e.StartsWith("faast-faults-", StringComparison.Ordinal) || e.StartsWith("faast-bench-", StringComparison.Ordinal)).ToArray();
        report.Add("baseline_shm_left_by_run", leftShm.Length, leftShm.Length == 0 ? "entries of this run's app left in /dev/shm (goal 0)" : "left: " + string.Join(' ', leftShm));
        foreach (var kind in Baseline.Kinds)
        {
            report.Add($"baseline_{kind}_processes_before", before.Processes[kind], $"{kind} processes of this checkout before the run");
            report.Add($"baseline_{kind}_processes_after", after.Processes[kind], "... and after it (goal: the same)");
            if (after.Processes[kind] > before.Processes[kind])
                goals.Add($"{after.Processes[kind] - before.Processes[kind]} {kind} process(es) more than before the run");
        }
        if (leftShm.Length > 0)
            goals.Add($"/dev/shm entries left: {string.Join(' ', leftShm)}");
        report.Add("total_s", total.Elapsed.TotalSeconds, "the whole run");
        report.Config("goals_missed", new JsonArray(goals.Select(g => (JsonNode?)g).ToArray()));
        report.Config("loadavg_at_end", File.ReadAllText("/proc/loadavg").Trim());
        report.Write(home);
        Console.WriteLine(goals.Count == 0 ? "every goal met" : "goals missed:\n  " + string.Join("\n  ", goals));
    }

    private static readonly Stopwatch Clock = Stopwatch.StartNew();

    private static void Say(string message) => Console.WriteLine($"[{Clock.Elapsed.TotalSeconds,6:0.0} s] {message}");

    private static double Seconds(long ticks) => ticks / (double)Stopwatch.Frequency;

    // ---- versioned content -----------------------------------------------------------------------

    // Every write of key k is version v of k: a header naming both, then bytes that follow from them
    // alone. A read is then checked byte for byte against the one version its header names, so a
    // torn, mixed or foreign value is a wrong read, never a lucky match.
    private const int HeaderLength = 15; // "k0000 v0000000\n"

    /// <summary>96 KiB for every fourth key (over the 64 KiB inline threshold: shared memory, bulk peer
    /// transfers), 1 KiB for the others (inline).</summary>
    private static int SizeOf(int key) => key % 4 == 0 ? 96 * 1024 : 1024;

    private static byte[] Content(int key, int version)
    {
        var data = new byte[SizeOf(key)];
        Encoding.ASCII.GetBytes(string.Create(CultureInfo.InvariantCulture, $"k{key:D4} v{version:D7}\n"), data);
        var x = ((uint)key * 2654435761u) ^ ((uint)version * 40503u) ^ 0x9E3779B9u;
        for (var i = HeaderLength; i < data.Length; i++)
        {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            data[i] = (byte)x;
        }
        return data;
    }

    /// <summary>The version <paramref name="body"/> is, if it is exactly some version of <paramref name="key"/> up to <paramref name="highest"/>; else null.</summary>
    internal static int? VersionOf(int key, ReadOnlySpan<byte> body, int highest)
    {
        if (body.Length != SizeOf(key) || body[0] != 'k' || body[5] != ' ' || body[6] != 'v' || body[14] != '\n')
            return null;
        if (!int.TryParse(body[1..5], NumberStyles.None, CultureInfo.InvariantCulture, out var k) || k != key
            || !int.TryParse(body[7..14], NumberStyles.None, CultureInfo.InvariantCulture, out var v) || v > highest)
            return null;
        return body.SequenceEqual(Content(key, v)) ? v : null;
    }

    /// <summary>The wrong-bytes verdict is only as good as <see cref="VersionOf"/>: before any
    /// measurement, it must accept each version as itself and reject a flipped byte, a value torn
    /// between two versions, another key's value and a version not yet written.</summary>
    private static void CheckTheChecker()
    {
        foreach (var key in new[] { 0, 1 })
        {
            var v3 = Content(key, 3);
            var v4 = Content(key, 4);
            var flipped = (byte[])v3.Clone();
            flipped[^1] ^= 1;
            var torn = v3[..(v3.Length / 2)].Concat(v4[(v4.Length / 2)..]).ToArray();
            var failures = new List<string>();
            if (VersionOf(key, v3, 4) != 3)
                failures.Add("version 3 is not read as 3");
            if (VersionOf(key, flipped, 4) is not null)
                failures.Add("a flipped last byte passes");
            if (VersionOf(key, torn, 4) is not null)
                failures.Add("half of version 3 and half of version 4 pass");
            if (VersionOf(key, Content(key + 4, 3), 4) is not null)
                failures.Add("another key's value of the same size passes");
            if (VersionOf(key, v4, 3) is not null)
                failures.Add("a version higher than any written passes");
            if (failures.Count > 0)
                throw new InvalidOperationException($"the content check is broken for key {key}: {string.Join("; ", failures)}");
        }
    }

    // ---- requests and their outcomes -------------------------------------------------------------

    /// <summary>One request: when it was sent and answered (Stopwatch ticks), its status (0: no answer:
    /// refused, reset, timed out), and to which instance.</summary>
    private readonly record struct Outcome(long Sent, long Done, int Status, int Instance, char Kind)
    {
        public bool Ok => Status is >= 200 and < 300;

        public bool Bad => !Ok || Done - Sent > Slow.TotalSeconds * Stopwatch.Frequency;
    }

    private static HttpClient NewClient(int maxConnections = 1024) => new(new SocketsHttpHandler
    {
        MaxConnectionsPerServer = maxConnections,
        UseCookies = false,
        UseProxy = false,
        ConnectTimeout = TimeSpan.FromSeconds(5),
        PooledConnectionIdleTimeout = TimeSpan.FromMinutes(5),
    })
    { Timeout = TimeSpan.FromSeconds(60) };

    /// <summary>Seconds from <paramref name="fault"/> until requests were served again: the end of the
    /// last bad (failed or slow) request that was still open at the fault or sent after it; 0 if none.</summary>
    private static double RecoverySeconds(IEnumerable<Outcome> outcomes, long fault) =>
        outcomes.Where(o => o.Bad && o.Done >= fault).Select(o => Seconds(o.Done - fault)).DefaultIfEmpty(0).Max();

    private static double P99Ms(IEnumerable<Outcome> outcomes)
    {
        var ms = outcomes.Select(o => Seconds(o.Done - o.Sent) * 1000).Order().ToArray();
        return ms.Length == 0 ? 0 : ms[Math.Min(ms.Length - 1, (int)Math.Ceiling(0.99 * ms.Length) - 1)];
    }

    private static string StatusCounts(IEnumerable<Outcome> failed) =>
        string.Join(", ", failed.GroupBy(o => o.Status).OrderBy(g => g.Key).Select(g => $"{(g.Key == 0 ? "no answer" : g.Key.ToString(CultureInfo.InvariantCulture))}: {g.Count()}"));

    /// <summary>
    /// An open-loop load: starts a request every 1/<paramref name="rate"/> s whether or not the earlier
    /// ones have been answered (a stalled server collects them), for <paramref name="duration"/>, then
    /// waits for the ones in flight. At most <paramref name="maxInFlight"/> at once; the rest are counted as not sent.
    /// </summary>
    private static async Task<int> OpenLoopAsync(int rate, TimeSpan duration, Func<long, Task> request, int maxInFlight = 2000)
    {
        var inFlight = new ConcurrentDictionary<Task, bool>();
        var notSent = 0;
        var interval = Stopwatch.Frequency / rate;
        var start = Stopwatch.GetTimestamp();
        var end = start + (long)(duration.TotalSeconds * Stopwatch.Frequency);
        for (var next = start; next < end; next += interval)
        {
            var wait = next - Stopwatch.GetTimestamp();
            if (wait > 0)
                await Task.Delay(TimeSpan.FromSeconds(Seconds(wait)));
            if (inFlight.Count >= maxInFlight)
            {
                notSent++;
                continue;
            }
            var task = Task.Run(() => request(Stopwatch.GetTimestamp()));
            inFlight[task] = true;
            _ = task.ContinueWith(t => inFlight.TryRemove(t, out _), TaskScheduler.Default);
        }
        await Task.WhenAll(inFlight.Keys);
        return notSent;
    }

    // ---- worker kill -----------------------------------------------------------------------------

    /// <summary>One instance with N workers under an open-loop load of reads checked byte for byte;
    /// one worker SIGKILLed in the middle.</summary>
    private static async Task WorkerKillAsync(string home, Report report, List<string> goals, string app, string storage, BlobStore store, int workers, Plan plan, string logs)
    {
        var name = $"worker_kill_{workers}w";
        Say($"worker kill: 1 instance, {workers} worker(s), {plan.WorkerKillRate} reads/s, SIGKILL a worker after {plan.WorkerKillBefore.TotalSeconds} s");
        var copy = HostProcess.CopyApp(app, """{ "cache": { "consistency": "storage/sync/storage" } }""", $"faults-wk{workers}");
        int[] keys = [0, 1]; // 96 KiB (shared memory) and 1 KiB (inline)
        var blobs = keys.Select(k => $"{name}-k{k}").ToArray();
        for (var i = 0; i < keys.Length; i++)
            await store.UploadAsync(Container, blobs[i], Content(keys[i], 0));
        var outcomes = new ConcurrentQueue<Outcome>();
        long wrong = 0;
        await using (var group = await StartGroupAsync(home, copy, 1, storage, logs, ["--workers", workers.ToString(CultureInfo.InvariantCulture)], workers))
        {
            using var http = NewClient();
            var address = group[0].BaseAddress;
            long kill = 0, restarted = 0, sequence = 0;
            var killer = Task.Run(async () =>
            {
                await Task.Delay(plan.WorkerKillBefore);
                var status = await StatusAsync(http, address);
                var pid = status.WorkerProcessIds[0];
                kill = Stopwatch.GetTimestamp();
                Signal(pid, "KILL");
                // Until the host has all its workers again (the dead one's id is gone from the list).
                var deadline = Stopwatch.GetTimestamp() + 30 * Stopwatch.Frequency;
                while (Stopwatch.GetTimestamp() < deadline)
                {
                    var s = await StatusAsync(http, address);
                    if (s.ReadyWorkers >= workers && !s.WorkerProcessIds.Contains(pid))
                    {
                        restarted = Stopwatch.GetTimestamp();
                        return;
                    }
                    await Task.Delay(20);
                }
            });
            await OpenLoopAsync(plan.WorkerKillRate, plan.WorkerKillBefore + plan.WorkerKillAfter, async sent =>
            {
                var i = (int)(Interlocked.Increment(ref sequence) % keys.Length);
                var status = 0;
                try
                {
                    using var response = await http.GetAsync(new Uri(address, "api/read/" + blobs[i]));
                    var body = await response.Content.ReadAsByteArrayAsync();
                    status = (int)response.StatusCode;
                    if (response.IsSuccessStatusCode && VersionOf(keys[i], body, 0) is null)
                        Interlocked.Increment(ref wrong);
                }
                catch (Exception e) when (e is HttpRequestException or TaskCanceledException)
                {
                }
                outcomes.Enqueue(new Outcome(sent, Stopwatch.GetTimestamp(), status, 0, 'r'));
            });
            await killer;
            var all = outcomes.ToArray();
            var failed = all.Where(o => !o.Ok).ToArray();
            var recovery = RecoverySeconds(all, kill);
            var afterKill = all.Where(o => o.Done >= kill).ToArray();
            report.Add($"{name}_requests", all.Length, $"reads at {plan.WorkerKillRate}/s, each checked byte for byte");
            report.Add($"{name}_failed", failed.Length, failed.Length == 0 ? "" : StatusCounts(failed));
            report.Add($"{name}_wrong_bytes", wrong, "answers that were not the blob's bytes (goal 0)");
            report.Add($"{name}_recovery_s", recovery, $"kill -> end of the last failed or > {Slow.TotalSeconds:0} s request (goal <= 2)");
            report.Add($"{name}_p99_before_ms", P99Ms(all.Where(o => o.Done < kill)), "p99 latency before the kill (for comparison)");
            report.Add($"{name}_max_latency_ms", afterKill.Select(o => Seconds(o.Done - o.Sent) * 1000).DefaultIfEmpty(0).Max(), "slowest request open at or after the kill");
            report.Add($"{name}_worker_back_s", restarted > 0 ? Seconds(restarted - kill) : -1, "kill -> the host has all its workers again (-1: not within 30 s)");
            if (wrong > 0)
                goals.Add($"{name}: {wrong} wrong answers");
            if (recovery > 2)
                goals.Add($"{name}: requests succeeded again only {recovery:0.00} s after the kill (goal 2 s)");
        }
        ReportLogWarnings(logs);
    }

    // ---- instance kill ---------------------------------------------------------------------------

    private sealed class KeyState
    {
        public int Attempted; // the highest version a write was sent for
        public int Acked;     // the highest version a write was acknowledged for
        public long AckedAt;  // when (ticks)
    }

    /// <summary>
    /// Three instances of the app in <paramref name="preset"/>, one sequential writer per key and a few
    /// readers, spread over the instances a load balancer still lists; the instance owning most keys is
    /// SIGKILLed (with its workers, as a machine dies) mid-load and leaves the list at that moment. Requests it had in flight
    /// fail and are counted apart; what the survivors answer is what the preset promises.
    /// </summary>
    private static async Task InstanceKillAsync(string home, Report report, List<string> goals, string app, string storage, BlobStore store, string preset, Plan plan, string logs)
    {
        var mode = preset.Replace('/', '_');
        var name = "ik_" + mode;
        Say($"instance kill: 3 instances, {preset}");
        var copy = HostProcess.CopyApp(app, $$"""{ "cache": { "consistency": "{{preset}}" } }""", "faults-ik-" + preset.Replace('/', '-'));
        var blobs = Enumerable.Range(0, plan.Keys).Select(k => $"{mode}-k{k:D4}").ToArray();
        var state = Enumerable.Range(0, plan.Keys).Select(_ => new KeyState()).ToArray();
        for (var k = 0; k < plan.Keys; k++)
            await store.UploadAsync(Container, blobs[k], Content(k, 0));
        var outcomes = new ConcurrentQueue<Outcome>();
        long wrong = 0, stale = 0, staleStorageNewer = 0, missing = 0, reads = 0, writes = 0;
        long kill = 0, viewBack = 0;
        int victim = -1, victimOwned = 0;
        var staleExamples = new ConcurrentQueue<string>();
        await using (var group = await StartGroupAsync(home, copy, 3, storage, logs, [], 1))
        {
            using var http = NewClient();
            var addresses = group.Instances.Select(i => i.BaseAddress).ToArray();
            // The victim is the instance that owns most keys (by the same ring and placement key the
            // cachelets use), so that the kill takes the owner of as many keys as it can.
            var ring = new HashRing(group.Instances.Select(i => new Member(i.Id, i.PeerAddress, default)));
            var owners = blobs.Select(b => group.Instances.First(i => i.Id == ring.OwnerOf(BlobCache.PlacementKey(new BlobKey(store.Endpoint.AbsoluteUri, Container, b))).Id).Index).ToArray();
            victim = Enumerable.Range(0, addresses.Length).MaxBy(i => owners.Count(o => o == i));
            victimOwned = owners.Count(o => o == victim);
            var others = Enumerable.Range(0, addresses.Length).Where(i => i != victim).ToArray();
            // Every instance reads every key once first: warm workers, and a copy in each cache (what
            // the local-read presets then serve).
            foreach (var address in addresses)
                for (var k = 0; k < plan.Keys; k++)
                {
                    var body = await http.GetByteArrayAsync(new Uri(address, "api/read/" + blobs[k]));
                    if (VersionOf(k, body, 0) != 0)
                        throw new InvalidOperationException($"{address} reads {blobs[k]} wrong before any fault");
                }
            var live = Enumerable.Range(0, addresses.Length).ToArray();
            // When a request was sent, relative to the kill.
            string When(long sent) => Volatile.Read(ref kill) is var k && k > 0
                ? string.Create(CultureInfo.InvariantCulture, $"{Seconds(sent - k):+0.00;-0.00} s from the kill")
                : "before the kill";
            using var stop = new CancellationTokenSource();
            var turn = 0;
            int Pick() => Volatile.Read(ref live) is var l ? l[(int)((uint)Interlocked.Increment(ref turn) % l.Length)] : 0;

            var writers = Enumerable.Range(0, plan.Keys).Select(k => Task.Run(async () =>
            {
                var s = state[k];
                while (!stop.IsCancellationRequested)
                {
                    var instance = Pick();
                    var version = s.Attempted + 1;
                    Volatile.Write(ref s.Attempted, version);
                    var sent = Stopwatch.GetTimestamp();
                    var status = 0;
                    try
                    {
                        using var content = new ByteArrayContent(Content(k, version));
                        using var response = await http.PostAsync(new Uri(addresses[instance], "api/write/" + blobs[k]), content);
                        status = (int)response.StatusCode;
                        if (response.IsSuccessStatusCode)
                        {
                            Volatile.Write(ref s.AckedAt, Stopwatch.GetTimestamp());
                            Volatile.Write(ref s.Acked, version);
                        }
                    }
                    catch (Exception e) when (e is HttpRequestException or TaskCanceledException)
                    {
                    }
                    Interlocked.Increment(ref writes);
                    outcomes.Enqueue(new Outcome(sent, Stopwatch.GetTimestamp(), status, instance, 'w'));
                    try
                    {
                        await Task.Delay(plan.WritePause, stop.Token);
                    }
                    catch (OperationCanceledException)
                    {
                    }
                }
            })).ToArray();
            var readers = Enumerable.Range(0, plan.Readers).Select(r => Task.Run(async () =>
            {
                var random = new Random(r);
                while (!stop.IsCancellationRequested)
                {
                    var k = random.Next(plan.Keys);
                    var instance = Pick();
                    var ackedBefore = Volatile.Read(ref state[k].Acked);
                    var sent = Stopwatch.GetTimestamp();
                    var status = 0;
                    try
                    {
                        using var response = await http.GetAsync(new Uri(addresses[instance], "api/read/" + blobs[k]));
                        var body = await response.Content.ReadAsByteArrayAsync();
                        status = (int)response.StatusCode;
                        if (status == 404)
                        {
                            Interlocked.Increment(ref missing);
                        }
                        else if (response.IsSuccessStatusCode)
                        {
                            Interlocked.Increment(ref reads);
                            var version = VersionOf(k, body, Volatile.Read(ref state[k].Attempted));
                            if (version is null)
                            {
                                Interlocked.Increment(ref wrong);
                            }
                            else if (version < ackedBefore)
                            {
                                Interlocked.Increment(ref stale);
                                // What storage itself holds now: newer than the answer means the
                                // instance served an old copy while storage had the acknowledged one.
                                var stored = await store.DownloadAsync(Container, blobs[k]);
                                var storedVersion = stored is null ? null : VersionOf(k, stored.Data, int.MaxValue);
                                if (storedVersion >= ackedBefore)
                                    Interlocked.Increment(ref staleStorageNewer);
                                if (staleExamples.Count < 3)
                                    staleExamples.Enqueue($"{blobs[k]} (owner {owners[k]}) on instance {instance}, sent {When(sent)}: v{version} after v{ackedBefore} was acknowledged (storage: v{storedVersion?.ToString(CultureInfo.InvariantCulture) ?? "?"})");
                            }
                        }
                    }
                    catch (Exception e) when (e is HttpRequestException or TaskCanceledException)
                    {
                    }
                    outcomes.Enqueue(new Outcome(sent, Stopwatch.GetTimestamp(), status, instance, 'r'));
                    try
                    {
                        await Task.Delay(plan.ReadPause, stop.Token);
                    }
                    catch (OperationCanceledException)
                    {
                    }
                }
            })).ToArray();

            await Task.Delay(plan.InstanceKillBefore);
            // The load balancer drops the instance as it dies; what it had in flight fails.
            Volatile.Write(ref live, others);
            kill = Stopwatch.GetTimestamp();
            await group.KillAsync(victim);
            // When the survivors' views are down to the two of them (membership: 3 missed heartbeats).
            var viewWatch = Task.Run(async () =>
            {
                while (!stop.IsCancellationRequested)
                {
                    try
                    {
                        var counts = await Task.WhenAll(others.Select(i => addresses[i]).Select(async a => (await StatusAsync(http, a)).Members.Count));
                        if (counts.All(c => c == 2))
                        {
                            viewBack = Stopwatch.GetTimestamp();
                            return;
                        }
                    }
                    catch (Exception e) when (e is HttpRequestException or TaskCanceledException)
                    {
                    }
                    await Task.Delay(50);
                }
            });
            await Task.Delay(plan.InstanceKillAfter);
            await stop.CancelAsync();
            await Task.WhenAll(writers.Concat(readers).Append(viewWatch));
        }
        // The survivors have stopped cleanly (SIGTERM: the async presets flush what they still owe).
        // What storage holds now is what survived: every acknowledged version must be there (or a later one).
        long lost = 0, finalWrong = 0;
        var lostExamples = new List<string>();
        for (var k = 0; k < plan.Keys; k++)
        {
            var stored = await store.DownloadAsync(Container, blobs[k]);
            var version = stored is null ? null : VersionOf(k, stored.Data, state[k].Attempted);
            if (version is null)
                finalWrong++;
            else if (version < state[k].Acked)
            {
                lost++;
                if (lostExamples.Count < 3)
                    lostExamples.Add($"{blobs[k]}: storage has v{version}, v{state[k].Acked} was acknowledged");
            }
        }
        var all = outcomes.ToArray();
        var atVictim = all.Where(o => o.Instance == victim && !o.Ok).ToArray();
        var survivors = all.Where(o => o.Instance != victim).ToArray();
        var failed = survivors.Where(o => !o.Ok).ToArray();
        var recovery = RecoverySeconds(survivors, kill);
        var after = survivors.Where(o => o.Done >= kill).ToArray();
        report.Add($"{name}_requests", all.Length, $"{writes} writes, {reads + missing} reads answered 2xx/404");
        report.Add($"{name}_killed_owned_keys", victimOwned, $"keys of {plan.Keys} the killed instance {victim} owned");
        report.Add($"{name}_wrong_bytes", wrong + finalWrong, "reads (and final blobs) that were no version ever written (goal 0)");
        report.Add($"{name}_stale_reads", stale, (StrongReads(preset) ? "goal 0; " : "weak reads: expected; ") + $"older than the last write acknowledged before the read was sent; {staleStorageNewer} of them while storage already held that write"
            + (staleExamples.IsEmpty ? "" : "; e.g. " + string.Join("; ", staleExamples)));
        report.Add($"{name}_missing_reads", missing, "reads answered 404 (every key exists from the start: goal 0)");
        report.Add($"{name}_lost_acked_writes", lost, (SyncWrites(preset) ? "goal 0; " : "async writes: may lose what the dead instance held; ") + $"keys whose storage version is older than the last acknowledged one, of {plan.Keys}"
            + (lostExamples.Count == 0 ? "" : "; e.g. " + string.Join("; ", lostExamples)));
        report.Add($"{name}_failed", failed.Length, "requests to the survivors that failed" + (failed.Length == 0 ? "" : ": " + StatusCounts(failed)));
        report.Add($"{name}_failed_in_flight_at_killed", atVictim.Length, "requests the killed instance had in flight (not acknowledged: expected)");
        report.Add($"{name}_recovery_s", recovery, $"kill -> end of the last failed or > {Slow.TotalSeconds:0} s request at a survivor");
        report.Add($"{name}_recovery_heartbeats", recovery / HeartbeatSeconds, "the same in heartbeats (goal <= 3)");
        report.Add($"{name}_p99_before_ms", P99Ms(survivors.Where(o => o.Done < kill)), "p99 latency before the kill (the load's own, for comparison)");
        report.Add($"{name}_max_latency_ms", after.Select(o => Seconds(o.Done - o.Sent) * 1000).DefaultIfEmpty(0).Max(), "slowest survivor request open at or after the kill");
        report.Add($"{name}_view_s", viewBack > 0 ? Seconds(viewBack - kill) : -1, "kill -> both survivors list 2 members (-1: not before the load ended)");
        if (wrong + finalWrong > 0)
            goals.Add($"{preset}: {wrong + finalWrong} wrong reads/blobs");
        if (StrongReads(preset) && stale > 0)
            goals.Add($"{preset}: {stale} stale reads");
        if (SyncWrites(preset) && lost > 0)
            goals.Add($"{preset}: {lost} acknowledged writes lost");
        if (StrongReads(preset) && missing > 0)
            goals.Add($"{preset}: {missing} reads of existing blobs answered 404");
        if (recovery > 3 * HeartbeatSeconds)
            goals.Add($"{preset}: requests were served again only {recovery:0.00} s after the kill (goal 3 heartbeats)");
        ReportLogWarnings(logs);
    }

    // ---- storage stall and kill ------------------------------------------------------------------

    /// <summary>
    /// One instance (default preset: every read asks storage) under reads and writes; Azurite is
    /// stopped (SIGSTOP) and continued, then killed (SIGKILL) and started again on the same port and
    /// data. The runtime's promise: 503 naming the blob while storage is away, served again after.
    /// </summary>
    private static async Task StorageFaultsAsync(string home, Report report, List<string> goals, string app, Plan plan, string logs)
    {
        var data = Path.Combine(Path.GetTempPath(), $"faast-bench-faults-azurite-{Environment.ProcessId}");
        Say("storage faults: Azurite with a data folder, 1 instance, storage/sync/storage");
        try
        {
            // Azurite keeps blob metadata in memory and saves it on a timer: the blobs the load reads
            // are written, then Azurite is restarted cleanly once, so a later SIGKILL cannot lose them.
            int port;
            await using (var first = await AzuriteProcess.StartAsync(home, dataDirectory: data))
            {
                port = first.Port;
                using var seed = new BlobStore(first.ConnectionString);
                await seed.CreateContainerIfNotExistsAsync(Container);
                for (var k = 0; k < 2; k++)
                    await seed.UploadAsync(Container, $"storage-k{k}", Content(k, 0));
            }
            var azurite = await AzuriteProcess.StartAsync(home, port, dataDirectory: data);
            try
            {
                var copy = HostProcess.CopyApp(app, """{ "cache": { "consistency": "storage/sync/storage" } }""", "faults-storage");
                var outcomes = new ConcurrentQueue<Outcome>();
                var bodies = new ConcurrentDictionary<int, string>();
                long wrong = 0, sequence = 0;
                await using var group = await StartGroupAsync(home, copy, 1, azurite.ConnectionString, logs, [], 1);
                using var http = NewClient();
                var address = group[0].BaseAddress;
                long stopped = 0, continued = 0, killed = 0, restarted = 0;
                var faults = Task.Run(async () =>
                {
                    await Task.Delay(TimeSpan.FromSeconds(2));
                    stopped = Stopwatch.GetTimestamp();
                    Signal(azurite.ProcessId, "STOP");
                    await Task.Delay(plan.StorageStall);
                    Signal(azurite.ProcessId, "CONT");
                    continued = Stopwatch.GetTimestamp();
                    await Task.Delay(plan.StorageAfter);
                    killed = Stopwatch.GetTimestamp();
                    azurite.Kill();
                    await Task.Delay(plan.StorageDown);
                    await azurite.DisposeAsync();
                    azurite = await AzuriteProcess.StartAsync(home, port, dataDirectory: data);
                    restarted = Stopwatch.GetTimestamp();
                });
                var duration = TimeSpan.FromSeconds(2) + plan.StorageStall + plan.StorageAfter + plan.StorageDown + TimeSpan.FromSeconds(2) + plan.StorageAfter;
                await OpenLoopAsync(plan.StorageRate, duration, async sent =>
                {
                    var n = Interlocked.Increment(ref sequence);
                    var write = n % 3 == 0; // a third writes (its own blob per request), the rest read
                    var k = (int)(n / 3 % 2);
                    var status = 0;
                    try
                    {
                        using var content = new ByteArrayContent(Content(1, (int)n));
                        using var response = write
                            ? await http.PostAsync(new Uri(address, $"api/write/storage-w{n}"), content)
                            : await http.GetAsync(new Uri(address, $"api/read/storage-k{k}"));
                        var body = await response.Content.ReadAsByteArrayAsync();
                        status = (int)response.StatusCode;
                        if (!write && response.IsSuccessStatusCode && VersionOf(k, body, 0) is null)
                            Interlocked.Increment(ref wrong);
                        if (!response.IsSuccessStatusCode)
                            bodies.TryAdd(status, $"{(write ? "write" : "read")}: {Encoding.UTF8.GetString(body.AsSpan(0, Math.Min(body.Length, 300)))}");
                    }
                    catch (Exception e) when (e is HttpRequestException or TaskCanceledException)
                    {
                    }
                    outcomes.Enqueue(new Outcome(sent, Stopwatch.GetTimestamp(), status, 0, write ? 'w' : 'r'));
                });
                await faults;
                var all = outcomes.ToArray();
                // The stall's requests: open at or sent after the SIGSTOP, before the kill.
                foreach (var (fault, resumed, until, label, what) in new[]
                         {
                             (stopped, continued, killed, "storage_stall", $"Azurite SIGSTOPped for {plan.StorageStall.TotalSeconds:0} s"),
                             (killed, restarted, long.MaxValue, "storage_kill", $"Azurite SIGKILLed, restarted on the same port and data after {plan.StorageDown.TotalSeconds:0} s"),
                         })
                {
                    var window = all.Where(o => o.Done >= fault && o.Sent < until).ToArray();
                    var failed = window.Where(o => !o.Ok).ToArray();
                    report.Add($"{label}_requests", window.Length, what + $"; {plan.StorageRate} requests/s, a third writes");
                    report.Add($"{label}_failed", failed.Length, failed.Length == 0 ? "" : StatusCounts(failed));
                    report.Add($"{label}_failed_500", failed.Count(o => o.Status == 500), "failures answered 500 (goal 0: 503 naming the blob)");
                    report.Add($"{label}_recovery_s", Math.Max(0, RecoverySeconds(window, fault) - Seconds(resumed - fault)), "storage back -> end of the last failed or slow request");
                    report.Add($"{label}_max_latency_ms", window.Select(o => Seconds(o.Done - o.Sent) * 1000).DefaultIfEmpty(0).Max(), "slowest request open during the fault");
                    if (failed.Any(o => o.Status == 500))
                        goals.Add($"{label}: {failed.Count(o => o.Status == 500)} requests answered 500");
                }
                report.Add("storage_wrong_bytes", wrong, "reads that were not the blob's bytes (goal 0)");
                var no503Name = bodies.TryGetValue(503, out var b503) && !b503.Contains("storage-", StringComparison.Ordinal);
                report.Config("storage_failure_bodies", new JsonObject(bodies.OrderBy(p => p.Key).Select(p => KeyValuePair.Create(p.Key.ToString(CultureInfo.InvariantCulture), (JsonNode?)p.Value))));
                if (no503Name)
                    goals.Add("storage: a 503 did not name the blob: " + b503);
                if (wrong > 0)
                    goals.Add($"storage: {wrong} wrong reads");
            }
            finally
            {
                await azurite.DisposeAsync();
            }
        }
        finally
        {
            if (Directory.Exists(data))
                Directory.Delete(data, recursive: true);
        }
        ReportLogWarnings(logs);
    }

    // ---- soak ------------------------------------------------------------------------------------

    private readonly record struct Sample(double T, double HostRssMb, double WorkersRssMb, double WorkersAnonMb, int HostFds, int HostSockets, double ShmMb, int ShmFiles);

    /// <summary>Mixed load (reads of 1 KiB-96 KiB blobs, writes, no-ops) on one instance with 2 workers,
    /// sampling the host's RSS and fds, the workers' RSS and the app's /dev/shm.</summary>
    private static async Task SoakAsync(string home, Report report, List<string> goals, JsonObject config, string app, string storage, BlobStore store, Plan plan, string logs)
    {
        Say($"soak: 1 instance, 2 workers, {plan.SoakRate} requests/s for {plan.Soak.TotalSeconds:0} s (after {plan.SoakWarmup.TotalSeconds:0} s warm-up)");
        var copy = HostProcess.CopyApp(app, """{ "cache": { "consistency": "storage/sync/storage" } }""", "faults-soak");
        const int keys = 16;
        for (var k = 0; k < keys; k++)
            await store.UploadAsync(Container, $"soak-k{k}", Content(k, 0));
        var samples = new List<Sample>();
        long failed = 0, wrong = 0, requests = 0, sequence = 0, missedSamples = 0;
        await using (var group = await StartGroupAsync(home, copy, 1, storage, logs, ["--workers", "2"], 2))
        {
            // A fixed pool of connections: the host's socket count then does not follow how many
            // requests happened to overlap, so a growing fd count is the host's own.
            using var http = NewClient(maxConnections: 16);
            // The sampler has its own connection: sharing the load's pool, a status request queued
            // behind 16 busy connections timed out on a loaded machine (load ~40) and ended the run.
            using var sampleHttp = NewClient(maxConnections: 1);
            var address = group[0].BaseAddress;
            var host = group[0].Process.Id;
            var appName = Path.GetFileName(copy);
            var versions = new int[keys];
            using var sampling = new CancellationTokenSource();
            var measuring = false;
            var sampler = Task.Run(async () =>
            {
                long start = 0;
                while (!sampling.IsCancellationRequested)
                {
                    if (Volatile.Read(ref measuring))
                    {
                        if (start == 0)
                            start = Stopwatch.GetTimestamp();
                        HostStatus status;
                        try
                        {
                            status = await StatusAsync(sampleHttp, address);
                        }
                        catch (TaskCanceledException) when (!sampling.IsCancellationRequested)
                        {
                            Interlocked.Increment(ref missedSamples); // the host did not answer in 5 s: reported, not fatal
                            continue;
                        }
                        var workers = status.WorkerProcessIds;
                        var (shmBytes, shmFiles) = ShmUsage(appName);
                        var (fds, sockets) = FdCount(host);
                        lock (samples)
                            samples.Add(new Sample(Seconds(Stopwatch.GetTimestamp() - start), RssMb(host), workers.Sum(RssMb), workers.Sum(pid => RssMb(pid, "RssAnon:")), fds, sockets, shmBytes / 1048576.0, shmFiles));
                    }
                    try
                    {
                        await Task.Delay(plan.SoakSample, sampling.Token);
                    }
                    catch (OperationCanceledException)
                    {
                    }
                }
            });
            async Task Request(long sent)
            {
                var n = Interlocked.Increment(ref sequence);
                var k = (int)(n % keys);
                var ok = false;
                try
                {
                    switch (n % 10)
                    {
                        case < 6: // read, checked against the versions this loop wrote
                            using (var response = await http.GetAsync(new Uri(address, $"api/read/soak-k{k}")))
                            {
                                var body = await response.Content.ReadAsByteArrayAsync();
                                ok = response.IsSuccessStatusCode;
                                if (ok && VersionOf(k, body, int.MaxValue) is null)
                                    Interlocked.Increment(ref wrong);
                            }
                            break;
                        case < 8: // write a new version
                            using (var content = new ByteArrayContent(Content(k, Interlocked.Increment(ref versions[k]))))
                            using (var response = await http.PostAsync(new Uri(address, $"api/write/soak-k{k}"), content))
                                ok = response.IsSuccessStatusCode;
                            break;
                        default:
                            using (var response = await http.GetAsync(new Uri(address, "api/noop")))
                                ok = response.IsSuccessStatusCode;
                            break;
                    }
                }
                catch (Exception e) when (e is HttpRequestException or TaskCanceledException)
                {
                }
                Interlocked.Increment(ref requests);
                if (!ok)
                    Interlocked.Increment(ref failed);
            }
            await OpenLoopAsync(plan.SoakRate, plan.SoakWarmup, Request);
            Volatile.Write(ref measuring, true);
            await OpenLoopAsync(plan.SoakRate, plan.Soak, Request);
            await sampling.CancelAsync();
            await sampler;
        }
        if (samples.Count < 6)
            throw new InvalidOperationException($"the soak took {samples.Count} samples");
        report.Add("soak_s", plan.Soak.TotalSeconds, $"{plan.SoakRate}/s: 60% reads (checked), 20% writes, 20% no-ops over {keys} keys");
        report.Add("soak_requests", requests, "including the warm-up");
        report.Add("soak_failed", failed, "goal 0");
        report.Add("soak_status_samples_missed", missedSamples, "status samples the host did not answer within 5 s (not counted as failed requests)");
        report.Add("soak_wrong_bytes", wrong, "goal 0");
        report.Add("soak_samples", samples.Count, $"every {plan.SoakSample.TotalSeconds:0} s");
        // "Flat": the end within a bound of the start. The bounds leave room for what a warm process
        // still settles (GC heap, JIT, a slab segment), not for growth per request.
        foreach (var (metric, unit, value, bound) in new (string, string, Func<Sample, double>, Func<double, double>)[]
                 {
                     ("soak_host_rss", "MB", s => s.HostRssMb, start => Math.Max(start * 0.25, 32)),
                     // A worker's VmRSS also counts the pages of the cache's segments it has read through its
                     // mapping (shared with the host, counted in soak_shm): up to the segments' size per worker
                     // as reads touch more of them. Its own memory (heap, stacks) is RssAnon, judged alone.
                     ("soak_workers_rss", "MB", s => s.WorkersRssMb, start => Math.Max(start * 0.25, 32) + 2 * samples.Max(x => x.ShmMb)),
                     ("soak_workers_anon", "MB", s => s.WorkersAnonMb, start => Math.Max(start * 0.25, 32)),
                     ("soak_host_fds", "", s => s.HostFds, _ => 16),
                     ("soak_host_sockets", "", s => s.HostSockets, _ => 16),
                     ("soak_shm", "MB", s => s.ShmMb, start => Math.Max(start * 0.10, 8)),
                 })
        {
            // Start and end are the medians of the first and the last three samples: one sample taken
            // while a burst of requests is open says nothing about a trend.
            static double Median3(IEnumerable<double> v) => v.Order().ElementAt(1);
            var first = Median3(samples.Take(3).Select(value));
            var end = Median3(samples.TakeLast(3).Select(value));
            var max = samples.Max(value);
            var slope = Slope(samples.Select(s => (s.T, value(s))).ToArray()) * 60;
            var flat = end <= first + bound(first);
            report.Add($"{metric}_start{(unit.Length > 0 ? "_" + unit.ToLowerInvariant() : "")}", first, "median of the first 3 samples");
            report.Add($"{metric}_end{(unit.Length > 0 ? "_" + unit.ToLowerInvariant() : "")}", end, "median of the last 3 samples");
            report.Add($"{metric}_max{(unit.Length > 0 ? "_" + unit.ToLowerInvariant() : "")}", max);
            report.Add($"{metric}_slope_per_min", slope, "least squares over the samples");
            report.Add($"{metric}_flat", flat ? 1 : 0, $"1: end <= start + {bound(first):0.#} {unit}");
            if (!flat)
                goals.Add($"{metric}: {first:0.#} -> {end:0.#} {unit} (bound +{bound(first):0.#})");
        }
        if (failed > 0 || wrong > 0)
            goals.Add($"soak: {failed} failed, {wrong} wrong");
        config["soak_samples"] = new JsonArray(samples.Select(s => (JsonNode?)new JsonArray(Math.Round(s.T, 1), Math.Round(s.HostRssMb, 1), Math.Round(s.WorkersRssMb, 1), Math.Round(s.WorkersAnonMb, 1), s.HostFds, s.HostSockets, Math.Round(s.ShmMb, 1), s.ShmFiles)).ToArray());
        config["soak_sample_columns"] = "t_s, host_rss_mb, workers_rss_mb, workers_anon_mb, host_fds, host_sockets, shm_mb, shm_files";
        ReportLogWarnings(logs);
    }

    internal static double Slope(IReadOnlyList<(double X, double Y)> points)
    {
        var mx = points.Average(p => p.X);
        var my = points.Average(p => p.Y);
        var sxx = points.Sum(p => (p.X - mx) * (p.X - mx));
        return sxx == 0 ? 0 : points.Sum(p => (p.X - mx) * (p.Y - my)) / sxx;
    }

    private static double RssMb(int pid) => RssMb(pid, "VmRSS:");

    /// <summary>A memory line of /proc/PID/status in MB (VmRSS:, RssAnon:, RssShmem:, ...).</summary>
    private static double RssMb(int pid, string field)
    {
        try
        {
            var line = File.ReadLines($"/proc/{pid}/status").FirstOrDefault(l => l.StartsWith(field, StringComparison.Ordinal));
            return line is null ? 0 : long.Parse(line.Split(' ', StringSplitOptions.RemoveEmptyEntries)[1], CultureInfo.InvariantCulture) / 1024.0;
        }
        catch (IOException)
        {
            return 0; // the process just exited
        }
    }

    /// <summary>The process's open file descriptors, and how many of them are sockets.</summary>
    private static (int Fds, int Sockets) FdCount(int pid)
    {
        try
        {
            var fds = Directory.GetFiles($"/proc/{pid}/fd");
            var sockets = fds.Count(fd =>
            {
                try
                {
                    return new FileInfo(fd).LinkTarget?.StartsWith("socket:", StringComparison.Ordinal) == true;
                }
                catch (IOException)
                {
                    return false; // closed meanwhile
                }
            });
            return (fds.Length, sockets);
        }
        catch (DirectoryNotFoundException)
        {
            return (0, 0);
        }
    }

    /// <summary>The bytes in memory (allocated blocks, not the files' apparent sizes) and files under
    /// the app's segment directories /dev/shm/faast-APP-PID.</summary>
    private static (long Bytes, int Files) ShmUsage(string appName)
    {
        long bytes = 0;
        var files = 0;
        foreach (var dir in Directory.EnumerateDirectories("/dev/shm", $"faast-{appName}-*"))
        {
            try
            {
                foreach (var file in Directory.EnumerateFiles(dir))
                {
                    files++;
                    bytes += AllocatedBytes(file);
                }
            }
            catch (Exception e) when (e is IOException or UnauthorizedAccessException)
            {
                // freed meanwhile
            }
        }
        return (bytes, files);
    }

    private static long AllocatedBytes(string file)
    {
        // st_blocks (512-byte units) via stat(1): slab segments are sparse until used.
        var info = new ProcessStartInfo("stat") { RedirectStandardOutput = true, RedirectStandardError = true, UseShellExecute = false };
        foreach (var a in new[] { "-c", "%b", file })
            info.ArgumentList.Add(a);
        using var stat = Process.Start(info)!;
        var output = stat.StandardOutput.ReadToEnd().Trim();
        stat.WaitForExit();
        return long.TryParse(output, CultureInfo.InvariantCulture, out var blocks) ? blocks * 512 : 0;
    }

    // ---- baseline --------------------------------------------------------------------------------

    /// <summary>/dev/shm entries and the processes of this checkout (hosts, Azurite, workers) at one moment.</summary>
    private sealed record Baseline(HashSet<string> ShmEntries, Dictionary<string, int> Processes)
    {
        public static readonly string[] Kinds = ["host", "azurite", "worker"];

        public static Baseline Take(string home)
        {
            var shm = Directory.EnumerateFileSystemEntries("/dev/shm").Select(e => Path.GetFileName(e)!).ToHashSet(StringComparer.Ordinal);
            var counts = Kinds.ToDictionary(k => k, _ => 0);
            foreach (var dir in Directory.EnumerateDirectories("/proc"))
            {
                if (!int.TryParse(Path.GetFileName(dir), out var pid) || pid == Environment.ProcessId)
                    continue;
                string cmdline;
                try
                {
                    cmdline = File.ReadAllText(Path.Combine(dir, "cmdline")).Replace('\0', ' ');
                }
                catch (Exception e) when (e is IOException or UnauthorizedAccessException)
                {
                    continue;
                }
                // Only this checkout's: other checkouts on the machine run the same programs.
                if (!cmdline.Contains(home, StringComparison.Ordinal))
                    continue;
                if (cmdline.Contains("FaaST.Runtime.dll", StringComparison.Ordinal))
                    counts["host"]++;
                else if (cmdline.Contains("azurite", StringComparison.Ordinal))
                    counts["azurite"]++;
                else if (cmdline.Contains("worker.py", StringComparison.Ordinal) || cmdline.Contains("worker.js", StringComparison.Ordinal))
                    counts["worker"]++;
            }
            return new Baseline(shm, counts);
        }

        /// <summary>Takes the baseline again until it matches <paramref name="before"/> or 10 s have passed
        /// (processes being reaped, a directory being removed).</summary>
        public static async Task<Baseline> SettleAsync(string home, Baseline before)
        {
            var deadline = Stopwatch.GetTimestamp() + 10 * Stopwatch.Frequency;
            while (true)
            {
                var now = Take(home);
                var same = Kinds.All(k => now.Processes[k] <= before.Processes[k])
                    && !now.ShmEntries.Except(before.ShmEntries).Any(e => e.StartsWith("faast-faults-", StringComparison.Ordinal));
                if (same || Stopwatch.GetTimestamp() > deadline)
                    return now;
                await Task.Delay(200);
            }
        }
    }

    // ---- helpers ---------------------------------------------------------------------------------

    private static void Signal(int pid, string signal)
    {
        using var kill = Process.Start("kill", ["-" + signal, pid.ToString(CultureInfo.InvariantCulture)]);
        kill.WaitForExit();
        if (kill.ExitCode != 0)
            throw new InvalidOperationException($"kill -{signal} {pid} failed");
    }

    private static async Task<HostStatus> StatusAsync(HttpClient http, Uri address)
    {
        using var cts = new CancellationTokenSource(TimeSpan.FromSeconds(5));
        return await http.GetFromJsonAsync(new Uri(address, "admin/host/status"), StatusJsonContext.Default.HostStatus, cts.Token)
            ?? throw new InvalidOperationException($"{address}admin/host/status answered null");
    }

    /// <summary>Starts the instances with the peer secret and waits until each has its workers ready.</summary>
    private static async Task<InstanceGroup> StartGroupAsync(string home, string app, int count, string storage, string logDirectory, string[] arguments, int workers)
    {
        var group = await InstanceGroup.StartAsync(new InstanceGroupOptions
        {
            AppDirectory = app,
            Count = count,
            StorageConnectionString = storage,
            RuntimeDll = Path.Combine(home, "src", "Runtime", "bin", "Release", "net10.0", "FaaST.Runtime.dll"),
            Arguments = arguments,
            Environment = new Dictionary<string, string>
            {
                ["FAAST_PEER_SECRET"] = PeerSecret,
                ["FAAST_HOME"] = home,
                ["Logging__LogLevel__Default"] = Environment.GetEnvironmentVariable("BENCH_INSTANCE_LOG_LEVEL") ?? "Warning",
            },
            LogDirectory = logDirectory,
        });
        await GroupReadiness.WaitForWorkersAsync(group, workers, logDirectory);
        return group;
    }

    /// <summary>Prints how many warnings and errors the instances logged, and the first few.</summary>
    private static void ReportLogWarnings(string directory)
    {
        if (!Directory.Exists(directory))
            return;
        var lines = Directory.EnumerateFiles(directory, "*.log").Order(StringComparer.Ordinal)
            .SelectMany(f => File.ReadLines(f).Select(l => (File: Path.GetFileName(f), Line: l)))
            .Where(x => GroupReadiness.LogProblem.IsMatch(x.Line))
            .ToArray();
        if (lines.Length > 0)
            Console.WriteLine($"  {lines.Length} warning(s)/error(s) in {directory}; first:");
        foreach (var (file, line) in lines.Take(3))
            Console.WriteLine($"    {file}: {line}");
    }

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
}
