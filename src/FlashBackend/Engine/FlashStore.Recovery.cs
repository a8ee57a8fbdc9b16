namespace FaaST.FlashBackend.Engine;

/// <summary>
/// Restart recovery (the default <see cref="StartupMode.Recover"/>): scan every segment from its start, rebuild the
/// index from the records whose header and payload checksums hold, and put the tail after the newest record.
/// Within a segment the scan stops at the first block that is not a valid header, or whose sequence is not above the
/// previous record's: a reused segment still holds its previous generation's records past the new tail, and those are
/// older, so they end the scan instead of coming back. A record with a valid header but a failed payload CRC is torn
/// (a crash mid-write): it is skipped, counted, and never indexed; its header's length is trusted to reach the next.
/// The newest record per (tenant, key) wins; a tombstone wins by removing the key.
/// </summary>
public sealed partial class FlashStore
{
    private void Recover()
    {
        var winners = new Dictionary<ObjectName, (RecordHeader Header, long Offset, int Segment)>();
        var used = new List<(int Segment, long First, long End)>();
        using AlignedBufferPool.Lease lease = _pool.Rent();
        Span<byte> block = lease.Span[..DirectFile.Alignment];
        foreach (Segment s in _segments)
        {
            long start = SegmentStart(s.Index), end = start + _segmentSize, pos = start, first = 0, last = 0;
            while (pos + DirectFile.Alignment <= end)
            {
                _file.Read(block, pos);
                RecordHeader? h = RecordFormat.TryReadHeader(block);
                if (h is null || h.Sequence <= last)
                    break;
                long padded = RecordFormat.PaddedSize(h.PayloadOffset, h.PayloadLength);
                if (pos + padded > end)
                    break;
                if (first == 0)
                    first = h.Sequence;
                last = h.Sequence;
                if (h.Abandoned)
                {
                    // A put whose stream broke: stepped over, never indexed (FlashStore.PutStream).
                }
                else if (PayloadChecks(h, pos, padded, lease))
                {
                    var name = new ObjectName(h.Tenant, h.Key);
                    if (!winners.TryGetValue(name, out var w) || w.Header.Sequence < h.Sequence)
                        winners[name] = (h, pos, s.Index);
                }
                else
                {
                    _torn++;
                }
                pos += padded;
                block = lease.Span[..DirectFile.Alignment];
            }
            if (first != 0)
                used.Add((s.Index, first, pos));
            _sequence = Math.Max(_sequence, last);
        }
        foreach ((ObjectName name, (RecordHeader h, long offset, int seg)) in winners)
        {
            if (h.Tombstone)
                continue;
            var extent = new Extent(h.Etag, offset, h.PayloadOffset, h.PayloadLength, h.Sequence, seg, 0, h.PayloadCrc);
            _index[name] = extent;
            _segments[seg].Records.Enqueue(new(name, extent));
            _recovered++;
        }
        if (used.Count == 0)
        {
            StartEmpty();
            return;
        }
        used.Sort((a, b) => a.First.CompareTo(b.First));
        foreach (var u in used)
            _logOrder.Enqueue(u.Segment);
        _current = used[^1].Segment;
        _writePos = used[^1].End;
        var inUse = used.Select(u => u.Segment).ToHashSet();
        for (int i = _segments.Length - 1; i >= 0; i--)
        {
            if (!inUse.Contains(i))
                _freeSegments.Push(i);
        }
    }

    /// <summary>Reads the record's payload in buffer-sized chunks and compares its CRC32C with the header's.</summary>
    private bool PayloadChecks(RecordHeader h, long pos, long padded, AlignedBufferPool.Lease lease)
    {
        Span<byte> buf = lease.Span;
        uint crc = 0;
        long payloadLeft = h.PayloadLength, left = padded;
        int skip = h.PayloadOffset;
        while (payloadLeft > 0)
        {
            int chunk = (int)Math.Min(left, buf.Length);
            _file.Read(buf[..chunk], pos);
            int n = (int)Math.Min(chunk - skip, payloadLeft);
            crc = RecordFormat.Crc32C(crc, buf.Slice(skip, n));
            payloadLeft -= n;
            pos += chunk;
            left -= chunk;
            skip = 0;
        }
        return crc == h.PayloadCrc;
    }
}
