using FaaST.Protos.Worker;
using FaaST.Runtime.Invocation;
using FaaST.Storage;
using Google.Protobuf;

namespace FaaST.Runtime.Bindings;

/// <summary>The vanilla platform: every read and write goes to blob storage.</summary>
public sealed class StorageBlobBindingProvider(StorageAccounts accounts) : IBlobBindingProvider
{
    public async ValueTask<BlobData?> ReadAsync(BlobAddress blob, InvocationContext invocation, CancellationToken ct)
    {
        var store = accounts.Get(blob.Connection);
        var content = await store.DownloadAsync(blob.Container, blob.Name, ct);
        if (content is null)
            return null;
        return new BlobData
        {
            Name = blob.Path,
            Uri = store.GetBlobUri(blob.Container, blob.Name).ToString(),
            Length = content.Data.Length,
            Etag = content.Properties.ETag,
            // The array is ours alone: wrap it instead of copying it into the message.
            Bytes = UnsafeByteOperations.UnsafeWrap(content.Data),
        };
    }

    public async ValueTask<BlobProperties> WriteAsync(BlobAddress blob, BlobOutput output, InvocationContext invocation, CancellationToken ct,
        BlobWriteCondition condition = default)
    {
        if (output.IsSharedMemory)
            throw new InvalidOperationException($"output for {blob.Path} arrived in shared memory, which only the cachelet offers");
        var content = output.Bytes;
        var store = accounts.Get(blob.Connection);
        try
        {
            return await store.UploadAsync(blob.Container, blob.Name, content, ifMatch: condition.IfMatch, ifNoneMatch: condition.IfNoneMatch, ct: ct);
        }
        catch (BlobStorageException e) when (e.Status == 404 && e.ErrorCode == "ContainerNotFound")
        {
            // Azure Functions creates an output binding's container on first use.
            await store.CreateContainerIfNotExistsAsync(blob.Container, ct);
            return await store.UploadAsync(blob.Container, blob.Name, content, ifMatch: condition.IfMatch, ifNoneMatch: condition.IfNoneMatch, ct: ct);
        }
    }
}
