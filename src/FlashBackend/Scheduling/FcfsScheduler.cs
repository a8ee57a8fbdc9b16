namespace FaaST.FlashBackend.Scheduling;

/// <summary>
/// First-come-first-served baseline (En4S §3.1): one global FIFO in arrival order, no tokens, no classes; dispatches
/// while fewer than the LC in-flight cap are outstanding. Cheapest to run, enforces no SLO.
/// </summary>
public sealed class FcfsScheduler : SchedulerBase
{
    private readonly RequestRing _fifo = new(1024);

    public FcfsScheduler(CostTable costs, SchedulerLimits limits) : base(costs, limits) { }

    public override string Name => "fcfs";

    private protected override void Accept(int tenant, ref TenantState s, in IoRequest request)
    {
        _fifo.Enqueue(request);
        s.Queue.Enqueue(request); // mirrored only for the per-tenant count; drained in step below
    }

    public override int Dispatch(long nowNs, Span<IoRequest> batch)
    {
        Advance(nowNs);
        int cap = BatchCap(batch);
        int n = 0;
        while (n < cap && _fifo.Count > 0 && InFlight < Limits.LcInFlightMax)
        {
            var r = _fifo.Dequeue();
            Visits++; // one queue operation per request: FCFS walks no tenants
            ref var s = ref Tenants[r.Tenant];
            s.Queue.Dequeue(); // per-tenant FIFO order equals global order restricted to the tenant
            NoteDispatched(ref s);
            batch[n++] = r;
        }
        return n;
    }
}
