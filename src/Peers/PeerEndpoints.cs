using System.Buffers;
using System.Globalization;
using System.Threading.Channels;
using FaaST.Cachelet;
using FaaST.Cachelet.Peers;
using FaaST.Protos.Peer;
using FaaST.Storage;
using Google.Protobuf;
using Grpc.AspNetCore.Server;
using Grpc.Core;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Http;
using Microsoft.AspNetCore.Routing;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Logging;

namespace FaaST.Peers;

/// <summary>How a host serves its cachelet to the app's other instances.</summary>
public sealed record PeerServerOptions
{
    /// <summary>The app's peer credentials a caller must prove it holds (see <see cref="PeerAuth"/>).</summary>
    public required PeerAuth Credentials { get; init; }

    /// <summary>The storage client for a blob's account, or null if this instance has no such account.</summary>
    public required Func<string, IBlobStore?> StoreFor { get; init; }

    /// <summary>Whether a connection may call peer methods at all (e.g. only on the peer port).</summary>
    public Func<HttpContext, bool> Accepts { get; init; } = _ => true;

    /// <summary>Bytes per data message sent, default 1 MiB.</summary>
    public int ChunkSize { get; init; } = 1 << 20;
}

/// <summary>The serving side of the peer protocol (protos/peer.proto): a gRPC service on the host's Kestrel.</summary>
public static class PeerEndpoints
{
    /// <summary>The HTTP/2 path of the long-lived Lookup stream (telemetry leaves it untraced).</summary>
    public const string LookupStreamPath = PeerMethods.LookupPath;

    /// <summary>Registers what the peer service needs (gRPC, with the peer protocol's message limits); call before the app is built.</summary>
    public static IServiceCollection AddPeerServices(this IServiceCollection services)
    {
        // Unknown services are left to the rest of the app: otherwise gRPC maps a catch-all
        // "/{service}/{method}" that turns the HTTP triggers' 405 (wrong method) into a 404.
        services.AddGrpc(o => o.IgnoreUnknownServices = true).AddServiceOptions<PeerService>(o =>
        {
            o.MaxReceiveMessageSize = PeerMethods.MaxMessageSize;
            o.MaxSendMessageSize = PeerMethods.MaxMessageSize;
        });
        services.AddSingleton<PeerService>();
        return services;
    }

    /// <summary>
    /// Maps the peer service; <paramref name="bulk"/>, if given, serves bulk Gets on its listener from
    /// then on. Every call is admitted (the connection, then the caller's credentials) before its
    /// first message is read, so a refused caller's bytes are never buffered or parsed.
    /// </summary>
    public static void MapPeerEndpoints(this IEndpointRouteBuilder routes, BlobCache cache, PeerServerOptions options, ILogger logger,
        PeerBulkListener? bulk = null)
    {
        var server = new PeerServer(cache, options, logger);
        routes.ServiceProvider.GetRequiredService<PeerService>().Serve(server);
        bulk?.Serve(server);
        routes.MapGrpcService<PeerService>().Add(endpoint =>
        {
            var next = endpoint.RequestDelegate ?? throw new InvalidOperationException("a gRPC endpoint without a request delegate");
            var method = endpoint.Metadata.OfType<GrpcMethodMetadata>().FirstOrDefault()?.Method.Name ?? "(unknown method)";
            endpoint.RequestDelegate = context => server.Admit(context, method, out var refusal) ? next(context) : Refuse(context, refusal);
        });
    }

    /// <summary>
    /// Admits the calls of <paramref name="builder"/>'s gRPC endpoints exactly as the peer service's: the
    /// connection (<see cref="PeerServerOptions.Accepts"/>), then the caller's peer credentials, before
    /// the first message is read; a refused call gets NotFound or Unauthenticated and is logged. For other
    /// services on the peer endpoint that only the app's own processes may call (e.g. the scale votes).
    /// </summary>
    /// <param name="credentials">Read per call: the app's credentials may be made after the endpoints are mapped.</param>
    public static TBuilder RequirePeerCredentials<TBuilder>(this TBuilder builder, Func<PeerAuth> credentials, Func<HttpContext, bool> accepts, ILogger logger)
        where TBuilder : IEndpointConventionBuilder
    {
        builder.Add(endpoint =>
        {
            var next = endpoint.RequestDelegate ?? throw new InvalidOperationException("a gRPC endpoint without a request delegate");
            var method = endpoint.Metadata.OfType<GrpcMethodMetadata>().FirstOrDefault()?.Method.Name ?? "(unknown method)";
            endpoint.RequestDelegate = context => PeerServer.Admit(context, method, credentials(), accepts, logger, out var refusal) ? next(context) : Refuse(context, refusal);
        });
        return builder;
    }

    /// <summary>A trailers-only gRPC answer, sent without reading the request.</summary>
    private static Task Refuse(HttpContext context, Status status)
    {
        context.Response.StatusCode = StatusCodes.Status200OK;
        context.Response.ContentType = "application/grpc";
        context.Response.Headers["grpc-status"] = ((int)status.StatusCode).ToString(CultureInfo.InvariantCulture);
        context.Response.Headers["grpc-message"] = Uri.EscapeDataString(status.Detail);
        return Task.CompletedTask;
    }
}

/// <summary>
/// The peer service's methods, bound with the marshallers of <see cref="PeerMethods"/> (a hand
/// binding rather than the generated base class, whose Put would parse every data chunk into a
/// ByteString). One instance per host (a singleton), serving once <see cref="Serve"/> was called.
/// The handlers are virtual only because Grpc.AspNetCore finds them as overridable methods declared
/// on the bound type.
/// </summary>
[BindServiceMethod(typeof(PeerService), nameof(BindService))]
public class PeerService
{
    private static readonly WriteOptions Buffered = new(WriteFlags.BufferHint);
    private volatile PeerServer? _server;

    internal void Serve(PeerServer server) => _server = server;

    private PeerServer Server => _server ?? throw new RpcException(new Status(StatusCode.Unavailable, "this instance does not serve peers (yet)"));

    /// <summary>Called by Grpc.AspNetCore, which finds the handlers on this type by the methods' names.</summary>
    public static void BindService(ServiceBinderBase binder, PeerService? service)
    {
        binder.AddMethod(PeerMethods.ServeGet, service is null ? null : service.Get);
        binder.AddMethod(PeerMethods.ServePut, service is null ? null : service.Put);
        binder.AddMethod(PeerMethods.Lookup, service is null ? null : service.Lookup);
        binder.AddMethod(PeerMethods.Invalidate, service is null ? null : service.Invalidate);
        binder.AddMethod(PeerMethods.Stats, service is null ? null : service.Stats);
    }

    public virtual Task<InvalidateResponse> Invalidate(InvalidateRequest request, ServerCallContext context)
    {
        var server = Server;
        var blob = server.Check(request.Blob, "Invalidate");
        return Task.FromResult(new InvalidateResponse { Dropped = server.Cache.InvalidateFromPeer(PeerWire.ToKey(blob), request.KeepVersion) });
    }

    public virtual Task<StatsResponse> Stats(StatsRequest request, ServerCallContext context) => Task.FromResult(PeerWire.ToWire(Server.Cache.PeerStats()));

    public virtual async Task Get(GetRequest request, IServerStreamWriter<GetChunk> responses, ServerCallContext context)
    {
        var server = Server;
        var ct = context.CancellationToken;
        var (header, read) = await server.OpenRangeAsync(request, "Get", ct);
        using (read)
        {
            await responses.WriteAsync(new GetChunk { Header = header }, ct);
            if (header.Status != ObjectHeader.Types.Status.Ok)
                return;
            if (request.RangeFromStorage)
            {
                // Each piece the download hands over is serialized into the response before WriteAsync
                // returns (the storage client's pooled buffer is then free for its next read).
                await server.SendStorageRangeAsync(request, header,
                    (data, token) => new ValueTask(responses.WriteAsync(new GetChunk { Data = UnsafeByteOperations.UnsafeWrap(data) }, token)), ct);
            }
            else
            {
                await server.SendRangeAsync(responses, read, header.Offset, header.RangeLength, ct);
            }
        }
    }

    /// <summary>
    /// Small Gets multiplexed on one stream: each request is served as its own task and its reply
    /// (the object inline, or TOO_LARGE) queued to one writer, which sends whatever is ready in one flush.
    /// </summary>
    public virtual async Task Lookup(IAsyncStreamReader<LookupRequest> requests, IServerStreamWriter<LookupReply> responses, ServerCallContext context)
    {
        var server = Server;
        var ct = context.CancellationToken;
        var replies = Channel.CreateUnbounded<LookupReply>(new UnboundedChannelOptions { SingleReader = true });
        var writer = Task.Run(async () =>
        {
            var reader = replies.Reader;
            while (await reader.WaitToReadAsync(ct))
            {
                while (reader.TryRead(out var reply))
                {
                    // Buffered while more replies are ready; the last one flushes them all.
                    responses.WriteOptions = reader.TryPeek(out _) ? Buffered : null;
                    await responses.WriteAsync(reply, ct);
                }
            }
        }, ct);
        var running = new List<Task>();
        try
        {
            while (await requests.MoveNext(ct))
            {
                running.RemoveAll(t => t.IsCompleted);
                running.Add(server.ServeLookupAsync(requests.Current, replies.Writer, ct));
            }
        }
        finally
        {
            // Also when a request is malformed: the writer must be done with the response before the
            // error status ends it, or the status lands in the middle of a reply's frame.
            await Task.WhenAll(running);
            replies.Writer.TryComplete();
            try
            {
                await writer;
            }
            catch (OperationCanceledException) when (ct.IsCancellationRequested)
            {
                // the requester went away
            }
        }
    }

    public virtual async Task<PutResponse> Put(IAsyncStreamReader<PutFrame> requests, ServerCallContext context)
    {
        var server = Server;
        var ct = context.CancellationToken;
        var sink = PayloadSink.Begin("Put"); // data messages go to sink once it has a target (below)
        if (!await requests.MoveNext(ct) || requests.Current.Header is not { } header)
            throw new RpcException(new Status(StatusCode.InvalidArgument, "Put: the first message must be the header"));
        var blob = server.Check(header.Blob, "Put");
        var store = server.StoreFor(blob, "Put");
        if (header.Length < 0)
            throw new RpcException(new Status(StatusCode.InvalidArgument, $"Put {blob.Container}/{blob.Blob}: negative length {header.Length}"));
        var cache = server.Cache;
        var condition = header.IfNoneExists ? BlobWriteCondition.Absent
            : header.IfMatch.Length > 0 ? BlobWriteCondition.Matching(header.IfMatch) : BlobWriteCondition.None;
        string version;
        try
        {
            version = await AcceptAsync(requests, sink, header, blob, store, cache, condition, ct);
        }
        catch (BlobConditionFailedException e)
        {
            return new PutResponse { ConditionFailed = true, Message = e.Message };
        }
        return new PutResponse { Version = version };
    }

    private static async Task<string> AcceptAsync(IAsyncStreamReader<PutFrame> requests, PayloadSink sink, PutHeader header, BlobRef blob, IBlobStore store,
        BlobCache cache, BlobWriteCondition condition, CancellationToken ct)
    {
        string version;
        if (cache.TryAllocateForPeer(header.Length, out var extent))
        {
            try
            {
                await using (var target = extent.OpenWriteStream())
                    await ReceiveAsync(requests, sink, target, header, ct);
            }
            catch
            {
                cache.ReleaseForPeer(extent);
                throw;
            }
            version = await cache.AcceptPeerPutAsync(store, PeerWire.ToKey(blob), extent, header.UploadSync, ct, condition);
        }
        else
        {
            // No room in this cache: take it into a file and upload it from there, through the
            // one descriptor (the workers may replace any name in the segment directory).
            using var spill = cache.CreateSpillFile();
            await ReceiveAsync(requests, sink, spill.Stream, header, ct);
            spill.Stream.Position = 0;
            version = await cache.AcceptPeerFileAsync(store, PeerWire.ToKey(blob), spill.Stream, header.Length, ct, condition);
        }
        return version;
    }

    /// <summary>The data messages, each written to <paramref name="target"/> by the marshaller as it is parsed.</summary>
    private static async Task ReceiveAsync(IAsyncStreamReader<PutFrame> requests, PayloadSink sink, Stream target, PutHeader header, CancellationToken ct)
    {
        var what = $"Put {header.Blob.Container}/{header.Blob.Blob}";
        sink.Start(target, header.Length);
        while (await requests.MoveNext(ct))
        {
            if (requests.Current.Header is not null)
                throw new RpcException(new Status(StatusCode.InvalidArgument, $"{what}: a malformed data message (a second header)"));
        }
        if (sink.Received != header.Length)
            throw new RpcException(new Status(StatusCode.InvalidArgument, $"{what}: {sink.Received} of the announced {header.Length} bytes arrived"));
    }
}

/// <summary>What the peer service and the bulk listener share: admission, checks, and serving objects from the cache.</summary>
internal sealed class PeerServer(BlobCache cache, PeerServerOptions options, ILogger logger)
{
    public BlobCache Cache => cache;

    public ILogger Logger => logger;

    public PeerAuth Credentials => options.Credentials;

    /// <summary>Admits (true) or refuses (and logs) a call from anything but another instance of this app.</summary>
    public bool Admit(HttpContext context, string method, out Status refusal) =>
        Admit(context, method, options.Credentials, options.Accepts, logger, out refusal);

    /// <summary>The admission of a call on the peer endpoint, shared with <see cref="PeerEndpoints.RequirePeerCredentials"/>.</summary>
    public static bool Admit(HttpContext context, string method, PeerAuth credentials, Func<HttpContext, bool> accepts, ILogger logger, out Status refusal)
    {
        if (!accepts(context))
        {
            refusal = new Status(StatusCode.NotFound, "not a peer endpoint");
            return false;
        }
        if (!credentials.VerifyCall(context.Request.Headers[PeerAuth.HeaderName].FirstOrDefault(), context.Request.Path.Value ?? "", out var reason))
        {
            Log.CallRefused(logger, method, context.Connection.RemoteIpAddress, reason);
            refusal = new Status(StatusCode.Unauthenticated, $"not an instance of this app (wrong or missing peer credentials: {reason})");
            return false;
        }
        refusal = Status.DefaultSuccess;
        return true;
    }

    public static RpcException Error(StatusCode code, string message) => new(new Status(code, message));

    public BlobRef Check(BlobRef? blob, string method)
    {
        if (blob is null || blob.Account.Length == 0 || blob.Container.Length == 0 || blob.Blob.Length == 0)
            throw Error(StatusCode.InvalidArgument, $"{method}: the request names no blob (account, container and blob are required)");
        try
        {
            // The cache and the blob store refuse bad names with ArgumentException deep inside, which
            // reset the stream (found by the fuzzer); a peer gets InvalidArgument naming the problem.
            BlobNames.ValidateContainer(blob.Container);
            BlobNames.ValidateBlob(blob.Blob);
        }
        catch (ArgumentException e)
        {
            throw Error(StatusCode.InvalidArgument, $"{method}: {e.Message}");
        }
        return blob;
    }

    public IBlobStore StoreFor(BlobRef blob, string method) =>
        options.StoreFor(blob.Account) ?? throw Error(StatusCode.FailedPrecondition,
            $"{method} {blob.Container}/{blob.Blob}: this instance has no storage account at {blob.Account}");

    /// <summary>
    /// Opens what a Get asks for (fetching it if asked and needed) and checks its range: the header
    /// to send and, if it is OK, the pinned object its bytes come from (the caller disposes it).
    /// </summary>
    public async Task<(ObjectHeader Header, CachedRead Read)> OpenRangeAsync(GetRequest request, string method, CancellationToken ct)
    {
        if (request.RangeFromStorage)
            return (await OpenStorageRangeAsync(request, method, ct), default);
        var blob = Check(request.Blob, method);
        var found = await cache.OpenForPeerAsync(StoreFor(blob, method), PeerWire.ToKey(blob), request.IfVersion, request.Fetch, request.Validate, ct);
        var read = found.Read;
        if (found.Status != PeerStatus.Ok)
        {
            read.Dispose();
            return (new ObjectHeader { Status = PeerWire.ToWire(found.Status) }, default);
        }
        var length = read.Length;
        var offset = request.Offset;
        var rangeLength = request.Length == 0 ? length - offset : request.Length;
        if (offset < 0 || offset > length || rangeLength < 0 || rangeLength > length - offset)
        {
            read.Dispose();
            throw Error(StatusCode.OutOfRange, $"{method} {blob.Container}/{blob.Blob}: range {offset}+{request.Length} is outside its {length} bytes");
        }
        return (new ObjectHeader
        {
            Status = ObjectHeader.Types.Status.Ok,
            Version = read.ETag,
            Length = length,
            Offset = offset,
            RangeLength = rangeLength,
            Fetched = found.Fetched,
        }, read);
    }

    /// <summary>
    /// A range_from_storage Get (bandwidth scaling, Faa$T §4): checks the request and, with one HEAD,
    /// that storage still holds the version asked for; the header to send (the whole object's length,
    /// the range). Nothing is cached or pinned: the bytes go from the download to the wire.
    /// </summary>
    private async Task<ObjectHeader> OpenStorageRangeAsync(GetRequest request, string method, CancellationToken ct)
    {
        var blob = Check(request.Blob, method);
        var what = $"{method} {blob.Container}/{blob.Blob} (range_from_storage)";
        if (request.IfVersion.Length == 0)
            throw Error(StatusCode.InvalidArgument, $"{what}: if_version (the object's ETag) is required");
        if (request.Offset < 0 || request.Length <= 0)
            throw Error(StatusCode.InvalidArgument, $"{what}: the range {request.Offset}+{request.Length} must have offset >= 0 and length > 0");
        var store = StoreFor(blob, method);
        var head = await store.GetPropertiesAsync(blob.Container, blob.Blob, ct);
        if (head is null)
            return new ObjectHeader { Status = ObjectHeader.Types.Status.NotFound };
        if (head.ETag != request.IfVersion)
            throw Error(StatusCode.FailedPrecondition, $"{what}: storage holds version {head.ETag}, not the {request.IfVersion} asked for");
        if (request.Offset > head.Length - request.Length)
            throw Error(StatusCode.OutOfRange, $"{what}: range {request.Offset}+{request.Length} is outside its {head.Length} bytes");
        return new ObjectHeader
        {
            Status = ObjectHeader.Types.Status.Ok,
            Version = head.ETag,
            Length = head.Length,
            Offset = request.Offset,
            RangeLength = request.Length,
            Fetched = true,
        };
    }

    /// <summary>
    /// Downloads a range_from_storage Get's range with If-Match on its version and hands each piece to
    /// <paramref name="send"/> as it arrives (the storage client's pooled copy buffer, no other copy).
    /// A failure after the header (the blob changed, storage went away) throws: the call is aborted,
    /// so the requester never takes a partial or mixed range.
    /// </summary>
    public async Task SendStorageRangeAsync(GetRequest request, ObjectHeader header, Func<ReadOnlyMemory<byte>, CancellationToken, ValueTask> send, CancellationToken ct)
    {
        var blob = request.Blob;
        var started = System.Diagnostics.Stopwatch.GetTimestamp();
        await using var wire = new ForwardingStream(send, header.RangeLength, $"{blob.Container}/{blob.Blob}");
        // Counted as it starts: the requester may have every byte before this handler returns.
        cache.CountStorageRangeServed();
        await options.StoreFor(blob.Account)!.DownloadToAsync(blob.Container, blob.Blob, wire,
            new BlobRange(header.Offset, header.RangeLength), ifMatch: header.Version, ct: ct);
        if (wire.Sent != header.RangeLength)
            throw new IOException($"range_from_storage {blob.Container}/{blob.Blob}: storage sent {wire.Sent} of the {header.RangeLength} bytes of range {header.Offset}");
        Log.ServedStorageRange(logger, blob.Container, blob.Blob, header.Offset, header.RangeLength,
            System.Diagnostics.Stopwatch.GetElapsedTime(started).TotalMilliseconds);
    }

    /// <summary>A write-only stream that passes each write on (to a response or a socket), refusing more than the range.</summary>
    private sealed class ForwardingStream(Func<ReadOnlyMemory<byte>, CancellationToken, ValueTask> send, long limit, string what) : Stream
    {
        public long Sent { get; private set; }

        public override bool CanRead => false;
        public override bool CanSeek => false;
        public override bool CanWrite => true;
        public override long Length => throw new NotSupportedException();

        public override long Position
        {
            get => Sent;
            set => throw new NotSupportedException();
        }

        public override async ValueTask WriteAsync(ReadOnlyMemory<byte> buffer, CancellationToken ct = default)
        {
            if (buffer.Length > limit - Sent)
                throw new IOException($"range_from_storage {what}: storage sent more than the {limit} bytes asked for");
            await send(buffer, ct);
            Sent += buffer.Length;
        }

        public override Task WriteAsync(byte[] buffer, int offset, int count, CancellationToken ct) => WriteAsync(buffer.AsMemory(offset, count), ct).AsTask();

        public override void Write(byte[] buffer, int offset, int count) => WriteAsync(buffer.AsMemory(offset, count)).AsTask().GetAwaiter().GetResult();

        public override void Flush()
        {
        }

        public override int Read(byte[] buffer, int offset, int count) => throw new NotSupportedException("the stream is write-only");

        public override long Seek(long offset, SeekOrigin origin) => throw new NotSupportedException();

        public override void SetLength(long value) => throw new NotSupportedException();
    }

    /// <summary>The range in data messages; each wraps the source's memory and is copied once, into the response.</summary>
    public async Task SendRangeAsync(IServerStreamWriter<GetChunk> responses, CachedRead read, long offset, long length, CancellationToken ct)
    {
        var chunk = options.ChunkSize;
        if (read.Entry is { } entry)
        {
            var extent = entry.Extent;
            for (long sent = 0; sent < length; sent += chunk)
                await responses.WriteAsync(new GetChunk { Data = UnsafeByteOperations.UnsafeWrap(extent.GetMemory(offset + sent, (int)Math.Min(chunk, length - sent))) }, ct);
            return;
        }
        if (read.File is { } file)
        {
            using var handle = cache.OpenFile(file);
            var buffer = ArrayPool<byte>.Shared.Rent(chunk);
            try
            {
                for (long sent = 0; sent < length;)
                {
                    var n = RandomAccess.Read(handle, buffer.AsSpan(0, (int)Math.Min(chunk, length - sent)), offset + sent);
                    if (n == 0)
                        throw Error(StatusCode.Internal, $"{file} ended early");
                    // Serialized into the response before WriteAsync returns: the buffer is free again after it.
                    await responses.WriteAsync(new GetChunk { Data = UnsafeByteOperations.UnsafeWrap(buffer.AsMemory(0, n)) }, ct);
                    sent += n;
                }
            }
            finally
            {
                ArrayPool<byte>.Shared.Return(buffer);
            }
            return;
        }
        for (long sent = 0; sent < length; sent += chunk)
            await responses.WriteAsync(new GetChunk { Data = UnsafeByteOperations.UnsafeWrap(read.Bytes.Slice((int)(offset + sent), (int)Math.Min(chunk, length - sent))) }, ct);
    }

    public async Task ServeLookupAsync(LookupRequest request, ChannelWriter<LookupReply> replies, CancellationToken ct)
    {
        var reply = new LookupReply { Id = request.Id };
        try
        {
            var get = request.Get ?? throw Error(StatusCode.InvalidArgument, "Lookup: no request");
            var blob = Check(get.Blob, "Lookup");
            if (!get.Validate && cache.PeekForPeer(PeerWire.ToKey(blob)) is { } cached && cached.Length > request.InlineLimit && cached.Version != get.IfVersion)
            {
                // Too large to go inline: say so without counting an access (the Get that follows counts).
                reply.Header = new ObjectHeader { Status = ObjectHeader.Types.Status.TooLarge, Version = cached.Version, Length = cached.Length, RangeLength = cached.Length };
                replies.TryWrite(reply);
                return;
            }
            var found = await cache.OpenForPeerAsync(StoreFor(blob, "Lookup"), PeerWire.ToKey(blob), get.IfVersion, get.Fetch, get.Validate, ct);
            using var read = found.Read;
            reply.Header = new ObjectHeader { Status = PeerWire.ToWire(found.Status) };
            if (found.Status == PeerStatus.Ok)
            {
                reply.Header.Version = read.ETag;
                reply.Header.Length = read.Length;
                reply.Header.RangeLength = read.Length;
                reply.Header.Fetched = found.Fetched;
                if (read.Length > request.InlineLimit)
                    reply.Header.Status = ObjectHeader.Types.Status.TooLarge;
                else
                    reply.Data = Copy(read);
            }
        }
        catch (Exception e) when (e is RpcException or IOException or BlobStorageException or StorageUnavailableException)
        {
            reply.Header = null;
            reply.Error = e is RpcException rpc ? rpc.Status.Detail : e.Message;
        }
        replies.TryWrite(reply);
    }

    private ByteString Copy(CachedRead read)
    {
        if (read.Entry is { } entry)
            return ByteString.CopyFrom(entry.Extent.Span);
        if (read.File is { } file)
        {
            using var handle = cache.OpenFile(file);
            var bytes = GC.AllocateUninitializedArray<byte>(checked((int)read.Length));
            for (var done = 0; done < bytes.Length;)
            {
                var n = RandomAccess.Read(handle, bytes.AsSpan(done), done);
                if (n == 0)
                    throw new IOException($"{file} ended after {done} of {bytes.Length} bytes");
                done += n;
            }
            return UnsafeByteOperations.UnsafeWrap(bytes);
        }
        return ByteString.CopyFrom(read.Bytes.Span);
    }
}
