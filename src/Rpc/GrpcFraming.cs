using System.Buffers;
using System.Buffers.Binary;
using Google.Protobuf;

namespace FaaST.Rpc;

/// <summary>
/// gRPC's message framing: a 1-byte compressed flag, a 4-byte big-endian length, the message.
/// </summary>
public static class GrpcFraming
{
    public const int HeaderSize = 5;

    /// <summary>Writes one framed message straight into the writer (no intermediate array).</summary>
    public static void Write(IBufferWriter<byte> writer, IMessage message)
    {
        var size = message.CalculateSize();
        var header = writer.GetSpan(HeaderSize);
        header[0] = 0;
        BinaryPrimitives.WriteUInt32BigEndian(header[1..], (uint)size);
        writer.Advance(HeaderSize);
        if (size > 0)
            message.WriteTo(writer);
    }

    /// <summary>
    /// Writes one framed message made of a single length-delimited field holding <paramref name="data"/>
    /// (e.g. the bytes arm of a oneof), copying the bytes once, straight into the writer. This is how
    /// bulk data leaves shared memory without first becoming a ByteString.
    /// </summary>
    public static void WriteBytesField(IBufferWriter<byte> writer, int fieldNumber, ReadOnlySpan<byte> data)
    {
        Span<byte> prefix = stackalloc byte[BytesFieldPrefixMax];
        writer.Write(prefix[..WriteBytesFieldPrefix(prefix, fieldNumber, data.Length)]);
        while (!data.IsEmpty)
        {
            var target = writer.GetSpan(Math.Min(data.Length, 64 * 1024));
            var chunk = Math.Min(target.Length, data.Length);
            data[..chunk].CopyTo(target);
            writer.Advance(chunk);
            data = data[chunk..];
        }
    }

    /// <summary>Longest prefix <see cref="WriteBytesFieldPrefix"/> writes.</summary>
    public const int BytesFieldPrefixMax = HeaderSize + 10;

    /// <summary>
    /// The frame header, field tag and length of a message made of one bytes field of
    /// <paramref name="length"/> bytes; the bytes themselves follow. Returns the prefix's size.
    /// </summary>
    public static int WriteBytesFieldPrefix(Span<byte> prefix, int fieldNumber, int length)
    {
        var n = HeaderSize + WriteVarint(prefix[HeaderSize..], (uint)(fieldNumber << 3 | 2));
        n += WriteVarint(prefix[n..], (uint)length);
        prefix[0] = 0;
        BinaryPrimitives.WriteUInt32BigEndian(prefix[1..], (uint)(n - HeaderSize + length));
        return n;
    }

    /// <summary>
    /// If <paramref name="payload"/> is exactly one length-delimited field numbered
    /// <paramref name="fieldNumber"/>, its bytes (a slice of the payload, not a copy).
    /// </summary>
    public static bool TryReadBytesField(in ReadOnlySequence<byte> payload, int fieldNumber, out ReadOnlySequence<byte> data)
    {
        data = default;
        var reader = new SequenceReader<byte>(payload);
        if (!TryReadVarint(ref reader, out var tag) || tag != (ulong)(fieldNumber << 3 | 2) ||
            !TryReadVarint(ref reader, out var length) || length != (ulong)reader.Remaining)
            return false;
        data = reader.UnreadSequence;
        return true;
    }

    private static int WriteVarint(Span<byte> target, uint value)
    {
        var i = 0;
        while (value >= 0x80)
        {
            target[i++] = (byte)(value | 0x80);
            value >>= 7;
        }
        target[i++] = (byte)value;
        return i;
    }

    private static bool TryReadVarint(ref SequenceReader<byte> reader, out ulong value)
    {
        value = 0;
        for (var shift = 0; shift < 64; shift += 7)
        {
            if (!reader.TryRead(out var b))
                return false;
            value |= (ulong)(b & 0x7F) << shift;
            if (b < 0x80)
                return true;
        }
        return false;
    }

    /// <summary>
    /// Takes one complete framed message off the front of <paramref name="buffer"/>, if there is one.
    /// Throws <see cref="GrpcException"/> for a compressed or oversized message.
    /// </summary>
    public static bool TryRead(ref ReadOnlySequence<byte> buffer, int maxMessageSize, out ReadOnlySequence<byte> message)
    {
        message = default;
        if (buffer.Length < HeaderSize)
            return false;
        Span<byte> header = stackalloc byte[HeaderSize];
        buffer.Slice(0, HeaderSize).CopyTo(header);
        if (header[0] != 0)
            throw new GrpcException(GrpcStatus.Unimplemented, "compressed messages are not supported");
        var length = BinaryPrimitives.ReadUInt32BigEndian(header[1..]);
        if (length > (uint)maxMessageSize)
            throw new GrpcException(GrpcStatus.ResourceExhausted,
                $"message of {length} bytes exceeds the limit of {maxMessageSize} bytes");
        if (buffer.Length < HeaderSize + length)
            return false;
        message = buffer.Slice(HeaderSize, length);
        buffer = buffer.Slice(HeaderSize + length);
        return true;
    }
}

/// <summary>The status codes of the gRPC protocol that FaaST uses.</summary>
public enum GrpcStatus
{
    Ok = 0,
    Cancelled = 1,
    Unknown = 2,
    InvalidArgument = 3,
    DeadlineExceeded = 4,
    NotFound = 5,
    PermissionDenied = 7,
    ResourceExhausted = 8,
    FailedPrecondition = 9,
    Aborted = 10,
    OutOfRange = 11,
    Unimplemented = 12,
    Internal = 13,
    Unavailable = 14,
    Unauthenticated = 16,
}

public sealed class GrpcException(GrpcStatus status, string message) : Exception(message)
{
    public GrpcStatus Status { get; } = status;
}
