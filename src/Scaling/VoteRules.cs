using System.Globalization;
using FaaST.Protos.Scale;

namespace FaaST.Scaling;

/// <summary>
/// An instance's votes (Faa$T §4): pure functions of what the instance measured over one interval. The
/// controller combines them (out if any says out, in only if all say in); an instance never decides
/// how many instances the app has.
/// </summary>
public static class VoteRules
{
    public const string Compute = "compute";
    public const string CacheSize = "cache-size";
    public const string Bandwidth = "bandwidth";

    /// <summary>
    /// Compute: above the band's top, out by <c>ceil(n·u/target) − n</c> (the instances that bring the
    /// utilisation back to the band's middle, at least one); below its bottom, in by one; else 0.
    /// </summary>
    /// <param name="load">The instance's load over the interval (<see cref="InstanceLoad.Utilization"/> is busy slots / slots).</param>
    /// <param name="instances">The instances the controller counts now (the request's); 1 when it said none.</param>
    public static PolicyVote ComputeVote(InstanceLoad load, int instances, VoteOptions options)
    {
        ArgumentNullException.ThrowIfNull(load);
        ArgumentNullException.ThrowIfNull(options);
        if (!options.ComputeEnabled)
            return Vote(Compute, 0, "disabled (scale.votes.compute is false)");
        var n = Math.Max(1, instances);
        var u = load.Utilization;
        var detail = string.Create(CultureInfo.InvariantCulture,
            $"({load.InvocationsPerSecond:0.#}/s, p50 {load.LatencyP50Ms:0.0} ms, {load.InFlight} in flight{(load.Queued > 0 ? $", {load.Queued} queued" : "")})");
        if (u > options.BandHigh)
        {
            // Pocket's rule: enough instances that the same load would sit at the band's middle.
            var wanted = (int)Math.Min(int.MaxValue, Math.Ceiling(n * u / options.Target));
            var delta = Math.Max(1, wanted - n);
            return Vote(Compute, delta, string.Create(CultureInfo.InvariantCulture, $"utilisation {u:0.00} > {options.BandHigh:0.00} {detail}"));
        }
        if (u < options.BandLow)
            return Vote(Compute, -1, string.Create(CultureInfo.InvariantCulture, $"utilisation {u:0.00} < {options.BandLow:0.00} {detail}"));
        return Vote(Compute, 0, string.Create(CultureInfo.InvariantCulture, $"utilisation {u:0.00} within {options.BandLow:0.00}-{options.BandHigh:0.00} {detail}"));
    }

    /// <summary>
    /// Cache size: +1 when any object was evicted more than once since the previous query (the working
    /// set does not fit: it comes back and is thrown out again); else −1 when accesses are rare (the
    /// cache is not what keeps this instance); else 0.
    /// </summary>
    /// <param name="load">Its <see cref="InstanceLoad.ObjectsEvictedTwice"/>, <see cref="InstanceLoad.CacheAccesses"/>,
    /// <see cref="InstanceLoad.Evictions"/> and <see cref="InstanceLoad.IntervalSeconds"/> are read.</param>
    public static PolicyVote CacheSizeVote(InstanceLoad load, VoteOptions options)
    {
        ArgumentNullException.ThrowIfNull(load);
        ArgumentNullException.ThrowIfNull(options);
        if (!options.CacheSizeEnabled)
            return Vote(CacheSize, 0, "disabled (scale.votes.cacheSize is false)");
        if (load.ObjectsEvictedTwice > 0)
            return Vote(CacheSize, 1, string.Create(CultureInfo.InvariantCulture,
                $"{load.ObjectsEvictedTwice} object(s) evicted more than once since the last query ({load.Evictions} evictions): the working set is larger than the cache"));
        if (load.IntervalSeconds <= 0)
            return Vote(CacheSize, 0, "no interval measured yet");
        var rate = load.CacheAccesses / load.IntervalSeconds;
        if (rate < options.RareAccessesPerSecond)
            return Vote(CacheSize, -1, string.Create(CultureInfo.InvariantCulture,
                $"cache accesses {rate:0.0#}/s < {options.RareAccessesPerSecond:0.0#}/s (rare)"));
        return Vote(CacheSize, 0, string.Create(CultureInfo.InvariantCulture,
            $"cache accesses {rate:0.0#}/s, no object evicted twice"));
    }

    /// <summary>
    /// Bandwidth, for the periodic query: −1 when large objects are accessed rarely, else 0. The +N of
    /// bandwidth is not voted here: the read path asks for it at once (ScaleControl.RequestScaleOut)
    /// when a large object is fetched, with N from the T_DR rule.
    /// </summary>
    /// <param name="largeObjectAccesses">Accesses to objects of at least <see cref="VoteOptions.LargeObjectBytes"/> since the previous query.</param>
    /// <param name="intervalSeconds">The interval the count covers.</param>
    public static PolicyVote BandwidthVote(long largeObjectAccesses, double intervalSeconds, VoteOptions options)
    {
        ArgumentNullException.ThrowIfNull(options);
        if (!options.BandwidthEnabled)
            return Vote(Bandwidth, 0, "disabled (scale.votes.bandwidth is false)");
        if (intervalSeconds <= 0)
            return Vote(Bandwidth, 0, "no interval measured yet");
        var rate = largeObjectAccesses / intervalSeconds;
        if (rate < options.RareAccessesPerSecond)
            return Vote(Bandwidth, -1, string.Create(CultureInfo.InvariantCulture,
                $"large-object accesses {rate:0.0#}/s < {options.RareAccessesPerSecond:0.0#}/s (rare)"));
        return Vote(Bandwidth, 0, string.Create(CultureInfo.InvariantCulture,
            $"large-object accesses {rate:0.0#}/s (scale-out for a large object is asked by the read path)"));
    }

    private static PolicyVote Vote(string policy, int delta, string reason) => new() { Policy = policy, Delta = delta, Reason = reason };
}
