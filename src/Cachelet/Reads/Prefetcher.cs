using FaaST.Cachelet.Index;
using FaaST.Storage;

namespace FaaST.Cachelet.Reads;

/// <summary>
/// Loads objects this instance owns into the cache ahead of their reads (prewarm): no access counted
/// (no hit or miss, no statistics, no LRU touch of a cached object), no pin left behind (eviction can
/// take what was loaded), and storage reads at the priority asked for, so a flood of background
/// prefetches never holds an invocation's read back (<see cref="StorageReadScheduler"/>).
/// </summary>
internal sealed class Prefetcher(CacheCore core, ReadChain chain)
{
    public async ValueTask<PrefetchOutcome> PrefetchAsync(IBlobStore store, string container, string blob, ReadPriority priority, CancellationToken ct)
    {
        if (!core.Caches(container, blob))
            return PrefetchOutcome.NotCacheable;
        var key = new BlobKey(store.Endpoint.AbsoluteUri, container, blob);
        if (core.Ownership.OwnerOf(key) is not null)
            return PrefetchOutcome.NotOwned;
        if (core.Index.TryPeek(key, out _))
            return PrefetchOutcome.AlreadyCached;
        try
        {
            // Through the chain as the owner's miss (tiers, then storage), shared with any reader of
            // the key meanwhile: a reader that joins gets it as a hit, one already fetching keeps it.
            var (result, _, mine) = await chain.FetchAsOwnerAsync(store, key, priority, countAccess: false, ct);
            if (result is not { } read)
                return PrefetchOutcome.NotFound;
            var cached = read.Entry is not null;
            if (!mine)
                return cached ? PrefetchOutcome.AlreadyCached : PrefetchOutcome.NoRoom; // the starter's to release
            read.Dispose(); // unpins (or deletes the file of an object there was no room for)
            return cached ? PrefetchOutcome.Loaded : PrefetchOutcome.NoRoom;
        }
        catch (Exception e) when (e is not OperationCanceledException || !ct.IsCancellationRequested)
        {
            Log.PrefetchFailed(core.Logger, container, blob, e.Message);
            return PrefetchOutcome.Failed;
        }
    }
}
