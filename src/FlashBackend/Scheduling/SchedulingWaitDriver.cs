using System.Diagnostics;

namespace FaaST.FlashBackend.Scheduling;

/// <summary>The virtual time one scheduling pass costs: <see cref="PassNs"/> plus <see cref="VisitNs"/> per tenant
/// visit the pass made (<see cref="IIoScheduler.TenantVisits"/>). <see cref="Free"/> is the ideal scheduler that costs
/// nothing.</summary>
public readonly record struct PassCost(double PassNs, double VisitNs)
{
    public static PassCost Free => default;

    public long Of(long visits) => (long)Math.Round(PassNs + VisitNs * visits);
}

/// <summary>One run of <see cref="SchedulingWaitDriver"/>: each request's completion time (ns) and class, and the
/// scheduler's work. <see cref="DispatchTicks"/> is wall-clock <see cref="Stopwatch"/> ticks spent inside Dispatch
/// (0 unless asked for): calibration only, never part of the virtual-time results.</summary>
public sealed record SchedulingWaitRun(long[] CompletionNs, bool[] IsLc, long Passes, long Visits, long DispatchTicks);

/// <summary>
/// En4S Fig. 8's simulation (§6.2.1) on virtual time: <c>tenants</c> tenants, a fraction <c>lcRatio</c> of them LC
/// (spread evenly through the round robin) whose SLO is their offered rate, all offering the same rate at uniform
/// intervals ("arriving at equal rates and uniform intervals"), 95 % of a 200K-IOPS device of 4 KiB reads served in
/// submission order at 5 µs each. The scheduler runs one pass per <c>batch</c> arrivals (the scheduling frequency the
/// batch size stands for) and hands out at most <c>batch</c> requests per pass.
/// <para>
/// What makes it Fig. 8: a pass is not free. It occupies the scheduler's core for <see cref="PassCost.Of"/> its tenant
/// visits, its dispatches reach the device only when it ends, and the next pass cannot start before. A scheduler that
/// walks every tenant per pass (ReFlex, §3.1) thus delays every request by its walk; En4S visits only active tenants.
/// When a pass filled its batch and work is still queued, the next one starts as soon as the core is free (a poll loop
/// with work does not sleep), so a scheduler slower than the arrivals falls behind and its queue grows.
/// </para>
/// Deterministic: no randomness and no clock in the results, so the same arguments give the same completions.
/// </summary>
public static class SchedulingWaitDriver
{
    public const double DeviceIops = 200_000;
    public const double Load = 0.95;
    /// <summary>1 / 200K IOPS.</summary>
    public const long ServiceNs = 5_000;

    public static SchedulingWaitRun Run(IIoScheduler scheduler, int tenants, double lcRatio, int batch, int requests,
        PassCost cost, bool measureDispatch = false)
    {
        ArgumentNullException.ThrowIfNull(scheduler);
        if (tenants < 1 || batch < 1 || requests < 1 || !(lcRatio >= 0 && lcRatio <= 1))
            throw new ArgumentException($"scheduling wait run: tenants {tenants}, batch {batch} and requests {requests} must be >= 1 and the LC ratio {lcRatio} in [0, 1]");
        double perTenant = Load * DeviceIops / tenants;
        var ids = new int[tenants];
        var lcTenant = new bool[tenants];
        for (int i = 0; i < tenants; i++)
        {
            // Spread LC tenants evenly through the round robin (every 4th at 25 %).
            lcTenant[i] = (int)((i + 1) * lcRatio) > (int)(i * lcRatio);
            ids[i] = scheduler.Register(lcTenant[i] ? new TenantSpec($"lc{i}", perTenant, 2000, 1.0) : new TenantSpec($"be{i}"));
        }
        (scheduler as En4sScheduler)?.RunAdmission(0);
        long gapNs = (long)(1e9 / (Load * DeviceIops));
        var done = new long[requests];
        var isLc = new bool[requests];
        var buffer = new IoRequest[batch];
        var inflight = new Queue<(long At, IoRequest R)>();
        long pipeFree = 0, now = 0, schedFree = 0, passes = 0, visits = 0, ticks = 0;
        int arrived = 0;
        bool backlog = false;
        while (arrived < requests || scheduler.Queued > 0 || inflight.Count > 0)
        {
            if (backlog)
                now = Math.Max(now, schedFree);
            else if (arrived < requests)
                now = Math.Max(schedFree, (long)(Math.Min(arrived + batch, requests) - 1) * gapNs);
            else
                now = Math.Max(schedFree, now + batch * gapNs);
            // Everything that arrived by the pass's start is seen by it (more than a batch when the core was busy).
            while (arrived < requests && (long)arrived * gapNs <= now)
            {
                int t = arrived % tenants;
                isLc[arrived] = lcTenant[t];
                scheduler.Enqueue(new IoRequest(arrived, ids[t], IoType.Read, 4096, (long)arrived * gapNs), now);
                arrived++;
            }
            while (inflight.Count > 0 && inflight.Peek().At <= now)
                scheduler.OnCompletion(inflight.Dequeue().R, now);
            long before = scheduler.TenantVisits;
            long start = measureDispatch ? Stopwatch.GetTimestamp() : 0;
            int got = scheduler.Dispatch(now, buffer);
            if (measureDispatch)
                ticks += Stopwatch.GetTimestamp() - start;
            long passVisits = scheduler.TenantVisits - before;
            passes++;
            visits += passVisits;
            long end = now + cost.Of(passVisits);
            schedFree = end;
            for (int j = 0; j < got; j++)
            {
                pipeFree = Math.Max(pipeFree, end) + ServiceNs;
                done[buffer[j].Id] = pipeFree;
                inflight.Enqueue((pipeFree, buffer[j]));
            }
            backlog = got == buffer.Length && scheduler.Queued > 0;
        }
        return new SchedulingWaitRun(done, isLc, passes, visits, ticks);
    }

    /// <summary>Mean extra wait (ns) of the LC requests of <paramref name="actual"/> against <paramref name="ideal"/>:
    /// §6.2.1's "time difference between the LC tenant's ideal process time (based on FCFS) and the actual process
    /// time". A request completed earlier than FCFS would have (LC served first) has no wait, not a negative one.</summary>
    public static double MeanLcWaitNs(SchedulingWaitRun actual, SchedulingWaitRun ideal)
    {
        ArgumentNullException.ThrowIfNull(actual);
        ArgumentNullException.ThrowIfNull(ideal);
        if (actual.CompletionNs.Length != ideal.CompletionNs.Length)
            throw new ArgumentException($"scheduling wait: runs of {actual.CompletionNs.Length} and {ideal.CompletionNs.Length} requests cannot be compared");
        double sum = 0;
        long lc = 0;
        for (int i = 0; i < actual.CompletionNs.Length; i++)
            if (actual.IsLc[i])
            {
                lc++;
                sum += Math.Max(0, actual.CompletionNs[i] - ideal.CompletionNs[i]);
            }
        return lc == 0 ? 0 : sum / lc;
    }
}
