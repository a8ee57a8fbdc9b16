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
    /// into the extent. Writing past <see cref="Length"/> throws.</summary>
    public Stream OpenWriteStream() =>
        File is null ? new MemoryStream([], writable: true) : new UnmanagedMemoryStream(Pointer, 0, Length, FileAccess.Write);

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
