namespace FaaST.Cachelet.Memory;

/// <summary>
/// Bytes of one cached object in shared memory: <see cref="Length"/> bytes at <see cref="Offset"/>
/// of the file <see cref="Segment"/> in the arena's directory, which is what a worker is told.
/// A slot of a slab segment ("s…") or a whole large-object file ("l…", or a worker's adopted
/// output). The default value is the empty extent (no file, length 0).
/// <para>
/// The accessors use the host's mapping without checks beyond "the file is still mapped": an
/// extent must not be used after it is freed. In the cache, pins guarantee that.
/// </para>
/// </summary>
public readonly unsafe struct Extent : IEquatable<Extent>
{
    internal Extent(MappedFile file, long offset, long length, int sizeClass)
    {
        File = file;
        Offset = offset;
        Length = length;
        SizeClass = sizeClass;
    }

    internal MappedFile? File { get; }

    /// <summary>Slab size class, or -1 for a large object (and the empty extent).</summary>
    internal int SizeClass { get; }

    /// <summary>File name (not path) in the arena's directory; empty for a zero-length extent.</summary>
    public string Segment => File?.Name ?? "";

    public long Offset { get; }

    public long Length { get; }

    /// <summary>The object has a file of its own.</summary>
    public bool IsLarge => File is { IsLarge: true };

    public bool IsEmpty => File is null;

    /// <summary>The bytes. Objects longer than <see cref="int.MaxValue"/> use <see cref="GetSpan"/>
    /// or the streams instead.</summary>
    public Span<byte> Span
    {
        get
        {
            if (Length > int.MaxValue)
                throw new InvalidOperationException($"the extent holds {Length} bytes, more than a span can; use GetSpan(start, length) or a stream");
            return File is null ? [] : new Span<byte>(Pointer, (int)Length);
        }
    }

    /// <summary>A window of the bytes, for objects of any size.</summary>
    public Span<byte> GetSpan(long start, int length)
    {
        ArgumentOutOfRangeException.ThrowIfNegative(start);
        ArgumentOutOfRangeException.ThrowIfNegative(length);
        if (start > Length - length)
            throw new ArgumentOutOfRangeException(nameof(length), $"[{start}, {start + length}) is outside the extent's {Length} bytes");
        return length == 0 ? [] : new Span<byte>(Pointer + start, length);
    }

    /// <summary>
    /// A window of the bytes as Memory, for async writers that cannot hold a span (valid only while
    /// the extent is pinned or otherwise kept alive).
    /// </summary>
    public ReadOnlyMemory<byte> GetMemory(long start, int length)
    {
        GetSpan(start, length); // bounds
        return length == 0 ? ReadOnlyMemory<byte>.Empty : new MappedMemory(Pointer + start, length).Memory;
    }

    private sealed class MappedMemory(byte* pointer, int length) : System.Buffers.MemoryManager<byte>
    {
        public override Span<byte> GetSpan() => new(pointer, length);

        public override System.Buffers.MemoryHandle Pin(int elementIndex = 0) => new(pointer + elementIndex);

        public override void Unpin()
        {
        }

        protected override void Dispose(bool disposing)
        {
        }
    }

    /// <summary>Reads the bytes, for objects of any size (an UnmanagedMemoryStream over the mapping).</summary>
    public Stream OpenReadStream() =>
        File is null ? new MemoryStream([], writable: false) : new UnmanagedMemoryStream(Pointer, Length, Length, FileAccess.Read);

    /// <summary>Writes the bytes from the start, for objects of any size: a download streams straight
    /// into the extent. Writing past <see cref="Length"/> throws. The stream is also an
    /// <see cref="System.Buffers.IBufferWriter{T}"/>, so a socket can receive straight into the mapping.</summary>
    public Stream OpenWriteStream() =>
        File is null ? new MemoryStream([], writable: true) : new WriteStream(Pointer, Length);

    /// <summary>Write-only, from the start of the mapping: Length is how far it was written.</summary>
    private sealed class WriteStream(byte* pointer, long capacity) : Stream, System.Buffers.IBufferWriter<byte>
    {
        private long _position;
        private long _length;

        public override bool CanRead => false;
        public override bool CanSeek => true;
        public override bool CanWrite => true;
        public override long Length => _length;

        public override long Position
        {
            get => _position;
            set
            {
                ArgumentOutOfRangeException.ThrowIfNegative(value);
                ArgumentOutOfRangeException.ThrowIfGreaterThan(value, capacity);
                _position = value;
            }
        }

        public override void Write(ReadOnlySpan<byte> buffer)
        {
            if (buffer.Length > capacity - _position)
                throw new NotSupportedException($"writing {buffer.Length} bytes at {_position} overflows the extent's {capacity} bytes");
            buffer.CopyTo(new Span<byte>(pointer + _position, buffer.Length));
            Moved(buffer.Length);
        }

        public override void Write(byte[] buffer, int offset, int count) => Write(buffer.AsSpan(offset, count));

        public override ValueTask WriteAsync(ReadOnlyMemory<byte> buffer, CancellationToken ct = default)
        {
            Write(buffer.Span);
            return ValueTask.CompletedTask;
        }

        public override Task WriteAsync(byte[] buffer, int offset, int count, CancellationToken ct) =>
            WriteAsync(buffer.AsMemory(offset, count), ct).AsTask();

        /// <summary>The rest of the extent from the current position (at most 1 GiB at a time).</summary>
        public Memory<byte> GetMemory(int sizeHint = 0)
        {
            var left = (int)Math.Min(capacity - _position, 1 << 30);
            if (left < Math.Max(sizeHint, 1))
                throw new InvalidOperationException($"the extent's {capacity} bytes are full");
            return new MappedMemory(pointer + _position, left).Memory;
        }

        public Span<byte> GetSpan(int sizeHint = 0) => GetMemory(sizeHint).Span;

        public void Advance(int count)
        {
            ArgumentOutOfRangeException.ThrowIfNegative(count);
            if (count > capacity - _position)
                throw new InvalidOperationException($"advanced past the extent's {capacity} bytes");
            Moved(count);
        }

        private void Moved(int count)
        {
            _position += count;
            _length = Math.Max(_length, _position);
        }

        public override long Seek(long offset, SeekOrigin origin) => Position = origin switch
        {
            SeekOrigin.Begin => offset,
            SeekOrigin.Current => _position + offset,
            _ => _length + offset,
        };

        public override void Flush()
        {
        }

        public override int Read(byte[] buffer, int offset, int count) => throw new NotSupportedException("the stream is write-only");

        public override void SetLength(long value) => throw new NotSupportedException("an extent's length is fixed");
    }

    /// <summary>The first byte in the host's mapping.</summary>
    internal byte* Pointer
    {
        get
        {
            var file = File;
            if (file is null)
                return null;
            ObjectDisposedException.ThrowIf(file.IsDisposed, file.Name);
            return file.Base + Offset;
        }
    }

    public bool Equals(Extent other) => ReferenceEquals(File, other.File) && Offset == other.Offset && Length == other.Length;

    public override bool Equals(object? obj) => obj is Extent other && Equals(other);

    public override int GetHashCode() => HashCode.Combine(File, Offset, Length);

    public static bool operator ==(Extent left, Extent right) => left.Equals(right);

    public static bool operator !=(Extent left, Extent right) => !left.Equals(right);

    public override string ToString() => File is null ? "(empty)" : $"{Segment}@{Offset}+{Length}";
}
