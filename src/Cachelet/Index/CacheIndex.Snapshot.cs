using System.Diagnostics;
using FaaST.Cachelet.Demotion;

namespace FaaST.Cachelet.Index;

/// <summary>What the index shows of itself to the components above the cache (prewarm, a flash tier, notebooks).</summary>
public sealed partial class CacheIndex
{
    /// <summary>
    /// An immutable copy of every cached entry with its statistics, taken without any lock: one pass
    /// over the concurrent dictionary while reads, adds and evictions go on (each entry is copied as
    /// it is at that moment; one added or removed during the pass may be in it or not). Allocates the
    /// copy only: the hit path is not slowed. <paramref name="ownerOf"/> names each key's owner
    /// (<see cref="CacheEntrySnapshot.Owner"/>); without it owners are null.
    /// </summary>
    public IReadOnlyList<CacheEntrySnapshot> Snapshot(Func<BlobKey, string?>? ownerOf = null)
    {
        var now = _clock();
        var result = new List<CacheEntrySnapshot>(Count);
        foreach (var entry in _entries.Values)
        {
            var stats = entry.Stats;
            result.Add(new CacheEntrySnapshot(entry.Key, entry.Length, entry.ETag, entry.Owned, ownerOf?.Invoke(entry.Key), entry.Pins,
                Elapsed(entry.InsertedAt, now), Elapsed(entry.LastAccess, now), AccessCounts.Of(stats), stats.InterArrival));
        }
        return result.AsReadOnly();
    }

    /// <summary>
    /// The last objects that left the index (<see cref="CacheIndexOptions.RecentlyEvictedCapacity"/> of
    /// them), newest first, with size, ETag and why: evicted for space, expired, or removed as stale.
    /// A version replaced by a newer one is not listed (the key is still cached).
    /// </summary>
    public IReadOnlyList<EvictedObject> RecentlyEvicted() => _recent?.ToArray() ?? [];

    /// <summary>The demotion queue's figures (all zero without eviction sinks).</summary>
    public DemotionStats Demotions => _demotion?.Stats ?? default;

    private static TimeSpan Elapsed(long from, long to) => to > from ? Stopwatch.GetElapsedTime(from, to) : TimeSpan.Zero;
}
