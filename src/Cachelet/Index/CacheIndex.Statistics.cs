using System.Diagnostics.CodeAnalysis;

namespace FaaST.Cachelet.Index;

/// <summary>Per-key statistics (kept apart from entries so they survive eviction) and the per-interval activity query.</summary>
public sealed partial class CacheIndex
{
    // ---- statistics ---------------------------------------------------------------------

    /// <summary>The key's statistics, created if needed.</summary>
    public ObjectStats GetStats(in BlobKey key)
    {
        if (_entries.TryGetValue(key, out var entry))
            return entry.Stats;
        return GetOrCreateStats(key);
    }

    /// <summary>The key's statistics if any are kept.</summary>
    public bool TryGetStats(in BlobKey key, [NotNullWhen(true)] out ObjectStats? stats) => _stats.TryGetValue(key, out stats);

    /// <summary>A read served from this cachelet.</summary>
    public void RecordLocalHit(in BlobKey key) => GetStats(key).RecordLocalHit(_clock());

    /// <summary>A read served by the owner's cachelet.</summary>
    public void RecordRemoteHit(in BlobKey key) => GetStats(key).RecordRemoteHit(_clock());

    /// <summary>A read this cachelet (the owner) fetched from storage.</summary>
    public void RecordLocalMiss(in BlobKey key) => GetStats(key).RecordLocalMiss(_clock());

    /// <summary>A read the owner fetched from storage for this cachelet.</summary>
    public void RecordRemoteMiss(in BlobKey key) => GetStats(key).RecordRemoteMiss(_clock());

    /// <summary>A write of the key through this cachelet.</summary>
    public void RecordWrite(in BlobKey key) => GetStats(key).RecordWrite(_clock());

    /// <summary>
    /// What the cache did since the previous call (the scale controller's per-interval query, Faa$T §4):
    /// evictions, objects evicted more than once, accesses, and accesses to cached objects of at least
    /// <paramref name="largeObjectBytes"/>. One pass over the statistics without the index's lock; an
    /// object whose statistics were trimmed meanwhile is not counted.
    /// </summary>
    public CacheActivity TakeActivity(long largeObjectBytes)
    {
        long evictedTwice = 0, accesses = 0, large = 0;
        foreach (var (key, stats) in _stats)
        {
            var (e, a) = stats.TakeSinceQuery();
            if (e > 1)
                evictedTwice++;
            accesses += a;
            if (a > 0 && _entries.TryGetValue(key, out var entry) && entry.Length >= largeObjectBytes)
                large += a;
        }
        var evictions = Evictions;
        return new CacheActivity(evictions - Interlocked.Exchange(ref _evictionsAtQuery, evictions), evictedTwice, accesses, large);
    }

    private ObjectStats GetOrCreateStats(in BlobKey key)
    {
        var stats = GetOrCreateStats(key, out var overLimit);
        if (overLimit)
            TrimStats();
        return stats;
    }

    /// <summary>Without trimming (the caller trims once the key's entry, if any, is in the index).</summary>
    private ObjectStats GetOrCreateStats(in BlobKey key, out bool overLimit)
    {
        overLimit = false;
        while (true)
        {
            if (_stats.TryGetValue(key, out var stats))
                return stats;
            var fresh = new ObjectStats(key);
            if (_stats.TryAdd(key, fresh))
            {
                overLimit = Interlocked.Increment(ref _trackedKeys) > _options.MaxTrackedKeys;
                return fresh;
            }
        }
    }

    /// <summary>Drops the statistics of uncached keys, least recently accessed first, down to 3/4 of the limit.</summary>
    private void TrimStats()
    {
        if (!_trimLock.TryEnter())
            return; // another thread is trimming
        try
        {
            var excess = Volatile.Read(ref _trackedKeys) - _options.MaxTrackedKeys * 3 / 4;
            if (excess <= 0)
                return;
            var candidates = new List<ObjectStats>();
            foreach (var (key, stats) in _stats)
            {
                if (!_entries.ContainsKey(key))
                    candidates.Add(stats);
            }
            candidates.Sort(static (a, b) => (a.LastAccess ?? long.MinValue).CompareTo(b.LastAccess ?? long.MinValue));
            foreach (var stats in candidates)
            {
                if (excess == 0)
                    break;
                lock (_lock)
                {
                    // Installs take this lock too, so a key being cached right now keeps its record.
                    if (_entries.ContainsKey(stats.Key) || !_stats.TryRemove(new KeyValuePair<BlobKey, ObjectStats>(stats.Key, stats)))
                        continue;
                }
                Interlocked.Decrement(ref _trackedKeys);
                excess--;
            }
        }
        finally
        {
            _trimLock.Exit();
        }
    }
}
