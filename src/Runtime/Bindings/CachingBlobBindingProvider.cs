using FaaST.Cachelet;
using FaaST.Protos.Worker;
using FaaST.Runtime.Invocation;
using FaaST.Storage;
using Google.Protobuf;

namespace FaaST.Runtime.Bindings;

/// <summary>
/// Blob bindings through the cachelet. A cached value reaches a worker as a reference into shared
/// memory (segment, offset, length, version) when it is at least the inline threshold, else as
/// inline bytes; the invocation pins it until it ends. A large miss may be handed over while it still downloads
/// (<see cref="SharedMemoryRef.Progress"/> names its progress record; cache.streamThreshold).
/// </summary>
internal sealed class CachingBlobBindingProvider(StorageAccounts accounts, BlobCache cache) : IBlobBindingProvider, ISharedMemoryReader
{
    public async ValueTask<BlobData?> ReadAsync(BlobAddress blob, InvocationContext invocation, CancellationToken ct)
    {
        var store = accounts.Get(blob.Connection);
        // A large miss may come back while it still downloads (cache.streamThreshold): the invocation is sent at once
        // and the worker reads as the bytes arrive; a worker that cannot is held by the pool until the fill completes.
        var read = await cache.ReadStreamingAsync(store, blob.Container, blob.Name, ct);
        if (read is not { } r)
            return null;
        invocation.Hold(r);
        var data = new BlobData
        {
            Name = blob.Path,
            Uri = store.GetBlobUri(blob.Container, blob.Name).ToString(),
            Length = r.Length,
            Etag = r.ETag,
        };
        if (r.Fill is { } fill)
        {
            data.SharedMemory = new SharedMemoryRef
            {
                Segment = fill.Extent.Segment,
                Offset = fill.Extent.Offset,
                Length = fill.Length,
                Version = fill.Version,
                Progress = fill.ProgressFile,
            };
        }
        else if (r.File is { } file)
        {
            // Larger than the cache: streamed into a file of its own, mapped by the worker like a segment.
            data.SharedMemory = new SharedMemoryRef { Segment = file, Offset = 0, Length = r.Length, Version = r.ETag };
        }
        else if (r.Entry is not { } entry)
        {
            data.Bytes = UnsafeByteOperations.UnsafeWrap(r.Bytes);
        }
        else if (r.Length < cache.Policy.InlineThreshold)
        {
            data.Bytes = CopyOut(entry);
        }
        else
        {
            data.SharedMemory = new SharedMemoryRef
            {
                Segment = entry.Extent.Segment,
                Offset = entry.Extent.Offset,
                Length = entry.Extent.Length,
                Version = entry.ETag,
            };
        }
        return data;
    }

    public async ValueTask<BlobProperties> WriteAsync(BlobAddress blob, BlobOutput output, InvocationContext invocation, CancellationToken ct,
        BlobWriteCondition condition = default)
    {
        var store = accounts.Get(blob.Connection);
        return output.IsSharedMemory
            ? await cache.WriteFileAsync(store, blob.Container, blob.Name, output.SharedMemoryFile!, output.SharedMemoryLength, ct, condition)
            : await cache.WriteAsync(store, blob.Container, blob.Name, output.Bytes, ct, condition);
    }

    public void Discard(BlobOutput output)
    {
        if (output.SharedMemoryFile is not { } file)
            return;
        try
        {
            cache.DiscardWorkerFile(file);
        }
        catch (ArgumentException)
        {
            // Not a worker's output name: nothing of the worker's to delete (its write would have been refused too).
        }
    }

    /// <summary>Waits for a streamed reference's fill to complete; throws an <see cref="IOException"/> naming the blob if it failed.</summary>
    public Task WaitFilledAsync(SharedMemoryRef reference, CancellationToken ct) =>
        reference.Progress.Length == 0 ? Task.CompletedTask : cache.WaitFilledAsync(reference.Progress, ct);

    /// <summary>The bytes behind a reference this provider handed out (still pinned by its invocation).</summary>
    public ByteString Read(SharedMemoryRef reference)
    {
        if (reference.Length > int.MaxValue)
            throw new InvalidOperationException($"{reference.Segment}: {reference.Length} bytes cannot go inline to a worker");
        // Never through a link a worker may have put under the segment's name.
        using var handle = cache.OpenFile(reference.Segment);
        var bytes = GC.AllocateUninitializedArray<byte>((int)reference.Length);
        var done = 0;
        while (done < bytes.Length)
        {
            var n = RandomAccess.Read(handle, bytes.AsSpan(done), reference.Offset + done);
            if (n == 0)
                throw new EndOfStreamException($"{reference.Segment} ended after {done} of {reference.Length} bytes");
            done += n;
        }
        return UnsafeByteOperations.UnsafeWrap(bytes);
    }

    private static ByteString CopyOut(FaaST.Cachelet.Index.CacheEntry entry)
    {
        if (entry.Length <= int.MaxValue)
            return ByteString.CopyFrom(entry.Extent.Span);
        using var source = entry.Extent.OpenReadStream();
        return ByteString.FromStream(source);
    }
}
