using System.Collections.Concurrent;

namespace FaaST.FlashBackend.Engine;

/// <summary>
/// The flash tier's storage engine (issue 22 item 2): a log of checksummed records on one preallocated file with
/// direct I/O, an in-memory index from (tenant, key) to the extent of its latest version, and reclamation of the oldest
/// segment when the log is full. Tenants are namespaces: every call takes the tenant from the caller (the server's
/// authenticated app), never from the key, and the index is keyed by both, so one tenant cannot name another's objects.
///
/// Index: a <see cref="ConcurrentDictionary{TKey, TValue}"/> of immutable <see cref="Extent"/>s. Reads are lock-free
/// (TryGetValue, then I/O); puts publish with a sequence compare so the newest record wins whatever the completion
/// order. An immutable snapshot would also give lock-free reads but copies the map on every put.
///
/// Reclamation policy: evict, not copy forward. The tier is a cache in front of blob storage, so dropping the oldest
/// segment's objects loses nothing that cannot be fetched again, while copying forward would spend device tokens
/// (En4S §4) on background writes that compete with tenants' SLOs. A reader holding an extent of a segment being
/// reclaimed is protected by the segment's generation: it is bumped before the segment is rewritten and checked after
/// every read, so a read that raced a reclaim is a miss, never another object's bytes.
/// </summary>
public sealed partial class FlashStore : IDisposable
{
    private readonly DirectFile _file;
    private readonly AlignedBufferPool _pool;
    private readonly IoUring? _ring;
    private readonly string? _ringUnavailable;
    private readonly ConcurrentDictionary<ObjectName, Extent> _index = new();
    private readonly Segment[] _segments;
    private readonly int _segmentSize;

    // The append state, under appendLock: only offset reservation and segment switching hold it, never I/O.
    private readonly Lock _appendLock = new();
    private readonly Queue<int> _logOrder = new();   // segments holding records, oldest first; the last is current
    private readonly Stack<int> _freeSegments = new();
    private int _current = -1;
    private long _writePos;
    private long _sequence;

    private long _puts, _deletes, _reclaimed, _evicted, _recovered, _torn;

    /// <summary>The largest value a put takes: one segment less the header block.</summary>
    public long MaxValueSize => _segmentSize - DirectFile.Alignment;

    public string Path => _file.Path;

    private FlashStore(FlashStoreOptions options, DirectFile file)
    {
        _file = file;
        _segmentSize = options.SegmentSize;
        _pool = new AlignedBufferPool(options.IoBufferSize);
        if (options.UseIoUring)
            _ring = IoUring.TryCreate(256, out _ringUnavailable);
        else
            _ringUnavailable = "turned off (FlashStoreOptions.UseIoUring = false)";
        _segments = new Segment[options.Capacity / options.SegmentSize];
        for (int i = 0; i < _segments.Length; i++)
            _segments[i] = new Segment(i);
    }

    public static FlashStore Open(FlashStoreOptions options)
    {
        ArgumentNullException.ThrowIfNull(options);
        if (options.SegmentSize % DirectFile.Alignment != 0 || options.SegmentSize < 2 * DirectFile.Alignment)
            throw new ArgumentException($"flash store {options.Path}: segment size {options.SegmentSize} must be a multiple of {DirectFile.Alignment} and hold at least two blocks");
        if (options.Capacity % options.SegmentSize != 0 || options.Capacity / options.SegmentSize < 2)
            throw new ArgumentException($"flash store {options.Path}: capacity {options.Capacity} must be a whole number (at least 2) of {options.SegmentSize}-byte _segments, so one segment can be _reclaimed while another is written");
        var store = new FlashStore(options, DirectFile.Open(options.Path, options.Capacity));
        try
        {
            if (options.Startup == StartupMode.Recover)
                store.Recover();
            else
                store.StartEmpty();
            return store;
        }
        catch
        {
            store.Dispose();
            throw;
        }
    }

    /// <summary>Whether the kernel holds O_DIRECT for the log's file descriptor.</summary>
    public bool UsesDirectIO => _file.KernelHasODirect();

    /// <summary>Stores <paramref name="value"/> as (<paramref name="tenant"/>, <paramref name="key"/>) at
    /// <paramref name="etag"/>, replacing any earlier version. Never refuses for lack of space: the oldest segment is
    /// reclaimed. Throws <see cref="ArgumentException"/> naming the key for a value larger than <see cref="MaxValueSize"/>
    /// or names over the header limits.</summary>
    public void Put(string tenant, string key, string etag, ReadOnlySpan<byte> value)
    {
        RecordFormat.Validate(tenant, key, etag);
        if (value.Length > MaxValueSize)
            throw new ArgumentException($"flash put of key '{key}' for tenant '{tenant}': the value is {value.Length} bytes, more than the largest the store takes ({MaxValueSize}, one segment less its header block)");
        var header = new RecordHeader(tenant, key, etag, 0, value.Length, RecordFormat.Crc32C(0, value), Tombstone: false);
        Extent extent = Append(header, value);
        var name = new ObjectName(tenant, key);
        _index.AddOrUpdate(name, extent, (_, old) => old.Sequence > extent.Sequence ? old : extent);
        _segments[extent.Segment].Records.Enqueue(new(name, extent));
        Interlocked.Increment(ref _puts);
        Interlocked.Decrement(ref _segments[extent.Segment].InFlight);   // after publishing: reclaim waits for this
    }

    /// <summary>Removes (tenant, key). A tombstone is logged first (in either startup mode), so recovery
    /// does not bring the object back. Returns whether the key was stored.</summary>
    public bool Delete(string tenant, string key)
    {
        RecordFormat.Validate(tenant, key, "");
        var name = new ObjectName(tenant, key);
        if (!_index.ContainsKey(name))
            return false;
        Extent tomb = Append(new RecordHeader(tenant, key, "", 0, 0, RecordFormat.Crc32C(0, []), Tombstone: true), []);
        Interlocked.Decrement(ref _segments[tomb.Segment].InFlight);
        bool removed = false;
        while (_index.TryGetValue(name, out Extent? e) && e.Sequence < tomb.Sequence)
            removed |= _index.TryRemove(new KeyValuePair<ObjectName, Extent>(name, e));
        Interlocked.Increment(ref _deletes);
        return removed;
    }

    /// <summary>The stored length of (tenant, key) at <paramref name="etag"/>, if that version is stored.</summary>
    public bool TryGetLength(string tenant, string key, string etag, out long length)
    {
        bool hit = TryLookup(tenant, key, etag, out Extent? e);
        length = hit ? e!.Length : 0;
        return hit;
    }

    public FlashStoreStats GetStats() => new(_index.Count, Interlocked.Read(ref _puts), Interlocked.Read(ref _deletes),
        Interlocked.Read(ref _reclaimed), Interlocked.Read(ref _evicted), Interlocked.Read(ref _recovered), Interlocked.Read(ref _torn));

    /// <summary>Every live (tenant, key, ETag, length, sequence), for tests and the server's stats.</summary>
    internal IEnumerable<(string Tenant, string Key, string Etag, long Length, long Sequence, long Offset)> Snapshot() =>
        _index.Select(kv => (kv.Key.Tenant, kv.Key.Key, kv.Value.Etag, kv.Value.Length, kv.Value.Sequence, kv.Value.Offset));

    private bool TryLookup(string tenant, string key, string etag, out Extent? extent)
    {
        RecordFormat.Validate(tenant, key, etag);
        if (_index.TryGetValue(new ObjectName(tenant, key), out extent) && extent.Etag == etag
            && Volatile.Read(ref _segments[extent.Segment].Generation) == extent.Generation)
            return true;
        extent = null;
        return false;
    }

    /// <summary>Reserves space (under the append lock, no I/O), writes header and payload through pooled aligned
    /// buffers, and returns the extent with its segment's in-flight count raised; the caller lowers it once published.</summary>
    private Extent Append(RecordHeader header, ReadOnlySpan<byte> payload)
    {
        int payloadOffset = RecordFormat.PayloadOffset(RecordFormat.HeaderSize(header), payload.Length);
        long padded = RecordFormat.PaddedSize(payloadOffset, payload.Length);
        (long offset, long seq, int seg, long generation) = Reserve(padded, out _);
        header = header with { Sequence = seq };
        using AlignedBufferPool.Lease lease = _pool.Rent();
        Span<byte> buf = lease.Span;
        int used = RecordFormat.WriteHeader(buf, header);
        buf[used..payloadOffset].Clear();   // the header's block past it when the payload starts on the next block
        used = payloadOffset;
        long pos = offset, remaining = padded;
        int payloadDone = 0;
        while (remaining > 0)
        {
            int chunk = (int)Math.Min(remaining, buf.Length);
            int n = Math.Min(chunk - used, payload.Length - payloadDone);
            payload.Slice(payloadDone, n).CopyTo(buf[used..]);
            buf[(used + n)..chunk].Clear();   // padding: zeros, never a previous request's bytes
            payloadDone += n;
            _file.Write(buf[..chunk], pos);
            pos += chunk;
            remaining -= chunk;
            used = 0;
        }
        return new Extent(header.Etag, offset, payloadOffset, payload.Length, seq, seg, generation, header.PayloadCrc);
    }

    /// <summary>Reserves <paramref name="padded"/> bytes at the log's tail (under the append lock, no I/O) and raises
    /// the segment's in-flight count; <paramref name="evicted"/> is how many objects a reclaim on the way dropped.</summary>
    private (long Offset, long Sequence, int Segment, long Generation) Reserve(long padded, out int evicted)
    {
        lock (_appendLock)
        {
            long before = _evicted;
            if (_current < 0 || _writePos + padded > SegmentStart(_current) + _segmentSize)
                SwitchSegment();
            evicted = (int)(_evicted - before);
            long offset = _writePos;
            _writePos += padded;
            int seg = _current;
            Interlocked.Increment(ref _segments[seg].InFlight);
            return (offset, ++_sequence, seg, _segments[seg].Generation);
        }
    }

    /// <summary>Moves the tail to a free segment, or reclaims the oldest (under the append lock).</summary>
    private void SwitchSegment()
    {
        int next;
        if (_freeSegments.Count > 0)
        {
            next = _freeSegments.Pop();
        }
        else
        {
            next = _logOrder.Dequeue();
            Reclaim(_segments[next]);
        }
        _logOrder.Enqueue(next);
        _current = next;
        _writePos = SegmentStart(next);
    }

    /// <summary>Evicts every object whose latest version lives in <paramref name="s"/>. The generation is bumped first,
    /// so readers already holding one of its extents will see the change after their read and answer a miss.</summary>
    private void Reclaim(Segment s)
    {
        Interlocked.Increment(ref s.Generation);
        var spin = new SpinWait();
        while (Volatile.Read(ref s.InFlight) != 0)   // a put reserved here before the log wrapped is still publishing
            spin.SpinOnce();
        while (s.Records.TryDequeue(out KeyValuePair<ObjectName, Extent> r))
        {
            if (_index.TryRemove(r))   // only if still this extent: a newer version elsewhere stays
                Interlocked.Increment(ref _evicted);
        }
        Interlocked.Increment(ref _reclaimed);
    }

    private long SegmentStart(int segment) => (long)segment * _segmentSize;

    private void StartEmpty()
    {
        for (int i = _segments.Length - 1; i >= 0; i--)
            _freeSegments.Push(i);
    }

    public void Dispose()
    {
        // The ring first: reads still in the kernel write into pooled buffers, which must outlive them.
        _ring?.Dispose();
        _file.Dispose();
        _pool.Dispose();
    }

    private readonly record struct ObjectName(string Tenant, string Key);

    /// <summary>Where one version lives: immutable, replaced whole in the index.</summary>
    /// <summary>Where a value is: <see cref="PayloadOffset"/> is its first byte's distance from the record's start
    /// (<see cref="RecordFormat.PayloadOffset"/>); under <see cref="DirectFile.Alignment"/> the header shares the block.</summary>
    internal sealed record Extent(string Etag, long Offset, int PayloadOffset, long Length, long Sequence, int Segment, long Generation, uint PayloadCrc);

    private sealed class Segment(int index)
    {
        public readonly int Index = index;
        public long Generation;
        public int InFlight;
        public readonly ConcurrentQueue<KeyValuePair<ObjectName, Extent>> Records = new();
    }
}
