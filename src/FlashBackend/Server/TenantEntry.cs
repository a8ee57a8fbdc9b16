using System.Collections.Concurrent;
using System.Diagnostics;
using FaaST.FlashBackend.Scheduling;

namespace FaaST.FlashBackend.Server;

/// <summary>One registered tenant: its SLO, its scheduler slot (owned by the dispatcher thread), its counters.</summary>
internal sealed class TenantEntry(TenantSpec spec, TimeSpan statsWindow)
{
    public string Name => Spec.Name;

    public TenantSpec Spec { get; set; } = spec;

    /// <summary>"LC" once admitted by the scheduler's admission control, else "BE".</summary>
    public volatile string Class = "BE";

    /// <summary>Set when deregistration starts: from then on its token is refused and new I/O units are rejected.</summary>
    public volatile bool Removed;

    /// <summary>Units submitted to the dispatcher and not yet completed or rejected.</summary>
    public int Pending;

    // Owned by the dispatcher thread only.
    public int SchedulerId = -1;
    public long Enqueued, Granted, HeldMark;

    public readonly TenantCounters Counters = new(statsWindow);
}

/// <summary>A flow (an instance of the app): its tenant and when it was last used (for the idle close).</summary>
internal sealed class FlowEntry(int id, TenantEntry tenant, string instance)
{
    public readonly int Id = id;
    public readonly TenantEntry Tenant = tenant;
    public readonly string Instance = instance;
    public long LastUsedTicks = Stopwatch.GetTimestamp();
}

/// <summary>
/// A tenant's counters (Interlocked, no lock) and its windowed rates: 4 KiB-equivalent I/Os served, those served
/// within the tenant's p95 latency SLO (goodput, En4S §2.2), and a histogram of read latencies for the p95. Two window
/// slots alternate; the report is the last complete window (or the current one while the server is younger than a
/// window). Recording allocates nothing; a record that lands as its slot is being recycled for a new window may be
/// lost, which only blurs the window's edge.
/// </summary>
internal sealed class TenantCounters(TimeSpan window)
{
    /// <summary>Log-spaced latency buckets, 8 per doubling (each ≤ 9 % wide), from 1 µs to 2^32 µs (over an hour).</summary>
    private const int PerOctave = 8, Buckets = 32 * PerOctave;

    public long Gets, Hits, Misses, Puts, Deletes, BytesRead, BytesWritten, Throttled, ChecksumFailures;

    private readonly long _windowTicks = (long)(window.TotalSeconds * Stopwatch.Frequency);
    private readonly Slot[] _slots = [new(), new()];

    private sealed class Slot
    {
        public long Epoch = -1;
        public long Blocks, GoodBlocks;
        public readonly long[] ReadHistogram = new long[Buckets];
    }

    /// <summary>One finished request: its 4 KiB blocks, its latency (queueing included), whether it met the SLO.</summary>
    public void Record(long nowTicks, long latencyTicks, long blocks, bool isRead, int p95SloUs)
    {
        Slot s = Current(nowTicks);
        double us = latencyTicks * 1e6 / Stopwatch.Frequency;
        Interlocked.Add(ref s.Blocks, blocks);
        if (p95SloUs > 0 && us <= p95SloUs)
            Interlocked.Add(ref s.GoodBlocks, blocks);
        if (isRead)
            Interlocked.Increment(ref s.ReadHistogram[Bucket(us)]);
    }

    private static int Bucket(double us) => us < 1 ? 0 : Math.Min(Buckets - 1, (int)(Math.Log2(us) * PerOctave));

    private Slot Current(long nowTicks)
    {
        long epoch = nowTicks / _windowTicks;
        Slot s = _slots[epoch & 1];
        long seen = Volatile.Read(ref s.Epoch);
        if (seen != epoch && seen < epoch && Interlocked.CompareExchange(ref s.Epoch, epoch, seen) == seen)
        {
            Interlocked.Exchange(ref s.Blocks, 0);
            Interlocked.Exchange(ref s.GoodBlocks, 0);
            Array.Clear(s.ReadHistogram);
        }
        return s;
    }

    /// <summary>(IOPS, read p95 µs, goodput fraction of <paramref name="iopsSlo"/>) over the last window.</summary>
    public (double Iops, double ReadP95Us, double Goodput) Window(long nowTicks, double iopsSlo)
    {
        long epoch = nowTicks / _windowTicks;
        Slot last = _slots[(epoch - 1) & 1];
        Slot s;
        double seconds;
        if (Volatile.Read(ref last.Epoch) == epoch - 1)
        {
            s = last;
            seconds = (double)_windowTicks / Stopwatch.Frequency;
        }
        else
        {
            s = Current(nowTicks);
            seconds = Math.Max(1e-3, (double)(nowTicks - epoch * _windowTicks) / Stopwatch.Frequency);
        }
        double iops = Volatile.Read(ref s.Blocks) / seconds;
        double goodput = iopsSlo > 0 ? Math.Min(1, Volatile.Read(ref s.GoodBlocks) / seconds / iopsSlo) : 0;
        return (iops, P95(s.ReadHistogram), goodput);
    }

    private static double P95(long[] histogram)
    {
        long total = 0;
        foreach (long c in histogram)
            total += c;
        if (total == 0)
            return 0;
        long rank = (long)Math.Ceiling(0.95 * total), seen = 0;
        for (int i = 0; i < histogram.Length; i++)
        {
            seen += histogram[i];
            if (seen >= rank)
                return Math.Pow(2, (i + 1.0) / PerOctave);   // the bucket's upper bound: never under-reports
        }
        return Math.Pow(2, (double)Buckets / PerOctave);
    }
}

/// <summary>The flows of every tenant, numbered by the server.</summary>
internal sealed class FlowTable
{
    private readonly ConcurrentDictionary<int, FlowEntry> _flows = new();
    private int _next;

    public FlowEntry Add(TenantEntry tenant, string instance)
    {
        var flow = new FlowEntry(Interlocked.Increment(ref _next), tenant, instance);
        _flows[flow.Id] = flow;
        return flow;
    }

    /// <summary>The flow, if it is open and belongs to <paramref name="tenant"/> (a tenant never uses another's flow).</summary>
    public FlowEntry? Find(int id, TenantEntry tenant) =>
        _flows.TryGetValue(id, out FlowEntry? f) && ReferenceEquals(f.Tenant, tenant) ? f : null;

    public bool Remove(FlowEntry flow) => _flows.TryRemove(new KeyValuePair<int, FlowEntry>(flow.Id, flow));

    public int CountOf(TenantEntry tenant) => _flows.Values.Count(f => ReferenceEquals(f.Tenant, tenant));

    public IEnumerable<FlowEntry> All => _flows.Values;
}
