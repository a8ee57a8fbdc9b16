namespace FaaST.FlashBackend.Engine;

/// <summary>Gets: a whole value or a byte range, into a caller's span or stream, one pooled aligned buffer at a time
/// (no whole-object buffer, whatever the size).</summary>
public sealed partial class FlashStore
{
    /// <summary>Reads (tenant, key) at <paramref name="etag"/> from <paramref name="offset"/> into
    /// <paramref name="destination"/>, up to its length or the value's end. A read of the whole value checks the
    /// record's header and payload CRC32C: on a mismatch the answer is <see cref="ReadStatus.Corrupt"/> (the bytes
    /// copied must not be used) and the key is dropped. A range read checks that the record is still the one the
    /// index named (the segment generation); its bytes were checksummed when written and when recovered.</summary>
    public ReadStatus Read(string tenant, string key, string etag, long offset, Span<byte> destination, out int bytesRead)
    {
        bytesRead = 0;
        if (!TryLookup(tenant, key, etag, out Extent? found))
            return ReadStatus.Miss;
        Extent e = found!;
        long count = CheckRange(tenant, key, e, offset, destination.Length);
        bool whole = offset == 0 && count == e.Length;
        uint crc = 0;
        using AlignedBufferPool.Lease lease = _pool.Rent();
        for (long done = 0; done < count;)
        {
            ReadStatus status = ReadChunk(tenant, key, e, offset + done, count - done, lease, whole && done == 0, out int start, out int n);
            if (status != ReadStatus.Hit)
                return status;
            ReadOnlySpan<byte> slice = lease.Span.Slice(start, n);
            if (whole)
                crc = RecordFormat.Crc32C(crc, slice);
            slice.CopyTo(destination[(int)done..]);
            done += n;
        }
        if (whole && crc != e.PayloadCrc)
            return DropCorrupt(tenant, key, e);
        bytesRead = (int)count;
        return ReadStatus.Hit;
    }

    /// <summary>Streams (tenant, key) at <paramref name="etag"/> from <paramref name="offset"/>, <paramref name="count"/>
    /// bytes or to the end when null, into <paramref name="destination"/>. For a whole value the CRC is known only
    /// at the end: a <see cref="ReadStatus.Corrupt"/> answer then means the bytes already written must be discarded
    /// (the server ends the gRPC stream with an error status, which the client treats as a failed get).</summary>
    public async ValueTask<ReadStatus> CopyToAsync(string tenant, string key, string etag, long offset, long? count, Stream destination, CancellationToken cancellationToken = default)
    {
        ArgumentNullException.ThrowIfNull(destination);
        if (!TryLookup(tenant, key, etag, out Extent? found))
            return ReadStatus.Miss;
        Extent e = found!;
        long total = CheckRange(tenant, key, e, offset, count ?? long.MaxValue);
        bool whole = offset == 0 && total == e.Length;
        uint crc = 0;
        using AlignedBufferPool.Lease lease = _pool.Rent();
        for (long done = 0; done < total;)
        {
            ReadStatus status = ReadChunk(tenant, key, e, offset + done, total - done, lease, whole && done == 0, out int start, out int n);
            if (status != ReadStatus.Hit)
                return status;
            if (whole)
                crc = RecordFormat.Crc32C(crc, lease.Memory.Span.Slice(start, n));
            await destination.WriteAsync(lease.Memory.Slice(start, n), cancellationToken).ConfigureAwait(false);
            done += n;
        }
        return whole && crc != e.PayloadCrc ? DropCorrupt(tenant, key, e) : ReadStatus.Hit;
    }

    private static long CheckRange(string tenant, string key, Extent e, long offset, long wanted)
    {
        if (offset < 0 || offset > e.Length || wanted < 0)
            throw new ArgumentOutOfRangeException(nameof(offset), $"flash get of key '{key}' for tenant '{tenant}': range at {offset} (count {wanted}) is outside the value's {e.Length} bytes");
        return Math.Min(wanted, e.Length - offset);
    }

    /// <summary>One aligned read covering the payload from <paramref name="payloadPos"/>; the wanted bytes are at
    /// [start, start + n) of the lease. Checks the generation after the I/O (a reclaim that raced it makes this a miss)
    /// and, for the first chunk of a whole read, that the header is this record's.</summary>
    private ReadStatus ReadChunk(string tenant, string key, Extent e, long payloadPos, long remaining, AlignedBufferPool.Lease lease, bool checkHeader, out int start, out int n)
    {
        long abs = e.Offset + e.PayloadOffset + payloadPos;
        long alignedStart = abs & ~(long)(DirectFile.Alignment - 1);
        start = (int)(abs - alignedStart);
        Span<byte> buf = lease.Span;
        long wantedBytes = start + remaining;
        int readLen = (int)Math.Min(buf.Length, (wantedBytes + DirectFile.Alignment - 1) & ~(long)(DirectFile.Alignment - 1));
        _file.Read(buf[..readLen], alignedStart);
        n = (int)Math.Min(readLen - start, remaining);
        if (Volatile.Read(ref _segments[e.Segment].Generation) != e.Generation)
            return ReadStatus.Miss;
        // The header is checked where the read holds it: when it shares the payload's first block. A block-aligned
        // payload's whole read is checked by its CRC32C alone (the index holds it, from the put or from recovery,
        // which verified it against the header's).
        if (checkHeader && alignedStart == e.Offset)
        {
            RecordHeader? h = RecordFormat.TryReadHeader(buf);
            if (h is null || h.Sequence != e.Sequence || h.Tenant != tenant || h.Key != key || h.Etag != e.Etag || h.PayloadLength != e.Length)
                return DropCorrupt(tenant, key, e);
        }
        return ReadStatus.Hit;
    }

    private ReadStatus DropCorrupt(string tenant, string key, Extent e)
    {
        _index.TryRemove(new KeyValuePair<ObjectName, Extent>(new ObjectName(tenant, key), e));
        return ReadStatus.Corrupt;
    }
}
