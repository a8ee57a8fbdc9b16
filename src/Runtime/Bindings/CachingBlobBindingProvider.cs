using System.Runtime.CompilerServices;
using FaaST.Cachelet;
using FaaST.Protos.Worker;
using FaaST.Runtime.Invocation;
using FaaST.Storage;
using Google.Protobuf;

namespace FaaST.Runtime.Bindings;

/// <summary>
/// Blob bindings through the cachelet. A cached value reaches a worker as a reference into shared
/// memory (segment, offset, length, version) when it is at least the inline threshold, else as
/// inline bytes; the invocation pins it until it ends.
/// </summary>
internal sealed class CachingBlobBindingProvider(StorageAccounts accounts, BlobCache cache) : IBlobBindingProvider, ISharedMemoryReader
{
    // The extent behind each reference handed out, for workers that want bytes inline instead.
    private readonly ConditionalWeakTable<SharedMemoryRef, Func<ByteString>> _references = new();

    public async ValueTask<BlobData?> ReadAsync(BlobAddress blob, InvocationContext invocation, CancellationToken ct)
    {
        var store = accounts.Get(blob.Connection);
        var read = await cache.ReadAsync(store, blob.Container, blob.Name, ct);
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
        if (r.File is { } file)
        {
            // Larger than the cache: streamed into a file of its own, mapped by the worker like a segment.
            var reference = new SharedMemoryRef { Segment = file, Offset = 0, Length = r.Length, Version = r.ETag };
            var path = Path.Combine(cache.Directory, file);
            _references.AddOrUpdate(reference, () => ByteString.CopyFrom(File.ReadAllBytes(path)));
            data.SharedMemory = reference;
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
            var reference = new SharedMemoryRef
            {
                Segment = entry.Extent.Segment,
                Offset = entry.Extent.Offset,
                Length = entry.Extent.Length,
                Version = entry.ETag,
            };
            _references.AddOrUpdate(reference, () => CopyOut(entry));
            data.SharedMemory = reference;
        }
        return data;
    }

    public async ValueTask<BlobProperties> WriteAsync(BlobAddress blob, BlobOutput output, InvocationContext invocation, CancellationToken ct)
    {
        var store = accounts.Get(blob.Connection);
        return output.IsSharedMemory
            ? await cache.WriteFileAsync(store, blob.Container, blob.Name, output.SharedMemoryFile!, output.SharedMemoryLength, ct)
            : await cache.WriteAsync(store, blob.Container, blob.Name, output.Bytes, ct);
    }

    public ByteString Read(SharedMemoryRef reference) =>
        _references.TryGetValue(reference, out var read)
            ? read()
            : throw new InvalidOperationException($"no cached object behind shared-memory segment {reference.Segment}");

    private static ByteString CopyOut(FaaST.Cachelet.Index.CacheEntry entry)
    {
        if (entry.Length <= int.MaxValue)
            return ByteString.CopyFrom(entry.Extent.Span);
        using var source = entry.Extent.OpenReadStream();
        return ByteString.FromStream(source);
    }
}
