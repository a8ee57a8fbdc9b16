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
internal sealed class CacheWriter(CacheCore core, WriteThrough through, WriteBehind behind, ConditionalWrites conditional)
{
    /// <summary>See <see cref="BlobCache.WriteAsync"/>.</summary>
    public ValueTask<BlobProperties> WriteAsync(IBlobStore store, string container, string blob, ReadOnlyMemory<byte> content, CancellationToken ct,
        BlobWriteCondition condition = default)
    {
        if (!core.Caches(container, blob) || !core.TryAllocate(content.Length, out var extent))
            return condition.IsNone
                ? new ValueTask<BlobProperties>(store.UploadAsync(container, blob, content, ct: ct))
                : UncachedAsync(store, container, blob, content, condition, ct);
        content.Span.CopyTo(extent.Span);
        return CommitAsync(store, new BlobKey(store.Endpoint.AbsoluteUri, container, blob), extent, condition, ct);
    }

    /// <summary>A conditional write the cache cannot hold: storage decides, and a stale cached copy goes either way.</summary>
    private async ValueTask<BlobProperties> UncachedAsync(IBlobStore store, string container, string blob, ReadOnlyMemory<byte> content,
        BlobWriteCondition condition, CancellationToken ct)
    {
        var key = new BlobKey(store.Endpoint.AbsoluteUri, container, blob);
        try
        {
            return await store.UploadAsync(container, blob, content, ifMatch: condition.IfMatch, ifNoneMatch: condition.IfNoneMatch, ct: ct);
        }
        finally
        {
            // Written or not, the version read is not the current one any more (or never will be).
            ConditionalWrites.DropStale(core, key, condition);
        }
    }

    /// <summary>See <see cref="BlobCache.WriteFileAsync"/>.</summary>
    public async ValueTask<BlobProperties> WriteFileAsync(IBlobStore store, string container, string blob, string fileName, long length, CancellationToken ct,
        BlobWriteCondition condition = default)
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
                return await CommitAsync(store, new BlobKey(store.Endpoint.AbsoluteUri, container, blob), adopted, condition, ct);
            await using var content = file.OpenRead();
            if (condition.IsNone)
                return await store.UploadAsync(container, blob, content, length, ct: ct);
            var key = new BlobKey(store.Endpoint.AbsoluteUri, container, blob);
            try
            {
                return await store.UploadAsync(container, blob, content, length, ifMatch: condition.IfMatch, ifNoneMatch: condition.IfNoneMatch, ct: ct);
            }
            finally
            {
                ConditionalWrites.DropStale(core, key, condition);
            }
        }
    }

    /// <summary>
    /// Caches a written object and sends it where the preset says: to the owner (owner/* presets, when
    /// the owner is another instance), else to storage; synchronously or in the background. A conditional
    /// write is decided where it goes: by storage when written through, by the owner when sent there, by
    /// this cache under a write-behind preset that keeps it here (<see cref="ConditionalWrites"/>).
    /// </summary>
    private async ValueTask<BlobProperties> CommitAsync(IBlobStore store, BlobKey key, Extent extent, BlobWriteCondition condition, CancellationToken ct)
    {
        using var span = CacheletMetrics.Activities.StartActivity("cachelet.write");
        span?.SetTag("blob", key.Container + "/" + key.Blob);
        core.Metrics.Write(extent.Length);
        var owner = core.Ownership.OwnerOf(key);
        var toOwner = core.Consistency.WritesToOwner(ownedElsewhere: owner is not null);
        if (core.Consistency.Write == WritePath.Through)
            return await through.CommitAsync(store, key, extent, owner, toOwner, ct, condition);
        if (!condition.IsNone && !toOwner)
            return await conditional.CommitIfCurrentAsync(store, key, extent, condition, owner, ct);
        if (toOwner)
        {
            // owner/async: written through to the owner's cache before returning (so a read at the
            // owner sees it), which uploads it in the background. If the owner cannot take it,
            // storage gets it in the background from here.
            string? version;
            try
            {
                version = await core.Peers.TryPutAsync(key, extent, owner!, uploadSync: false, ct, condition);
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
            if (version is null && !condition.IsNone)
            {
                // The owner that would decide cannot be reached: storage decides, now (toOwner: false tells the
                // owner in the background, as for any write that bypassed it).
                return await through.CommitAsync(store, key, extent, owner, toOwner: false, ct, condition);
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
