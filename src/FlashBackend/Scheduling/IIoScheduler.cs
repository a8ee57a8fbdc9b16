namespace FaaST.FlashBackend.Scheduling;

/// <summary>
/// A per-device-queue request scheduler (En4S §4.2, §5.3): requests of tenants are enqueued as they arrive, the poll
/// loop asks for the next batch to submit to the device, and the device's completions come back. One instance runs on
/// the one thread that owns its device queue (as En4S's per-core scheduler does): no method is thread-safe and none
/// takes a lock. Times are nanoseconds on the caller's clock (the device model's virtual time in tests and benchmarks).
/// </summary>
public interface IIoScheduler
{
    string Name { get; }

    /// <summary>Registers a tenant with one flow and returns its id (a slot, reused after deregistration).</summary>
    int Register(TenantSpec spec);

    /// <summary>Removes a tenant; refused while it has requests queued.</summary>
    void Deregister(int tenant);

    /// <summary>Adds a flow (an instance of the app) to a tenant; returns the tenant's flow count.</summary>
    int OpenFlow(int tenant);

    /// <summary>Removes a flow; returns the flows left (the owner deregisters the tenant at zero).</summary>
    int CloseFlow(int tenant);

    /// <summary>Queues a request; the scheduler computes its cost.</summary>
    void Enqueue(IoRequest request, long nowNs);

    /// <summary>Fills <paramref name="batch"/> with up to <see cref="SchedulerLimits.BatchSize"/> requests to submit
    /// now, within the in-flight caps; returns how many. The caller submits them all (they count as in flight).</summary>
    int Dispatch(long nowNs, Span<IoRequest> batch);

    /// <summary>A dispatched request completed.</summary>
    void OnCompletion(in IoRequest request, long nowNs);

    /// <summary>Requests dispatched and not yet completed.</summary>
    int InFlight { get; }

    /// <summary>Requests queued in the scheduler.</summary>
    int Queued { get; }

    /// <summary>The scheduler's own work so far, deterministically: tenants visited by Dispatch (and by the periodic
    /// work it triggers, such as En4S's reclaim), or queue operations for FCFS. Fig. 8 (§6.2.1) charges each pass this
    /// many visits of virtual time, since the difference between En4S and ReFlex there is the traversal's cost.</summary>
    long TenantVisits { get; }
}
