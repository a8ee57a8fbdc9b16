namespace FaaST.Cachelet;

/// <summary>What a cachelet did over one interval (between two <see cref="BlobCache.TakeActivity"/> calls).</summary>
/// <param name="Evictions">Objects evicted to make room.</param>
/// <param name="ObjectsEvictedTwice">Objects evicted more than once: the working set does not fit (the cache-size vote).</param>
/// <param name="Accesses">Reads (hits and misses) and writes.</param>
/// <param name="LargeObjectAccesses">Accesses to cached objects at least as large as asked (the bandwidth vote).</param>
public readonly record struct CacheActivity(long Evictions, long ObjectsEvictedTwice, long Accesses, long LargeObjectAccesses);
