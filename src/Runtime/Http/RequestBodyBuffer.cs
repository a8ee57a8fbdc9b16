using System.Buffers;
using System.Runtime.InteropServices;

namespace FaaST.Runtime.Http;

/// <summary>
/// A large request body in native memory, freed as soon as its invocation is done with it. A
/// managed array of 100 MiB lives on the large-object heap until a full collection happens to run
/// and the GC decides to give the pages back; the host's RSS stayed hundreds of MB up after one
/// large POST. malloc serves blocks this size with their own mapping, which free() unmaps.
/// </summary>
/// <remarks>
/// The bytes travel to the worker inside an <c>InvocationRequest</c> (wrapped, not copied). When
/// the invocation ended without an answer (timeout, worker crash, client gone), that message may
/// still sit in the worker channel's queue, so the buffer is then not freed explicitly: the
/// finalizer frees it once nothing references it any more, never while the message can be read.
/// </remarks>
internal sealed unsafe class RequestBodyBuffer : MemoryManager<byte>
{
    private byte* _pointer;
    private int _capacity;

    public RequestBodyBuffer(int capacity)
    {
        _capacity = Math.Max(capacity, 1);
        _pointer = (byte*)NativeMemory.Alloc((nuint)_capacity);
        GC.AddMemoryPressure(_capacity);
    }

    /// <summary>Bytes written so far (see <see cref="Grow"/>).</summary>
    public int Length { get; set; }

    public int Capacity => _capacity;

    /// <summary>Makes room for at least <paramref name="capacity"/> bytes, keeping the first <see cref="Length"/>.</summary>
    public void Grow(int capacity)
    {
        if (capacity <= _capacity)
            return;
        ObjectDisposedException.ThrowIf(_pointer is null, this);
        _pointer = (byte*)NativeMemory.Realloc(_pointer, (nuint)capacity);
        GC.AddMemoryPressure(capacity - _capacity);
        _capacity = capacity;
    }

    /// <summary>The part not yet written.</summary>
    public Memory<byte> Free => Memory[Length..];

    /// <summary>The bytes written.</summary>
    public ReadOnlyMemory<byte> Written => Memory[..Length];

    public override Span<byte> GetSpan()
    {
        ObjectDisposedException.ThrowIf(_pointer is null, this);
        return new Span<byte>(_pointer, _capacity);
    }

    public override MemoryHandle Pin(int elementIndex = 0)
    {
        ObjectDisposedException.ThrowIf(_pointer is null, this);
        return new MemoryHandle(_pointer + elementIndex);
    }

    public override void Unpin()
    {
        // Native memory never moves.
    }

    /// <summary>Frees the memory now. Only when nothing can still read it (the worker answered).</summary>
    public void Release()
    {
        Dispose(true);
        GC.SuppressFinalize(this);
    }

    protected override void Dispose(bool disposing)
    {
        var pointer = _pointer;
        if (pointer is null)
            return;
        _pointer = null;
        NativeMemory.Free(pointer);
        GC.RemoveMemoryPressure(_capacity);
    }

    // CA2015 warns that a finalizer may free memory a Span still points into. The only reader after
    // the invocation ends is the worker channel's writer, which keeps the message (and through its
    // ByteString, this object) alive with GC.KeepAlive until it has copied the bytes.
#pragma warning disable CA2015
    ~RequestBodyBuffer() => Dispose(false);
#pragma warning restore CA2015
}
