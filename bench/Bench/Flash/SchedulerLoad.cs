using FaaST.FlashBackend.Scheduling;

namespace FaaST.Bench.Flash;

/// <summary>
/// The scheduling-cost workload (issue 22: "scheduling under 1 µs per request at 1,000 tenants"): Fig. 10's 1,000 tenants
/// (250 LC G0 at 240 IOPS all reads, 250 LC G1 at 120 IOPS 80 % read, 250 BE G0 95 % read, 250 BE G1 25 % read, the
/// groups' offered IOPS in the paper's 60K : 30K : 30K : 15K proportions) scaled so the offered tokens are
/// <c>loadFactor</c> times the device's 200K tokens/s, driven on virtual time by a 10 µs poll loop against a token-pipe
/// device (216K tokens/s raw + 100 µs) whose completions come back in submission order.
/// <para>What is timed is the loop as a whole: enqueue of every arrival, dispatch, completion — the scheduler's three
/// calls — plus the loop's own bookkeeping (array reads, a FIFO of in-flight requests), a few ns per request, so the
/// figure is an upper bound on the scheduler's share. Arrivals come from a table generated once (fixed seed) and replayed
/// cyclically, so no random numbers are drawn while timing. A client holds at most <see cref="ClientWindow"/> requests
/// queued at the scheduler (Lambda clients are closed-loop), so a 2× overload reaches a steady backlog instead of
/// growing queues without bound.</para>
/// </summary>
public sealed class SchedulerLoad
{
    /// <summary>Requests a tenant may have queued before its client stops sending (drops the arrival).</summary>
    public const int ClientWindow = 32;

    private const long PollNs = 10_000;
    private const int TableSize = 1 << 20;
    private const double DeviceTokensPerSecond = 200_000;

    private readonly IIoScheduler _scheduler;
    private readonly SchedulerBase _base;
    private readonly int[] _ids;
    private readonly long[] _gapNs = new long[TableSize];
    private readonly int[] _tenant = new int[TableSize];
    private readonly IoType[] _type = new IoType[TableSize];
    private readonly IoRequest[] _batch = new IoRequest[64];
    private readonly IoRequest[] _inFlight = new IoRequest[1024];
    private readonly long[] _doneAt = new long[1024];
    private int _ifHead, _ifCount;
    private int _cursor;
    private long _nextArrival;
    private long _now;
    private long _id;
    private double _pipeFree;
    private readonly double _nsPerToken = 1e9 / 216_000;

    public SchedulerLoad(string scheduler, double loadFactor, int batchSize = 64, int tenants = 1000, ulong seed = 1)
    {
        var limits = SchedulerLimits.Default with { BatchSize = batchSize };
        _scheduler = Create(scheduler, limits);
        _base = (SchedulerBase)_scheduler;
        int perGroup = tenants / 4;
        var groups = new (TenantSpec? Slo, double GroupIops, double Read)[]
        {
            (new TenantSpec("", 60_000.0 / perGroup, 2000, 1.0), 60_000, 1.0),
            (new TenantSpec("", 30_000.0 / perGroup, 2000, 0.8), 30_000, 0.8),
            (null, 30_000, 0.95),
            (null, 15_000, 0.25),
        };
        var costs = CostTable.I3XLarge;
        double offeredTokens = 0;
        foreach (var g in groups)
            offeredTokens += costs.WeightedTokensPerSecond(g.GroupIops, g.Read);
        double scale = loadFactor * DeviceTokensPerSecond / offeredTokens;
        _ids = new int[perGroup * 4];
        var weight = new double[_ids.Length];
        var read = new double[_ids.Length];
        for (int g = 0; g < 4; g++)
            for (int k = 0; k < perGroup; k++)
            {
                int i = g * perGroup + k;
                var spec = groups[g].Slo is { } slo ? slo with { Name = $"g{g}-{k}" } : new TenantSpec($"g{g}-{k}");
                _ids[i] = _scheduler.Register(spec);
                weight[i] = groups[g].GroupIops / perGroup;
                read[i] = groups[g].Read;
            }
        if (_scheduler is En4sScheduler en4s)
            en4s.RunAdmission(0);
        // The arrival table: a Poisson stream at the total offered rate, each arrival's tenant drawn by its rate.
        double total = weight.Sum();
        var cumulative = new double[weight.Length];
        double acc = 0;
        for (int i = 0; i < weight.Length; i++) cumulative[i] = acc += weight[i] / total;
        double meanGapNs = 1e9 / (total * scale);
        var rng = new SeededRng(seed);
        for (int k = 0; k < TableSize; k++)
        {
            _gapNs[k] = (long)rng.NextExponential(meanGapNs);
            int i = Array.BinarySearch(cumulative, rng.NextDouble());
            i = i < 0 ? Math.Min(~i, weight.Length - 1) : i;
            _tenant[k] = _ids[i];
            _type[k] = rng.NextDouble() < read[i] ? IoType.Read : IoType.Write;
        }
        _nextArrival = _gapNs[0];
    }

    public IIoScheduler Scheduler => _scheduler;

    public static IIoScheduler Create(string name, SchedulerLimits limits) => name switch
    {
        "en4s" => new En4sScheduler(CostTable.I3XLarge, limits, DeviceProfile.I3XLarge, En4sSettings.Conservative),
        "reflex" => new ReflexScheduler(CostTable.I3XLarge, limits, DeviceProfile.I3XLarge),
        "fcfs" => new FcfsScheduler(CostTable.I3XLarge, limits),
        _ => throw new ArgumentException($"unknown scheduler '{name}' (en4s, reflex, fcfs)", nameof(name)),
    };

    /// <summary>Runs poll rounds until <paramref name="completions"/> more requests completed; returns the arrivals
    /// the clients dropped on the way (their window was full).</summary>
    public long RunUntilCompleted(long completions)
    {
        long done = 0, dropped = 0;
        var scheduler = _scheduler;
        while (done < completions)
        {
            _now += PollNs;
            while (_nextArrival <= _now)
            {
                int k = _cursor;
                int tenant = _tenant[k];
                if (_base.QueuedOf(tenant) < ClientWindow)
                    scheduler.Enqueue(new IoRequest(_id++, tenant, _type[k], 4096, _nextArrival), _now);
                else
                    dropped++;
                _cursor = (k + 1) & (TableSize - 1);
                _nextArrival += _gapNs[_cursor];
            }
            while (_ifCount > 0 && _doneAt[_ifHead] <= _now)
            {
                scheduler.OnCompletion(_inFlight[_ifHead], _now);
                _ifHead = (_ifHead + 1) & (_inFlight.Length - 1);
                _ifCount--;
                done++;
            }
            int n = scheduler.Dispatch(_now, _batch);
            for (int j = 0; j < n; j++)
            {
                double start = Math.Max(_now, _pipeFree);
                _pipeFree = start + _batch[j].Cost * _nsPerToken;
                int slot = (_ifHead + _ifCount) & (_inFlight.Length - 1);
                _inFlight[slot] = _batch[j];
                _doneAt[slot] = (long)_pipeFree + 100_000;
                _ifCount++;
            }
        }
        return dropped;
    }
}
