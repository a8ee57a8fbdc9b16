using FaaST.Cachelet.Memory;

namespace FaaST.Cachelet.Index;

/// <summary>Making room: allocation with eviction, eviction by policy and TTL, and where evicted objects go.</summary>
public sealed partial class CacheIndex
{
    /// <summary>
    /// Allocates from the arena, evicting (by policy, never pinned entries) while it is full: up to
    /// 8 rounds, each asking for twice as many bytes as the last. False if that does not make room.
    /// With eviction sinks, the victims wait in the demotion queue with their memory still allocated;
    /// this never waits for them: when the allocation still fails, it takes back the newest demotions
    /// not yet started (dropping them) until it succeeds (see <see cref="Demotion.DemotionQueue"/>).
    /// </summary>
    public bool TryAllocate(long length, out Extent extent) =>
        WithRoom(length, (_arena, length), static ((SharedMemoryArena Arena, long Length) s, out Extent e) => s.Arena.TryAllocate(s.Length, out e),
            out extent);

    /// <summary>
    /// <see cref="SharedMemoryArena.TryAdopt(WorkerFile, out Extent)"/> (a worker's output taken into
    /// the arena), making room the way <see cref="TryAllocate"/> does: a write never waits for a sink
    /// either. False if that does not make room; the file is then still the caller's.
    /// </summary>
    public bool TryAdopt(WorkerFile file, out Extent extent)
    {
        ArgumentNullException.ThrowIfNull(file);
        return WithRoom(file.Length, (_arena, file), static ((SharedMemoryArena Arena, WorkerFile File) s, out Extent e) => s.Arena.TryAdopt(s.File, out e),
            out extent);
    }

    private delegate bool Attempt<TState>(TState state, out Extent extent);

    /// <summary>Tries <paramref name="attempt"/>, evicting and taking back queued demotions between tries (static lambdas: no allocation).</summary>
    private bool WithRoom<TState>(long length, TState state, Attempt<TState> attempt, out Extent extent)
    {
        if (attempt(state, out extent))
            return Allocated();
        if (length > _arena.Capacity)
            return false;
        for (var round = 0; round < 8; round++)
        {
            var evicted = Evict(Math.Max(length, 1) << round).Objects;
            if (attempt(state, out extent))
                return Allocated();
            // The victims may be waiting for the sinks with their memory: a miss does not wait for them.
            while (_demotion is not null && _demotion.TryReclaimNewest())
            {
                if (attempt(state, out extent))
                    return Allocated();
            }
            if (evicted == 0)
                return false; // nothing left to evict
        }
        return false;
    }

    /// <summary>With sinks: past the budget, the pump is asked to evict ahead (two reads and a compare when not).</summary>
    private bool Allocated()
    {
        if (_demotion is not null && _arena.Used - _demotion.PendingBytes > _cachedBudget)
            _demotion.RequestRoom();
        return true;
    }

    /// <summary>On the pump's thread: evicts what the cached bytes are over the budget by (see <see cref="Demotion.DemotionQueue"/>).</summary>
    private void EvictAhead()
    {
        var excess = _arena.Used - _demotion!.PendingBytes - _cachedBudget;
        if (excess > 0)
            Evict(excess);
    }

    // ---- eviction -----------------------------------------------------------------------

    /// <summary>
    /// Evicts until at least <paramref name="bytesNeeded"/> object bytes left the index, or nothing
    /// unpinned is left: expired entries first (all of them), then the policy's tiers in order, LRU
    /// (sampled) within a tier. Never evicts a pinned entry. Synchronous: it only moves pointers and
    /// frees extents.
    /// </summary>
    public EvictionResult Evict(long bytesNeeded)
    {
        var objects = 0;
        long bytes = 0;
        lock (_evictLock)
        {
            var expired = RemoveExpired();
            objects += expired.Objects;
            bytes += expired.Bytes;
            for (var tier = 0; tier < _tiers.Length && bytes < bytesNeeded; tier++)
            {
                var pinnedRounds = 0;
                while (bytes < bytesNeeded)
                {
                    var victim = TakeVictim(_tiers[tier], ref pinnedRounds, out var tierDone);
                    if (tierDone)
                        break;
                    if (victim is null)
                        continue;
                    victim.Stats.RecordEviction();
                    Interlocked.Increment(ref _evictions);
                    objects++;
                    bytes += victim.Length;
                    LeftForGood(victim, EvictionReason.Space);
                }
            }
        }
        return new EvictionResult(objects, bytes);
    }

    /// <summary>Evicts every entry past its TTL (none without a TTL) that is not pinned.</summary>
    public EvictionResult RemoveExpired()
    {
        if (_ttlTicks == 0)
            return default;
        var now = _clock();
        List<CacheEntry>? removed = null;
        lock (_lock)
        {
            for (var i = _expiredPinned.Count - 1; i >= 0; i--)
            {
                var e = _expiredPinned[i];
                if (e.Slot < 0)
                {
                    _expiredPinned.RemoveAt(i); // replaced or removed meanwhile: its retirement frees it
                }
                else if (TryRemoveUnpinned(e))
                {
                    _expiredPinned.RemoveAt(i);
                    (removed ??= []).Add(e);
                }
            }
            while (_byInsertion.TryPeek(out var head))
            {
                if (head.Slot < 0)
                {
                    _byInsertion.Dequeue(); // already gone
                    continue;
                }
                if (now - head.InsertedAt < _ttlTicks)
                    break;
                _byInsertion.Dequeue();
                if (TryRemoveUnpinned(head))
                    (removed ??= []).Add(head);
                else
                    _expiredPinned.Add(head); // evicted once unpinned
            }
        }
        if (removed is null)
            return default;
        long bytes = 0;
        foreach (var e in removed)
        {
            e.Stats.RecordExpiration();
            Interlocked.Increment(ref _expirations);
            bytes += e.Length;
            LeftForGood(e, EvictionReason.Expired);
        }
        return new EvictionResult(removed.Count, bytes);
    }

    /// <summary>
    /// Under the mutation lock: samples the tier and removes the least recently used unpinned
    /// candidate. Null with <paramref name="tierDone"/> false: try again (all samples pinned, or a
    /// race with a pin). <paramref name="tierDone"/>: the tier has nothing unpinned.
    /// </summary>
    private CacheEntry? TakeVictim(Tier tier, ref int pinnedRounds, out bool tierDone)
    {
        lock (_lock)
        {
            var n = tier.Count;
            tierDone = n == 0;
            if (tierDone)
                return null;
            CacheEntry? best = null;
            var k = _options.SampleSize;
            if (n <= k || pinnedRounds >= AllPinnedRounds)
            {
                // Small tier, or sampling keeps finding pinned entries: look at all of it (rare).
                for (var i = 0; i < n; i++)
                    best = Better(best, tier.Items[i]!);
            }
            else
            {
                for (var i = 0; i < k; i++)
                    best = Better(best, tier.Items[_random.Next(n)]!);
            }
            if (best is null)
            {
                pinnedRounds++;
                tierDone = n <= k || pinnedRounds > AllPinnedRounds;
                return null;
            }
            pinnedRounds = 0;
            return TryRemoveUnpinned(best) ? best : null;
        }

        static CacheEntry? Better(CacheEntry? best, CacheEntry candidate) =>
            candidate.Pins == 0 && (best is null || candidate.LastAccess < best.LastAccess) ? candidate : best;
    }

    /// <summary>Mutation lock held: retires and unlinks an unpinned current entry; the caller frees its extent.</summary>
    private bool TryRemoveUnpinned(CacheEntry entry)
    {
        if (!entry.TryRetireUnpinned())
            return false;
        _entries.TryRemove(new KeyValuePair<BlobKey, CacheEntry>(entry.Key, entry));
        Unlink(entry);
        return true;
    }

    /// <summary>
    /// An entry evicted for space or expired (out of the index, retired, unpinned): remembered among
    /// the recently evicted, then handed to the demotion queue, which frees its extent once the sinks
    /// are done or the demotion is dropped; without sinks, freed now.
    /// </summary>
    private void LeftForGood(CacheEntry entry, EvictionReason reason)
    {
        var evicted = _recent?.Add(entry, reason);
        if (_demotion is null)
            ReleaseExtent(entry, retiredWhilePinned: false);
        else
            _demotion.Offer(evicted ?? RecentEvictions.Describe(entry, reason), entry);
    }
}
