namespace FaaST.FlashBackend.Scheduling;

/// <summary>Per-tenant scheduler state, kept in one array of structs indexed by tenant id (no per-tenant objects on
/// the hot path besides the request ring).</summary>
internal struct TenantState
{
    public bool InUse;
    public bool IsLc;
    public bool PendingLc;
    public bool Active;
    /// <summary>Waiting out of its active list for tokens (En4S only); <see cref="ParkedFromBe"/> says which list it
    /// returns to.</summary>
    public bool Parked;
    public bool ParkedFromBe;
    /// <summary>An LC visit cut off by the batch limit, to be continued, and the tokens it has spent so far.</summary>
    public bool InVisit;
    public double VisitSpent;
    public TenantSpec Spec;
    public int Flows;
    public RequestRing Queue;
    /// <summary>Tokens per second reserved for the tenant (wTPS for LC, the static or fair share for BE).</summary>
    public double Rate;
    public double Credit;
    public long LastRefillNs;
    /// <summary>Tokens added since the last reclaim tick, and the amount added in the tick before (En4S §4.5).</summary>
    public double IncrementSinceReclaim;
    public double LastIncrement;
    public double DeficitLimit;
    public double BaseDeficitLimit;
    public int LoanTimes;
    public long Dispatched;
    public long Completed;
}

/// <summary>
/// Tenant registration, flows, per-tenant queues, cost assignment and in-flight accounting shared by the three
/// schedulers. Single-threaded (see <see cref="IIoScheduler"/>).
/// </summary>
public abstract class SchedulerBase : IIoScheduler
{
    /// <summary>Weight of one request in the device's observed read ratio (an EWMA over ~1,000 requests), used for the
    /// cost of tenants that gave no read-ratio hint (§5.3.3: "a sliding window to use the past read ratio").</summary>
    private const double ReadRatioAlpha = 1.0 / 1024;

    private protected readonly CostTable Costs;
    private protected readonly SchedulerLimits Limits;
    private protected readonly TenantState[] Tenants;
    private readonly int[] _free;
    private int _freeCount;
    private protected readonly List<int> LcTenants = [];
    private protected readonly List<int> BeTenants = [];
    private int _inFlight;
    private int _queued;
    private protected long NowNs;
    /// <summary>See <see cref="TenantVisits"/>: a plain increment where a tenant is visited (single-threaded, no
    /// allocation).</summary>
    private protected long Visits;

    private protected SchedulerBase(CostTable costs, SchedulerLimits limits)
    {
        ArgumentNullException.ThrowIfNull(costs);
        ArgumentNullException.ThrowIfNull(limits);
        limits.Validate();
        Costs = costs;
        Limits = limits;
        Tenants = new TenantState[limits.MaxTenants];
        _free = new int[limits.MaxTenants];
        for (int i = 0; i < _free.Length; i++)
            _free[i] = _free.Length - 1 - i; // pop order 0, 1, 2, ...
        _freeCount = _free.Length;
    }

    public abstract string Name { get; }

    public int InFlight => _inFlight;

    public int Queued => _queued;

    public long TenantVisits => Visits;

    /// <summary>The read ratio observed over recent requests (starts at 1: no writes seen).</summary>
    public double ObservedReadRatio { get; private set; } = 1.0;

    public int TenantCount => LcTenants.Count + BeTenants.Count;

    public bool IsLatencyCritical(int tenant) => Get(tenant).IsLc;

    public long DispatchedOf(int tenant) => Get(tenant).Dispatched;

    public int QueuedOf(int tenant) => Get(tenant).Queue.Count;

    public double CreditOf(int tenant) => Get(tenant).Credit;

    public double RateOf(int tenant) => Get(tenant).Rate;

    public virtual int Register(TenantSpec spec)
    {
        ArgumentNullException.ThrowIfNull(spec);
        spec.Validate();
        if (_freeCount == 0)
            throw new InvalidOperationException($"tenant '{spec.Name}': all {Limits.MaxTenants} tenant slots of this device queue are in use");
        int id = _free[--_freeCount];
        Tenants[id] = new TenantState
        {
            InUse = true,
            Spec = spec,
            Flows = 1,
            Queue = Tenants[id].Queue ?? new RequestRing(),
            LastRefillNs = NowNs,
        };
        OnRegistered(id);
        return id;
    }

    public virtual void Deregister(int tenant)
    {
        ref var s = ref Get(tenant);
        if (s.Queue.Count > 0)
            throw new InvalidOperationException($"tenant '{s.Spec.Name}' ({tenant}): {s.Queue.Count} requests still queued; drain them before deregistering");
        OnDeregistering(tenant);
        (s.IsLc ? LcTenants : BeTenants).Remove(tenant);
        var ring = s.Queue;
        s = default;
        s.Queue = ring; // reuse the grown ring for the next tenant in this slot
        _free[_freeCount++] = tenant;
    }

    public int OpenFlow(int tenant) => ++Get(tenant).Flows;

    public int CloseFlow(int tenant)
    {
        ref var s = ref Get(tenant);
        if (s.Flows == 0)
            throw new InvalidOperationException($"tenant '{s.Spec.Name}' ({tenant}): no open flow to close");
        return --s.Flows;
    }

    public void Enqueue(IoRequest request, long nowNs)
    {
        ref var s = ref Get(request.Tenant);
        if (request.SizeBytes < 0)
            throw new ArgumentException($"request {request.Id} of tenant '{s.Spec.Name}': size {request.SizeBytes} is negative", nameof(request));
        Advance(nowNs);
        ObservedReadRatio += ReadRatioAlpha * ((request.Type == IoType.Read ? 1.0 : 0.0) - ObservedReadRatio);
        double ratio = s.Spec.ReadRatioHint ?? ObservedReadRatio;
        request.Cost = Costs.Cost(request.Type, request.SizeBytes, ratio);
        _queued++;
        Accept(request.Tenant, ref s, request);
    }

    public abstract int Dispatch(long nowNs, Span<IoRequest> batch);

    public void OnCompletion(in IoRequest request, long nowNs)
    {
        if (_inFlight == 0)
            throw new InvalidOperationException($"completion of request {request.Id} (tenant {request.Tenant}) with nothing in flight");
        _inFlight--;
        if ((uint)request.Tenant < (uint)Tenants.Length && Tenants[request.Tenant].InUse)
            Tenants[request.Tenant].Completed++;
    }

    /// <summary>Called after a tenant's slot is filled; puts it in its class list.</summary>
    private protected virtual void OnRegistered(int tenant) => BeTenants.Add(tenant);

    private protected virtual void OnDeregistering(int tenant) { }

    /// <summary>Takes a costed request: by default into the tenant's own FIFO.</summary>
    private protected virtual void Accept(int tenant, ref TenantState s, in IoRequest request) => s.Queue.Enqueue(request);

    /// <summary>Book-keeping for a request handed out by Dispatch.</summary>
    private protected void NoteDispatched(ref TenantState s)
    {
        _inFlight++;
        _queued--;
        s.Dispatched++;
    }

    private protected void Advance(long nowNs)
    {
        if (nowNs < NowNs)
            throw new ArgumentOutOfRangeException(nameof(nowNs), nowNs, $"{Name}: time went backwards ({nowNs} ns after {NowNs} ns)");
        NowNs = nowNs;
    }

    private protected int BatchCap(Span<IoRequest> batch) => Math.Min(batch.Length, Limits.BatchSize);

    private protected ref TenantState Get(int tenant)
    {
        if ((uint)tenant >= (uint)Tenants.Length || !Tenants[tenant].InUse)
            throw new ArgumentException($"{Name}: unknown tenant {tenant}", nameof(tenant));
        return ref Tenants[tenant];
    }
}
