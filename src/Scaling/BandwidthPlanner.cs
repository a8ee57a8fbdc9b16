namespace FaaST.Scaling;

/// <summary>
/// How many instances should download one large object together (Faa$T §4, "Bandwidth scaling"): with
/// N instances each fetches S/N bytes from storage in parallel and the requester receives the other
/// ranges from them, so
/// <c>T_DR(N) = T_Load + (S/N) / BW_BS + (S − S/N) / BW_Inst</c>,
/// where T_Load is paid only when N exceeds the instances already running (the added ones start
/// together, so once). N goes up from the running count one at a time and stops where T_DR falls by
/// less than <see cref="MinImprovement"/> (10 %) or rises; never above the cap.
/// </summary>
public static class BandwidthPlanner
{
    /// <summary>The smallest relative fall in T_DR worth another instance (§4: 10 %).</summary>
    public const double MinImprovement = 0.10;

    /// <summary>T_DR(<paramref name="instances"/>) in seconds for an object of <paramref name="objectBytes"/>.</summary>
    /// <param name="running">Instances already up (no T_Load for them).</param>
    public static double DownloadSeconds(long objectBytes, int instances, int running, in BandwidthSnapshot profile)
    {
        ArgumentOutOfRangeException.ThrowIfNegative(objectBytes);
        ArgumentOutOfRangeException.ThrowIfLessThan(instances, 1);
        double size = objectBytes;
        var share = size / instances;
        var load = instances > running ? profile.LoadSeconds : 0;
        return load + share / profile.StorageBytesPerSecond + (size - share) / profile.InstanceBytesPerSecond;
    }

    /// <summary>
    /// The N the T_DR rule picks for an object of <paramref name="objectBytes"/> with
    /// <paramref name="running"/> instances up, at most <paramref name="maxInstances"/>; at least 1, and
    /// never more than the running count unless adding instances pays by the rule.
    /// </summary>
    public static int PlanInstances(long objectBytes, int running, in BandwidthSnapshot profile, int maxInstances)
    {
        ArgumentOutOfRangeException.ThrowIfNegative(objectBytes);
        ArgumentOutOfRangeException.ThrowIfLessThan(maxInstances, 1);
        var n = Math.Clamp(running, 1, maxInstances);
        var current = DownloadSeconds(objectBytes, n, running, profile);
        while (n < maxInstances)
        {
            var next = DownloadSeconds(objectBytes, n + 1, running, profile);
            if (next >= current || (current - next) < MinImprovement * current)
                break;
            n++;
            current = next;
        }
        return n;
    }
}
