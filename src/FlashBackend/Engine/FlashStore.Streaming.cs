namespace FaaST.FlashBackend.Engine;

/// <summary>
/// What the server needs beyond whole-span calls: a put that streams its bytes in (no whole-object buffer), a reader
/// that streams a value out in units the scheduler admits one at a time, the current version of a key (the "any
/// version" get), and a per-tenant delete (DeregisterTenant).
/// </summary>
public sealed partial class FlashStore
{
    /// <summary>Starts a put of <paramref name="length"/> bytes: space is reserved now, the bytes follow through
    /// <see cref="PutStream.Write"/>, and the value becomes visible only at <see cref="PutStream.Commit"/>. Disposing
    /// an uncommitted stream (a broken client stream, a length mismatch) leaves nothing visible.</summary>
    public PutStream BeginPut(string tenant, string key, string etag, long length)
    {
        RecordFormat.Validate(tenant, key, etag);
        if (length < 0 || length > MaxValueSize)
            throw new ArgumentException($"flash put of key '{key}' for tenant '{tenant}': the value is {length} bytes; the store takes 0 to {MaxValueSize} (one segment less its header block)");
        var header = new RecordHeader(tenant, key, etag, 0, length, 0, Tombstone: false);
        int headerSize = RecordFormat.HeaderSize(header);
        int payloadOffset = RecordFormat.PayloadOffset(headerSize, length);
        (long offset, long seq, int seg, long generation) = Reserve(RecordFormat.PaddedSize(payloadOffset, length), out int evicted);
        return new PutStream(this, header with { Sequence = seq, HeaderSize = headerSize, PayloadOffset = payloadOffset }, offset, seg, generation, evicted);
    }

    /// <summary>Opens a reader of (tenant, key) at <paramref name="etag"/>, or at whichever version is stored when
    /// <paramref name="etag"/> is null; false when that is not stored.</summary>
    public bool TryOpenRead(string tenant, string key, string? etag, out ValueReader reader)
    {
        reader = default;
        RecordFormat.Validate(tenant, key, etag ?? "");
        if (!_index.TryGetValue(new ObjectName(tenant, key), out Extent? e) || (etag is not null && e.Etag != etag)
            || Volatile.Read(ref _segments[e.Segment].Generation) != e.Generation)
            return false;
        reader = new ValueReader(this, tenant, key, e);
        return true;
    }

    /// <summary>Deletes every object of <paramref name="tenant"/> (each with a tombstone, so recovery does not bring
    /// it back); returns how many were stored.</summary>
    public long DeleteTenant(string tenant)
    {
        long n = 0;
        foreach (KeyValuePair<ObjectName, Extent> kv in _index)
        {
            if (kv.Key.Tenant == tenant && Delete(tenant, kv.Key.Key))
                n++;
        }
        return n;
    }

    /// <summary>Reads one stored version from a position, chunk by chunk. Reading from offset 0 to the end checks the
    /// payload CRC32C at the end (a mismatch answers <see cref="ReadStatus.Corrupt"/> and drops the key); every chunk
    /// checks the segment generation (a read that raced a reclaim answers <see cref="ReadStatus.Miss"/>).</summary>
    public struct ValueReader
    {
        private readonly FlashStore _store;
        private readonly string _tenant;
        private readonly string _key;
        private readonly Extent _extent;
        private long _position;
        private uint _crc;
        private bool _sequential;

        internal ValueReader(FlashStore store, string tenant, string key, Extent extent)
        {
            _store = store;
            _tenant = tenant;
            _key = key;
            _extent = extent;
            _sequential = true;
        }

        public readonly string Etag => _extent.Etag;

        internal readonly Extent Extent => _extent;
        internal readonly string Tenant => _tenant;
        internal readonly string Key => _key;

        public readonly long Length => _extent.Length;

        public readonly long Position => _position;

        /// <summary>Moves to <paramref name="offset"/> (a range get); the whole-value CRC is then not checked.</summary>
        public void Seek(long offset)
        {
            CheckRange(_tenant, _key, _extent, offset, 0);
            _sequential &= offset == _position;
            _position = offset;
        }

        /// <summary>Fills <paramref name="destination"/> (or up to the value's end) from the current position.</summary>
        public ReadStatus Read(Span<byte> destination, out int bytesRead)
        {
            bytesRead = 0;
            long count = Math.Min(destination.Length, _extent.Length - _position);
            using AlignedBufferPool.Lease lease = _store._pool.Rent();
            for (long done = 0; done < count;)
            {
                bool first = _sequential && _position == 0;
                ReadStatus status = _store.ReadChunk(_tenant, _key, _extent, _position, count - done, lease, first, out int start, out int n);
                if (status != ReadStatus.Hit)
                    return status;
                ReadOnlySpan<byte> slice = lease.Span.Slice(start, n);
                if (_sequential)
                    _crc = RecordFormat.Crc32C(_crc, slice);
                slice.CopyTo(destination[(int)done..]);
                done += n;
                _position += n;
            }
            bytesRead = (int)count;
            if (_sequential && _position == _extent.Length && _crc != _extent.PayloadCrc)
                return _store.DropCorrupt(_tenant, _key, _extent);
            return ReadStatus.Hit;
        }
    }

    /// <summary>
    /// One streamed put. The record's first block (the header, and a small value's payload) is held back and written last,
    /// at commit, once the payload CRC32C is known: until then no valid header exists at the record's offset, so a crash
    /// leaves a block recovery stops at (never a record with wrong bytes). Later payload goes to the device a pooled
    /// aligned buffer at a time. Not thread-safe: one caller streams it. The segment's in-flight count stays raised until
    /// commit or dispose, so a reclaim of this segment waits for the stream; the server bounds a stream's idle time.
    /// </summary>
    public sealed class PutStream : IDisposable
    {
        private readonly FlashStore _store;
        private readonly RecordHeader _header;
        private readonly long _offset;
        private readonly int _segment;
        private readonly long _generation;
        private readonly AlignedBufferPool.Lease _first;
        private readonly AlignedBufferPool.Lease _data;
        private long _written;      // payload bytes taken
        private int _fill;          // bytes in the data buffer, not yet on the device
        private long _devicePos;    // where the data buffer goes
        private uint _crc;
        private bool _done;

        internal PutStream(FlashStore store, RecordHeader header, long offset, int segment, long generation, int evicted)
        {
            _store = store;
            _header = header;
            _offset = offset;
            _segment = segment;
            _generation = generation;
            Evicted = evicted;
            _first = store._pool.Rent();
            _data = store._pool.Rent();
            _devicePos = offset + DirectFile.Alignment;
            _first.Span[..DirectFile.Alignment].Clear();
        }

        /// <summary>Objects a reclaim dropped to make room for this put.</summary>
        public int Evicted { get; }

        public long Length => _header.PayloadLength;

        public long Written => _written;

        /// <summary>Appends payload bytes; more than the declared length throws naming the key, and the put is void.</summary>
        public void Write(ReadOnlySpan<byte> bytes)
        {
            ObjectDisposedException.ThrowIf(_done, this);
            if (bytes.Length > _header.PayloadLength - _written)
                throw new ArgumentException($"flash put of key '{_header.Key}' for tenant '{_header.Tenant}': more than the declared {_header.PayloadLength} bytes");
            _crc = RecordFormat.Crc32C(_crc, bytes);
            int inFirst = (int)Math.Max(0, Math.Min(bytes.Length, DirectFile.Alignment - _header.PayloadOffset - _written));
            if (inFirst > 0)
            {
                bytes[..inFirst].CopyTo(_first.Span[(int)(_header.PayloadOffset + _written)..]);
                _written += inFirst;
                bytes = bytes[inFirst..];
            }
            Span<byte> data = _data.Span;
            while (bytes.Length > 0)
            {
                int n = Math.Min(bytes.Length, data.Length - _fill);
                bytes[..n].CopyTo(data[_fill..]);
                _fill += n;
                _written += n;
                bytes = bytes[n..];
                if (_fill == data.Length)
                    Flush();
            }
        }

        /// <summary>Writes the rest and the header, and publishes the value. Throws naming the key when fewer bytes
        /// than declared arrived (nothing is then visible).</summary>
        public void Commit()
        {
            ObjectDisposedException.ThrowIf(_done, this);
            if (_written != _header.PayloadLength)
                throw new ArgumentException($"flash put of key '{_header.Key}' for tenant '{_header.Tenant}': {_written} bytes arrived, the header declared {_header.PayloadLength}");
            if (_fill > 0)
            {
                int padded = (_fill + DirectFile.Alignment - 1) & ~(DirectFile.Alignment - 1);
                _data.Span[_fill..padded].Clear();   // padding: zeros, never a previous request's bytes
                _fill = padded;
                Flush();
            }
            RecordHeader h = _header with { PayloadCrc = _crc };
            RecordFormat.WriteHeader(_first.Span, h);
            _store._file.Write(_first.Span[..DirectFile.Alignment], _offset);
            var extent = new Extent(h.Etag, _offset, h.PayloadOffset, h.PayloadLength, h.Sequence, _segment, _generation, _crc);
            var name = new ObjectName(h.Tenant, h.Key);
            _store._index.AddOrUpdate(name, extent, (_, old) => old.Sequence > extent.Sequence ? old : extent);
            _store._segments[_segment].Records.Enqueue(new(name, extent));
            Interlocked.Increment(ref _store._puts);
            Finish();
        }

        private void Flush()
        {
            _store._file.Write(_data.Span[.._fill], _devicePos);
            _devicePos += _fill;
            _fill = 0;
        }

        /// <summary>Without a commit: marks the record abandoned (so recovery steps over it to the records after it),
        /// publishes nothing.</summary>
        public void Dispose()
        {
            if (_done)
                return;
            try
            {
                Span<byte> block = _first.Span[..DirectFile.Alignment];
                block.Clear();
                RecordFormat.WriteHeader(block, _header with { Abandoned = true });
                _store._file.Write(block, _offset);
            }
            catch (IOException)
            {
                // The device failed too: the block stays unwritten, which recovery also never indexes.
            }
            Finish();
        }

        private void Finish()
        {
            _done = true;
            _first.Dispose();
            _data.Dispose();
            Interlocked.Decrement(ref _store._segments[_segment].InFlight);   // after publishing: reclaim waits for this
        }
    }
}
