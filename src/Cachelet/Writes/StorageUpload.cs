using FaaST.Cachelet.Index;
using FaaST.Cachelet.Memory;
using FaaST.Storage;

namespace FaaST.Cachelet.Writes;

/// <summary>Uploads of cached bytes to storage, creating the container on its first write.</summary>
internal static class StorageUpload
{
    /// <summary>The version of a write storage has not acknowledged yet.</summary>
    public static string ProvisionalVersion() => $"\"faast-pending-{Guid.NewGuid():N}\"";

    public static async Task<BlobProperties> FromExtentAsync(IBlobStore store, BlobKey key, Extent extent, CancellationToken ct)
    {
        await using var source = extent.OpenReadStream();
        return await FromStreamAsync(store, key, source, extent.Length, ct);
    }

    public static async Task<BlobProperties> FromStreamAsync(IBlobStore store, BlobKey key, Stream source, long length, CancellationToken ct)
    {
        try
        {
            return await store.UploadAsync(key.Container, key.Blob, source, length, ct: ct);
        }
        catch (BlobStorageException e) when (e.Status == 404)
        {
            await store.CreateContainerIfNotExistsAsync(key.Container, ct);
            source.Position = 0;
            return await store.UploadAsync(key.Container, key.Blob, source, length, ct: ct);
        }
    }
}
