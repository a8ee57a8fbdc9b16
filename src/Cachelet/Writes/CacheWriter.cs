using FaaST.Cachelet.Consistency;
using FaaST.Cachelet.Index;
using FaaST.Cachelet.Memory;
using FaaST.Cachelet.Telemetry;
using FaaST.Storage;

namespace FaaST.Cachelet.Writes;

/// <summary>
/// An output binding's write: into the cache when it can hold it (a copy into a new extent, or the
/// worker's own file adopted without a copy), then along the write path the preset's
/// <see cref="ConsistencyStrategy"/> names (<see cref="WriteThrough"/>, <see cref="WriteBehind"/>);
/// straight to storage when the cache cannot hold it.
/// </summary>
internal sealed class CacheWriter(CacheCore core, WriteThrough through, WriteBehind behind)
{
    /// <summary>See <see cref="BlobCache.WriteAsync"/>.</summary>
    public ValueTask<BlobProperties> WriteAsync(IBlobStore store, string container, string blob, ReadOnlyMemory<byte> content, CancellationToken ct)
    {
        if (!core.Caches(container, blob) || !core.TryAllocate(content.Length, out var extent))
            return new ValueTask<BlobProperties>(store.UploadAsync(container, blob, content, ct: ct));
        content.Span.CopyTo(extent.Span);
        return CommitAsync(store, new BlobKey(store.Endpoint.AbsoluteUri, container, blob), extent, ct);
    }

    /// <summary>See <see cref="BlobCache.WriteFileAsync"/>.</summary>
    public async ValueTask<BlobProperties> WriteFileAsync(IBlobStore store, string container, string blob, string fileName, long length, CancellationToken ct)
    {
        WorkerFile file;
        try
        {
            file = core.Arena.OpenWorkerFile(fileName, length);
        }
        catch (Exception e) when (e is ArgumentException or FileNotFoundException)
        {
            throw new InvalidOperationException($"output for {container}/{blob}: the worker named an unusable shared-memory file: {e.Message}", e);
        }
        using (file)
        {
            // The index makes room as for any allocation: evicting, and taking back queued demotions, so a full
            // arena whose evicted bytes still wait for an eviction sink does not turn a cacheable write uncached.
            if (core.Caches(container, blob) && length <= core.Policy.MaxCachedBytes && core.Index.TryAdopt(file, out var adopted))
                return await CommitAsync(store, new BlobKey(store.Endpoint.AbsoluteUri, container, blob), adopted, ct);
            await using var content = file.OpenRead();
            return await store.UploadAsync(container, blob, content, length, ct: ct);
        }
    }

    /// <summary>
    /// Caches a written object and sends it where the preset says: to the owner (owner/* presets, when
    /// the owner is another instance), else to storage; synchronously or in the background.
    /// </summary>
    private async ValueTask<BlobProperties> CommitAsync(IBlobStore store, BlobKey key, Extent extent, CancellationToken ct)
    {
        using var span = CacheletMetrics.Activities.StartActivity("cachelet.write");
        span?.SetTag("blob", key.Container + "/" + key.Blob);
        core.Metrics.Write(extent.Length);
        var owner = core.Ownership.OwnerOf(key);
        var toOwner = core.Consistency.WritesToOwner(ownedElsewhere: owner is not null);
        if (core.Consistency.Write == WritePath.Through)
            return await through.CommitAsync(store, key, extent, owner, toOwner, ct);
        if (toOwner)
        {
            // owner/async: written through to the owner's cache before returning (so a read at the
            // owner sees it), which uploads it in the background. If the owner cannot take it,
            // storage gets it in the background from here.
            string? version;
            try
            {
                version = await core.Peers.TryPutAsync(key, extent, owner!, uploadSync: false, ct);
            }
            catch
            {
                core.Arena.Free(extent);
                throw;
            }
            if (version is not null)
            {
                core.Index.AddOrReplace(key, version, extent, owned: false);
                core.Index.RecordWrite(key);
                return new BlobProperties(version, extent.Length, DateTimeOffset.UtcNow, null);
            }
        }
        // Write-behind: the cache has the new version now; storage gets it in the background.
        var provisional = behind.Commit(store, key, extent, owned: owner is null);
        return new BlobProperties(provisional, extent.Length, DateTimeOffset.UtcNow, null);
    }
}
