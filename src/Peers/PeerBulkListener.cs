using System.Buffers;
using System.Buffers.Binary;
using System.IO.Pipelines;
using System.Net.Sockets;
using FaaST.Cachelet;
using FaaST.Protos.Peer;
using Grpc.Core;
using FaaST.Storage;
using Microsoft.AspNetCore.Connections;
using Microsoft.AspNetCore.Connections.Features;
using Microsoft.AspNetCore.Server.Kestrel.Core;

namespace FaaST.Peers;

/// <summary>
/// Serves bulk Gets (framing in protos/peer.proto) on the peer listener, ahead of HTTP/2: a connection
/// whose first bytes are <see cref="PeerBulk.Magic"/> is served here, any other goes on to HTTP/2
/// untouched. Requests are read from Kestrel's input pipe; replies and object bytes are written to
/// the connection's socket directly, from the shared-memory extent, with no copy in user space.
/// </summary>
public sealed class PeerBulkListener
{
    private volatile PeerServer? _server;

    /// <summary>How long a send may wait for the requester to take bytes before the connection is dropped.</summary>
    public TimeSpan SendTimeout { get; init; } = TimeSpan.FromSeconds(30);

    /// <summary>While an owner fetches from storage for a Get, it says so this often (an empty reply).</summary>
    public TimeSpan FetchHeartbeat { get; init; } = TimeSpan.FromSeconds(1);

    /// <summary>Installs the listener on a Kestrel endpoint (before the app is built).</summary>
    public void Attach(ListenOptions listen) => listen.Use(next => context => OnConnectionAsync(context, next));

    internal void Serve(PeerServer server) => _server = server;

    private async Task OnConnectionAsync(ConnectionContext context, ConnectionDelegate next)
    {
        var input = context.Transport.Input;
        bool bulk;
        try
        {
            bulk = await PeekMagicAsync(input, context.ConnectionClosed);
        }
        catch (OperationCanceledException)
        {
            return;
        }
        if (!bulk)
        {
            await next(context);
            return;
        }
        var socket = context.Features.Get<IConnectionSocketFeature>()?.Socket;
        var server = _server;
        try
        {
            if (socket is null || server is null)
            {
                if (socket is not null)
                    await SendAsync(socket, PeerBulk.Frame(new BulkReply { Error = "this instance does not serve peers (yet)" }), context.ConnectionClosed);
                return;
            }
            await ServeAsync(server, socket, input, context);
        }
        catch (InvalidDataException e)
        {
            if (server is not null)
                Log.BulkDropped(server.Logger, context.RemoteEndPoint, e.Message);
        }
        catch (Exception e) when (e is OperationCanceledException or SocketException or IOException or ObjectDisposedException)
        {
            // The requester went away or stalled past SendTimeout: drop the connection.
            if (server is not null)
                Log.BulkEnded(server.Logger, context.RemoteEndPoint, e.Message);
        }
    }

    /// <summary>True if the connection starts with the bulk magic (consumed); else nothing is consumed.</summary>
    private static async Task<bool> PeekMagicAsync(PipeReader input, CancellationToken ct)
    {
        while (true)
        {
            var result = await input.ReadAsync(ct);
            var buffer = result.Buffer;
            if (buffer.Length >= PeerBulk.Magic.Length || result.IsCompleted)
            {
                var ours = buffer.Length >= PeerBulk.Magic.Length && PeerBulk.IsMagic(buffer.Slice(0, PeerBulk.Magic.Length));
                input.AdvanceTo(ours ? buffer.GetPosition(PeerBulk.Magic.Length) : buffer.Start);
                return ours;
            }
            input.AdvanceTo(buffer.Start, buffer.End);
        }
    }

    /// <summary>How long a new bulk connection may take to send its hello and its answer to the challenge.</summary>
    internal static readonly TimeSpan HandshakeTimeout = TimeSpan.FromSeconds(5);

    private async Task ServeAsync(PeerServer server, Socket socket, PipeReader input, ConnectionContext context)
    {
        // Ends when the requester goes, or when the host stops (Kestrel asks its connections to close).
        using var closing = CancellationTokenSource.CreateLinkedTokenSource(context.ConnectionClosed,
            context.Features.Get<IConnectionLifetimeNotificationFeature>()?.ConnectionClosedRequested ?? CancellationToken.None);
        var ct = closing.Token;
        // The handshake (see PeerAuth): a fresh challenge per connection, so nothing recorded from
        // another connection answers it.
        // A connection that does not finish the handshake in time is dropped: otherwise a stranger could
        // hold connections open forever with a hello cut short (found by the fuzzer).
        using var handshake = CancellationTokenSource.CreateLinkedTokenSource(ct);
        handshake.CancelAfter(HandshakeTimeout);
        var hello = await ReadExactlyAsync(input, PeerAuth.NonceLength + 2, handshake.Token);
        if (hello is null)
            return;
        if (!hello.AsSpan(PeerAuth.NonceLength).SequenceEqual("\r\n"u8))
            throw new InvalidDataException("a malformed bulk hello");
        var requesterNonce = hello.AsSpan(0, PeerAuth.NonceLength).ToArray();
        var credentials = server.Credentials;
        var serverNonce = PeerAuth.NewNonce();
        var challenge = new byte[4 + PeerBulk.ChallengeLength];
        BinaryPrimitives.WriteUInt32LittleEndian(challenge, PeerBulk.ChallengeLength);
        serverNonce.CopyTo(challenge.AsSpan(4));
        credentials.BulkServerProof(requesterNonce, serverNonce).CopyTo(challenge.AsSpan(4 + PeerAuth.NonceLength));
        await SendAsync(socket, challenge, ct);
        byte[]? proof;
        try
        {
            proof = await ReadExactlyAsync(input, PeerAuth.MacLength, handshake.Token);
        }
        catch (Exception e) when (e is OperationCanceledException or IOException or SocketException &&
            context.Features.Get<IConnectionLifetimeNotificationFeature>()?.ConnectionClosedRequested.IsCancellationRequested != true)
        {
            // A requester without the secret gives up on the proof and closes; Kestrel may report that
            // as the connection closing (a cancellation) or a reset rather than the end of the input.
            // Each is the same refusal (only the host's own stop is not one).
            proof = null;
        }
        if (proof is null)
        {
            // A requester of this app checks the proof above and answers; one without the secret cannot.
            Log.BulkRefusedNoAnswer(server.Logger, context.RemoteEndPoint);
            return;
        }
        if (!PeerAuth.Same(proof, credentials.BulkClientProof(requesterNonce, serverNonce)))
        {
            Log.BulkRefusedWrongProof(server.Logger, context.RemoteEndPoint);
            await SendAsync(socket, PeerBulk.Frame(new BulkReply { Error = "not an instance of this app (wrong or missing peer credentials)" }), ct);
            return;
        }
        while (await ReadFrameAsync(input, PeerBulk.MaxRequestLength, static s => GetRequest.Parser.ParseFrom(s), ct) is { } request)
        {
            ObjectHeader header;
            CachedRead read;
            try
            {
                var open = server.OpenRangeAsync(request, "Get", ct);
                try
                {
                    while (!open.IsCompleted && await Task.WhenAny(open, Task.Delay(FetchHeartbeat, ct)) != open)
                        await SendAsync(socket, PeerBulk.Frame(new BulkReply()), ct);
                }
                catch
                {
                    // The connection is going: whatever the open still pins must be let go when it ends.
                    _ = open.ContinueWith(static t => t.Result.Read.Dispose(), TaskContinuationOptions.OnlyOnRanToCompletion);
                    throw;
                }
                (header, read) = await open;
            }
            catch (Exception e) when (e is RpcException or IOException or BlobStorageException or StorageUnavailableException)
            {
                await SendAsync(socket, PeerBulk.Frame(new BulkReply { Error = e is RpcException rpc ? rpc.Status.Detail : e.Message }), ct);
                continue;
            }
            using (read)
            {
                await SendAsync(socket, PeerBulk.Frame(new BulkReply { Header = header }), ct);
                if (header.Status != ObjectHeader.Types.Status.Ok)
                    continue;
                if (request.RangeFromStorage)
                {
                    // A failure once the header went (the blob changed mid-range) ends the connection:
                    // the framing promised range_length bytes, so the requester sees the range cut short.
                    await server.SendStorageRangeAsync(request, header, (data, token) => new ValueTask(SendAsync(socket, data, token)), ct);
                }
                else
                {
                    await SendRangeAsync(server.Cache, socket, read, header.Offset, header.RangeLength, ct);
                }
            }
        }
    }

    /// <summary>Reads exactly <paramref name="length"/> bytes; null if the connection ends first.</summary>
    private static async Task<byte[]?> ReadExactlyAsync(PipeReader input, int length, CancellationToken ct)
    {
        while (true)
        {
            var result = await input.ReadAsync(ct);
            var buffer = result.Buffer;
            if (buffer.Length >= length)
            {
                var bytes = buffer.Slice(0, length).ToArray();
                input.AdvanceTo(buffer.GetPosition(length));
                return bytes;
            }
            if (result.IsCompleted)
            {
                input.AdvanceTo(buffer.End);
                return null;
            }
            input.AdvanceTo(buffer.Start, buffer.End);
        }
    }

    /// <summary>Reads one length-prefixed frame; null at a clean end of the connection.</summary>
    private static async Task<T?> ReadFrameAsync<T>(PipeReader input, int maxLength, Func<ReadOnlySpan<byte>, T> parse, CancellationToken ct)
        where T : class
    {
        while (true)
        {
            var result = await input.ReadAsync(ct);
            var buffer = result.Buffer;
            if (buffer.Length >= 4)
            {
                var length = PeerBulk.ReadLength(buffer);
                if (length > maxLength)
                    throw new InvalidDataException($"a {length}-byte frame (at most {maxLength})");
                if (buffer.Length >= 4 + length)
                {
                    var payload = buffer.Slice(4, length);
                    T value;
                    try
                    {
                        value = payload.IsSingleSegment ? parse(payload.FirstSpan) : parse(payload.ToArray());
                    }
                    catch (Google.Protobuf.InvalidProtocolBufferException e)
                    {
                        throw new InvalidDataException("a malformed message: " + e.Message);
                    }
                    input.AdvanceTo(payload.End);
                    return value;
                }
            }
            if (result.IsCompleted)
            {
                if (buffer.Length > 0)
                    throw new InvalidDataException("the connection ended inside a frame");
                return null;
            }
            input.AdvanceTo(buffer.Start, buffer.End);
        }
    }

    private async Task SendRangeAsync(BlobCache cache, Socket socket, CachedRead read, long offset, long length, CancellationToken ct)
    {
        const int Window = 8 << 20; // bytes per send call: large, so the kernel does the work in few calls
        if (read.Entry is { } entry)
        {
            var extent = entry.Extent;
            for (long sent = 0; sent < length; sent += Window)
                await SendAsync(socket, extent.GetMemory(offset + sent, (int)Math.Min(Window, length - sent)), ct);
            return;
        }
        if (read.File is { } file)
        {
            using var handle = cache.OpenFile(file);
            var buffer = ArrayPool<byte>.Shared.Rent(1 << 20);
            try
            {
                for (long sent = 0; sent < length;)
                {
                    var n = RandomAccess.Read(handle, buffer.AsSpan(0, (int)Math.Min(buffer.Length, length - sent)), offset + sent);
                    if (n == 0)
                        throw new IOException($"{file} ended early");
                    await SendAsync(socket, buffer.AsMemory(0, n), ct);
                    sent += n;
                }
            }
            finally
            {
                ArrayPool<byte>.Shared.Return(buffer);
            }
            return;
        }
        await SendAsync(socket, read.Bytes.Slice((int)offset, (int)length), ct);
    }

    private async Task SendAsync(Socket socket, ReadOnlyMemory<byte> data, CancellationToken ct)
    {
        using var timeout = CancellationTokenSource.CreateLinkedTokenSource(ct);
        timeout.CancelAfter(SendTimeout);
        while (!data.IsEmpty)
        {
            var n = await socket.SendAsync(data, SocketFlags.None, timeout.Token);
            data = data[n..];
        }
    }
}
