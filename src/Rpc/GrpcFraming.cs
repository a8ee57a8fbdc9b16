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
    Unimplemented = 12,
    Internal = 13,
    Unavailable = 14,
    Unauthenticated = 16,
}

public sealed class GrpcException(GrpcStatus status, string message) : Exception(message)
{
    public GrpcStatus Status { get; } = status;
}
