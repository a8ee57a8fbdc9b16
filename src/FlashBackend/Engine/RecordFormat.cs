using System.Buffers.Binary;
using System.Numerics;
using System.Runtime.InteropServices;
using System.Text;

namespace FaaST.FlashBackend.Engine;

/// <summary>
/// The on-flash record: a header, then the payload, padded to <see cref="DirectFile.Alignment"/>. Header layout
/// (little endian): magic u32 · format version u16 · flags u16 (1 = tombstone) · sequence i64 · payload length i64 ·
/// payload CRC32C u32 · tenant, key and ETag lengths u16 each · reserved u16 · header CRC32C u32 (over the header with
/// this field zeroed, so it also covers the payload CRC) · tenant, key and ETag in UTF-8. The tenant is in the header so
/// recovery can rebuild the per-tenant namespaces, and reads check it as well as the index (defence in depth).
/// </summary>
internal static class RecordFormat
{
    public const uint Magic = 0x31524C46; // "FLR1"
    /// <summary>2: a payload that does not fit the header's block starts on the next block boundary
    /// (<see cref="PayloadOffset"/>). 1, the earlier layout (the payload right after the header), is still read.</summary>
    public const ushort FormatVersion = 2;
    public const ushort TombstoneFlag = 1;

    /// <summary>A streamed put that ended without its bytes (a broken stream): the header is written so recovery can
    /// step over the record to the ones after it in the segment, and the record is never indexed.</summary>
    public const ushort AbandonedFlag = 2;
    public const int FixedSize = 40;
    private const int HeaderCrcOffset = 36;

    // Limits so a header always fits the first 4 KiB block (recovery reads one block to judge a record): 40 + 128 +
    // 1024 + 256 < 4096. 1 KiB keys are what object stores commonly allow; ETags are short quoted strings.
    public const int MaxTenantBytes = 128, MaxKeyBytes = 1024, MaxEtagBytes = 256;

    public static int HeaderSize(RecordHeader h) =>
        FixedSize + Encoding.UTF8.GetByteCount(h.Tenant) + Encoding.UTF8.GetByteCount(h.Key) + Encoding.UTF8.GetByteCount(h.Etag);

    /// <summary>
    /// Where the payload starts within its record. Format 2: right after the header when both fit one block (a small
    /// value costs one block), else at the second block, so the payload is block-aligned and a 4 KiB value is one
    /// 4 KiB device read. Format 1 put it right after the header always: a 4 KiB value then spanned two blocks and
    /// every read of it cost 8 KiB (measured on this VM: 72,709 8 KiB reads/s against 83,425 4 KiB ones at QD 32,
    /// fio psync; docs/flash.md). The cost of format 2: at most one block more per record, and none for a value of a
    /// whole number of blocks (a 4 KiB value took two blocks in either format).
    /// </summary>
    public static int PayloadOffset(int headerSize, long payloadLength, ushort version = FormatVersion) =>
        version == 1 || headerSize + payloadLength <= DirectFile.Alignment ? headerSize : DirectFile.Alignment;

    /// <summary>Bytes on flash: the payload's offset in the record plus the payload, rounded up to the alignment.</summary>
    public static long PaddedSize(int payloadOffset, long payloadLength) =>
        (payloadOffset + payloadLength + DirectFile.Alignment - 1) / DirectFile.Alignment * DirectFile.Alignment;

    public static void Validate(string tenant, string key, string etag)
    {
        Check(tenant, "tenant", MaxTenantBytes, allowEmpty: false, key);
        Check(key, "key", MaxKeyBytes, allowEmpty: false, key);
        Check(etag, "ETag", MaxEtagBytes, allowEmpty: true, key);

        static void Check(string s, string what, int max, bool allowEmpty, string key)
        {
            ArgumentNullException.ThrowIfNull(s, what);
            if (!allowEmpty && s.Length == 0)
                throw new ArgumentException($"flash record for key '{key}': the {what} is empty");
            int n = Encoding.UTF8.GetByteCount(s);
            if (n > max)
                throw new ArgumentException($"flash record for key '{Shorten(key)}': the {what} is {n} bytes in UTF-8, more than {max}");
        }
    }

    private static string Shorten(string key) => key.Length <= 64 ? key : key[..64] + "…";

    /// <summary>Writes the header into <paramref name="dest"/> and returns its size.</summary>
    public static int WriteHeader(Span<byte> dest, RecordHeader h, ushort version = FormatVersion)
    {
        int t = Encoding.UTF8.GetBytes(h.Tenant, dest[FixedSize..]);
        int k = Encoding.UTF8.GetBytes(h.Key, dest[(FixedSize + t)..]);
        int e = Encoding.UTF8.GetBytes(h.Etag, dest[(FixedSize + t + k)..]);
        BinaryPrimitives.WriteUInt32LittleEndian(dest, Magic);
        BinaryPrimitives.WriteUInt16LittleEndian(dest[4..], version);
        BinaryPrimitives.WriteUInt16LittleEndian(dest[6..], (ushort)((h.Tombstone ? TombstoneFlag : 0) | (h.Abandoned ? AbandonedFlag : 0)));
        BinaryPrimitives.WriteInt64LittleEndian(dest[8..], h.Sequence);
        BinaryPrimitives.WriteInt64LittleEndian(dest[16..], h.PayloadLength);
        BinaryPrimitives.WriteUInt32LittleEndian(dest[24..], h.PayloadCrc);
        BinaryPrimitives.WriteUInt16LittleEndian(dest[28..], (ushort)t);
        BinaryPrimitives.WriteUInt16LittleEndian(dest[30..], (ushort)k);
        BinaryPrimitives.WriteUInt16LittleEndian(dest[32..], (ushort)e);
        BinaryPrimitives.WriteUInt16LittleEndian(dest[34..], 0);
        BinaryPrimitives.WriteUInt32LittleEndian(dest[HeaderCrcOffset..], 0);
        int size = FixedSize + t + k + e;
        BinaryPrimitives.WriteUInt32LittleEndian(dest[HeaderCrcOffset..], Crc32C(0, dest[..size]));
        return size;
    }

    /// <summary>Parses a header from the start of <paramref name="block"/> (one aligned block). Null when the magic,
    /// format version, lengths or header CRC are wrong: a torn, stale or never-written block.</summary>
    public static RecordHeader? TryReadHeader(ReadOnlySpan<byte> block)
    {
        ushort version = BinaryPrimitives.ReadUInt16LittleEndian(block[4..]);
        if (BinaryPrimitives.ReadUInt32LittleEndian(block) != Magic || version is not (1 or FormatVersion))
            return null;
        int t = BinaryPrimitives.ReadUInt16LittleEndian(block[28..]);
        int k = BinaryPrimitives.ReadUInt16LittleEndian(block[30..]);
        int e = BinaryPrimitives.ReadUInt16LittleEndian(block[32..]);
        if (t > MaxTenantBytes || k > MaxKeyBytes || e > MaxEtagBytes)
            return null;
        int size = FixedSize + t + k + e;
        uint stored = BinaryPrimitives.ReadUInt32LittleEndian(block[HeaderCrcOffset..]);
        uint crc = Crc32C(0, block[..HeaderCrcOffset]);
        crc = Crc32C(crc, [0, 0, 0, 0]);
        crc = Crc32C(crc, block[(HeaderCrcOffset + 4)..size]);
        long length = BinaryPrimitives.ReadInt64LittleEndian(block[16..]);
        if (crc != stored || length < 0)
            return null;
        return new RecordHeader(
            Encoding.UTF8.GetString(block.Slice(FixedSize, t)),
            Encoding.UTF8.GetString(block.Slice(FixedSize + t, k)),
            Encoding.UTF8.GetString(block.Slice(FixedSize + t + k, e)),
            BinaryPrimitives.ReadInt64LittleEndian(block[8..]),
            length,
            BinaryPrimitives.ReadUInt32LittleEndian(block[24..]),
            (BinaryPrimitives.ReadUInt16LittleEndian(block[6..]) & TombstoneFlag) != 0,
            size,
            (BinaryPrimitives.ReadUInt16LittleEndian(block[6..]) & AbandonedFlag) != 0,
            PayloadOffset(size, length, version));
    }

    /// <summary>
    /// Whether <paramref name="block"/> starts with a valid header (magic, version, header CRC) of the record with
    /// <paramref name="sequence"/> and <paramref name="payloadLength"/>, without decoding its strings (no allocation:
    /// the check runs on every whole small read). The sequence alone names the record: the store hands out each once
    /// (monotonic, and recovery resumes above the largest found), so a valid header carrying the index's sequence is
    /// the header of the record the index named, with that tenant, key and ETag.
    /// </summary>
    public static bool HeaderIs(ReadOnlySpan<byte> block, long sequence, long payloadLength)
    {
        if (BinaryPrimitives.ReadUInt32LittleEndian(block) != Magic || BinaryPrimitives.ReadUInt16LittleEndian(block[4..]) is not (1 or FormatVersion)
            || BinaryPrimitives.ReadInt64LittleEndian(block[8..]) != sequence || BinaryPrimitives.ReadInt64LittleEndian(block[16..]) != payloadLength)
            return false;
        int t = BinaryPrimitives.ReadUInt16LittleEndian(block[28..]);
        int k = BinaryPrimitives.ReadUInt16LittleEndian(block[30..]);
        int e = BinaryPrimitives.ReadUInt16LittleEndian(block[32..]);
        if (t > MaxTenantBytes || k > MaxKeyBytes || e > MaxEtagBytes)
            return false;
        int size = FixedSize + t + k + e;
        uint crc = Crc32C(0, block[..HeaderCrcOffset]);
        crc = Crc32C(crc, [0, 0, 0, 0]);
        crc = Crc32C(crc, block[(HeaderCrcOffset + 4)..size]);
        return crc == BinaryPrimitives.ReadUInt32LittleEndian(block[HeaderCrcOffset..]);
    }

    /// <summary>CRC32C (Castagnoli) with the hardware instruction through <see cref="BitOperations.Crc32C(uint, ulong)"/>:
    /// 8 bytes a step, then the tail. The running value is pre- and post-inverted as the standard CRC32C is
    /// (so "123456789" gives 0xE3069283), and chains: Crc32C(Crc32C(0, a), b) == Crc32C(0, a + b).</summary>
    public static uint Crc32C(uint running, ReadOnlySpan<byte> data)
    {
        uint crc = ~running;
        ReadOnlySpan<ulong> words = MemoryMarshal.Cast<byte, ulong>(data);
        foreach (ulong w in words)
            crc = BitOperations.Crc32C(crc, BitConverter.IsLittleEndian ? w : BinaryPrimitives.ReverseEndianness(w));
        foreach (byte b in data[(words.Length * 8)..])
            crc = BitOperations.Crc32C(crc, b);
        return ~crc;
    }
}

/// <summary>A record's header fields; <see cref="HeaderSize"/> is filled in when parsed.</summary>
internal sealed record RecordHeader(string Tenant, string Key, string Etag, long Sequence, long PayloadLength, uint PayloadCrc, bool Tombstone, int HeaderSize = 0, bool Abandoned = false, int PayloadOffset = 0);
