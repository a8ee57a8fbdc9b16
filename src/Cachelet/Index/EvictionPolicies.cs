namespace FaaST.Cachelet.Index;

/// <summary>
/// An eviction order (Faa$T §3.4) as strict tiers: the index evicts from tier 0 until it is empty
/// or enough is freed, then tier 1, and so on; within a tier, least recently used first (sampled,
/// see <see cref="CacheIndex"/>). A tier depends only on what rarely changes (ownership, length),
/// so entries are filed by tier once and the hit path never reorders anything. A TTL, if any, comes
/// before every tier: expired entries are misses and are evicted first.
/// </summary>
public interface IEvictionPolicy
{
    /// <summary>Number of tiers (at least 1).</summary>
    int TierCount { get; }

    /// <summary>The tier of an entry, 0 (evicted first) to <see cref="TierCount"/> − 1.</summary>
    int Tier(bool owned, long length);

    /// <summary>Entries older than this (since cached) are expired; null for no TTL.</summary>
    TimeSpan? TimeToLive { get; }
}

/// <summary>The policies of the paper.</summary>
public static class EvictionPolicies
{
    /// <summary>Default: objects this cachelet does not own, then owned ones; LRU within each.</summary>
    public static IEvictionPolicy LruNonOwnedFirst { get; } = new LruNonOwnedFirstPolicy(null);

    /// <summary>Non-owned objects larger than <paramref name="threshold"/> first, then smaller non-owned
    /// ones, then owned larger ones, then owned smaller ones; LRU within each.</summary>
    public static IEvictionPolicy SizeAware(long threshold = 12 * 1024)
    {
        ArgumentOutOfRangeException.ThrowIfNegativeOrZero(threshold);
        return new SizeAwarePolicy(threshold, null);
    }

    /// <summary><paramref name="policy"/> with a TTL: entries older than <paramref name="ttl"/> are misses and evicted first.</summary>
    public static IEvictionPolicy WithTtl(IEvictionPolicy policy, TimeSpan ttl)
    {
        ArgumentNullException.ThrowIfNull(policy);
        if (ttl <= TimeSpan.Zero)
            throw new ArgumentOutOfRangeException(nameof(ttl), ttl, "a TTL is positive");
        return policy switch
        {
            LruNonOwnedFirstPolicy => new LruNonOwnedFirstPolicy(ttl),
            SizeAwarePolicy s => new SizeAwarePolicy(s.Threshold, ttl),
            _ => new TtlPolicy(policy, ttl),
        };
    }

    /// <summary>The policy a policy file describes (<c>cache.eviction</c>): LRU or size-aware, with an optional TTL.</summary>
    public static IEvictionPolicy Create(bool sizeAware, long sizeThreshold = 12 * 1024, TimeSpan? ttl = null)
    {
        var policy = sizeAware ? SizeAware(sizeThreshold) : LruNonOwnedFirst;
        return ttl is { } t ? WithTtl(policy, t) : policy;
    }

    private sealed record LruNonOwnedFirstPolicy(TimeSpan? TimeToLive) : IEvictionPolicy
    {
        public int TierCount => 2;

        public int Tier(bool owned, long length) => owned ? 1 : 0;
    }

    private sealed record SizeAwarePolicy(long Threshold, TimeSpan? TimeToLive) : IEvictionPolicy
    {
        public int TierCount => 4;

        public int Tier(bool owned, long length) => (owned ? 2 : 0) + (length > Threshold ? 0 : 1);
    }

    private sealed record TtlPolicy(IEvictionPolicy Inner, TimeSpan? TimeToLive) : IEvictionPolicy
    {
        public int TierCount => Inner.TierCount;

        public int Tier(bool owned, long length) => Inner.Tier(owned, length);
    }
}
