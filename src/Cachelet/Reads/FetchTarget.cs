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
/// <param name="streaming">Set when the reader takes an object of at least cache.streamThreshold while it is still
/// downloading: the fill is handed to it as soon as the extent is allocated (only storage's fetches get one: its
/// first response fixes the version, so the reader never sees bytes of two versions).</param>
internal sealed class FetchTarget(CacheCore core, BlobKey key, bool countAccess, LogGate uncachedLog,
    TaskCompletionSource<StreamingFill>? streaming = null) : IFetchTarget
{
    private Extent? _extent;
    private MemoryStream? _buffer;
    private TemporaryFile? _file;
    private StreamingFill? _fill;

    public Stream Open(long length) => OpenCore(length, version: null);

    public Stream Open(long length, string version) => OpenCore(length, version);

    private Stream OpenCore(long length, string? version)
    {
        Discard();
        if (core.TryAllocate(length, out var extent))
        {
            _extent = extent;
            var threshold = core.Policy.StreamThreshold;
            if (streaming is not null && version is not null && threshold > 0 && length >= threshold )
            {
                _fill = new StreamingFill(core, extent, version, length, core.NextProgressFile(), key.Container + "/" + key.Blob);
                core.Fills[_fill.ProgressFile] = _fill;
                var stream = _fill.Wrap(extent.OpenWriteStream());
                // Continuations run elsewhere: the download goes on at once. A reader that stopped waiting takes nothing.
                if (!streaming.TrySetResult(_fill))
                    _fill.ReleaseReader();
                return stream;
            }
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
            if (_fill is { } fill && fill.Filled != result.Length)
                throw new IOException($"{key.Container}/{key.Blob}: the download ended after {fill.Filled} of {result.Length} bytes");
            _extent = null;
            // Added and pinned in one step: a concurrent write of the key may retire the new entry at
            // once, and these bytes must still reach the reader that fetched them.
            var pin = core.Index.AddOrReplacePinned(key, result.Version, stored, owned: core.Ownership.OwnerOf(key) is null, validatedEpoch);
            if (_fill is { } streamed)
            {
                _fill = null;
                streamed.MarkComplete(); // the entry holds the extent now; the reader's pin is the read returned here
            }
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
    public void Discard() => Discard("the fetch was abandoned");

    /// <summary>As <see cref="Discard()"/>; a streamed fill is marked failed with <paramref name="why"/> and its
    /// extent freed only when its reader let go.</summary>
    public void Discard(string why)
    {
        if (_fill is { } fill)
        {
            _fill = null;
            _extent = null;
            fill.MarkFailed(why);
        }
        if (_extent is { } partial)
            core.Arena.Free(partial);
        _extent = null;
        _file?.Dispose();
        _file = null;
        _buffer = null;
    }
}
