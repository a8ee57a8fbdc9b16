using FaaST.Cachelet.Index;
using FaaST.Cachelet.Memory;
using FaaST.Cachelet.Peers;
using FaaST.Storage;

namespace FaaST.Cachelet.Writes;

/// <summary>
/// Write-through (the sync presets): the write completes once its destination has it — the owner
/// (which uploads before answering) or storage — and the cache then holds the version that
/// destination acknowledged.
/// </summary>
internal sealed class WriteThrough(CacheCore core)
{
    /// <summary>
    /// Sends a written extent to <paramref name="owner"/> when <paramref name="toOwner"/> (storage if it
    /// cannot take it), else to storage, then caches it. The cache owns the extent afterwards (freed on failure).
    /// With a <paramref name="condition"/>, whichever of them takes the write decides it: storage by If-Match /
    /// If-None-Match, the owner as its preset says; a failed one throws <see cref="BlobConditionFailedException"/>
    /// and a copy here of the version the writer read, stale now, is dropped.
    /// </summary>
    public async ValueTask<BlobProperties> CommitAsync(IBlobStore store, BlobKey key, Extent extent, Peer? owner, bool toOwner, CancellationToken ct,
        BlobWriteCondition condition = default)
    {
        var epoch = core.Epoch.Current; // before the upload, as for a fetch
        string? ownerVersion = null;
        string version;
        try
        {
            if (toOwner)
                ownerVersion = await core.Peers.TryPutAsync(key, extent, owner!, uploadSync: true, ct, condition);
            version = ownerVersion ?? (await StorageUpload.FromExtentAsync(store, key, extent, ct, condition)).ETag;
        }
        catch (BlobConditionFailedException)
        {
            core.Arena.Free(extent);
            ConditionalWrites.DropStale(core, key, condition);
            throw;
        }
        catch
        {
            core.Arena.Free(extent);
            throw;
        }
        // Validated here only if this instance uploaded it; the owner's version is the owner's word.
        core.Index.AddOrReplace(key, version, extent, owned: owner is null, validatedEpoch: ownerVersion is null ? epoch : CacheEntry.NotValidated);
        core.Index.RecordWrite(key);
        if (owner is not null && !toOwner)
            core.Peers.InvalidateAtOwner(owner, key, version);
        else if (toOwner && ownerVersion is null)
            await core.Peers.InvalidateEverywhereAsync(key, version, owner!);
        return new BlobProperties(version, extent.Length, DateTimeOffset.UtcNow, null);
    }

    /// <summary>
    /// A peer's write taken by this owner: uploaded before answering (under <paramref name="condition"/>, which
    /// storage then decides), then cached; storage's version.
    /// </summary>
    public async Task<string> AcceptAsOwnerAsync(IBlobStore store, BlobKey key, Extent extent, CancellationToken ct,
        BlobWriteCondition condition = default)
    {
        var epoch = core.Epoch.Current; // before the upload, as for a fetch
        BlobProperties written;
        try
        {
            written = await StorageUpload.FromExtentAsync(store, key, extent, ct, condition);
        }
        catch (BlobConditionFailedException)
        {
            core.Arena.Free(extent);
            ConditionalWrites.DropStale(core, key, condition);
            throw;
        }
        catch
        {
            core.Arena.Free(extent);
            throw;
        }
        core.Index.AddOrReplace(key, written.ETag, extent, owned: core.Ownership.OwnerOf(key) is null, validatedEpoch: epoch);
        core.Index.RecordWrite(key);
        return written.ETag;
    }
}
