namespace FaaST.Policy;

/// <summary>
/// An application's cache policy: what <c>faast.json</c> (beside <c>host.json</c>, read once at start)
/// says, with every key it leaves out at its default. <see cref="Default"/> is the policy of an app
/// without the file.
/// </summary>
/// <remarks>
/// This record is the one place the defaults live; <c>schemas/faast.schema.json</c> repeats them for
/// editors and a test keeps the two in agreement. Sizes are bytes. The parser
/// (<see cref="CachePolicyFile"/>) checks every range and that <see cref="CacheCapacity"/> does not
/// exceed <see cref="MemoryLimit"/>; a policy built in code is taken as given.
/// </remarks>
public sealed record CachePolicy
{
    /// <summary>The policy of an app without <c>faast.json</c>.</summary>
    public static CachePolicy Default { get; } = new();

    /// <summary><c>cache.enabled</c>, default <c>true</c>. When false every blob is read and written
    /// straight through to storage, as on the vanilla platform.</summary>
    public bool Enabled { get; init; } = true;

    /// <summary><c>cache.memoryLimit</c>: the instance's whole memory (host, workers and cache) that
    /// the memory daemon keeps under. At least 1 MiB. Default 1 GiB (1,073,741,824), or the memory
    /// cgroup's limit when the host runs under one (<see cref="WithMemoryCgroup"/>).</summary>
    public long MemoryLimit { get; init; } = 1L << 30;

    /// <summary>Where <see cref="MemoryLimit"/> came from.</summary>
    public MemoryLimitSource MemoryLimitSource { get; init; } = MemoryLimitSource.Default;

    /// <summary><c>cache.cacheCapacity</c>, default none (bounded only by <see cref="MemoryLimit"/>):
    /// an upper bound on cached bytes. At least 1 byte and at most <see cref="MemoryLimit"/>.</summary>
    public long? CacheCapacity { get; init; }

    /// <summary>
    /// Fits the policy to the memory cgroup the instance runs in (<paramref name="cgroupBytes"/>, its limit,
    /// read from <paramref name="cgroupFile"/>; both null without a cgroup): without <c>cache.memoryLimit</c>
    /// in faast.json the cgroup's limit is the memory limit; a larger value from the file, or a larger
    /// <c>cache.cacheCapacity</c>, is cut to it, since the kernel would stop the instance there anyway.
    /// <paramref name="warning"/> says what was cut, or is null. Without a cgroup, a
    /// <c>cache.cacheCapacity</c> above the default 1 GiB limit is an error in
    /// <paramref name="policyFile"/> (<see cref="PolicyFileException"/>). The cachelet finds the cgroup
    /// (its <c>WithCgroupLimit</c>); the rule lives here, beside the defaults it applies to.
    /// </summary>
    public CachePolicy WithMemoryCgroup(long? cgroupBytes, string? cgroupFile, string policyFile, out string? warning)
    {
        warning = null;
        if (cgroupBytes is not { } limit)
        {
            if (CacheCapacity is { } wanted && wanted > MemoryLimit)
            {
                throw new PolicyFileException(policyFile, "cache.cacheCapacity",
                    $"{ByteSize.Format(wanted)} is more than cache.memoryLimit ({ByteSize.Format(MemoryLimit)}, the default "
                    + "where no memory cgroup sets one); set cache.memoryLimit too");
            }
            return this;
        }
        var policy = this;
        if (MemoryLimitSource != MemoryLimitSource.PolicyFile)
            policy = policy with { MemoryLimit = limit, MemoryLimitSource = MemoryLimitSource.Cgroup };
        else if (MemoryLimit > limit)
        {
            warning = $"cache.memoryLimit ({ByteSize.Format(MemoryLimit)}) is more than the memory cgroup allows "
                + $"({ByteSize.Format(limit)}, {cgroupFile}); using {ByteSize.Format(limit)}";
            policy = policy with { MemoryLimit = limit, MemoryLimitSource = MemoryLimitSource.Cgroup };
        }
        if (policy.CacheCapacity is { } capacity && capacity > policy.MemoryLimit)
        {
            warning = (warning is null ? "" : warning + "; ")
                + $"cache.cacheCapacity ({ByteSize.Format(capacity)}) is cut to the memory limit ({ByteSize.Format(policy.MemoryLimit)})";
            policy = policy with { CacheCapacity = policy.MemoryLimit };
        }
        return policy;
    }

    /// <summary>The most bytes the cache may hold: <see cref="CacheCapacity"/> if set, else
    /// <see cref="MemoryLimit"/> (never more than <see cref="MemoryLimit"/>).</summary>
    public long MaxCachedBytes => Math.Min(CacheCapacity ?? MemoryLimit, MemoryLimit);

    /// <summary><c>cache.headroom</c>, default 0.10: the memory daemon evicts once heap + cache is
    /// within this fraction of <see cref="MemoryLimit"/> (Faa$T §3.4). Strictly between 0 and 1.</summary>
    public double Headroom { get; init; } = 0.10;

    /// <summary><c>cache.eviction</c>: which objects go first when memory runs short.</summary>
    public EvictionOptions Eviction { get; init; } = EvictionOptions.Default;

    /// <summary><c>cache.doNotCache</c>, default empty: globs over <c>container/blob</c>; matching
    /// blobs are read and written straight through. See <see cref="DoNotCache"/>.</summary>
    public BlobGlobSet DoNotCacheGlobs { get; init; } = BlobGlobSet.Empty;

    /// <summary><c>cache.consistency</c>, default <c>storage/sync/storage</c>
    /// (<see cref="ConsistencyPreset.StorageSyncStorage"/>): one of the six presets of Faa$T Table 3.</summary>
    public ConsistencyPreset Consistency { get; init; } = ConsistencyPreset.Default;

    /// <summary><c>cache.inlineThreshold</c>, default 64 KiB (65,536; measured crossover of inline gRPC vs shared memory for the Python worker): values smaller than this go to
    /// workers inline in the gRPC message, others through shared memory. 0 (always shared memory) to
    /// 64 MiB.</summary>
    public long InlineThreshold { get; init; } = 64 * 1024;

    /// <summary><c>cache.streamThreshold</c>, default 8 MiB: a blob input at least this long that misses the cache
    /// reaches a worker that streams inputs (the Python worker) while it is still being read from storage: the
    /// invocation is sent once the object's length and ETag are known and its extent is allocated, and the worker
    /// reads as far as the bytes have arrived (docs/cache.md, "Streamed inputs"). 8 MiB: below it the whole
    /// download on loopback Azurite takes under ~10 ms, so there is little to overlap and a progress file per read
    /// would cost more than it saves. 0 turns streaming off (every input is read whole before the invocation is sent).</summary>
    public long StreamThreshold { get; init; } = 8L << 20;

    /// <summary><c>cache.memoryDaemon</c>, default true: whether the memory daemon evicts cached objects when the
    /// functions' heap grows (Faa$T §3.5). Off only to measure what it prevents (Faa$T Table 5's first row: the
    /// heap allocation fails while the cache holds its memory); an app should leave it on.</summary>
    public bool MemoryDaemon { get; init; } = true;

    /// <summary><c>cache.memoryDaemonInterval</c>, default 0.5 s: how often the memory daemon samples
    /// heap and cache size. 10 ms to 1 minute.</summary>
    public TimeSpan MemoryDaemonInterval { get; init; } = TimeSpan.FromMilliseconds(500);

    /// <summary><c>cache.peerTimeout</c>, default 5 s: the longest wait for any one message from
    /// another instance; a peer silent that long is given up and the read goes to storage. 0.1 s to 5 minutes.</summary>
    public TimeSpan PeerTimeout { get; init; } = DefaultPeerTimeout;

    /// <summary>The default of <see cref="PeerTimeout"/>, also the peer transport's own.</summary>
    // Properties, not static fields: those initialise in text order, after Default above was built with zeros.
    public static TimeSpan DefaultPeerTimeout => TimeSpan.FromSeconds(5);

    /// <summary><c>cache.peerFetchTimeout</c>, default 5 minutes: how long a read waits for an owner
    /// that says it is still fetching the object from storage. 1 s to 1 day.</summary>
    public TimeSpan PeerFetchTimeout { get; init; } = DefaultPeerFetchTimeout;

    /// <summary>The default of <see cref="PeerFetchTimeout"/>, also the peer transport's own.</summary>
    public static TimeSpan DefaultPeerFetchTimeout => TimeSpan.FromMinutes(5);

    /// <summary><c>scale</c>: how the platform's scale controller sizes the app (<see cref="ScalePolicy"/>;
    /// not a cache setting, but read from the same file at the same time, so one parse validates both).</summary>
    public ScalePolicy Scale { get; init; } = ScalePolicy.Default;

    /// <summary><c>prewarm</c>: whether and how the app is loaded ahead of its predicted invocations and its cache
    /// pre-warmed (<see cref="PrewarmPolicy"/>; Faa$T §3.3).</summary>
    public PrewarmPolicy Prewarm { get; init; } = PrewarmPolicy.Default;

    /// <summary><c>flash</c>: whether and how the app's instances use the flash tier between the cache and storage
    /// (<see cref="FlashPolicy"/>; issue 22).</summary>
    public FlashPolicy Flash { get; init; } = FlashPolicy.Default;

    /// <summary>Whether <c>container/blob</c> matches a <c>cache.doNotCache</c> glob, so it is read and
    /// written straight through. Independent of <see cref="Enabled"/>.</summary>
    public bool DoNotCache(string container, string blob) => DoNotCacheGlobs.Matches(container, blob);
}

/// <summary><c>cache.eviction</c>: the per-application eviction policy (Faa$T §3.4).</summary>
public sealed record EvictionOptions
{
    /// <summary>LRU, no size threshold in play, no TTL.</summary>
    public static EvictionOptions Default { get; } = new();

    /// <summary><c>cache.eviction.policy</c>, default <c>"lru"</c>.</summary>
    public EvictionPolicy Policy { get; init; } = EvictionPolicy.Lru;

    /// <summary><c>cache.eviction.sizeThreshold</c>, default 12 KiB (12,288): what "large" means for
    /// <see cref="EvictionPolicy.SizeAware"/> (ignored by LRU). At least 1 byte.</summary>
    public long SizeThreshold { get; init; } = 12 * 1024;

    /// <summary><c>cache.eviction.ttl</c>, default none: when set, a cached object is evicted this long
    /// after it was cached (fetched or written), on top of either policy. Positive.</summary>
    public TimeSpan? Ttl { get; init; }
}

/// <summary>Where an app's <see cref="CachePolicy.MemoryLimit"/> came from.</summary>
public enum MemoryLimitSource
{
    /// <summary>Nothing set it: 1 GiB.</summary>
    Default,
    /// <summary><c>cache.memoryLimit</c> in faast.json.</summary>
    PolicyFile,
    /// <summary>The memory cgroup the host runs in (its limit was lower, or faast.json left it out).</summary>
    Cgroup,
}

/// <summary>The eviction order when the memory daemon needs room; both evict objects this cachelet
/// does not own before owned ones.</summary>
public enum EvictionPolicy
{
    /// <summary><c>"lru"</c>: non-owned objects in LRU order, then owned ones in LRU order.</summary>
    Lru,

    /// <summary><c>"size-aware"</c>: non-owned objects larger than the size threshold, then smaller
    /// non-owned ones, then owned large ones, then LRU for the rest.</summary>
    SizeAware,
}
