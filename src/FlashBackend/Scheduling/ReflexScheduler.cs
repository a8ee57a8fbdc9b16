namespace FaaST.FlashBackend.Scheduling;

/// <summary>
/// ReFlex-style baseline (En4S §2.3, §3.1–§3.2): static per-tenant token rates from the SLO (wTPS for LC tenants, an
/// equal split of the device's leftover for BE tenants) and a fixed burst bucket: an LC tenant may run its credit down
/// to −<see cref="BurstFraction"/> · wTPS. Every Dispatch walks all registered tenants (no active list: the O(tenants)
/// traversal §3.1 measures), LC first; an LC tenant whose queue is empty hands its positive credit to BE at once (the
/// immediate work conservation whose token leak §4.5 describes). Admits every SLO, as the authors' build runs
/// (OVERLOAD_MODE). Single-threaded.
/// </summary>
public sealed class ReflexScheduler : SchedulerBase
{
    private readonly DeviceProfile _device;
    private double _pool;
    private double _beShare;
    private int _lcStart;
    private int _beStart;

    /// <param name="burstFraction">The fixed burst allowance as a fraction of the tenant's token rate per second; §3.2
    /// sweeps 5–50 %; 10 % is the default (the authors' deficit limit).</param>
    public ReflexScheduler(CostTable costs, SchedulerLimits limits, DeviceProfile device, double burstFraction = 0.10)
        : base(costs, limits)
    {
        ArgumentNullException.ThrowIfNull(device);
        device.Validate();
        if (!(burstFraction >= 0 && burstFraction <= 1))
            throw new ArgumentOutOfRangeException(nameof(burstFraction), burstFraction, "burst fraction must lie in [0, 1]");
        _device = device;
        BurstFraction = burstFraction;
    }

    public override string Name => "reflex";

    public double BurstFraction { get; }

    private protected override void OnRegistered(int tenant)
    {
        ref var s = ref Tenants[tenant];
        if (s.Spec.IsLatencyCritical)
        {
            s.IsLc = true;
            s.Rate = Costs.WeightedTokensPerSecond(s.Spec.IopsSlo, s.Spec.ReadRatioHint ?? ObservedReadRatio);
            s.DeficitLimit = s.BaseDeficitLimit = BurstFraction * s.Rate;
            LcTenants.Add(tenant);
        }
        else
            BeTenants.Add(tenant);
        Recompute(extraLc: -1);
    }

    private protected override void OnDeregistering(int tenant) => Recompute(extraLc: tenant);

    /// <summary>BE tenants split what the strictest LC latency row leaves after the LC reservations.</summary>
    private void Recompute(int extraLc)
    {
        double lcSum = 0;
        int strictest = int.MaxValue;
        foreach (int t in LcTenants)
        {
            if (t == extraLc) continue;
            lcSum += Tenants[t].Rate;
            strictest = Math.Min(strictest, Tenants[t].Spec.P95LatencyUs);
        }
        double global = strictest == int.MaxValue ? _device.TokensPerSecond : _device.TokenRateFor(strictest);
        int be = BeTenants.Count;
        _beShare = be == 0 ? 0 : Math.Max(0, global - lcSum) / be;
        foreach (int t in BeTenants)
            Tenants[t].Rate = _beShare;
    }

    public override int Dispatch(long nowNs, Span<IoRequest> batch)
    {
        Advance(nowNs);
        int cap = BatchCap(batch);
        int n = 0;
        int lcCount = LcTenants.Count;
        for (int k = 0; k < lcCount; k++)
        {
            int t = LcTenants[(_lcStart + k) % lcCount];
            Visits++;
            ref var s = ref Tenants[t];
            s.Credit += s.Rate * (nowNs - s.LastRefillNs) * 1e-9;
            s.LastRefillNs = nowNs;
            while (s.Queue.Count > 0 && s.Credit >= -s.DeficitLimit)
            {
                if (n == cap || InFlight >= Limits.LcInFlightMax)
                {
                    _lcStart = (_lcStart + k) % lcCount; // resume here next call
                    return n;
                }
                var r = s.Queue.Dequeue();
                s.Credit -= r.Cost;
                NoteDispatched(ref s);
                batch[n++] = r;
            }
            if (s.Queue.Count == 0 && s.Credit > 0)
            {
                _pool += s.Credit; // unused LC tokens go to BE now (the leak of §4.5)
                s.Credit = 0;
            }
        }
        // The pool never holds more than one millisecond of the device: unused tokens do not bank into a burst.
        _pool = Math.Min(_pool, _device.TokensPerSecond * 1e-3);
        int beCount = BeTenants.Count;
        for (int k = 0; k < beCount; k++)
        {
            int t = BeTenants[(_beStart + k) % beCount];
            Visits++;
            ref var s = ref Tenants[t];
            s.Credit += s.Rate * (nowNs - s.LastRefillNs) * 1e-9;
            s.LastRefillNs = nowNs;
            while (s.Queue.Count > 0)
            {
                if (n == cap || InFlight >= Limits.BeInFlightMax)
                {
                    _beStart = (_beStart + k) % beCount;
                    return n;
                }
                double cost = s.Queue.Head.Cost;
                if (s.Credit < cost)
                {
                    double need = cost - s.Credit;
                    if (_pool < need) break;
                    _pool -= need;
                    s.Credit += need;
                }
                var r = s.Queue.Dequeue();
                s.Credit -= r.Cost;
                NoteDispatched(ref s);
                batch[n++] = r;
            }
            // A BE tenant banks at most a millisecond of its share (or its head request, so a large one can start).
            double keep = Math.Max(s.Rate * 1e-3, s.Queue.Count > 0 ? s.Queue.Head.Cost : 0);
            if (s.Credit > keep) s.Credit = keep;
        }
        if (lcCount > 0) _lcStart = (_lcStart + 1) % lcCount; // rotate the start for fairness between calls
        if (beCount > 0) _beStart = (_beStart + 1) % beCount;
        return n;
    }
}
