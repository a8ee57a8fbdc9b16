using System.Buffers;
using System.Collections.Concurrent;
using System.Runtime.InteropServices;

namespace FaaST.FlashBackend.Engine;

/// <summary>
/// Fixed-size native buffers aligned to <see cref="DirectFile.Alignment"/>, pooled so the put and get paths allocate
/// nothing per request (O_DIRECT needs aligned memory; managed arrays are not aligned and may move). Every I/O moves
/// at most one buffer's worth at a time, so large values stream through a bounded amount of memory.
/// </summary>
internal sealed unsafe class AlignedBufferPool : IDisposable
{
    private readonly ConcurrentBag<Buffer> _free = [];
    private readonly ConcurrentBag<Buffer> _all = [];
    private int _disposed;

    /// <summary>The size of each buffer: a whole number of alignment units.</summary>
    public int BufferSize { get; }

    public AlignedBufferPool(int bufferSize)
    {
        if (bufferSize <= 0 || bufferSize % DirectFile.Alignment != 0)
            throw new ArgumentException($"buffer size {bufferSize} must be a positive multiple of {DirectFile.Alignment}", nameof(bufferSize));
        BufferSize = bufferSize;
    }

    public Lease Rent()
    {
        ObjectDisposedException.ThrowIf(Volatile.Read(ref _disposed) != 0, this);
        if (!_free.TryTake(out Buffer? b))
        {
            // Grows to the number of concurrent I/Os (bounded by the scheduler's in-flight caps), then stays.
            b = new Buffer((byte*)NativeMemory.AlignedAlloc((nuint)BufferSize, DirectFile.Alignment), BufferSize);
            _all.Add(b);
        }
        return new Lease(this, b);
    }

    public void Dispose()
    {
        if (Interlocked.Exchange(ref _disposed, 1) != 0)
            return;
        foreach (Buffer b in _all)
            NativeMemory.AlignedFree(b.Pointer);
    }

    /// <summary>One rented buffer; returned to the pool on dispose.</summary>
    public readonly struct Lease(AlignedBufferPool pool, Buffer buffer) : IDisposable
    {
        public Span<byte> Span => buffer.GetSpan();

        /// <summary>The buffer's address, for a read the kernel fills asynchronously (io_uring).</summary>
        public byte* Pointer => buffer.Pointer;

        /// <summary>The same memory for async writes to a caller's stream (a Span cannot cross an await).</summary>
        public Memory<byte> Memory => buffer.Memory;

        public void Dispose()
        {
            if (Volatile.Read(ref pool._disposed) == 0)
                pool._free.Add(buffer);
        }
    }

    /// <summary>One native buffer as a <see cref="MemoryManager{T}"/>, made once per buffer, so leases hand out
    /// <see cref="Memory{T}"/> without allocating.</summary>
    internal sealed class Buffer(byte* pointer, int length) : MemoryManager<byte>
    {
        public byte* Pointer => pointer;

        public override Span<byte> GetSpan() => new(pointer, length);

        public override MemoryHandle Pin(int elementIndex = 0) => new(pointer + elementIndex);

        public override void Unpin()
        {
        }

        protected override void Dispose(bool disposing)
        {
        }
    }
}
