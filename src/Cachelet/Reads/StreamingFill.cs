using System.IO.MemoryMappedFiles;
using FaaST.Cachelet.Memory;

namespace FaaST.Cachelet;

/// <summary>
/// A miss being read from storage into its extent while a worker already reads it (cache.streamThreshold): the
/// extent, the version the download's first response named, and a progress record in a file of the segment
/// directory that tells the worker how many bytes are final and whether the fill is still going, complete or
/// failed (protos/shared-memory.json, "progressRecord"), and wakes a worker waiting for more (a futex word).
/// </summary>
/// <remarks>
/// Two holders: the fetch (until the download ends) and the reader that was handed the fill (until its invocation
/// ends). On success the extent goes into the index as a normal entry (pinned for the reader by the fetch's
/// result); on failure it never does, and its memory is freed only when both holders let go, so a worker that is
/// still reading never reads memory the arena gave to something else. The progress file goes with the last holder.
/// </remarks>
public sealed unsafe class StreamingFill
{
    /// <summary>Progress states (the record's int32 at offset 8).</summary>
    public const int Filling = 0, Complete = 1, Failed = 2;

    private const int RecordSize = 16;

    /// <summary>The record's futex word (protos/shared-memory.json, "wakeOffset").</summary>
    internal const int WakeOffset = 12;

    /// <summary>The least growth of "filled" between two wakes: a worker reading 64 KiB first gets it at once.</summary>
    internal const long MinWakeStep = 64 << 10;

    /// <summary>The most growth of "filled" between two wakes (about 16 ms of a 500 MB/s download).</summary>
    internal const long MaxWakeStep = 8 << 20;

    private readonly CacheCore _core;
    private readonly Extent _extent;
    private readonly FileStream _file;
    private readonly MemoryMappedFile _map;
    private readonly MemoryMappedViewAccessor _view;
    private readonly byte* _record;
    private readonly TaskCompletionSource _done = new(TaskCreationOptions.RunContinuationsAsynchronously);
    private int _holders = 2; // the fetch and the reader
    private long _wokenAt; // "filled" at the last wake (the download's writer only)
    private bool _adopted; // the extent went into the index: not ours to free

    internal StreamingFill(CacheCore core, Extent extent, string version, long length, string progressName, string blobName)
    {
        _core = core;
        _extent = extent;
        Version = version;
        Length = length;
        ProgressFile = progressName;
        BlobName = blobName;
        _file = core.Arena.CreateSideFile(progressName);
        try
        {
            _file.SetLength(RecordSize);
            _map = MemoryMappedFile.CreateFromFile(_file, null, RecordSize, MemoryMappedFileAccess.ReadWrite, HandleInheritability.None, leaveOpen: true);
            _view = _map.CreateViewAccessor(0, RecordSize, MemoryMappedFileAccess.ReadWrite);
            byte* pointer = null;
            _view.SafeMemoryMappedViewHandle.AcquirePointer(ref pointer);
            _record = pointer + _view.PointerOffset;
            // Non-zero: this host wakes waiters on the word; a zero word (no futex here) tells the worker to poll.
            Volatile.Write(ref *(int*)(_record + WakeOffset), Futex.Supported ? 1 : 0);
        }
        catch
        {
            _view?.Dispose();
            _map?.Dispose();
            _file.Dispose();
            core.Arena.DeleteSideFile(progressName);
            throw;
        }
    }

    /// <summary>The segment, offset and length of the object's bytes.</summary>
    public Extent Extent => _extent;

    /// <summary>The version (ETag) of the download's first response: every byte of the fill is of it.</summary>
    public string Version { get; }

    public long Length { get; }

    /// <summary>The progress record's file name in the segment directory.</summary>
    public string ProgressFile { get; }

    /// <summary>"container/blob", for messages.</summary>
    public string BlobName { get; }

    /// <summary>Bytes from the extent's start that are final.</summary>
    public long Filled => Volatile.Read(ref *(long*)_record);

    /// <summary><see cref="Filling"/>, <see cref="Complete"/> or <see cref="Failed"/>.</summary>
    public int State => Volatile.Read(ref *(int*)(_record + 8));

    /// <summary>Completes when the fill is complete; faults with an <see cref="IOException"/> naming the blob when it failed.</summary>
    public Task Completion => _done.Task;

    /// <summary>The download's destination: the extent's stream, publishing how far it got after every write.</summary>
    internal Stream Wrap(Stream extentStream) => new ProgressStream(this, extentStream);

    private void Publish(long filled) => Volatile.Write(ref *(long*)_record, filled); // after the bytes (a release store)

    /// <summary>
    /// How far "filled" grows before the next wake: a quarter of what had arrived at the last one, between
    /// <see cref="MinWakeStep"/> and <see cref="MaxWakeStep"/>. A reader that keeps pace with the download is woken
    /// ~60 times for 256 MiB (not once per 64–200 KiB write): each wake-up on a busy 2-core machine slows the download
    /// (see <see cref="Futex"/>), and a reader cannot use bytes faster than it can copy them anyway.
    /// </summary>
    internal static long WakeStep(long wokenAt) => Math.Clamp(wokenAt / 4, MinWakeStep, MaxWakeStep);

    /// <summary>Publishes <paramref name="filled"/>; true when it also woke the reader.</summary>
    private bool Advance(long filled)
    {
        Publish(filled);
        if (filled - _wokenAt < WakeStep(_wokenAt))
            return false;
        _wokenAt = filled;
        Wake();
        return true;
    }

    /// <summary>Changes the wake word (after "filled" or "state"), then wakes every waiter on it.</summary>
    private void Wake()
    {
        var word = (int*)(_record + WakeOffset);
        if (!Futex.Supported)
            return;
        if (Interlocked.Increment(ref *word) == 0) // 0 means "poll": skip it on wrap-around
            Interlocked.Increment(ref *word);
        Futex.WakeAll(word);
    }

    /// <summary>All <see cref="Length"/> bytes arrived and the extent is now a cache entry.</summary>
    internal void MarkComplete()
    {
        _adopted = true;
        Publish(Length);
        Volatile.Write(ref *(int*)(_record + 8), Complete);
        Wake();
        // The fetch lets go before Completion says so: whoever sees it complete (or failed) and then lets go of the
        // reader's hold frees the extent at once (CI caught a failed fill still allocated after its reader let go).
        Release();
        _done.TrySetResult();
    }

    /// <summary>The fetch failed or was abandoned: the worker sees <see cref="Failed"/>; the extent is freed once the reader let go too.</summary>
    internal void MarkFailed(string why)
    {
        Volatile.Write(ref *(int*)(_record + 8), Failed);
        Wake();
        // The reader's invocation sees the failure (the worker raises OSError); the fetch's own exception goes
        // nowhere else once its reader took the fill, so it is logged here.
        var filled = Filled; // read before the record may go with the last holder
        Log.StreamedFillFailed(_core.Logger, BlobName, filled, Length, why);
        Release(); // before Completion: see MarkComplete
        _done.TrySetException(new IOException($"{BlobName}: reading it from storage failed after {filled} of {Length} bytes ({why}); it was not cached"));
    }

    /// <summary>The reader's invocation ended (or it never used the fill).</summary>
    public void ReleaseReader() => Release();

    private void Release()
    {
        if (Interlocked.Decrement(ref _holders) != 0)
            return;
        _view.SafeMemoryMappedViewHandle.ReleasePointer();
        _view.Dispose();
        _map.Dispose();
        _file.Dispose();
        _core.Arena.DeleteSideFile(ProgressFile);
        _core.Fills.TryRemove(new KeyValuePair<string, StreamingFill>(ProgressFile, this));
        if (!Volatile.Read(ref _adopted))
            _core.Arena.Free(_extent);
    }

    /// <summary>Writes go to the extent's stream; each then publishes the position (the download writes in order from 0)
    /// and wakes the reader when enough arrived since the last wake.</summary>
    private sealed class ProgressStream(StreamingFill fill, Stream inner) : Stream
    {
        private long _written;
        private bool _yielded, _woke;

        public long Written => _written;

        public override bool CanRead => false;
        public override bool CanSeek => false;
        public override bool CanWrite => true;
        public override long Length => _written;
        public override long Position { get => _written; set => throw new NotSupportedException("a streamed fill is written in order"); }

        public override void Write(ReadOnlySpan<byte> buffer)
        {
            inner.Write(buffer);
            _written += buffer.Length;
            _woke = fill.Advance(_written);
        }

        public override void Write(byte[] buffer, int offset, int count) => Write(buffer.AsSpan(offset, count));

        public override ValueTask WriteAsync(ReadOnlyMemory<byte> buffer, CancellationToken ct = default)
        {
            if (!_yielded)
            {
                // Once, before the first bytes: let the reader's continuation (queued on this thread when the fill was
                // handed over) run. A download whose socket always has data never yields otherwise, and on two cores
                // the reader then saw the fill only when it was complete: 2 of 5 64 MiB misses were served whole
                // (bench/streamed-inputs, 2026-11-29 07:30).
                _yielded = true;
                return YieldingWrite.WriteAfterYieldAsync(this, buffer);
            }
            Write(buffer.Span);
            // And after each wake (~60 times for 256 MiB): the work queued behind the download on this thread (the
            // invocation's message to the worker among it) runs, rather than after the last byte.
            return _woke ? YieldingWrite.YieldAsync() : ValueTask.CompletedTask;
        }

        public override Task WriteAsync(byte[] buffer, int offset, int count, CancellationToken ct)
        {
            Write(buffer.AsSpan(offset, count));
            return Task.CompletedTask;
        }

        public override void Flush()
        {
        }

        public override int Read(byte[] buffer, int offset, int count) => throw new NotSupportedException("the stream is write-only");
        public override long Seek(long offset, SeekOrigin origin) => throw new NotSupportedException("a streamed fill is written in order");
        public override void SetLength(long value) => throw new NotSupportedException("an extent's length is fixed");
    }
}

/// <summary>Outside <see cref="StreamingFill"/>'s unsafe context, where an await may not be.</summary>
internal static class YieldingWrite
{
    public static async ValueTask WriteAfterYieldAsync(Stream stream, ReadOnlyMemory<byte> buffer)
    {
        await Task.Yield();
        stream.Write(buffer.Span);
    }

    public static async ValueTask YieldAsync() => await Task.Yield();
}
