using FaaST.Cachelet.Consistency;
using FaaST.Cachelet.Index;
using FaaST.Cachelet.Memory;
using FaaST.Cachelet.Ownership;
using FaaST.Cachelet.Peers;
using FaaST.Policy;
using FaaST.Cachelet.Telemetry;
using Microsoft.Extensions.Logging;

namespace FaaST.Cachelet;

/// <summary>
/// What the cachelet's mechanisms share (the read chain, the write paths, peer serving, parallel range
/// fetch): the arena and its index, the preset's strategy, the validation epoch, ownership, the peer
/// link, metrics. One per <see cref="BlobCache"/>; it holds state, not behaviour.
/// </summary>
internal sealed class CacheCore
{
    public CacheCore(CachePolicy policy, SharedMemoryArena arena, CacheIndex index, ILogger logger, CacheletMetrics metrics, CancellationToken stopping)
    {
        Policy = policy;
        Consistency = ConsistencyStrategy.For(policy.Consistency);
        Arena = arena;
        Index = index;
        Logger = logger;
        Metrics = metrics;
        Stopping = stopping;
        Ownership = new CacheOwnership(index, Epoch);
        Peers = new PeerLink(Ownership, logger);
        TemporaryFiles = new TemporaryFiles(arena);
    }

    public CachePolicy Policy { get; }

    /// <summary>The preset's row of Table 3 (<see cref="ConsistencyStrategy.Table"/>).</summary>
    public ConsistencyStrategy Consistency { get; }

    public SharedMemoryArena Arena { get; }
    public CacheIndex Index { get; }
    public ILogger Logger { get; }
    public CacheletMetrics Metrics { get; }

    /// <summary>The cache's lifetime: fetches and write-behind run under it, never a reader's token.</summary>
    public CancellationToken Stopping { get; }

    public ValidationEpoch Epoch { get; } = new();
    public CacheOwnership Ownership { get; }
    public PeerLink Peers { get; }
    public TemporaryFiles TemporaryFiles { get; }

    /// <summary>Fills being streamed to a reader, by progress file name (for a worker that cannot stream: the host waits).</summary>
    public System.Collections.Concurrent.ConcurrentDictionary<string, StreamingFill> Fills { get; } = new(StringComparer.Ordinal);

    private long _progressFiles;

    /// <summary>A new progress file name ("p" + a number never reused by this instance).</summary>
    public string NextProgressFile() => SharedMemoryNames.HostFile(SharedMemoryNames.Progress, Interlocked.Increment(ref _progressFiles));

    /// <summary>Whether the policy lets the cache hold the blob at all (enabled, not do-not-cache).</summary>
    public bool Caches(string container, string blob) => Policy.Enabled && !Policy.DoNotCache(container, blob);

    /// <summary>A new extent of the arena (evicting if needed), or false when the object cannot be cached.</summary>
    public bool TryAllocate(long length, out Extent extent)
    {
        extent = default;
        return length <= Policy.MaxCachedBytes && Index.TryAllocate(length, out extent);
    }
}
