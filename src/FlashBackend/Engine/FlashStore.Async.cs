using System.Runtime.InteropServices;

namespace FaaST.FlashBackend.Engine;

/// <summary>
/// One small read in flight through io_uring (a GetMany item): the caller derives from it, <see cref="FlashStore.BeginRead"/>
/// starts it, and <see cref="ReadDone"/> ends it on the ring's thread. Reused: the store keeps nothing of it after
/// <see cref="ReadDone"/> returns.
/// </summary>
internal abstract class PendingRead : IUringCompletion
{
    private FlashStore? _store;
    private FlashStore.Extent? _extent;
    private string _tenant = "", _key = "";
    private long _offset;
    private int _count, _start, _readLength;
    private bool _whole, _headerRead, _deviceDone;
    private AlignedBufferPool.Lease _lease;

    /// <summary>The read ended: <paramref name="status"/> Hit with the wanted <paramref name="bytes"/> (valid only
    /// during this call), Miss (the value was reclaimed meanwhile), Corrupt (checksum: the key is dropped), or
    /// <paramref name="error"/> set when the device failed. Runs on the ring's thread: do little, never block.</summary>
    protected abstract void ReadDone(ReadStatus status, ReadOnlySpan<byte> bytes, string? error);

    /// <summary>The device is done with the read, before its checks (<see cref="IUringCompletion.DeviceDone"/>): give
    /// back what the read held at the device (GetMany: the scheduler's unit). Called once per read, before
    /// <see cref="ReadDone"/>; runs on the ring's thread.</summary>
    protected virtual void DeviceDone()
    {
    }

    internal void Start(FlashStore store, FlashStore.Extent extent, string tenant, string key, long offset, int count, int start, int readLength, AlignedBufferPool.Lease lease, bool headerRead)
    {
        _headerRead = headerRead;
        _deviceDone = false;
        _store = store;
        _extent = extent;
        _tenant = tenant;
        _key = key;
        _offset = offset;
        _count = count;
        _start = start;
        _readLength = readLength;
        _whole = offset == 0 && count == extent.Length;
        _lease = lease;
    }

    void IUringCompletion.DeviceDone(int result)
    {
        _deviceDone = true;
        DeviceDone();
    }

    void IUringCompletion.Completed(int result)
    {
        if (!_deviceDone)
        {
            _deviceDone = true;
            DeviceDone();
        }
        FlashStore store = _store!;
        FlashStore.Extent e = _extent!;
        _store = null;
        _extent = null;
        AlignedBufferPool.Lease lease = _lease;
        _lease = default;
        try
        {
            if (result < 0)
                ReadDone(ReadStatus.Miss, default, $"device read failed: {Marshal.GetPInvokeErrorMessage(-result)} (errno {-result})");
            else if (result < _readLength)
                ReadDone(ReadStatus.Miss, default, $"short device read ({result} of {_readLength} bytes)");
            else
            {
                ReadStatus status = store.FinishRead(e, _tenant, _key, lease.Span[.._readLength], _start, _count, _whole, _headerRead);
                ReadDone(status, status == ReadStatus.Hit ? lease.Span.Slice(_start, _count) : default, null);
            }
        }
        finally
        {
            lease.Dispose();
        }
    }
}

/// <summary>Small reads through io_uring (<see cref="PendingRead"/>).</summary>
public sealed partial class FlashStore
{
    /// <summary>Whether small reads go through io_uring (<see cref="BeginRead"/> works).</summary>
    public bool UsesIoUring => _ring is not null;

    /// <summary>How the ring's completions are posted ("coop" or "default", <see cref="IoUring.TaskRun"/>), or null
    /// without io_uring.</summary>
    public string? IoUringTaskRun => _ring?.TaskRun;

    /// <summary>Why io_uring is not used, or null when it is.</summary>
    public string? IoUringUnavailable => _ring is null ? _ringUnavailable : null;

    /// <summary>The largest read <see cref="BeginRead"/> takes: what one pooled buffer holds when the range starts at
    /// the worst offset within a block (the header shares the first block with the payload).</summary>
    public int MaxAsyncRead => _pool.BufferSize - DirectFile.Alignment;

    /// <summary>
    /// Starts reading <paramref name="count"/> bytes of <paramref name="reader"/>'s value from <paramref name="offset"/>
    /// (at most <see cref="MaxAsyncRead"/>; the range is the caller's to have clamped to the value) with one aligned
    /// device read through io_uring; <paramref name="op"/> hears the outcome on the ring's thread. A whole read checks
    /// the record's header and the payload's CRC32C exactly as <see cref="Read"/> does (a failure is Corrupt and drops
    /// the key); every read checks the segment's generation after the I/O (a reclaim that raced it makes it a Miss).
    /// </summary>
    internal unsafe void BeginRead(in ValueReader reader, long offset, int count, PendingRead op)
    {
        if (_ring is null)
            throw new InvalidOperationException($"flash store {Path}: io_uring is not in use ({_ringUnavailable})");
        Extent e = reader.Extent;
        if (offset < 0 || count <= 0 || offset + count > e.Length || count > MaxAsyncRead)
            throw new ArgumentOutOfRangeException(nameof(count), $"flash get of key '{reader.Key}': range at {offset} of {count} bytes is outside the value's {e.Length} bytes or over {MaxAsyncRead}");
        // Records start on a block boundary and a payload starts either in the header's block (read and checked with
        // it) or on the next boundary (a 4 KiB value is one 4 KiB read); start < one block, so start + count stays
        // under one buffer.
        long abs = e.Offset + e.PayloadOffset + offset;
        long alignedStart = abs & ~(long)(DirectFile.Alignment - 1);
        int start = (int)(abs - alignedStart);
        int readLength = (int)((start + count + DirectFile.Alignment - 1) & ~(long)(DirectFile.Alignment - 1));
        AlignedBufferPool.Lease lease = _pool.Rent();
        op.Start(this, e, reader.Tenant, reader.Key, offset, count, start, readLength, lease, alignedStart == e.Offset);
        _ring.SubmitRead(op, _file.Fd, lease.Pointer, readLength, alignedStart);
    }

    /// <summary>Starts a run of <see cref="BeginRead"/> calls on this thread that wake the ring once, at
    /// <see cref="FlushReads"/> (see <see cref="IoUring.DeferWakes"/>); dispose the scope before any await.</summary>
    internal static IoUring.DeferScope DeferReadWakes() => IoUring.DeferWakes();

    /// <summary>Wakes the ring for the reads this thread queued under <see cref="DeferReadWakes"/>.</summary>
    internal void FlushReads() => _ring?.Flush();

    /// <summary>From <see cref="PendingRead"/>'s ReadDone (the ring's thread): <paramref name="listener"/> hears once
    /// when the current batch of completions is done.</summary>
    internal void AtReadBatchEnd(IUringBatchEnd listener) => _ring!.AtBatchEnd(listener);

    /// <summary>The checks after an async read (see <see cref="BeginRead"/>); <paramref name="read"/> starts at the
    /// aligned start, the wanted bytes at <paramref name="start"/>.</summary>
    internal ReadStatus FinishRead(Extent e, string tenant, string key, ReadOnlySpan<byte> read, int start, int count, bool whole, bool headerRead)
    {
        if (Volatile.Read(ref _segments[e.Segment].Generation) != e.Generation)
            return ReadStatus.Miss;
        if (whole && headerRead && !RecordFormat.HeaderIs(read, e.Sequence, e.Length))
            return DropCorrupt(tenant, key, e);
        if (whole && RecordFormat.Crc32C(0, read.Slice(start, count)) != e.PayloadCrc)
            return DropCorrupt(tenant, key, e);
        return ReadStatus.Hit;
    }
}
