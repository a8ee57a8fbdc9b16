namespace FaaST.FlashBackend.Scheduling;

/// <summary>
/// What a tenant (an app) registers (En4S §4.2.1): an IOPS SLO for 4 KiB requests, a p95 latency SLO and an optional
/// read-ratio hint. A tenant with both an IOPS and a latency SLO is latency-critical (LC); one without is best-effort
/// (BE), as in the authors' registration (LC iff both are non-zero).
/// </summary>
public sealed record TenantSpec(string Name, double IopsSlo = 0, int P95LatencyUs = 0, double? ReadRatioHint = null)
{
    public bool IsLatencyCritical => IopsSlo > 0 && P95LatencyUs > 0;

    /// <summary>Throws naming the tenant and the field when the SLO cannot be scheduled.</summary>
    public void Validate()
    {
        if (string.IsNullOrWhiteSpace(Name))
            throw new ArgumentException("tenant spec: the tenant needs a name");
        if (!(IopsSlo >= 0) || double.IsInfinity(IopsSlo))
            throw new ArgumentException($"tenant '{Name}': IOPS SLO {IopsSlo} must be a finite number >= 0");
        if (P95LatencyUs < 0)
            throw new ArgumentException($"tenant '{Name}': p95 latency SLO {P95LatencyUs} µs must be >= 0");
        if ((IopsSlo > 0) != (P95LatencyUs > 0))
            throw new ArgumentException($"tenant '{Name}': an LC SLO needs both IOPS ({IopsSlo}) and p95 latency ({P95LatencyUs} µs); a BE tenant gives neither");
        if (ReadRatioHint is { } r && !(r >= 0 && r <= 1))
            throw new ArgumentException($"tenant '{Name}': read-ratio hint {r} must lie in [0, 1]");
    }
}

/// <summary>Limits shared by every scheduler.</summary>
public sealed record SchedulerLimits
{
    /// <summary>Most requests one Dispatch call hands out (§5.3.1: 64 keeps the scheduling frequency from dropping too
    /// low; Fig. 8 also runs 4 and 16).</summary>
    public int BatchSize { get; init; } = 64;

    /// <summary>LC requests are dispatched while fewer than this many requests are outstanding at the device
    /// (Algorithm 1's lc_threshold_max). By Little's law a device queue of N requests at throughput X adds N/X of
    /// waiting: 128 requests of the 90 %-read mix (1.6 tokens each) are ~1 ms of a 200K-token device, half the 2 ms SLO,
    /// while 128 is still far above the ~32 outstanding 4 KiB reads an NVMe needs to reach its peak. (The authors cap at
    /// their SSD queue, 512 = 2.6 ms at 200K IOPS: more than a 2 ms SLO can absorb.)</summary>
    public int LcInFlightMax { get; init; } = 128;

    /// <summary>BE requests stop at this lower mark (be_threshold_max) so BE work never fills the queue: a quarter of
    /// it (32 slots) stays free for LC arrivals. The paper leaves the value open.</summary>
    public int BeInFlightMax { get; init; } = 96;

    /// <summary>Tenant slots per scheduler (per device queue); the paper runs 1,000 tenants.</summary>
    public int MaxTenants { get; init; } = 4096;

    public static SchedulerLimits Default { get; } = new();

    public void Validate()
    {
        if (BatchSize < 1 || LcInFlightMax < 1 || BeInFlightMax < 1 || MaxTenants < 1)
            throw new ArgumentException($"scheduler limits: batch {BatchSize}, LC cap {LcInFlightMax}, BE cap {BeInFlightMax} and tenant slots {MaxTenants} must all be >= 1");
        if (BeInFlightMax > LcInFlightMax)
            throw new ArgumentException($"scheduler limits: the BE in-flight cap {BeInFlightMax} exceeds the LC cap {LcInFlightMax}; BE must never hold slots LC cannot");
    }
}

/// <summary>The outcome of the slow LC admission of one tenant (§4.3.3): who, whether, why, what it asked (its wTPS)
/// and what the device had left for LC reservations within the strictest p95 bound before this decision.</summary>
public readonly record struct AdmissionDecision(int Tenant, string Name, bool Admitted, string Reason,
    double RequestedTokensPerSecond = 0, double LeftTokensPerSecond = 0);
