using FaaST.Cachelet.Index;
using FaaST.Cachelet.Memory;
using FaaST.Cachelet.Sources;
using Microsoft.Extensions.Logging;

namespace FaaST.Cachelet.Reads;

/// <summary>
/// Where one source writes what it found: a new extent when the cache has room, else (logged) a
/// buffer or a file of the read's own in the segment directory, which the worker maps and which
/// goes when the invocation ends.
/// </summary>
/// <param name="countAccess">Whether the read is a user's (counted by its path); a prefetch is not.</param>
internal sealed class FetchTarget(CacheCore core, BlobKey key, bool countAccess, LogGate uncachedLog) : IFetchTarget
{
    private Extent? _extent;
    private MemoryStream? _buffer;
    private TemporaryFile? _file;

    public Stream Open(long length)
    {
        Discard();
        if (core.TryAllocate(length, out var extent))
        {
            _extent = extent;
            return extent.OpenWriteStream();
        }
        var logger = core.Logger;
        if (countAccess && logger.IsEnabled(LogLevel.Warning) && uncachedLog.TryPass(out var suppressed))
        {
            if (suppressed > 0)
                Log.Suppressed(logger, suppressed, "served without caching");
            Log.ServedUncached(logger, key.Container, key.Blob, length);
        }
        if (length < core.Policy.InlineThreshold)
            return _buffer = new MemoryStream((int)length);
        _file = core.TemporaryFiles.Create();
        return _file.Stream;
    }

    /// <summary>
    /// A new extent of exactly <paramref name="length"/> bytes for ranges written at their offsets
    /// (bandwidth scaling); false, holding nothing, when the cache has no room.
    /// </summary>
    public bool TryOpenExtent(long length, out Extent extent)
    {
        Discard();
        if (!core.TryAllocate(length, out extent))
            return false;
        _extent = extent;
        return true;
    }

    /// <summary>The read of a found object; the target holds nothing afterwards.</summary>
    public CachedRead Complete(SourceResult result, long validatedEpoch)
    {
        if (_extent is { } stored)
        {
            _extent = null;
            // Added and pinned in one step: a concurrent write of the key may retire the new entry at
            // once, and these bytes must still reach the reader that fetched them.
            var pin = core.Index.AddOrReplacePinned(key, result.Version, stored, owned: core.Ownership.OwnerOf(key) is null, validatedEpoch);
            var cachedPath = ReadPaths.OfFetch(result.Path, cached: true);
            if (countAccess)
                ReadPaths.Count(core, key, cachedPath, result.Length, fromEntry: true);
            return CachedRead.FromEntry(pin.Entry, pin, cachedPath);
        }
        var path = ReadPaths.OfFetch(result.Path, cached: false);
        if (countAccess)
            ReadPaths.Count(core, key, path, result.Length, fromEntry: false);
        if (_file is { } file)
        {
            _file = null;
            file.CloseStream();
            return CachedRead.FromFile(result.Version, result.Length, file, path);
        }
        var bytes = _buffer is { } buffer ? buffer.GetBuffer().AsMemory(0, (int)buffer.Length) : ReadOnlyMemory<byte>.Empty;
        _buffer = null;
        return CachedRead.FromBytes(result.Version, bytes, path);
    }

    /// <summary>Frees what an open received that no read took (a failed, cancelled or unanswered fetch).</summary>
    public void Discard()
    {
        if (_extent is { } partial)
            core.Arena.Free(partial);
        _extent = null;
        _file?.Dispose();
        _file = null;
        _buffer = null;
    }
}
