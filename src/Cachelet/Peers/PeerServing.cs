using FaaST.Cachelet.Bandwidth;
using FaaST.Cachelet.Index;
using FaaST.Cachelet.Memory;
using FaaST.Cachelet.Reads;
using FaaST.Cachelet.Telemetry;
using FaaST.Cachelet.Writes;
using FaaST.Storage;

namespace FaaST.Cachelet.Peers;

/// <summary>
/// This instance as the owner other instances ask (Faa$T §3.2): the domain side of the peer protocol
/// that src/Peers serves — lookups, fetching Gets (a remote miss is this owner's local miss), writes
/// through to this owner, invalidations, statistics.
/// </summary>
internal sealed class PeerServing(CacheCore core, ReadChain reads, WriteThrough through, WriteBehind behind, ConditionalWrites conditional,
    ParallelRangeFetch bandwidth)
{
    /// <summary>See <see cref="BlobCache.PeekForPeer"/>.</summary>
    public (long Length, string Version)? Peek(in BlobKey key) =>
        core.Index.TryPeek(key, out var entry) ? (entry.Length, entry.ETag) : null;

    /// <summary>See <see cref="BlobCache.OpenForPeerAsync"/>.</summary>
    public async Task<PeerObject> OpenAsync(IBlobStore store, BlobKey key, string ifVersion, bool fetch, bool validate, CancellationToken ct)
    {
        var index = core.Index;
        if (index.TryGet(key, out var entry))
        {
            var current = true;
            // Under owner/sync/owner the asker takes our copy as the current version: unchecked only if
            // this instance owns the key in its own view (the asker's view may be newer, and then the
            // copy may predate writes the old owner took) and validated it in the current epoch.
            if (validate || (core.Consistency.TrustsEpoch && (core.Ownership.OwnerOf(key) is not null || !core.Epoch.Trusts(entry))))
            {
                var matches = await reads.RevalidateAsync(store, key, entry, ct);
                if (matches is null)
                    return new PeerObject(PeerStatus.NotFound, default, false);
                current = matches.Value;
            }
            if (current)
            {
                if (ifVersion.Length > 0 && ifVersion == entry.ETag)
                    return new PeerObject(PeerStatus.NotModified, default, false);
                if (index.TryPin(entry, out var pin))
                {
                    ReadPaths.Count(core, key, ReadPath.LocalHit, entry.Length, fromEntry: true);
                    return new PeerObject(PeerStatus.Ok, CachedRead.FromEntry(entry, pin, ReadPath.LocalHit), false);
                }
            }
        }
        if (!fetch)
            return new PeerObject(PeerStatus.NotCached, default, false);
        // Fetched the way a local miss is (one fetch per key at a time, through the chain past the
        // owner: this instance is the owner). The fetch is not the requesting peer's to cancel: a peer
        // that gives up (its timeout, e.g. on a large remote miss) will ask again, as will others, so
        // the owner finishes it and caches the object; only shutdown stops it. The peer stops waiting,
        // and what it leaves pinned is released.
        while (true)
        {
            var (result, shared, mine) = await reads.FetchAsOwnerAsync(store, key, ReadPriority.OnDemand, countAccess: true, ct);
            if (result is not { } read)
                return new PeerObject(PeerStatus.NotFound, default, false);
            if (mine || read.Entry is null && read.File is null)
            {
                if (ifVersion.Length > 0 && ifVersion == read.ETag)
                {
                    read.Dispose();
                    return new PeerObject(PeerStatus.NotModified, default, false);
                }
                return new PeerObject(PeerStatus.Ok, read, true);
            }
            if (read.Entry is { } cached && (!core.Consistency.TrustsEpoch || core.Epoch.Trusts(cached)) && index.TryPin(cached, out var pin))
                return new PeerObject(PeerStatus.Ok, CachedRead.FromEntry(cached, pin, ReadPath.LocalMiss), true);
            reads.Forget(key, shared);
        }
    }

    /// <summary>See <see cref="BlobCache.AcceptPeerPutAsync"/>.</summary>
    public async Task<string> AcceptPutAsync(IBlobStore store, BlobKey key, Extent extent, bool uploadSync, CancellationToken ct,
        BlobWriteCondition condition = default)
    {
        core.Metrics.Write(extent.Length);
        if (uploadSync)
            return await through.AcceptAsOwnerAsync(store, key, extent, ct, condition);
        // owner/async/owner: the version the writer read may be one of this owner's pending writes, which only
        // this cache knows; it decides (storage when it does not hold the key).
        if (!condition.IsNone)
            return (await conditional.CommitIfCurrentAsync(store, key, extent, condition, core.Ownership.OwnerOf(key), ct)).ETag;
        return behind.Commit(store, key, extent, owned: core.Ownership.OwnerOf(key) is null);
    }

    /// <summary>See <see cref="BlobCache.AcceptPeerFileAsync"/>.</summary>
    public async Task<string> AcceptFileAsync(IBlobStore store, BlobKey key, Stream content, long length, CancellationToken ct,
        BlobWriteCondition condition = default)
    {
        BlobProperties written;
        try
        {
            written = await StorageUpload.FromStreamAsync(store, key, content, length, ct, condition);
        }
        catch (BlobConditionFailedException)
        {
            ConditionalWrites.DropStale(core, key, condition);
            throw;
        }
        core.Index.Remove(key); // an older cached version is stale now
        return written.ETag;
    }

    /// <summary>See <see cref="BlobCache.InvalidateFromPeer"/>.</summary>
    public bool Invalidate(in BlobKey key, string keepVersion)
    {
        core.Epoch.Distrust();
        return core.Index.TryGet(key, out var entry) && entry.ETag != keepVersion && core.Index.Remove(entry);
    }

    /// <summary>See <see cref="BlobCache.PeerStats"/>.</summary>
    public CacheStats Stats()
    {
        var reads = new Dictionary<string, long>(StringComparer.Ordinal);
        foreach (var path in Enum.GetValues<ReadPath>())
            reads[CacheletMetrics.PathName(path)] = core.Metrics.Reads(path);
        return new CacheStats(core.Ownership.SelfId, core.Index.Count, core.Arena.Allocated, core.Index.PinnedBytes, core.Index.Evictions, reads,
            bandwidth.Stats);
    }
}
