using System.Buffers;
using System.Buffers.Binary;
using System.Collections.Concurrent;
using System.Net.Sockets;
using FaaST.Cachelet.Peers;
using FaaST.Protos.Peer;
using Google.Protobuf;

namespace FaaST.Peers;

/// <summary>The bulk framing of the peer port (see protos/peer.proto): shared by both sides.</summary>
internal static class PeerBulk
{
    /// <summary>The first bytes of a bulk connection; an HTTP/2 connection starts "PRI * HT".</summary>
    /// <remarks>Version 2 authenticates with a challenge per connection; a version-1 server does not
    /// recognise it and treats the connection as HTTP/2, so the requester falls back to gRPC.</remarks>
    public static ReadOnlySpan<byte> Magic => "FAASTBK2"u8;

    /// <summary>The server's challenge frame: its nonce, then its proof.</summary>
    public const int ChallengeLength = PeerAuth.NonceLength + PeerAuth.MacLength;
    public const int MaxRequestLength = 64 * 1024;
    public const int MaxReplyLength = 64 * 1024;

    public static bool IsMagic(ReadOnlySequence<byte> first8)
    {
        Span<byte> bytes = stackalloc byte[8];
        first8.CopyTo(bytes);
        return bytes.SequenceEqual(Magic);
    }

    /// <summary>The length prefix at the start of <paramref name="buffer"/> (at least 4 bytes).</summary>
    public static uint ReadLength(ReadOnlySequence<byte> buffer)
    {
        Span<byte> prefix = stackalloc byte[4];
        buffer.Slice(0, 4).CopyTo(prefix);
        return BinaryPrimitives.ReadUInt32LittleEndian(prefix);
    }

    /// <summary>u32 little-endian length, then the message.</summary>
    public static byte[] Frame(IMessage message)
    {
        var size = message.CalculateSize();
        var frame = new byte[4 + size];
        BinaryPrimitives.WriteUInt32LittleEndian(frame, (uint)size);
        message.WriteTo(frame.AsSpan(4));
        return frame;
    }
}

/// <summary>
/// The requesting side of bulk Gets to one peer: a few pooled connections, each authenticated once,
/// one request at a time on each. The object's bytes are received straight into the destination
/// when it is an <see cref="System.Buffers.IBufferWriter{T}"/> (an extent's write stream).
/// </summary>
internal sealed class PeerBulkChannel(Uri peer, PeerAuth credentials) : IDisposable
{
    private const int MaxIdle = 4;
    private readonly ConcurrentQueue<Socket> _idle = new();
    private int _disposed;

    /// <summary>
    /// One Get. <paramref name="timeout"/> is re-armed with <paramref name="limit"/> before each wait
    /// on the peer: a peer fetching from storage first sends empty replies while it waits, so a long
    /// fetch (up to <paramref name="fetchLimit"/>) is not taken for a dead peer. Throws <see cref="PeerException"/> on any failure; the
    /// destination then holds a partial range.
    /// </summary>
    public async Task<ObjectHeader> GetAsync(GetRequest request, Func<ObjectHeader, Stream?> destination,
        CancellationTokenSource timeout, TimeSpan limit, TimeSpan fetchLimit)
    {
        var ct = timeout.Token;
        var fetchDeadline = Environment.TickCount64 + (long)fetchLimit.TotalMilliseconds;
        while (true)
        {
            var pooled = _idle.TryDequeue(out var socket);
            var replied = false;
            try
            {
                timeout.CancelAfter(limit);
                socket ??= await ConnectAsync(ct);
                await SendAsync(socket, PeerBulk.Frame(request), ct);
                BulkReply reply;
                while (true)
                {
                    timeout.CancelAfter(limit);
                    reply = await ReadReplyAsync(socket, ct);
                    replied = true;
                    if (reply.Header is not null || reply.Error.Length > 0)
                        break;
                    // An empty reply: the peer is still fetching from storage, but not for ever.
                    if (Environment.TickCount64 > fetchDeadline)
                        throw new PeerException($"{peer} was still fetching {PeerClient.Describe(request.Blob)} after {fetchLimit.TotalSeconds:0.##} s");
                }
                if (reply.Error.Length > 0)
                    throw new PeerException($"{peer} could not serve {PeerClient.Describe(request.Blob)}: {reply.Error}");
                var header = reply.Header!;
                if (header.Status == ObjectHeader.Types.Status.Ok)
                {
                    if (header.RangeLength < 0 || header.Offset < 0 || header.Offset + header.RangeLength > header.Length)
                        throw new PeerException($"{peer} announced an invalid range {header.Offset}+{header.RangeLength} of {header.Length} bytes for {PeerClient.Describe(request.Blob)}");
                    var target = destination(header) ?? throw new OperationCanceledException("the destination declined the object");
                    await ReceiveAsync(socket, target, header.RangeLength, timeout, limit);
                }
                Return(socket);
                socket = null;
                return header;
            }
            catch (Exception e) when (!replied && !ct.IsCancellationRequested && e is not OperationCanceledException && e is not PeerException { CredentialsRefused: true })
            {
                // Nothing valid came back. On a pooled connection the peer may have closed it since
                // (it restarted, or dropped an idle one): try a new one. On a new one, the peer does not
                // serve bulk Gets (an older version, or not a FaaST host): the caller uses gRPC.
                if (!pooled)
                    throw new NotBulkException($"{peer} did not take a bulk Get: {e.Message}", e, mismatch: e is InvalidProtocolBufferException or InvalidDataException);
            }
            catch (Exception e) when (e is SocketException or IOException or InvalidDataException or InvalidProtocolBufferException)
            {
                throw new PeerException($"bulk Get {PeerClient.Describe(request.Blob)} from {peer} failed: {e.Message}", e);
            }
            finally
            {
                socket?.Dispose(); // anything but a finished request leaves the connection out of step
            }
        }
    }

    /// <summary>The peer answered a new bulk connection with nothing valid (<see cref="Mismatch"/>: with bytes of another protocol).</summary>
    internal sealed class NotBulkException(string message, Exception inner, bool mismatch) : Exception(message, inner)
    {
        public bool Mismatch => mismatch;
    }

    private async Task<Socket> ConnectAsync(CancellationToken ct)
    {
        var socket = new Socket(SocketType.Stream, ProtocolType.Tcp) { NoDelay = true };
        try
        {
            await socket.ConnectAsync(peer.Host, peer.Port, ct);
            // The handshake (see PeerAuth): our nonce; the server's nonce and proof; our proof. The
            // first request follows our proof at once, so a pooled connection costs one round trip more.
            var nonce = PeerAuth.NewNonce();
            // The CRLF ends the hello as a line: an HTTP/2-only server that is not FaaST's (it waits for a
            // line before it decides the bytes are neither HTTP/2 nor HTTP/1) then answers at once.
            var hello = new byte[PeerBulk.Magic.Length + nonce.Length + 2];
            PeerBulk.Magic.CopyTo(hello);
            nonce.CopyTo(hello.AsSpan(PeerBulk.Magic.Length));
            "\r\n"u8.CopyTo(hello.AsSpan(PeerBulk.Magic.Length + nonce.Length));
            await SendAsync(socket, hello, ct);
            var prefix = new byte[4];
            await ReceiveExactlyAsync(socket, prefix, ct);
            var length = BinaryPrimitives.ReadUInt32LittleEndian(prefix);
            if (length != PeerBulk.ChallengeLength)
            {
                // Not a challenge: an error reply (e.g. not serving peers yet), or another protocol.
                if (length > PeerBulk.MaxReplyLength)
                    throw new InvalidDataException($"{peer} answered a bulk connection with something else than a challenge");
                var payload = new byte[length];
                await ReceiveExactlyAsync(socket, payload, ct);
                var error = BulkReply.Parser.ParseFrom(payload).Error;
                if (error.Length == 0)
                    throw new InvalidDataException($"{peer} answered a bulk connection with something else than a challenge");
                throw new PeerException($"{peer} refused a bulk connection: {error}");
            }
            var challenge = new byte[PeerBulk.ChallengeLength];
            await ReceiveExactlyAsync(socket, challenge, ct);
            var serverNonce = challenge.AsSpan(0, PeerAuth.NonceLength);
            if (!PeerAuth.Same(challenge.AsSpan(PeerAuth.NonceLength), credentials.BulkServerProof(nonce, serverNonce)))
                throw new PeerException($"{peer} and this instance do not share the app's peer credentials (the bulk handshake's proof does not match)") { CredentialsRefused = true };
            await SendAsync(socket, credentials.BulkClientProof(nonce, serverNonce), ct);
            return socket;
        }
        catch
        {
            socket.Dispose();
            throw;
        }
    }

    private async Task<BulkReply> ReadReplyAsync(Socket socket, CancellationToken ct)
    {
        var prefix = new byte[4];
        await ReceiveExactlyAsync(socket, prefix, ct);
        var length = BinaryPrimitives.ReadUInt32LittleEndian(prefix);
        if (length > PeerBulk.MaxReplyLength)
            throw new InvalidDataException($"{peer} sent a {length}-byte bulk reply (at most {PeerBulk.MaxReplyLength})");
        var payload = new byte[length];
        await ReceiveExactlyAsync(socket, payload, ct);
        return BulkReply.Parser.ParseFrom(payload);
    }

    private async Task ReceiveExactlyAsync(Socket socket, Memory<byte> buffer, CancellationToken ct)
    {
        while (!buffer.IsEmpty)
        {
            var n = await socket.ReceiveAsync(buffer, SocketFlags.None, ct);
            if (n == 0)
                throw new PeerException($"{peer} closed the bulk connection");
            buffer = buffer[n..];
        }
    }

    /// <summary>The range's bytes, into the destination's memory if it offers it, else through a pooled buffer.</summary>
    private async Task ReceiveAsync(Socket socket, Stream target, long length, CancellationTokenSource timeout, TimeSpan limit)
    {
        var writer = target as System.Buffers.IBufferWriter<byte>;
        var rented = writer is null ? System.Buffers.ArrayPool<byte>.Shared.Rent(1 << 20) : null;
        try
        {
            for (long received = 0; received < length;)
            {
                var want = (int)Math.Min(length - received, 64 << 20);
                var memory = writer is not null ? writer.GetMemory(want)[..want] : rented.AsMemory(0, Math.Min(want, rented!.Length));
                var filled = 0;
                while (filled < memory.Length)
                {
                    timeout.CancelAfter(limit);
                    var n = await socket.ReceiveAsync(memory[filled..], SocketFlags.None, timeout.Token);
                    // The limit is for waiting on the peer: time spent in a slow destination must not count.
                    timeout.CancelAfter(Timeout.InfiniteTimeSpan);
                    if (n == 0)
                        throw new PeerException($"{peer} ended a bulk Get after {received + filled} of {length} bytes");
                    filled += n;
                }
                if (writer is not null)
                    writer.Advance(filled);
                else
                    target.Write(rented.AsSpan(0, filled));
                received += filled;
            }
        }
        finally
        {
            if (rented is not null)
                System.Buffers.ArrayPool<byte>.Shared.Return(rented);
        }
    }

    private static async Task SendAsync(Socket socket, ReadOnlyMemory<byte> data, CancellationToken ct)
    {
        while (!data.IsEmpty)
            data = data[await socket.SendAsync(data, SocketFlags.None, ct)..];
    }

    private void Return(Socket socket)
    {
        if (Volatile.Read(ref _disposed) == 0 && _idle.Count < MaxIdle)
        {
            _idle.Enqueue(socket);
            if (Volatile.Read(ref _disposed) == 0)
                return;
            while (_idle.TryDequeue(out var s))
                s.Dispose();
            return;
        }
        socket.Dispose();
    }

    public void Dispose()
    {
        Volatile.Write(ref _disposed, 1);
        while (_idle.TryDequeue(out var socket))
            socket.Dispose();
    }
}
