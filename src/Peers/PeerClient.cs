using System.Collections.Concurrent;
using FaaST.Cachelet.Index;
using FaaST.Cachelet.Peers;
using FaaST.Protos.Peer;
using FaaST.Storage;
using Google.Protobuf;
using Grpc.Core;

namespace FaaST.Peers;

/// <summary>
/// The requesting side of the peer protocol. Small whole objects come inline on one long-lived
/// Lookup stream per peer (HTTP/2); larger ones and ranges come over the peer port's bulk framing,
/// on pooled connections of their own, received from the socket straight into the destination (a
/// shared-memory extent), so a small request is never queued behind a large one. A peer that does
/// not speak the bulk framing is asked with the gRPC Get method instead. The cache core uses it as
/// its <see cref="IOwnerClient"/>.
/// </summary>
public sealed class PeerClient(PeerOptions options) : IOwnerClient, IDisposable
{
    public const string GetPath = PeerMethods.GetPath;
    public const string PutPath = PeerMethods.PutPath;
    public const string InvalidatePath = PeerMethods.InvalidatePath;
    public const string StatsPath = PeerMethods.StatsPath;

    private readonly ConcurrentDictionary<Uri, PeerChannel> _channels = new();
    private readonly ConcurrentDictionary<Uri, LookupChannel> _lookups = new();
    private readonly ConcurrentDictionary<Uri, PeerBulkChannel> _bulk = new();
    private readonly ConcurrentDictionary<Uri, long> _bulkRefused = new();

    /// <summary>A peer that answered a bulk connection in another protocol is asked over gRPC only, for this long.</summary>
    private static readonly TimeSpan BulkRetryAfter = TimeSpan.FromMinutes(1);

    public PeerOptions Options => options;

    /// <summary>How long a Put whose writes failed waits for the owner's answer (the reason it ended the call).</summary>
    private static readonly TimeSpan AnswerGrace = TimeSpan.FromSeconds(1);

    private long _lookupFailures;

    /// <summary>Lookups that failed (a broken or refused stream) and left the object to a Get.</summary>
    public long LookupFailures => Interlocked.Read(ref _lookupFailures);

    /// <summary>Whole objects up to this size are asked for on the peer's Lookup stream (inline, one
    /// message each way); larger ones, and failed lookups, take a Get call of their own.</summary>
    public const int LookupInlineLimit = 64 * 1024;

    internal PeerChannel ChannelFor(Uri peer) => _channels.GetOrAdd(peer, static (address, credentials) => new PeerChannel(address, credentials), options.Credentials);

    /// <summary>
    /// Gets an object (or range) from <paramref name="peer"/>. For an OK answer, <paramref name="destination"/>
    /// gets the header and returns the stream the range is copied into (null to abandon the call); the
    /// header is returned once every byte arrived. Throws <see cref="PeerException"/> on any failure, after
    /// which the destination holds a partial range and must be discarded.
    /// </summary>
    public async Task<ObjectHeader> GetAsync(Uri peer, GetRequest request, Func<ObjectHeader, Stream?> destination, CancellationToken ct)
    {
        using var timeout = CancellationTokenSource.CreateLinkedTokenSource(ct);
        PayloadSink? sink = null;
        try
        {
            timeout.CancelAfter(options.Timeout);
            // A lookup stream that does not work (a peer without Lookup, a broken stream) leaves the Get call.
            // The lookup never fetches: a miss at the owner (NOT_CACHED) goes on to a Get that does.
            var fetchedByLookup = false;
            if (request is { Offset: 0, Length: 0 } &&
                await TryLookupAsync(peer, new GetRequest(request) { Fetch = false }, timeout.Token) is { } lookup)
            {
                if (lookup.Error.Length > 0)
                    throw new PeerException($"{peer} could not serve {Describe(request.Blob)}: {lookup.Error}");
                var answer = lookup.Header ?? throw new PeerException($"{peer} answered a lookup of {Describe(request.Blob)} without a header");
                if (answer.Status == ObjectHeader.Types.Status.NotCached && !request.Fetch)
                    return answer;
                if (answer.Status is not (ObjectHeader.Types.Status.TooLarge or ObjectHeader.Types.Status.NotCached))
                {
                    if (answer.Status == ObjectHeader.Types.Status.Ok)
                    {
                        if (lookup.Data.Length != answer.Length || answer.RangeLength != answer.Length)
                            throw new PeerException($"{peer} sent {lookup.Data.Length} of {answer.Length} bytes of {Describe(request.Blob)}");
                        var target = destination(answer) ?? throw new OperationCanceledException("the destination declined the object");
                        target.Write(lookup.Data.Span);
                    }
                    return answer;
                }
                fetchedByLookup = answer.Fetched; // the owner fetched it for the lookup; Get finds it cached
            }
            if (options.BulkTransfers && !(_bulkRefused.TryGetValue(peer, out var until) && Environment.TickCount64 < until))
            {
                try
                {
                    var bulk = _bulk.GetOrAdd(peer, static (p, credentials) => new PeerBulkChannel(p, credentials), options.Credentials);
                    var answer = await bulk.GetAsync(request, destination, timeout, options.Timeout, options.FetchTimeout);
                    answer.Fetched |= fetchedByLookup;
                    return answer;
                }
                catch (PeerBulkChannel.NotBulkException e)
                {
                    // A peer without bulk Gets: the gRPC Get below (and for a while, only that).
                    if (e.Mismatch)
                        _bulkRefused[peer] = Environment.TickCount64 + (long)BulkRetryAfter.TotalMilliseconds;
                }
            }
            // The data messages are written into the destination by the marshaller as they are parsed.
            sink = PayloadSink.Begin($"Get {Describe(request.Blob)} from {peer}");
            var channel = ChannelFor(peer);
            using var call = channel.Invoker.AsyncServerStreamingCall(PeerMethods.FetchGet, null, channel.Options(GetPath, timeout.Token), request);
            var responses = call.ResponseStream;
            if (!await responses.MoveNext(timeout.Token))
                throw new PeerException($"{peer} ended Get {Describe(request.Blob)} without a header");
            var header = responses.Current.Header ?? throw new PeerException($"{peer} answered Get {Describe(request.Blob)} with data before the header");
            header.Fetched |= fetchedByLookup;
            if (header.Status != ObjectHeader.Types.Status.Ok)
                return header;
            if (header.RangeLength < 0 || header.Offset < 0 || header.Offset + header.RangeLength > header.Length)
                throw new PeerException($"{peer} announced an invalid range {header.Offset}+{header.RangeLength} of {header.Length} bytes for {Describe(request.Blob)}");
            var into = destination(header) ?? throw new OperationCanceledException("the destination declined the object");
            // The timeout is for waiting on the peer: once a message has arrived, the time spent writing it
            // into the destination does not count (the loop re-arms it for the next one). Otherwise a
            // destination slower than the timeout fails a transfer the peer kept up with.
            sink.Start(into, header.RangeLength, () => timeout.CancelAfter(Timeout.InfiniteTimeSpan));
            while (sink.Received < header.RangeLength)
            {
                timeout.CancelAfter(options.Timeout);
                if (!await responses.MoveNext(timeout.Token))
                    throw new PeerException($"{peer} ended Get {Describe(request.Blob)} after {sink.Received} of {header.RangeLength} bytes");
                if (responses.Current.Header is not null)
                    throw new PeerException($"{peer} sent a malformed data message (a second header) in Get {Describe(request.Blob)}");
            }
            return header;
        }
        catch (OperationCanceledException) when (timeout.IsCancellationRequested && !ct.IsCancellationRequested)
        {
            throw new PeerException($"{peer} did not answer Get {Describe(request.Blob)} within {options.Timeout.TotalSeconds:0.##} s");
        }
        catch (OperationCanceledException e) when (!ct.IsCancellationRequested)
        {
            throw new PeerException($"Get {Describe(request.Blob)} from {peer} failed: the connection went away ({e.Message})", e);
        }
        // ObjectDisposedException: the peer's channel was closed under the call, because its owner left the view while the
        // call was in flight (an owner SIGKILLed mid-load; found by OwnerCrashTests on a busy machine). That peer is gone,
        // like a refused connection: the caller falls back as for any failed peer, never a 500.
        catch (Exception e) when (e is RpcException or HttpRequestException or IOException or InvalidProtocolBufferException or InvalidDataException or ObjectDisposedException)
        {
            throw new PeerException($"Get {Describe(request.Blob)} from {peer} failed: {sink?.Failure ?? Reason(e)}", e);
        }
    }

    /// <summary>What went wrong, for a log line: a status and its detail rather than the exception's own dump.</summary>
    internal static string Reason(Exception e) => e is RpcException rpc ? $"{rpc.StatusCode}: {rpc.Status.Detail}" : e.Message;

    private async Task<LookupReply?> TryLookupAsync(Uri peer, GetRequest request, CancellationToken ct)
    {
        try
        {
            return await _lookups.GetOrAdd(peer, p => new LookupChannel(ChannelFor(p), p)).LookupAsync(request, LookupInlineLimit, ct);
        }
        catch (PeerException)
        {
            Interlocked.Increment(ref _lookupFailures);
            return null;
        }
    }

    /// <summary>
    /// Writes an object through to the owner <paramref name="peer"/>: the header, then
    /// <see cref="PutHeader.Length"/> bytes taken chunk by chunk from <paramref name="source"/>
    /// (offset, length: a window of the object, e.g. of its extent). Returns the version the owner then holds.
    /// </summary>
    public async Task<PutResponse> PutAsync(Uri peer, PutHeader header, Func<long, int, ReadOnlyMemory<byte>> source, CancellationToken ct)
    {
        using var timeout = CancellationTokenSource.CreateLinkedTokenSource(ct);
        try
        {
            timeout.CancelAfter(options.Timeout);
            var channel = ChannelFor(peer);
            using var call = channel.Invoker.AsyncClientStreamingCall(PeerMethods.SendPut, null, channel.Options(PutPath, timeout.Token));
            try
            {
                await call.RequestStream.WriteAsync(new PutChunk { Header = header }, timeout.Token);
                for (long sent = 0; sent < header.Length;)
                {
                    var n = (int)Math.Min(options.ChunkSize, header.Length - sent);
                    timeout.CancelAfter(options.Timeout);
                    // The chunk wraps the source's memory (an extent): serialized once, into the request.
                    await call.RequestStream.WriteAsync(new PutChunk { Data = UnsafeByteOperations.UnsafeWrap(source(sent, n)) }, timeout.Token);
                    sent += n;
                }
                await call.RequestStream.CompleteAsync();
            }
            catch (Exception e) when (!ct.IsCancellationRequested &&
                e is OperationCanceledException or InvalidOperationException or RpcException or IOException or HttpRequestException)
            {
                // The owner may have ended the call (refused the credentials, failed) before it took every
                // byte, which cancels the writes: then its answer, read below, is the reason to report.
                if (await Task.WhenAny(call.ResponseAsync, Task.Delay(AnswerGrace, CancellationToken.None)) != call.ResponseAsync)
                    throw;
            }
            timeout.CancelAfter(options.Timeout);
            return await call.ResponseAsync;
        }
        catch (OperationCanceledException) when (timeout.IsCancellationRequested && !ct.IsCancellationRequested)
        {
            throw new PeerException($"{peer} did not take Put {Describe(header.Blob)} within {options.Timeout.TotalSeconds:0.##} s");
        }
        catch (OperationCanceledException e) when (!ct.IsCancellationRequested)
        {
            // Neither the caller's cancellation nor the timeout: the request's writes are cancelled when the
            // peer's stream is aborted (the owner died mid-Put). The caller then writes to storage instead.
            throw new PeerException($"Put {Describe(header.Blob)} to {peer} failed: the connection went away ({e.Message})", e);
        }
        catch (Exception e) when (e is RpcException or HttpRequestException or IOException or InvalidProtocolBufferException or InvalidOperationException or ObjectDisposedException)
        {
            throw new PeerException($"Put {Describe(header.Blob)} to {peer} failed: {Reason(e)}", e);
        }
    }

    public Task<InvalidateResponse> InvalidateAsync(Uri peer, InvalidateRequest request, CancellationToken ct) =>
        UnaryAsync(peer, InvalidatePath, (client, options) => client.InvalidateAsync(request, options), ct);

    public Task<StatsResponse> StatsAsync(Uri peer, CancellationToken ct) =>
        UnaryAsync(peer, StatsPath, static (client, options) => client.StatsAsync(new StatsRequest(), options), ct);

    private async Task<TResponse> UnaryAsync<TResponse>(Uri peer, string path, Func<CacheletPeer.CacheletPeerClient, CallOptions, AsyncUnaryCall<TResponse>> start, CancellationToken ct)
    {
        using var timeout = CancellationTokenSource.CreateLinkedTokenSource(ct);
        timeout.CancelAfter(options.Timeout);
        try
        {
            var channel = ChannelFor(peer);
            using var call = start(channel.Client, channel.Options(path, timeout.Token));
            return await call.ResponseAsync;
        }
        catch (OperationCanceledException) when (timeout.IsCancellationRequested && !ct.IsCancellationRequested)
        {
            throw new PeerException($"{peer} did not answer {path} within {options.Timeout.TotalSeconds:0.##} s");
        }
        catch (OperationCanceledException e) when (!ct.IsCancellationRequested)
        {
            throw new PeerException($"{path} to {peer} failed: the connection went away ({e.Message})", e);
        }
        catch (Exception e) when (e is RpcException or HttpRequestException or IOException or InvalidProtocolBufferException or ObjectDisposedException)
        {
            throw new PeerException($"{path} to {peer} failed: {Reason(e)}", e);
        }
    }

    internal static string Describe(BlobRef? blob) => PeerWire.Describe(blob);

    // ---- the cache core's view (domain types) ---------------------------------------------------

    async Task<PeerAnswer> IOwnerClient.GetAsync(Peer owner, PeerGet request, Func<PeerAnswer, Stream?> destination, CancellationToken ct)
    {
        var get = new GetRequest { Blob = PeerWire.ToRef(request.Key), IfVersion = request.IfVersion ?? "", Fetch = request.Fetch, Validate = request.Validate };
        var header = await GetAsync(owner.Address, get, h => destination(PeerWire.ToAnswer(h, owner.Address)), ct);
        return PeerWire.ToAnswer(header, owner.Address);
    }

    async Task<PeerAnswer> IOwnerClient.GetRangeFromStorageAsync(Peer peer, BlobKey key, string version, long offset, long length, Stream destination, CancellationToken ct)
    {
        var get = new GetRequest { Blob = PeerWire.ToRef(key), IfVersion = version, Offset = offset, Length = length, RangeFromStorage = true };
        var header = await GetAsync(peer.Address, get, h =>
        {
            if (h.Offset != offset || h.RangeLength != length || h.Version != version)
                throw new PeerException($"{peer.Address} answered range {h.Offset}+{h.RangeLength} of version {h.Version} of {key.Container}/{key.Blob} for range {offset}+{length} of {version}");
            return destination;
        }, ct);
        return PeerWire.ToAnswer(header, peer.Address);
    }

    async Task<string> IOwnerClient.PutAsync(Peer owner, BlobKey key, long length, bool uploadSync, Func<long, int, ReadOnlyMemory<byte>> source, CancellationToken ct,
        BlobWriteCondition condition)
    {
        var header = new PutHeader { Blob = PeerWire.ToRef(key), Length = length, UploadSync = uploadSync };
        if (condition.IfMatch is { } version)
            header.IfMatch = version;
        header.IfNoneExists = condition.IfNoneExists;
        var answer = await PutAsync(owner.Address, header, source, ct);
        return answer.ConditionFailed
            ? throw new BlobConditionFailedException(412, "ConditionNotMet", $"{answer.Message} (the owner {owner.Id})")
            : answer.Version;
    }

    async Task<bool> IOwnerClient.InvalidateAsync(Peer peer, BlobKey key, string keepVersion, CancellationToken ct) =>
        (await InvalidateAsync(peer.Address, new InvalidateRequest { Blob = PeerWire.ToRef(key), KeepVersion = keepVersion }, ct)).Dropped;

    async Task<CacheStats> IOwnerClient.StatsAsync(Peer peer, CancellationToken ct) => PeerWire.ToStats(await StatsAsync(peer.Address, ct));

    /// <summary>The peers this client holds connections (or connection state) for.</summary>
    public IReadOnlyCollection<Uri> ConnectedPeers =>
        _channels.Keys.Union(_lookups.Keys).Union(_bulk.Keys).Union(_bulkRefused.Keys).ToArray();

    /// <summary>
    /// Closes and forgets the channel, Lookup stream and pooled bulk connections of every peer not in
    /// <paramref name="current"/> (instances that left the view): without this they would stay open,
    /// and the tables grow, for as long as the host runs. A call still running to a dropped peer fails
    /// (the cache then reads storage); a later call to it connects anew.
    /// </summary>
    public void RetainOnly(IReadOnlyCollection<Peer> current)
    {
        var keep = current.Select(p => p.Address).ToHashSet();
        foreach (var peer in ConnectedPeers)
        {
            if (keep.Contains(peer))
                continue;
            if (_lookups.TryRemove(peer, out var lookup))
                lookup.Dispose();
            if (_bulk.TryRemove(peer, out var bulk))
                bulk.Dispose();
            if (_channels.TryRemove(peer, out var channel))
                channel.Dispose();
            _bulkRefused.TryRemove(peer, out _);
        }
    }

    public void Dispose()
    {
        foreach (var lookup in _lookups.Values)
            lookup.Dispose();
        foreach (var bulk in _bulk.Values)
            bulk.Dispose();
        foreach (var channel in _channels.Values)
            channel.Dispose();
        _channels.Clear();
    }
}
