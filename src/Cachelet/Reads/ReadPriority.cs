namespace FaaST.Cachelet;

/// <summary>Whose storage read it is: an invocation waits for an on-demand one; a background one (prefetch) yields to them.</summary>
public enum ReadPriority
{
    /// <summary>A read an invocation waits for: admitted at once.</summary>
    OnDemand,

    /// <summary>A read nobody waits for (prefetch): runs only while no on-demand storage read does, a few at a time.</summary>
    Background,
}

/// <summary>What <see cref="BlobCache.PrefetchAsync"/> did.</summary>
public enum PrefetchOutcome
{
    /// <summary>Fetched and cached, unpinned, with no access counted.</summary>
    Loaded,

    /// <summary>Already cached (or being fetched by a reader, who cached it); nothing fetched.</summary>
    AlreadyCached,

    /// <summary>Another instance owns the key: prefetching is the owner's to do.</summary>
    NotOwned,

    /// <summary>The policy keeps it out of the cache (caching off, do-not-cache).</summary>
    NotCacheable,

    /// <summary>The blob does not exist.</summary>
    NotFound,

    /// <summary>The cache had no room for it (or it is larger than the cache); not kept.</summary>
    NoRoom,

    /// <summary>Storage (or a tier) failed; logged, nothing kept.</summary>
    Failed,
}
