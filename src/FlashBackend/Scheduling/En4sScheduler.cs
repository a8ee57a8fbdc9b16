namespace FaaST.FlashBackend.Scheduling;

/// <summary>
/// The En4S scheduler (SoCC'24 §4–§5, Algorithm 1), complete:
/// <list type="bullet">
/// <item>per-tenant token rate wTPS = IOPS · (r·C*(RD, r) + (1 − r)·C*(WR, r)) from the SLO (§4.2.1);</item>
/// <item>LC tenants are served before BE tenants (§4.2.2), each class from an activation-ordered cyclic active list
/// with exhaustive dequeue of the visited tenant and requeue at the tail when it is blocked (§4.3.1–§4.3.2);</item>
/// <item>LC burst allowance: credit may go down to −deficit limit, with the AIMD consecutive-burst limit (§4.4; see
/// <see cref="En4sSettings"/> for the authors' values);</item>
/// <item>BE tenants get an equal share of what the LC reservations leave, plus tokens borrowed from a global pool
/// (reclaimed LC tokens, idle BE shares) up to their queued demand, plus saved credit (Algorithm 1 lines 17–35);</item>
/// <item>token reclaim at a fixed period below the scheduling frequency (§4.5);</item>
/// <item>separate in-flight caps for LC and BE, batched dispatch;</item>
/// <item>fast join as BE, slow LC admission (§4.3.3) that refuses an SLO the device cannot carry.</item>
/// </list>
/// Single-threaded: one instance per device queue, driven by that queue's thread; no locks; the hot path (Enqueue,
/// Dispatch, OnCompletion) allocates nothing once the per-tenant rings have grown to the workload.
/// </summary>
public sealed partial class En4sScheduler : SchedulerBase
{
    private readonly DeviceProfile _device;
    private readonly En4sSettings _settings;
    private readonly ActiveList _activeLc;
    private readonly ActiveList _activeBe;
    private readonly WakeHeap _parked;
    private readonly ActiveList _parkedBe;
    private readonly List<int> _pendingLc = [];
    private double _pool;
    private double _beShare;
    private double _lcReserved;
    private long _nextReclaimNs = long.MinValue;
    private long _lastReclaimNs = long.MinValue;
    private int _activeBeCount;

    public En4sScheduler(CostTable costs, SchedulerLimits limits, DeviceProfile device, En4sSettings settings)
        : base(costs, limits)
    {
        ArgumentNullException.ThrowIfNull(device);
        ArgumentNullException.ThrowIfNull(settings);
        device.Validate();
        settings.Validate();
        _device = device;
        _settings = settings;
        _activeLc = new ActiveList(limits.MaxTenants);
        _activeBe = new ActiveList(limits.MaxTenants);
        _parked = new WakeHeap(limits.MaxTenants);
        _parkedBe = new ActiveList(limits.MaxTenants);
    }

    public override string Name => "en4s";

    /// <summary>Tokens in the global BE pool.</summary>
    public double Pool => _pool;

    /// <summary>Tokens reclaimed from LC tenants so far (60 % of the credit of each over-saved tenant).</summary>
    public double ReclaimedTotal { get; private set; }

    /// <summary>Each BE tenant's share of the leftover, tokens per second.</summary>
    public double BeShare => _beShare;

    /// <summary>Sum of the admitted LC tenants' wTPS.</summary>
    public double LcReserved => _lcReserved;

    public double DeficitLimitOf(int tenant) => Get(tenant).DeficitLimit;

    public int LoanTimesOf(int tenant) => Get(tenant).LoanTimes;

    /// <summary>The LC active list front to back (diagnostics; allocates).</summary>
    public int[] ActiveLcOrder() => _activeLc.Snapshot();

    public int[] ActiveBeOrder() => _activeBe.Snapshot();

    /// <summary>Tenants with queued work parked out of the active lists until their tokens allow a dispatch.</summary>
    public int ParkedCount => _parked.Count + _parkedBe.Count;

    public bool IsParked(int tenant) => Get(tenant).Parked;

    /// <summary>Fast join (§4.3.3): every tenant starts as BE at once; one with an LC SLO waits for
    /// <see cref="RunAdmission"/>.</summary>
    private protected override void OnRegistered(int tenant)
    {
        BeTenants.Add(tenant);
        RecomputeBeShare(BeTenants.Count);
        // Fast join: the first requests go out at once on one interval of the BE share instead of waiting a round.
        Tenants[tenant].Credit = _beShare * _settings.ReclaimIntervalNs * 1e-9;
        if (Tenants[tenant].Spec.IsLatencyCritical)
        {
            Tenants[tenant].PendingLc = true;
            _pendingLc.Add(tenant);
        }
    }

    private protected override void OnDeregistering(int tenant)
    {
        ref var s = ref Tenants[tenant];
        if (s.PendingLc)
            _pendingLc.Remove(tenant);
        if (s.IsLc)
            _lcReserved -= s.Rate;
        // A deregistered tenant has an empty queue, so it is in no active list.
        RecomputeBeShare(BeTenants.Count - (s.IsLc ? 0 : 1));
    }

    /// <summary>
    /// Slow LC join (§4.3.3): the owner runs it off the hot path (the server's poll loop when it is not busy, the
    /// driver once per reclaim interval). Each pending tenant is admitted as LC when the LC reservations plus its wTPS
    /// fit the device's token rate at the strictest p95 bound among them; otherwise it stays BE and the decision names
    /// the shortfall. A tenant without a read-ratio hint is costed at the device's observed ratio.
    /// </summary>
    public IReadOnlyList<AdmissionDecision> RunAdmission(long nowNs)
    {
        Advance(nowNs);
        if (_pendingLc.Count == 0)
            return [];
        var decisions = new List<AdmissionDecision>(_pendingLc.Count);
        foreach (int t in _pendingLc)
        {
            ref var s = ref Tenants[t];
            s.PendingLc = false;
            var spec = s.Spec;
            double ratio = spec.ReadRatioHint ?? ObservedReadRatio;
            double need = Costs.WeightedTokensPerSecond(spec.IopsSlo, ratio);
            int strictest = spec.P95LatencyUs;
            foreach (int lc in LcTenants)
                strictest = Math.Min(strictest, Tenants[lc].Spec.P95LatencyUs);
            double capacity = _device.TokenRateFor(strictest);
            if (_lcReserved + need > capacity)
            {
                double shortfall = _lcReserved + need - capacity;
                decisions.Add(new AdmissionDecision(t, spec.Name, false,
                    $"tenant '{spec.Name}': LC SLO of {spec.IopsSlo:0} IOPS at {ratio:P0} read needs {need:0} tokens/s; " +
                    $"the device carries {capacity:0} tokens/s within p95 {strictest} µs and admitted LC tenants hold " +
                    $"{_lcReserved:0}; shortfall {shortfall:0} tokens/s (the tenant stays best-effort)",
                    need, Math.Max(0, capacity - _lcReserved)));
                continue;
            }
            BeTenants.Remove(t);
            LcTenants.Add(t);
            double left = capacity - _lcReserved;
            s.IsLc = true;
            s.Rate = need;
            s.Credit = 0;
            s.LastRefillNs = nowNs;
            s.IncrementSinceReclaim = 0;
            s.LastIncrement = need * _settings.ReclaimIntervalNs * 1e-9;
            s.DeficitLimit = s.BaseDeficitLimit = _settings.DeficitLimitFraction * need;
            s.LoanTimes = 0;
            _lcReserved += need;
            // If it is in the BE active list, the next BE pass moves it to the LC list's tail.
            decisions.Add(new AdmissionDecision(t, spec.Name, true,
                $"tenant '{spec.Name}': admitted as LC with {need:0} tokens/s ({_lcReserved:0} of {capacity:0} reserved)",
                need, left));
        }
        _pendingLc.Clear();
        RecomputeBeShare(BeTenants.Count);
        return decisions;
    }

    private void RecomputeBeShare(int beCount)
    {
        int strictest = int.MaxValue;
        foreach (int lc in LcTenants)
            strictest = Math.Min(strictest, Tenants[lc].Spec.P95LatencyUs);
        double global = strictest == int.MaxValue ? _device.TokensPerSecond : _device.TokenRateFor(strictest);
        _beShare = beCount <= 0 ? 0 : Math.Max(0, global - _lcReserved) / beCount;
        foreach (int t in BeTenants)
            Tenants[t].Rate = _beShare;
    }

    /// <summary>Activation (§4.3.2): a tenant joins the tail of its class's list when its first request arrives.</summary>
    private protected override void Accept(int tenant, ref TenantState s, in IoRequest request)
    {
        s.Queue.Enqueue(request);
        if (s.Active)
            return;
        s.Active = true;
        if (s.IsLc)
            _activeLc.PushTail(tenant);
        else
        {
            // An idle BE tenant's share went to the pool meanwhile; it restarts from what it saved.
            s.LastRefillNs = NowNs;
            _activeBe.PushTail(tenant);
            _activeBeCount++;
        }
    }

    public override int Dispatch(long nowNs, Span<IoRequest> batch)
    {
        Advance(nowNs);
        if (nowNs >= _nextReclaimNs)
            Reclaim(nowNs);
        while (_parked.TryPopDue(nowNs, out int woken))
            Unpark(woken);
        int cap = BatchCap(batch);
        int n = 0;

        for (int visits = _activeLc.Count; visits > 0; visits--)
        {
            int t = _activeLc.Head;
            Visits++;
            ref var s = ref Tenants[t];
            RefillLc(ref s, nowNs);
            // A visit cut off by a full batch continues in the next call with the same burst schedule and is not a new
            // visit for the loan count: otherwise a batch of 4 would count 16 times the loans of a batch of 64.
            bool continuing = s.InVisit;
            s.InVisit = false;
            // Consecutive-burst limit (§4.4): a visit that finds the tenant borrowing counts as a loan.
            if (continuing) { }
            else if (s.Credit < -(s.DeficitLimit / _settings.LoanThresholdDivisor))
            {
                if (++s.LoanTimes > _settings.ConsecutiveLoansToHalve)
                {
                    s.LoanTimes -= _settings.ConsecutiveLoansToHalve;
                    s.DeficitLimit /= 2;
                }
            }
            else
            {
                s.LoanTimes = 0; // repaid: the allowance grows back additively at reclaim time (§4.4's AI)
            }
            bool blocked = false, outOfTokens = false;
            double quantum = s.Rate * _settings.VisitQuantumNs * 1e-9;
            double spent = continuing ? s.VisitSpent : 0;
            while (s.Queue.Count > 0)
            {
                if (n == cap)
                {
                    // Batch full: the tenant stays at the head, the next call continues this visit's dequeue.
                    s.InVisit = true;
                    s.VisitSpent = spent;
                    return n;
                }
                if (InFlight >= Limits.LcInFlightMax)
                {
                    // Blocked by a full device queue (§4.3.2): to the tail, so the slots that free up next go to the
                    // tenants behind it rather than to whoever happened to be at the head.
                    _activeLc.Requeue();
                    return n;
                }
                if (s.Credit < -s.DeficitLimit)
                {
                    outOfTokens = true; // out of tokens and burst allowance: parked until the refill covers it
                    break;
                }
                if (spent > 0 && spent + s.Queue.Head.Cost > quantum)
                {
                    blocked = true; // this visit's burst schedule is used up; credit is left, so to the tail
                    break;
                }
                var r = s.Queue.Dequeue();
                s.Credit -= r.Cost;
                spent += r.Cost;
                NoteDispatched(ref s);
                batch[n++] = r;
            }
            if (outOfTokens)
            {
                _activeLc.PopHead();
                // Eligible again when credit + rate·dt reaches −deficit limit (the +1 ns absorbs the rounding down).
                long dt = (long)((-s.DeficitLimit - s.Credit) / s.Rate * 1e9) + 1;
                Park(t, ref s, nowNs + dt, fromBe: false);
            }
            else if (blocked)
                _activeLc.Requeue();
            else
            {
                _activeLc.PopHead();
                s.Active = false;
            }
        }

        WakeBeOnPool(nowNs);

        double intervalSec = _settings.ReclaimIntervalNs * 1e-9;
        for (int visits = _activeBe.Count; visits > 0; visits--)
        {
            int t = _activeBe.Head;
            Visits++;
            ref var s = ref Tenants[t];
            if (s.IsLc)
            {
                // Admitted while queued as BE: it continues in the LC list (served from the next call).
                _activeBe.PopHead();
                _activeBeCount--;
                _activeLc.PushTail(t);
                continue;
            }
            // Saved credit plus the fair share since the last visit, never above one interval of share — or the head
            // request's cost, so a tenant whose share is below one request per interval (750 BE tenants splitting
            // 80K tokens/s get ~0.1 token/ms) still saves up to it instead of living on the pool alone.
            double inc = s.Rate * (nowNs - s.LastRefillNs) * 1e-9;
            s.LastRefillNs = nowNs;
            double bank = Math.Max(s.Rate * intervalSec, s.Queue.Head.Cost);
            double tokens = Math.Min(s.Credit + inc, Math.Max(s.Credit, bank));
            double demand = s.Queue.QueuedCost;
            if (demand > tokens && _pool > 0)
            {
                double borrow = Math.Min(_pool, demand - tokens);
                _pool -= borrow;
                tokens += borrow;
            }
            bool blocked = false;
            while (s.Queue.Count > 0)
            {
                if (n == cap || InFlight >= Limits.BeInFlightMax)
                {
                    s.Credit = tokens;
                    if (n < cap)
                        _activeBe.Requeue(); // blocked by the BE in-flight cap: to the tail, as for LC
                    return n;
                }
                double cost = s.Queue.Head.Cost;
                if (tokens < cost)
                {
                    blocked = true;
                    break;
                }
                var r = s.Queue.Dequeue();
                tokens -= cost;
                NoteDispatched(ref s);
                batch[n++] = r;
            }
            // save_credit: keep one interval of share (or the blocked head's cost), lend the rest back.
            double keep = Math.Max(s.Rate * intervalSec, blocked ? s.Queue.Head.Cost : 0);
            double saved = Math.Min(tokens, keep);
            s.Credit = saved;
            _pool += tokens - saved;
            if (blocked)
            {
                _activeBe.PopHead();
                ParkBe(t, ref s, nowNs);
            }
            else
            {
                _activeBe.PopHead();
                _activeBeCount--;
                s.Active = false;
            }
        }
        CapPool();
        return n;
    }
}
