using Microsoft.Win32.SafeHandles;

namespace FaaST.Cachelet.Memory;

/// <summary>
/// A worker's output file, opened and checked once by <see cref="SharedMemoryArena.OpenWorkerFile"/>.
/// Everything done with it goes through this descriptor. Disposing closes it and deletes the
/// worker's name for it (the output has been taken over or uploaded); <see cref="Close"/> only closes.
/// </summary>
public sealed class WorkerFile : IDisposable
{
    private SafeFileHandle? _handle;
    private bool _done;

    internal WorkerFile(SharedMemoryArena arena, string name, SafeFileHandle handle, long length)
    {
        Arena = arena;
        Name = name;
        Length = length;
        _handle = handle;
    }

    internal SharedMemoryArena Arena { get; }

    /// <summary>The worker's name for the file in the arena's directory.</summary>
    public string Name { get; }

    /// <summary>The output's length (the file holds at least this many bytes).</summary>
    public long Length { get; }

    /// <summary>The open file; null once the arena took it over or it was closed.</summary>
    internal SafeFileHandle? Handle => _handle;

    /// <summary>A stream of the output's bytes, from this descriptor (for an upload); dispose it before this.</summary>
    public Stream OpenRead()
    {
        var handle = _handle ?? throw new ObjectDisposedException(Name, $"{Name} was adopted or closed already");
        // The stream shares the descriptor (a SafeHandle may be disposed twice); buffer size 0: the
        // uploader reads in large blocks itself.
        return new FileStream(handle, FileAccess.Read, bufferSize: 0);
    }

    /// <summary>The arena keeps the descriptor (a large file is mapped through it).</summary>
    internal void TakeHandle() => _handle = null;

    /// <summary>Closes the descriptor, leaving the worker's file where it is.</summary>
    internal void Close()
    {
        _done = true;
        _handle?.Dispose();
        _handle = null;
    }

    /// <summary>Closes the descriptor and deletes the worker's name for the file (never following a link).</summary>
    public void Dispose()
    {
        if (_done)
            return;
        _done = true;
        _handle?.Dispose();
        _handle = null;
        Arena.RemoveWorkerEntry(Name);
    }
}
