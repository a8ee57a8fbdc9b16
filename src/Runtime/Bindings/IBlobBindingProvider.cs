using FaaST.Protos.Worker;
using FaaST.Runtime.Invocation;
using FaaST.Storage;

namespace FaaST.Runtime.Bindings;

/// <summary>A blob a binding refers to: which account (connection setting), container and name.</summary>
public readonly record struct BlobAddress(string Connection, string Container, string Name)
{
    public string Path => Container + "/" + Name;

    /// <summary>Splits "container/path/name" (a resolved binding path).</summary>
    public static BlobAddress Parse(string connection, string path)
    {
        var slash = path.IndexOf('/');
        return new BlobAddress(connection, path[..slash], path[(slash + 1)..]);
    }
}

/// <summary>
/// How blob bindings read and write. The vanilla provider goes to storage every time; the
/// cachelet replaces it to serve reads from shared memory and write through.
/// </summary>
public interface IBlobBindingProvider
{
    /// <summary>The blob as a worker receives it, or null when it does not exist.</summary>
    ValueTask<BlobData?> ReadAsync(BlobAddress blob, InvocationContext invocation, CancellationToken ct);

    /// <summary>
    /// Writes an output binding's value and returns the blob's new properties. A <paramref name="condition"/> (an
    /// output's "ifMatch") makes it conditional; a failed one throws <see cref="BlobConditionFailedException"/> and
    /// nothing is written.
    /// </summary>
    ValueTask<BlobProperties> WriteAsync(BlobAddress blob, BlobOutput output, InvocationContext invocation, CancellationToken ct,
        BlobWriteCondition condition = default);

    /// <summary>Drops an output value that will not be written (the worker's shared-memory file, if it sent one).</summary>
    void Discard(BlobOutput output)
    {
    }
}

/// <summary>
/// An output binding's value: bytes that came inline, or a file the worker wrote into the
/// instance's shared-memory directory (the cachelet adopts it without copying).
/// </summary>
public readonly record struct BlobOutput(ReadOnlyMemory<byte> Bytes, string? SharedMemoryFile = null, long SharedMemoryLength = 0)
{
    public bool IsSharedMemory => SharedMemoryFile is not null;

    public long Length => IsSharedMemory ? SharedMemoryLength : Bytes.Length;
}

/// <summary>Copies a shared-memory reference's bytes out, for a worker that reads blobs inline.</summary>
public interface ISharedMemoryReader
{
    Google.Protobuf.ByteString Read(SharedMemoryRef reference);

    /// <summary>
    /// For a worker that cannot read an input as it arrives: waits until a streamed reference
    /// (<see cref="SharedMemoryRef.Progress"/> set) is complete; at once for any other. Throws an
    /// <see cref="IOException"/> naming the blob if its fill failed.
    /// </summary>
    Task WaitFilledAsync(SharedMemoryRef reference, CancellationToken ct);
}
