using System.Buffers;
using FaaST.Cachelet;
using FaaST.Cachelet.Peers;
using FaaST.Protos.Peer;
using FaaST.Rpc;
using FaaST.Storage;
using Google.Protobuf;
using Microsoft.AspNetCore.Http;
using Microsoft.AspNetCore.Routing;
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

/// <summary>The serving side of the peer protocol (protos/peer.proto) on the host's Kestrel.</summary>
public static class PeerEndpoints
{
    private const int DataField = 2;

    /// <summary>Maps the gRPC methods; <paramref name="bulk"/>, if given, serves bulk Gets on its listener from then on.</summary>
    public static void MapPeerEndpoints(this IEndpointRouteBuilder routes, BlobCache cache, PeerServerOptions options, ILogger logger,
        PeerBulkListener? bulk = null)
    {
        var server = new Server(cache, options, logger);
        bulk?.Serve(server);
        routes.MapGrpcDuplex<GetRequest, GetChunk>(PeerClient.GetPath, GetRequest.Parser, server.GetAsync);
        routes.MapGrpcDuplex<PutChunk, PutResponse>(PeerClient.PutPath, PutChunk.Parser, server.PutAsync);
        routes.MapGrpcDuplex<LookupRequest, LookupReply>(LookupChannel.Path, LookupRequest.Parser, server.LookupAsync);
        // Unary calls are admitted before their message is read, as the streaming ones are.
        routes.MapGrpcUnary<InvalidateRequest, InvalidateResponse>(PeerClient.InvalidatePath, InvalidateRequest.Parser, (request, _) =>
        {
            var blob = server.Check(request.Blob, "Invalidate");
            return Task.FromResult(new InvalidateResponse { Dropped = cache.InvalidateFromPeer(PeerWire.ToKey(blob), request.KeepVersion) });
        }, admit: context => server.Admit(context, "Invalidate"));
        routes.MapGrpcUnary<StatsRequest, StatsResponse>(PeerClient.StatsPath, StatsRequest.Parser,
            (_, _) => Task.FromResult(PeerWire.ToWire(cache.PeerStats())), admit: context => server.Admit(context, "Stats"));
    }

    internal sealed class Server(BlobCache cache, PeerServerOptions options, ILogger logger)
    {
        public BlobCache Cache => cache;

        public ILogger Logger => logger;

        public PeerAuth Credentials => options.Credentials;

        /// <summary>Refuses (and logs) a call from anything but another instance of this app.</summary>
        public void Admit(HttpContext context, string method)
        {
            if (!options.Accepts(context))
                throw new GrpcException(GrpcStatus.NotFound, "not a peer endpoint");
            if (!options.Credentials.VerifyCall(context.Request.Headers[PeerAuth.HeaderName].FirstOrDefault(), context.Request.Path.Value ?? "", out var reason))
            {
                logger.LogWarning("Refused a peer {Method} call from {Remote}: missing or wrong app credentials ({Reason})", method, context.Connection.RemoteIpAddress, reason);
                throw new GrpcException(GrpcStatus.Unauthenticated, $"not an instance of this app (wrong or missing peer credentials: {reason})");
            }
        }

        public BlobRef Check(BlobRef? blob, string method)
        {
            if (blob is null || blob.Account.Length == 0 || blob.Container.Length == 0 || blob.Blob.Length == 0)
                throw new GrpcException(GrpcStatus.InvalidArgument, $"{method}: the request names no blob (account, container and blob are required)");
            try
            {
                // The cache and the blob store refuse bad names with ArgumentException deep inside, which
                // reset the stream (found by the fuzzer); a peer gets InvalidArgument naming the problem.
                FaaST.Storage.BlobNames.ValidateContainer(blob.Container);
                FaaST.Storage.BlobNames.ValidateBlob(blob.Blob);
            }
            catch (ArgumentException e)
            {
                throw new GrpcException(GrpcStatus.InvalidArgument, $"{method}: {e.Message}");
            }
            return blob;
        }

        private IBlobStore StoreFor(BlobRef blob, string method) =>
            options.StoreFor(blob.Account) ?? throw new GrpcException(GrpcStatus.FailedPrecondition,
                $"{method} {blob.Container}/{blob.Blob}: this instance has no storage account at {blob.Account}");

        public async Task GetAsync(GrpcServerStream<GetRequest, GetChunk> stream)
        {
            Admit(stream.Context, "Get");
            var ct = stream.Context.RequestAborted;
            var request = await stream.ReadAsync(ct) ?? throw new GrpcException(GrpcStatus.InvalidArgument, "Get: no request message");
            var (header, read) = await OpenRangeAsync(request, "Get", ct);
            using (read)
            {
                stream.Write(new GetChunk { Header = header });
                await stream.FlushAsync(ct);
                if (header.Status == ObjectHeader.Types.Status.Ok)
                    await SendRangeAsync(stream, read, header.Offset, header.RangeLength, ct);
            }
        }

        /// <summary>
        /// Opens what a Get asks for (fetching it if asked and needed) and checks its range: the header
        /// to send and, if it is OK, the pinned object its bytes come from (the caller disposes it).
        /// </summary>
        public async Task<(ObjectHeader Header, CachedRead Read)> OpenRangeAsync(GetRequest request, string method, CancellationToken ct)
        {
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
                throw new GrpcException(GrpcStatus.OutOfRange, $"{method} {blob.Container}/{blob.Blob}: range {offset}+{request.Length} is outside its {length} bytes");
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

        private async Task SendRangeAsync(GrpcServerStream<GetRequest, GetChunk> stream, CachedRead read, long offset, long length, CancellationToken ct)
        {
            var chunk = options.ChunkSize;
            if (read.Entry is { } entry)
            {
                // Straight from the shared-memory extent into the connection's buffers.
                var extent = entry.Extent;
                for (long sent = 0; sent < length; sent += chunk)
                {
                    stream.WriteBytesField(DataField, extent.GetSpan(offset + sent, (int)Math.Min(chunk, length - sent)));
                    await stream.FlushAsync(ct);
                }
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
                            throw new GrpcException(GrpcStatus.Internal, $"{file} ended early");
                        stream.WriteBytesField(DataField, buffer.AsSpan(0, n));
                        await stream.FlushAsync(ct);
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
            {
                stream.WriteBytesField(DataField, read.Bytes.Span.Slice((int)(offset + sent), (int)Math.Min(chunk, length - sent)));
                await stream.FlushAsync(ct);
            }
        }

        /// <summary>
        /// Small Gets multiplexed on one stream: each request is served as its own task and its reply
        /// (the object inline, or TOO_LARGE) queued to one writer that flushes whatever is ready.
        /// </summary>
        public async Task LookupAsync(GrpcServerStream<LookupRequest, LookupReply> stream)
        {
            Admit(stream.Context, "Lookup");
            var ct = stream.Context.RequestAborted;
            var replies = System.Threading.Channels.Channel.CreateUnbounded<LookupReply>(new System.Threading.Channels.UnboundedChannelOptions { SingleReader = true });
            var writer = Task.Run(async () =>
            {
                var reader = replies.Reader;
                while (await reader.WaitToReadAsync(ct))
                {
                    while (reader.TryRead(out var reply))
                        stream.Write(reply);
                    await stream.FlushAsync(ct);
                }
            }, ct);
            var running = new List<Task>();
            try
            {
                while (await stream.ReadAsync(ct) is { } request)
                {
                    running.RemoveAll(t => t.IsCompleted);
                    running.Add(ServeLookupAsync(request, replies.Writer, ct));
                }
            }
            finally
            {
                // Also when a request is malformed: the writer must be done with the response before the
                // error status ends it, or the status lands in the middle of a reply's frame (found by the
                // fuzzer: "a response frame runs past the end of the body").
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

        private async Task ServeLookupAsync(LookupRequest request, System.Threading.Channels.ChannelWriter<LookupReply> replies, CancellationToken ct)
        {
            var reply = new LookupReply { Id = request.Id };
            try
            {
                var get = request.Get ?? throw new GrpcException(GrpcStatus.InvalidArgument, "Lookup: no request");
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
            catch (Exception e) when (e is GrpcException or IOException or BlobStorageException or StorageUnavailableException)
            {
                reply.Header = null;
                reply.Error = e.Message;
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

        public async Task PutAsync(GrpcServerStream<PutChunk, PutResponse> stream)
        {
            Admit(stream.Context, "Put");
            var ct = stream.Context.RequestAborted;
            var first = await stream.ReadAsync(ct);
            if (first?.ContentCase != PutChunk.ContentOneofCase.Header)
                throw new GrpcException(GrpcStatus.InvalidArgument, "Put: the first message must be the header");
            var header = first.Header;
            var blob = Check(header.Blob, "Put");
            var store = StoreFor(blob, "Put");
            if (header.Length < 0)
                throw new GrpcException(GrpcStatus.InvalidArgument, $"Put {blob.Container}/{blob.Blob}: negative length {header.Length}");
            string version;
            if (cache.TryAllocateForPeer(header.Length, out var extent))
            {
                try
                {
                    await using (var target = extent.OpenWriteStream())
                        await ReceiveAsync(stream, target, header, ct);
                }
                catch
                {
                    cache.ReleaseForPeer(extent);
                    throw;
                }
                version = await cache.AcceptPeerPutAsync(store, PeerWire.ToKey(blob), extent, header.UploadSync, ct);
            }
            else
            {
                // No room in this cache: take it into a file and upload it from there, through the
                // one descriptor (the workers may replace any name in the segment directory).
                using var spill = cache.CreateSpillFile();
                await ReceiveAsync(stream, spill.Stream, header, ct);
                spill.Stream.Position = 0;
                version = await cache.AcceptPeerFileAsync(store, PeerWire.ToKey(blob), spill.Stream, header.Length, ct);
            }
            await stream.WriteAsync(new PutResponse { Version = version }, ct);
        }

        private static async Task ReceiveAsync(GrpcServerStream<PutChunk, PutResponse> stream, Stream target, PutHeader header, CancellationToken ct)
        {
            long received = 0;
            void Copy(ReadOnlySequence<byte> payload)
            {
                if (!GrpcFraming.TryReadBytesField(payload, DataField, out var data))
                    throw new GrpcException(GrpcStatus.InvalidArgument, $"Put {header.Blob.Container}/{header.Blob.Blob}: a malformed data message");
                if (received + data.Length > header.Length)
                    throw new GrpcException(GrpcStatus.InvalidArgument, $"Put {header.Blob.Container}/{header.Blob.Blob}: more than the announced {header.Length} bytes");
                foreach (var segment in data)
                    target.Write(segment.Span);
                received += data.Length;
            }
            while (await stream.ReadPayloadAsync(Copy, ct))
            {
            }
            if (received != header.Length)
                throw new GrpcException(GrpcStatus.InvalidArgument, $"Put {header.Blob.Container}/{header.Blob.Blob}: {received} of the announced {header.Length} bytes arrived");
        }
    }
}
