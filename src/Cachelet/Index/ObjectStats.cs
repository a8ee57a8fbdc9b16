using System.Diagnostics;

namespace FaaST.Cachelet.Index;

/// <summary>
/// What the cachelet knows about one key's use, kept apart from the cached entry so that it
/// survives eviction and re-insertion (prewarm and the cache-size vote need the history). Counters
/// are updated with Interlocked and may be read at any time.
/// </summary>
public sealed class ObjectStats
{
    private long _localHits;
    private long _remoteHits;
    private long _localMisses;
    private long _remoteMisses;
    private long _writes;
    private long _evictions;
    private long _expirations;
    private long _accesses;
    private long _firstAccess = long.MinValue;
    private long _lastAccess = long.MinValue;
    // What the previous activity query saw (CacheIndex.TakeActivity): the vote counts since then.
    private long _evictionsAtQuery;
    private long _accessesAtQuery;
    // Inter-arrival histogram and extremes (Stopwatch ticks; long.MaxValue / 0 while no gap was seen).
    private InterArrivalBuckets _gaps;
    private long _minGap = long.MaxValue;
    private long _maxGap;

    internal ObjectStats(BlobKey key) => Key = key;

    public BlobKey Key { get; }

    public long LocalHits => Volatile.Read(ref _localHits);

    public long RemoteHits => Volatile.Read(ref _remoteHits);

    public long LocalMisses => Volatile.Read(ref _localMisses);

    public long RemoteMisses => Volatile.Read(ref _remoteMisses);

    public long Writes => Volatile.Read(ref _writes);

    /// <summary>Times the key was evicted to make room (not counting TTL expiry).</summary>
    public long Evictions => Volatile.Read(ref _evictions);

    /// <summary>Times the key was dropped because its TTL ran out.</summary>
    public long Expirations => Volatile.Read(ref _expirations);

    /// <summary>Recorded accesses: hits, misses and writes of either kind.</summary>
    public long Accesses => Volatile.Read(ref _accesses);

    /// <summary>Stopwatch timestamp (in the index's clock) of the last recorded access; null if none.</summary>
    public long? LastAccess => Volatile.Read(ref _lastAccess) is var t && t != long.MinValue ? t : null;

    /// <summary>
    /// Mean time between recorded accesses: the gaps telescope, so the running mean of n−1 gaps is
    /// (last − first)/(n − 1), kept exactly with two timestamps and a count. Zero below two accesses.
    /// </summary>
    public TimeSpan MeanInterArrival
    {
        get
        {
            var n = Accesses;
            var first = Volatile.Read(ref _firstAccess);
            var last = Volatile.Read(ref _lastAccess);
            if (n < 2 || first == long.MinValue || last <= first)
                return TimeSpan.Zero;
            return Stopwatch.GetElapsedTime(first, last) / (n - 1);
        }
    }

    /// <summary>
    /// The gaps between accesses so far (a moment's view: counters read one by one, without a lock,
    /// while accesses may go on).
    /// </summary>
    public InterArrivalSummary InterArrival
    {
        get
        {
            var buckets = new long[Index.InterArrival.BucketCount];
            long count = 0;
            for (var i = 0; i < buckets.Length; i++)
                count += buckets[i] = (uint)Volatile.Read(ref _gaps[i]);
            var min = Volatile.Read(ref _minGap);
            var max = Volatile.Read(ref _maxGap);
            return new InterArrivalSummary(count, MeanInterArrival,
                count == 0 || min == long.MaxValue ? TimeSpan.Zero : Stopwatch.GetElapsedTime(0, min),
                Stopwatch.GetElapsedTime(0, max), buckets);
        }
    }

    internal void RecordLocalHit(long now) => Access(ref _localHits, now);

    internal void RecordRemoteHit(long now) => Access(ref _remoteHits, now);

    internal void RecordLocalMiss(long now) => Access(ref _localMisses, now);

    internal void RecordRemoteMiss(long now) => Access(ref _remoteMisses, now);

    internal void RecordWrite(long now) => Access(ref _writes, now);

    internal void RecordEviction() => Interlocked.Increment(ref _evictions);

    internal void RecordExpiration() => Interlocked.Increment(ref _expirations);

    /// <summary>
    /// Evictions and accesses since the previous call, which becomes the new mark. Lock-free; concurrent
    /// callers split the counts between them (each counted once).
    /// </summary>
    internal (long Evictions, long Accesses) TakeSinceQuery()
    {
        var evictions = Evictions;
        var accesses = Accesses;
        return (evictions - Interlocked.Exchange(ref _evictionsAtQuery, evictions), accesses - Interlocked.Exchange(ref _accessesAtQuery, accesses));
    }

    private void Access(ref long counter, long now)
    {
        Interlocked.Increment(ref counter);
        Interlocked.Increment(ref _accesses);
        Interlocked.CompareExchange(ref _firstAccess, now, long.MinValue);
        var last = Volatile.Read(ref _lastAccess);
        while (true)
        {
            if (now <= last)
            {
                // A concurrent access got in with the same or a later time: a gap of (about) nothing.
                RecordGap(0);
                return;
            }
            var seen = Interlocked.CompareExchange(ref _lastAccess, now, last);
            if (seen == last)
                break;
            last = seen;
        }
        if (last != long.MinValue)
            RecordGap(now - last);
    }

    /// <summary>One Interlocked increment; the extremes are written only when they move (rare once warm).</summary>
    private void RecordGap(long ticks)
    {
        Interlocked.Increment(ref _gaps[Index.InterArrival.BucketOf(ticks)]);
        var min = Volatile.Read(ref _minGap);
        while (ticks < min)
        {
            var seen = Interlocked.CompareExchange(ref _minGap, ticks, min);
            if (seen == min)
                break;
            min = seen;
        }
        var max = Volatile.Read(ref _maxGap);
        while (ticks > max)
        {
            var seen = Interlocked.CompareExchange(ref _maxGap, ticks, max);
            if (seen == max)
                break;
            max = seen;
        }
    }

    public override string ToString() =>
        $"{Key}: LH {LocalHits} RH {RemoteHits} LM {LocalMisses} RM {RemoteMisses} W {Writes} evicted {Evictions} expired {Expirations}";
}
