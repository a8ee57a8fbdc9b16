using System.Buffers;
using System.Collections.Concurrent;
using System.Net;
using System.Net.Http.Headers;
using System.Net.Sockets;
using System.Security.Cryptography;
using FaaST.Cachelet.Peers;
using FaaST.Peers;
using FaaST.Policy;
using FaaST.Protos.Peer;
using Grpc.Core;
using FaaST.Storage;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Hosting;
using Microsoft.AspNetCore.Http;
using Microsoft.AspNetCore.Server.Kestrel.Core;
using Google.Protobuf;
using Microsoft.Extensions.Logging;

namespace FaaST.Cachelet.Tests;

/// <summary>
/// The peer tests move hundreds of MB through this process (arrays, /dev/shm, sockets): they run on
/// their own, not alongside the other collections, whose measurements of this process (its resident
/// heap, for the memory daemon tests) they would disturb.
/// </summary>
[CollectionDefinition("azurite", DisableParallelization = true)]
public sealed class AzuriteCollection : ICollectionFixture<AzuriteFixture>;

/// <summary>Ownership fixed by a test: keys listed map to a peer, everything else to this instance.</summary>
public sealed class FixedOwners(string self) : IOwnerDirectory
{
    public ConcurrentDictionary<string, Peer> Remote { get; } = new();
    public Peer? Everything { get; set; }
    /// <summary>The other instances of the "view" (told when a write bypasses its owner), by id.</summary>
    public ConcurrentDictionary<string, Peer> View { get; } = new();
    public string SelfId => self;
    public Peer? OwnerOf(string key) => Remote.TryGetValue(key, out var p) ? p : Everything;
    public IReadOnlyCollection<Peer> Others => [.. View.Values];
}

/// <summary>A cachelet serving the peer protocol on a real Kestrel listener on loopback.</summary>
public sealed class PeerNode : IAsyncDisposable
{
    public const string App = "peertest";
    public static readonly byte[] Secret = "test-secret-0123456789"u8.ToArray();

    /// <summary>The app's credentials (each holder remembers the call nonces it accepted).</summary>
    public static PeerAuth NewCredentials() => new(Secret, App);

    private readonly WebApplication _web;

    private PeerNode(string id, BlobCache cache, WebApplication web, Uri address, ListLogger logs, PeerClient client, FixedOwners owners)
    {
        Id = id;
        Cache = cache;
        _web = web;
        Address = address;
        Logs = logs;
        Client = client;
        Owners = owners;
    }

    public string Id { get; }
    public BlobCache Cache { get; }
    public Uri Address { get; }
    public ListLogger Logs { get; }
    public PeerClient Client { get; }
    public FixedOwners Owners { get; }
    public Peer AsPeer => new(Id, Address);

    public static async Task<PeerNode> StartAsync(string id, IBlobStore store, CachePolicy? policy = null, TimeSpan? timeout = null, PeerAuth? credentials = null,
        TimeSpan? fetchTimeout = null, bool bulkTransfers = true)
    {
        var logs = new ListLogger(LogLevel.Information); // what a test looks for: information, warnings and errors
        var cache = new BlobCache($"{App}-{id}-{Guid.NewGuid():N}"[..24], policy ?? new CachePolicy(), logs);
        var builder = WebApplication.CreateSlimBuilder();
        builder.Logging.ClearProviders();
        builder.Logging.AddProvider(logs);
        builder.Services.AddPeerServices();
        var bulk = new PeerBulkListener();
        builder.WebHost.ConfigureKestrel(k =>
        {
            k.Limits.Http2.InitialConnectionWindowSize = 16 * 1024 * 1024;
            k.Limits.Http2.InitialStreamWindowSize = 16 * 1024 * 1024;
            k.Listen(IPAddress.Loopback, 0, l =>
            {
                l.Protocols = HttpProtocols.Http2;
                bulk.Attach(l);
            });
        });
        var web = builder.Build();
        web.MapPeerEndpoints(cache, new PeerServerOptions
        {
            Credentials = NewCredentials(),
            StoreFor = account => account == store.Endpoint.AbsoluteUri ? store : null,
        }, logs, bulk);
        await web.StartAsync();
        var address = new Uri(web.Urls.First().Replace("[::1]", "127.0.0.1", StringComparison.Ordinal) + "/");
        var client = new PeerClient(new PeerOptions
        {
            Credentials = credentials ?? NewCredentials(),
            Timeout = timeout ?? TimeSpan.FromSeconds(5),
            FetchTimeout = fetchTimeout ?? TimeSpan.FromMinutes(5),
            BulkTransfers = bulkTransfers,
        });
        var owners = new FixedOwners(id);
        cache.ConnectPeers(owners, client);
        return new PeerNode(id, cache, web, address, logs, client, owners);
    }

    private int _stopped;

    /// <summary>Stops the Kestrel listener (the port then refuses connections); the cache stays up.</summary>
    public async Task StopServingAsync()
    {
        if (Interlocked.Exchange(ref _stopped, 1) == 0)
            await _web.StopAsync();
    }

    /// <summary>Stops the listener as a crash would: open connections are cut at once, not drained.</summary>
    public async Task CrashServingAsync()
    {
        if (Interlocked.Exchange(ref _stopped, 1) == 0)
            await _web.StopAsync(new CancellationToken(canceled: true));
    }

    public async ValueTask DisposeAsync()
    {
        Client.Dispose();
        await StopServingAsync();
        await _web.DisposeAsync();
        await Cache.DisposeAsync();
    }
}

/// <summary>
/// A deliberately misbehaving peer: a bare Kestrel (HTTP/2 cleartext) whose Get path runs whatever the
/// test says. Handlers should end when <see cref="HttpContext.RequestAborted"/> or <see cref="Stopping"/> fires.
/// </summary>
public sealed class FakePeer : IAsyncDisposable
{
    private readonly WebApplication _web;
    private readonly CancellationTokenSource _stopping = new();
    private int _calls;

    private FakePeer(WebApplication web, Uri address)
    {
        _web = web;
        Address = address;
    }

    public Uri Address { get; }
    public Peer AsPeer => new("fake", Address);
    public CancellationToken Stopping => _stopping.Token;

    /// <summary>Calls that reached the Get path.</summary>
    public int Calls => Volatile.Read(ref _calls);

    /// <summary>Set once a call's requester went away (its stream was reset or its connection closed).</summary>
    public TaskCompletionSource Abandoned { get; } = new(TaskCreationOptions.RunContinuationsAsynchronously);

    public static async Task<FakePeer> StartAsync(Func<HttpContext, CancellationToken, Task> get, Func<HttpContext, Task>? put = null)
    {
        var builder = WebApplication.CreateSlimBuilder();
        builder.Logging.ClearProviders();
        builder.WebHost.ConfigureKestrel(k => k.Listen(IPAddress.Loopback, 0, l => l.Protocols = HttpProtocols.Http2));
        var web = builder.Build();
        FakePeer? self = null;
        web.MapPost(PeerClient.GetPath, async context =>
        {
            Interlocked.Increment(ref self!._calls);
            using var token = CancellationTokenSource.CreateLinkedTokenSource(context.RequestAborted, self._stopping.Token);
            using var signal = context.RequestAborted.Register(() => self.Abandoned.TrySetResult());
            try
            {
                await get(context, token.Token);
            }
            catch (OperationCanceledException) when (token.IsCancellationRequested)
            {
            }
        });
        if (put is not null)
            web.MapPost(PeerClient.PutPath, context => put(context));
        await web.StartAsync();
        var address = new Uri(web.Urls.First().Replace("[::1]", "127.0.0.1", StringComparison.Ordinal) + "/");
        return self = new FakePeer(web, address);
    }

    /// <summary>Starts a gRPC response (headers only).</summary>
    public static Task StartGrpcAsync(HttpContext context)
    {
        context.Response.ContentType = "application/grpc";
        return context.Response.StartAsync(context.RequestAborted);
    }

    /// <summary>Writes a framed message and sends it.</summary>
    public static async Task SendAsync(HttpContext context, IMessage message)
    {
        context.Response.BodyWriter.Write(RawHttp2.Frame(message));
        await context.Response.BodyWriter.FlushAsync(context.RequestAborted);
    }

    /// <summary>Writes a data message (field 2 of GetChunk) and sends it.</summary>
    public static async Task SendDataAsync(HttpContext context, ReadOnlyMemory<byte> data)
    {
        context.Response.BodyWriter.Write(RawHttp2.Frame(new GetChunk { Data = ByteString.CopyFrom(data.Span) }));
        await context.Response.BodyWriter.FlushAsync(context.RequestAborted);
    }

    /// <summary>Writes raw bytes (e.g. a garbage frame) and sends them.</summary>
    public static async Task SendRawAsync(HttpContext context, byte[] bytes)
    {
        await context.Response.BodyWriter.WriteAsync(bytes, context.RequestAborted);
    }

    /// <summary>Ends the response with a grpc-status trailer.</summary>
    public static void EndWith(HttpContext context, StatusCode status) =>
        context.Response.AppendTrailer("grpc-status", ((int)status).ToString(System.Globalization.CultureInfo.InvariantCulture));

    public async ValueTask DisposeAsync()
    {
        await _stopping.CancelAsync();
        await _web.StopAsync();
        await _web.DisposeAsync();
        _stopping.Dispose();
    }
}

/// <summary>Raw HTTP/2 cleartext calls (prior knowledge) for requests our own client would never send.</summary>
public static class RawHttp2
{
    public sealed record Answer(HttpStatusCode Http, StatusCode? Status, string? Message, byte[] Body);

    public static HttpClient NewClient() => new(new SocketsHttpHandler { UseCookies = false })
    {
        DefaultRequestVersion = HttpVersion.Version20,
        DefaultVersionPolicy = HttpVersionPolicy.RequestVersionExact,
        Timeout = TimeSpan.FromSeconds(60),
    };

    /// <summary>gRPC's frame header: a compressed flag and a big-endian length.</summary>
    public const int HeaderSize = 5;

    /// <summary>A framed message, as gRPC sends it.</summary>
    public static byte[] Frame(IMessage message)
    {
        var payload = message.ToByteArray();
        return Frame((uint)payload.Length, payload);
    }

    /// <summary>A frame header claiming <paramref name="length"/> bytes (compressed flag as given), then <paramref name="payload"/>.</summary>
    public static byte[] Frame(uint length, ReadOnlySpan<byte> payload, byte flag = 0)
    {
        var frame = new byte[HeaderSize + payload.Length];
        frame[0] = flag;
        System.Buffers.Binary.BinaryPrimitives.WriteUInt32BigEndian(frame.AsSpan(1), length);
        payload.CopyTo(frame.AsSpan(HeaderSize));
        return frame;
    }

    /// <summary>A call whose request body <paramref name="write"/> streams (and may leave unfinished); ends with the response.</summary>
    public static async Task StreamAsync(HttpClient client, Uri peer, string path, string authorization, Func<Stream, CancellationToken, Task> write, CancellationToken ct)
    {
        using var request = new HttpRequestMessage(HttpMethod.Post, new Uri(peer, path))
        {
            Version = HttpVersion.Version20,
            VersionPolicy = HttpVersionPolicy.RequestVersionExact,
            Content = new PushContent(write),
        };
        request.Content.Headers.ContentType = new MediaTypeHeaderValue("application/grpc");
        request.Headers.TE.ParseAdd("trailers");
        request.Headers.TryAddWithoutValidation(PeerAuth.HeaderName, authorization);
        using var response = await client.SendAsync(request, HttpCompletionOption.ResponseContentRead, ct);
    }

    private sealed class PushContent(Func<Stream, CancellationToken, Task> write) : HttpContent
    {
        protected override Task SerializeToStreamAsync(Stream stream, TransportContext? context, CancellationToken ct) => write(stream, ct);

        protected override Task SerializeToStreamAsync(Stream stream, TransportContext? context) => write(stream, CancellationToken.None);

        protected override bool TryComputeLength(out long length)
        {
            length = -1;
            return false;
        }
    }

    public static async Task<Answer> PostAsync(HttpClient client, Uri peer, string path, byte[] body, string? authorization,
        string contentType = "application/grpc")
    {
        using var request = new HttpRequestMessage(HttpMethod.Post, new Uri(peer, path))
        {
            Version = HttpVersion.Version20,
            VersionPolicy = HttpVersionPolicy.RequestVersionExact,
            Content = new ByteArrayContent(body),
        };
        request.Content.Headers.ContentType = new MediaTypeHeaderValue(contentType);
        request.Headers.TE.ParseAdd("trailers");
        if (authorization is not null)
            request.Headers.TryAddWithoutValidation(PeerAuth.HeaderName, authorization);
        using var response = await client.SendAsync(request, HttpCompletionOption.ResponseContentRead);
        var bytes = await response.Content.ReadAsByteArrayAsync();
        var headers = response.TrailingHeaders.Contains("grpc-status") ? response.TrailingHeaders : (HttpHeaders)response.Headers;
        StatusCode? status = headers.TryGetValues("grpc-status", out var values) ? (StatusCode)int.Parse(values.First(), System.Globalization.CultureInfo.InvariantCulture) : null;
        var message = headers.TryGetValues("grpc-message", out var m) ? Uri.UnescapeDataString(m.First()) : null;
        return new Answer(response.StatusCode, status, message, bytes);
    }
}

/// <summary>
/// A destination that hashes what it is given and, once <see cref="BlockAfter"/> bytes arrived, blocks
/// its writer (the requesting side "not reading") until <see cref="Release"/>.
/// </summary>
public sealed class GatedStream(long blockAfter) : Stream
{
    private readonly IncrementalHash _hash = IncrementalHash.CreateHash(HashAlgorithmName.SHA256);
    private readonly SemaphoreSlim _gate = new(0);
    private long _written;
    private int _blocked;

    public long BlockAfter => blockAfter;
    public long Written => Interlocked.Read(ref _written);

    /// <summary>Set when the writer blocks.</summary>
    public TaskCompletionSource Blocked { get; } = new(TaskCreationOptions.RunContinuationsAsynchronously);

    public void Release() => _gate.Release();

    public byte[] Hash() => _hash.GetHashAndReset();

    public override void Write(ReadOnlySpan<byte> buffer)
    {
        if (Written >= blockAfter && Interlocked.Exchange(ref _blocked, 1) == 0)
        {
            Blocked.TrySetResult();
            _gate.Wait();
        }
        _hash.AppendData(buffer);
        Interlocked.Add(ref _written, buffer.Length);
    }

    public override void Write(byte[] buffer, int offset, int count) => Write(buffer.AsSpan(offset, count));
    public override bool CanRead => false;
    public override bool CanSeek => false;
    public override bool CanWrite => true;
    public override long Length => Written;
    public override long Position { get => Written; set => throw new NotSupportedException(); }
    public override void Flush() { }
    public override int Read(byte[] buffer, int offset, int count) => throw new NotSupportedException();
    public override long Seek(long offset, SeekOrigin origin) => throw new NotSupportedException();
    public override void SetLength(long value) => throw new NotSupportedException();

    protected override void Dispose(bool disposing)
    {
        if (disposing)
        {
            _hash.Dispose();
            _gate.Dispose();
        }
        base.Dispose(disposing);
    }
}

/// <summary>
/// A deliberately misbehaving bulk peer: a bare TCP listener that reads the bulk hello and the first
/// request of each connection, then runs whatever the test says on the socket.
/// </summary>
public sealed class FakeBulkPeer : IAsyncDisposable
{
    private readonly Socket _listener;
    private readonly CancellationTokenSource _stopping = new();
    private readonly Task _accepting;
    private int _calls;
    private int _connections;

    private FakeBulkPeer(Func<Socket, GetRequest, CancellationToken, Task> serve)
    {
        _listener = new Socket(SocketType.Stream, ProtocolType.Tcp);
        _listener.Bind(new IPEndPoint(IPAddress.Loopback, 0));
        _listener.Listen();
        Address = new Uri($"http://127.0.0.1:{((IPEndPoint)_listener.LocalEndPoint!).Port}/");
        _accepting = Task.Run(async () =>
        {
            while (!_stopping.IsCancellationRequested)
            {
                Socket connection;
                try
                {
                    connection = await _listener.AcceptAsync(_stopping.Token);
                }
                catch (Exception) when (_stopping.IsCancellationRequested)
                {
                    return;
                }
                Interlocked.Increment(ref _connections);
                _ = Task.Run(async () =>
                {
                    using var socket = connection;
                    try
                    {
                        var hello = new byte[8 + PeerAuth.NonceLength + 2];
                        await ReceiveExactlyAsync(socket, hello);
                        if (!hello.AsSpan(0, 8).SequenceEqual("FAASTBK2"u8))
                            return; // not a bulk connection (e.g. HTTP/2 for a Lookup): closed, as a peer without Lookup would
                        // The handshake, as an instance of the app answers it.
                        var credentials = PeerNode.NewCredentials();
                        var serverNonce = PeerAuth.NewNonce();
                        await SendAsync(socket, (byte[])[.. BitConverter.GetBytes(PeerAuth.NonceLength + PeerAuth.MacLength), .. serverNonce,
                            .. credentials.BulkServerProof(hello.AsSpan(8, PeerAuth.NonceLength), serverNonce)]);
                        await ReceiveExactlyAsync(socket, new byte[PeerAuth.MacLength]);
                        while (await ReadRequestAsync(socket) is { } request)
                        {
                            Interlocked.Increment(ref _calls);
                            await serve(socket, request, _stopping.Token);
                        }
                    }
                    catch (Exception e) when (e is SocketException or IOException or OperationCanceledException or EndOfStreamException)
                    {
                    }
                    Abandoned.TrySetResult();
                });
            }
        });
    }

    public Uri Address { get; }
    public Peer AsPeer => new("fake-bulk", Address);

    /// <summary>Requests read, and connections accepted.</summary>
    public int Calls => Volatile.Read(ref _calls);
    public int Connections => Volatile.Read(ref _connections);

    /// <summary>Set once a connection ended (the requester closed it, or the handler returned).</summary>
    public TaskCompletionSource Abandoned { get; } = new(TaskCreationOptions.RunContinuationsAsynchronously);

    public static FakeBulkPeer Start(Func<Socket, GetRequest, CancellationToken, Task> serve) => new(serve);

    public static async Task SendAsync(Socket socket, ReadOnlyMemory<byte> bytes)
    {
        while (!bytes.IsEmpty)
            bytes = bytes[await socket.SendAsync(bytes)..];
    }

    public static Task ReplyAsync(Socket socket, BulkReply reply) => SendAsync(socket, Frame(reply));

    public static byte[] Frame(IMessage message)
    {
        var frame = new byte[4 + message.CalculateSize()];
        BitConverter.TryWriteBytes(frame, message.CalculateSize());
        message.WriteTo(frame.AsSpan(4));
        return frame;
    }

    /// <summary>The next request on a connection, or null when the requester closed it.</summary>
    public static async Task<GetRequest?> ReadRequestAsync(Socket socket)
    {
        var prefix = new byte[4];
        if (await socket.ReceiveAsync(prefix.AsMemory(0, 1)) == 0)
            return null;
        await ReceiveExactlyAsync(socket, prefix.AsMemory(1));
        var payload = new byte[BitConverter.ToInt32(prefix)];
        await ReceiveExactlyAsync(socket, payload);
        return GetRequest.Parser.ParseFrom(payload);
    }

    /// <summary>Stalls (reads and drops anything sent) until the requester closes the connection.</summary>
    public static async Task UntilClosedAsync(Socket socket, CancellationToken ct)
    {
        var sink = new byte[4096];
        while (await socket.ReceiveAsync(sink, ct) > 0)
        {
        }
    }

    public static async Task ReceiveExactlyAsync(Socket socket, Memory<byte> buffer)
    {
        while (!buffer.IsEmpty)
        {
            var n = await socket.ReceiveAsync(buffer);
            if (n == 0)
                throw new EndOfStreamException();
            buffer = buffer[n..];
        }
    }

    public async ValueTask DisposeAsync()
    {
        _stopping.Cancel();
        _listener.Dispose();
        await _accepting;
    }
}

/// <summary>Azurite, with every download held back by <see cref="Delay"/> first (slow storage).</summary>
public sealed class SlowDownloads(IBlobStore inner, TimeSpan delay) : DelegatingStore(inner)
{
    private int _downloads;

    public TimeSpan Delay => delay;

    /// <summary>Downloads started.</summary>
    public int Downloads => Volatile.Read(ref _downloads);

    public override async Task<BlobProperties?> DownloadToAsync(string container, string blob, Stream destination, BlobRange? range = null,
        string? ifMatch = null, CancellationToken ct = default)
    {
        await HoldAsync(ct);
        return await base.DownloadToAsync(container, blob, destination, range, ifMatch, ct);
    }

    public override async Task<BlobProperties?> DownloadToAsync(string container, string blob, Func<BlobProperties, Stream> destinationFactory,
        string? ifMatch = null, CancellationToken ct = default)
    {
        await HoldAsync(ct);
        return await base.DownloadToAsync(container, blob, destinationFactory, ifMatch, ct);
    }

    public override async Task<BlobContent?> DownloadAsync(string container, string blob, CancellationToken ct = default)
    {
        await HoldAsync(ct);
        return await base.DownloadAsync(container, blob, ct);
    }

    private Task HoldAsync(CancellationToken ct)
    {
        Interlocked.Increment(ref _downloads);
        return Task.Delay(delay, ct);
    }
}
