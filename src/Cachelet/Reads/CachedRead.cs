using FaaST.Cachelet.Index;
using FaaST.Cachelet.Memory;

namespace FaaST.Cachelet;

/// <summary>
/// A blob served to a binding: cached (a pinned extent), or not cached (plain bytes, or a file of its
/// own in the segment directory for large ones). Dispose unpins, or deletes the file.
/// </summary>
public readonly struct CachedRead : IDisposable
{
    private readonly IDisposable? _pin;

    private CachedRead(ReadPath path, string etag, long length, CacheEntry? entry, ReadOnlyMemory<byte> bytes, IDisposable? pin, string? file = null)
    {
        Path = path;
        ETag = etag;
        Length = length;
        Entry = entry;
        Bytes = bytes;
        _pin = pin;
        File = file;
    }

    /// <summary>An uncached object's file in the segment directory (its name is its segment), or null.</summary>
    public string? File { get; }

    internal static CachedRead FromFile(string etag, long length, TemporaryFile file, ReadPath path = ReadPath.Passthrough) =>
        new(path, etag, length, null, default, file, file.Name);

    public ReadPath Path { get; }
    public string ETag { get; }
    public long Length { get; }

    /// <summary>The cached object (its extent names the segment, offset and length); null when not cached.</summary>
    public CacheEntry? Entry { get; }

    /// <summary>The bytes, when the read was not cached.</summary>
    public ReadOnlyMemory<byte> Bytes { get; }

    /// <summary>A miss handed over while it downloads (cache.streamThreshold): its extent, version and progress record. The
    /// bytes are final only up to <see cref="StreamingFill.Filled"/>; the object becomes a cache entry when complete.</summary>
    public StreamingFill? Fill { get; private init; }

    internal static CachedRead FromFill(StreamingFill fill, IDisposable flight) =>
        new(ReadPath.LocalMiss, fill.Version, fill.Length, null, default, new FillLease(fill, flight)) { Fill = fill };

    /// <summary>The reader's hold on a streamed fill and, once it completes, on the entry's pin.</summary>
    private sealed class FillLease(StreamingFill fill, IDisposable flight) : IDisposable
    {
        private int _disposed;

        public void Dispose()
        {
            if (Interlocked.Exchange(ref _disposed, 1) != 0)
                return;
            flight.Dispose();
            fill.ReleaseReader();
        }
    }

    internal static CachedRead FromEntry(CacheEntry entry, IDisposable pin, ReadPath path) =>
        new(path, entry.ETag, entry.Length, entry, default, pin);

    internal static CachedRead FromBytes(string etag, ReadOnlyMemory<byte> bytes, ReadPath path = ReadPath.Passthrough) =>
        new(path, etag, bytes.Length, null, bytes, null);

    public void Dispose() => _pin?.Dispose();
}

/// <summary>A file in the segment directory holding one uncached object for one invocation.</summary>
public sealed class TemporaryFile : IDisposable
{
    private readonly SharedMemoryArena _arena;

    private TemporaryFile(SharedMemoryArena arena, string name, FileStream stream)
    {
        _arena = arena;
        Name = name;
        Stream = stream;
    }

    /// <summary>The segment name workers map ("t" + a number never reused by this instance).</summary>
    public string Name { get; }

    public FileStream Stream { get; }

    /// <summary>Created and later deleted by the arena, relative to its directory descriptor (the
    /// workers' user may have replaced the directory's path by then).</summary>
    internal static TemporaryFile Create(SharedMemoryArena arena, long number)
    {
        var name = SharedMemoryNames.HostFile(SharedMemoryNames.Temporary, number);
        return new TemporaryFile(arena, name, arena.CreateSideFile(name));
    }

    public void CloseStream() => Stream.Dispose();

    public void Dispose()
    {
        Stream.Dispose();
        _arena.DeleteSideFile(Name);
    }
}

/// <summary>Numbers the temporary files of one cache ("t" + a number never reused by this instance).</summary>
internal sealed class TemporaryFiles(SharedMemoryArena arena)
{
    private long _count;

    public TemporaryFile Create() => TemporaryFile.Create(arena, Interlocked.Increment(ref _count));
}
