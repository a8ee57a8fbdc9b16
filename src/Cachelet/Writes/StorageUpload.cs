using FaaST.Cachelet.Index;
using FaaST.Cachelet.Memory;
using FaaST.Storage;

namespace FaaST.Cachelet.Writes;

/// <summary>Uploads of cached bytes to storage, creating the container on its first write.</summary>
internal static class StorageUpload
{
    /// <summary>The version of a write storage has not acknowledged yet.</summary>
    public static string ProvisionalVersion() => $"\"faast-pending-{Guid.NewGuid():N}\"";

    public static async Task<BlobProperties> FromExtentAsync(IBlobStore store, BlobKey key, Extent extent, CancellationToken ct,
        BlobWriteCondition condition = default)
    {
        await using var source = extent.OpenReadStream();
        return await FromStreamAsync(store, key, source, extent.Length, ct, condition);
    }

    /// <summary>
    /// Uploads <paramref name="length"/> bytes of <paramref name="source"/>; with a <paramref name="condition"/>, storage
    /// decides it (If-Match / If-None-Match: *) and a failed one throws <see cref="BlobConditionFailedException"/>.
    /// </summary>
    public static async Task<BlobProperties> FromStreamAsync(IBlobStore store, BlobKey key, Stream source, long length, CancellationToken ct,
        BlobWriteCondition condition = default)
    {
        try
        {
            return await store.UploadAsync(key.Container, key.Blob, source, length, ifMatch: condition.IfMatch, ifNoneMatch: condition.IfNoneMatch, ct: ct);
        }
        catch (BlobStorageException e) when (e.Status == 404 && e is not BlobConditionFailedException)
        {
            // No container yet. Under If-Match the retry then fails as it must (there is no blob of that version).
            await store.CreateContainerIfNotExistsAsync(key.Container, ct);
            source.Position = 0;
            return await store.UploadAsync(key.Container, key.Blob, source, length, ifMatch: condition.IfMatch, ifNoneMatch: condition.IfNoneMatch, ct: ct);
        }
    }
}
