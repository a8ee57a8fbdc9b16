using System.IO.MemoryMappedFiles;

namespace FaaST.Cachelet.Memory;

/// <summary>
/// One file of the arena's directory, mapped read-write for the life of the object: a slab segment
/// or one large object. The raw pointer is acquired once and released on dispose.
/// </summary>
internal unsafe class MappedFile : IDisposable
{
    private readonly FileStream _stream;
    private readonly MemoryMappedFile _map;
    private readonly MemoryMappedViewAccessor _view;
    private volatile bool _disposed;

    /// <summary>Maps <paramref name="size"/> bytes of <paramref name="stream"/>, which this object then owns.</summary>
    public MappedFile(SharedMemoryArena owner, long id, string name, string path, FileStream stream, long size, bool isLarge)
    {
        Owner = owner;
        Id = id;
        Name = name;
        Path = path;
        Size = size;
        IsLarge = isLarge;
        _stream = stream;
        _map = MemoryMappedFile.CreateFromFile(stream, null, size, MemoryMappedFileAccess.ReadWrite, HandleInheritability.None, leaveOpen: true);
        try
        {
            _view = _map.CreateViewAccessor(0, size, MemoryMappedFileAccess.ReadWrite);
            byte* pointer = null;
            _view.SafeMemoryMappedViewHandle.AcquirePointer(ref pointer);
            Base = pointer + _view.PointerOffset;
        }
        catch
        {
            _view?.Dispose();
            _map.Dispose();
            throw;
        }
    }

    public SharedMemoryArena Owner { get; }

    /// <summary>Creation order (the counter in the name); orders segments by "address".</summary>
    public long Id { get; }

    public string Name { get; }

    public string Path { get; }

    public long Size { get; }

    public bool IsLarge { get; }

    public byte* Base { get; }

    public bool IsDisposed => _disposed;

    public FileStream Stream => _stream;

    public void Dispose()
    {
        if (_disposed)
            return;
        _disposed = true;
        _view.SafeMemoryMappedViewHandle.ReleasePointer();
        _view.Dispose();
        _map.Dispose();
        _stream.Dispose();
    }
}
