namespace FaaST.Cachelet.Index;

/// <summary>A key's accesses by kind, as <see cref="ObjectStats"/> counts them (they survive eviction).</summary>
public readonly record struct AccessCounts(long LocalHits, long RemoteHits, long LocalMisses, long RemoteMisses, long Writes,
    long Evictions, long Expirations)
{
    /// <summary>Reads of every kind (hits and misses, local and remote).</summary>
    public long Reads => LocalHits + RemoteHits + LocalMisses + RemoteMisses;

    internal static AccessCounts Of(ObjectStats s) =>
        new(s.LocalHits, s.RemoteHits, s.LocalMisses, s.RemoteMisses, s.Writes, s.Evictions, s.Expirations);
}

/// <summary>
/// One cached object at the moment of a <see cref="CacheIndex.Snapshot"/>: an immutable copy, safe to
/// keep and hand to another thread (it holds no pin: the object may be gone by the time it is read).
/// </summary>
/// <param name="Key">Account, container and blob.</param>
/// <param name="Length">Object bytes.</param>
/// <param name="ETag">The cached version.</param>
/// <param name="Owned">This cachelet owns the key (consistent hashing).</param>
/// <param name="Owner">The owning instance's id, when the snapshot was taken through <c>BlobCache</c>
/// with membership; null from the index alone or without membership.</param>
/// <param name="Pins">Readers holding it at the moment.</param>
/// <param name="Age">Since this version was cached (by the index's clock).</param>
/// <param name="Idle">Since it was last looked up.</param>
/// <param name="Accesses">The key's accesses by kind (all versions, since its statistics were created).</param>
/// <param name="InterArrival">The key's inter-arrival histogram.</param>
public sealed record CacheEntrySnapshot(BlobKey Key, long Length, string ETag, bool Owned, string? Owner, int Pins, TimeSpan Age,
    TimeSpan Idle, AccessCounts Accesses, InterArrivalSummary InterArrival);

/// <summary>Why an object left the cache.</summary>
public enum EvictionReason
{
    /// <summary>Evicted to make room (policy order); handed to the eviction sinks.</summary>
    Space,
    /// <summary>Its TTL ran out; handed to the eviction sinks.</summary>
    Expired,
    /// <summary>Removed as stale (a write elsewhere, an invalidation, a failed check); never handed to a sink.</summary>
    Invalidated,
}

/// <summary>An object that left the cache (see <see cref="CacheIndex.RecentlyEvicted"/>, <see cref="Sources.IEvictionSink"/>).</summary>
/// <param name="At">Wall-clock time it left.</param>
public sealed record EvictedObject(BlobKey Key, long Length, string ETag, EvictionReason Reason, DateTimeOffset At);

/// <summary>
/// The last N objects that left the index, newest last: a fixed ring under a small lock, written
/// only on the eviction paths (never on a hit), read by <see cref="CacheIndex.RecentlyEvicted"/>.
/// </summary>
internal sealed class RecentEvictions(int capacity)
{
    private readonly EvictedObject?[] _ring = new EvictedObject?[capacity];
    private readonly Lock _lock = new();
    private long _written;

    public static EvictedObject Describe(CacheEntry entry, EvictionReason reason) =>
        new(entry.Key, entry.Length, entry.ETag, reason, DateTimeOffset.UtcNow);

    public EvictedObject Add(CacheEntry entry, EvictionReason reason)
    {
        var evicted = Describe(entry, reason);
        lock (_lock)
            _ring[_written++ % _ring.Length] = evicted;
        return evicted;
    }

    /// <summary>Newest first.</summary>
    public EvictedObject[] ToArray()
    {
        lock (_lock)
        {
            var n = (int)Math.Min(_written, _ring.Length);
            var result = new EvictedObject[n];
            for (var i = 0; i < n; i++)
                result[i] = _ring[(_written - 1 - i) % _ring.Length]!;
            return result;
        }
    }
}
