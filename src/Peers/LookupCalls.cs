using System.Buffers;
using System.Buffers.Binary;
using System.Globalization;
using System.IO.Pipelines;
using System.Net;
using System.Net.Http.Headers;
using FaaST.Cachelet.Peers;
using FaaST.Protos.Peer;
using Google.Protobuf;
using Grpc.Core;

namespace FaaST.Peers;

/// <summary>How the requesting side of a Lookup stream is carried.</summary>
public enum LookupTransport
{
    /// <summary>
    /// The Lookup call on a raw HTTP/2 stream of the peer's SocketsHttpHandler, framed here (see
    /// <see cref="RawLookupCall"/>): the one specialised path kept, because the 1 KB remote-hit goal
    /// does not hold on Grpc.Net.Client (./faast bench distributed: rh_1kb_ops beside rh_1kb_grpcnet_ops).
    /// </summary>
    RawHttp2,

    /// <summary>The generated client on Grpc.Net.Client (one write per request, no batching).</summary>
    GrpcNetClient,
}

/// <summary>One open Lookup call: batches of requests out, replies in.</summary>
internal interface ILookupCall : IDisposable
{
    /// <summary>Sends the requests in one go where the transport can.</summary>
    ValueTask WriteAsync(List<LookupRequest> batch, CancellationToken ct);

    /// <summary>The next reply; null when the peer ended the stream cleanly.</summary>
    ValueTask<LookupReply?> ReadAsync(CancellationToken ct);
}

/// <summary>The Lookup call through Grpc.Net.Client's generated client.</summary>
internal sealed class GrpcLookupCall(AsyncDuplexStreamingCall<LookupRequest, LookupReply> call) : ILookupCall
{
    public async ValueTask WriteAsync(List<LookupRequest> batch, CancellationToken ct)
    {
        foreach (var request in batch)
            await call.RequestStream.WriteAsync(request, ct);
    }

    public async ValueTask<LookupReply?> ReadAsync(CancellationToken ct) =>
        await call.ResponseStream.MoveNext(ct) ? call.ResponseStream.Current : null;

    public void Dispose() => call.Dispose();
}

/// <summary>
/// The Lookup call on a raw HTTP/2 stream: the request body stays open and takes each batch of framed
/// requests with one write and one flush; replies are parsed off a pipe over the response body. The
/// framing is gRPC's
/// (a flag byte, a big-endian length, the message) and the status is read from the trailers, so
/// the server cannot tell this client from any other.
/// </summary>
internal sealed class RawLookupCall : ILookupCall
{
    private const int HeaderSize = 5;
    private static readonly MediaTypeHeaderValue GrpcContentType = new("application/grpc");

    private readonly HttpRequestMessage _request;
    private readonly DuplexContent _body;
    private readonly Stream _requests;
    private readonly Task<HttpResponseMessage> _sending;
    private readonly Uri _peer;
    private readonly ArrayBufferWriter<byte> _buffer = new(4096);
    private HttpResponseMessage? _response;
    private PipeReader? _replies;

    private RawLookupCall(HttpRequestMessage request, DuplexContent body, Stream requests, Task<HttpResponseMessage> sending, Uri peer)
    {
        _request = request;
        _body = body;
        _requests = requests;
        _sending = sending;
        _peer = peer;
    }

    public static async Task<RawLookupCall> OpenAsync(HttpMessageInvoker invoker, Uri peer, string authorization, CancellationToken ct)
    {
        var body = new DuplexContent();
        body.Headers.ContentType = GrpcContentType;
        var request = new HttpRequestMessage(HttpMethod.Post, new Uri(peer, PeerMethods.LookupPath))
        {
            Version = HttpVersion.Version20,
            VersionPolicy = HttpVersionPolicy.RequestVersionExact,
            Content = body,
        };
        request.Headers.TE.ParseAdd("trailers");
        request.Headers.TryAddWithoutValidation(PeerAuth.HeaderName, authorization);
        try
        {
            // The body's stream exists once the handler starts sending it; the response is not awaited
            // here (the server may answer only after the first request message).
            var sending = invoker.SendAsync(request, ct);
            await Task.WhenAny(body.Stream, sending).WaitAsync(ct);
            if (!body.Stream.IsCompleted && !sending.IsCompletedSuccessfully)
                await sending; // failed before the body started (e.g. a refused connection): surface it
            Stream requests;
            try
            {
                requests = await body.Stream.WaitAsync(ct);
            }
            catch (Exception) when (!ct.IsCancellationRequested)
            {
                // The call was answered before its body opened (refused on its headers, or no such
                // method): that answer is the error to report.
                using var early = await sending.WaitAsync(ct);
                throw new PeerException($"{peer} refused the lookup stream: {StatusOf(early)}");
            }
            return new RawLookupCall(request, body, requests, sending, peer);
        }
        catch
        {
            body.Complete();
            request.Dispose();
            throw;
        }
    }

    public async ValueTask WriteAsync(List<LookupRequest> batch, CancellationToken ct)
    {
        foreach (var request in batch)
        {
            var size = request.CalculateSize();
            var header = _buffer.GetSpan(HeaderSize);
            header[0] = 0;
            BinaryPrimitives.WriteUInt32BigEndian(header[1..], (uint)size);
            _buffer.Advance(HeaderSize);
            request.WriteTo(_buffer);
        }
        await _requests.WriteAsync(_buffer.WrittenMemory, ct);
        _buffer.ResetWrittenCount();
        await _requests.FlushAsync(ct);
    }

    public async ValueTask<LookupReply?> ReadAsync(CancellationToken ct)
    {
        if (_replies is null)
        {
            _response = await _sending.WaitAsync(ct);
            if (_response.StatusCode != HttpStatusCode.OK)
                throw new PeerException($"{_peer} answered the lookup stream with HTTP {(int)_response.StatusCode}");
            _replies = PipeReader.Create(await _response.Content.ReadAsStreamAsync(ct));
        }
        while (true)
        {
            var result = await _replies.ReadAsync(ct);
            var buffer = result.Buffer;
            if (buffer.Length >= HeaderSize)
            {
                var (flag, length) = ReadHeader(buffer);
                if (flag != 0)
                    throw new PeerException($"{_peer} sent a compressed lookup reply");
                if (length > PeerMethods.MaxMessageSize)
                    throw new PeerException($"{_peer} sent a {length}-byte lookup reply (at most {PeerMethods.MaxMessageSize})");
                if (buffer.Length >= HeaderSize + length)
                {
                    var payload = buffer.Slice(HeaderSize, length);
                    try
                    {
                        return LookupReply.Parser.ParseFrom(payload);
                    }
                    finally
                    {
                        _replies.AdvanceTo(payload.End);
                    }
                }
            }
            if (result.IsCompleted)
            {
                _replies.AdvanceTo(buffer.End);
                if (!buffer.IsEmpty)
                    throw new PeerException($"{_peer} ended the lookup stream inside a reply");
                var status = StatusOf(_response!);
                return status.StartsWith("OK", StringComparison.Ordinal) ? null : throw new PeerException($"{_peer} ended the lookup stream: {status}");
            }
            _replies.AdvanceTo(buffer.Start, buffer.End);
        }
    }

    private static (byte Flag, uint Length) ReadHeader(in ReadOnlySequence<byte> buffer)
    {
        Span<byte> header = stackalloc byte[HeaderSize];
        buffer.Slice(0, HeaderSize).CopyTo(header);
        return (header[0], BinaryPrimitives.ReadUInt32BigEndian(header[1..]));
    }

    /// <summary>"CODE: detail" from the trailers (or, for a trailers-only answer, the headers).</summary>
    private static string StatusOf(HttpResponseMessage response)
    {
        if (response.StatusCode != HttpStatusCode.OK)
            return $"HTTP {(int)response.StatusCode}";
        var headers = response.TrailingHeaders.Contains("grpc-status") ? response.TrailingHeaders : (HttpHeaders)response.Headers;
        if (!headers.TryGetValues("grpc-status", out var values) || !int.TryParse(values.First(), NumberStyles.None, CultureInfo.InvariantCulture, out var code))
            return "no grpc-status";
        var detail = headers.TryGetValues("grpc-message", out var m) ? Uri.UnescapeDataString(m.First()) : "";
        return $"{(StatusCode)code}: {detail}";
    }

    public void Dispose()
    {
        _body.Complete();
        _response?.Dispose();
        _request.Dispose();
    }

    /// <summary>
    /// A request body that stays open: it flushes at once (so the headers go out and the server can
    /// answer before any request is written), hands its stream over and ends when told.
    /// </summary>
    private sealed class DuplexContent : HttpContent
    {
        private readonly TaskCompletionSource<Stream> _stream = new(TaskCreationOptions.RunContinuationsAsynchronously);
        private readonly TaskCompletionSource _done = new(TaskCreationOptions.RunContinuationsAsynchronously);

        public Task<Stream> Stream => _stream.Task;

        public void Complete() => _done.TrySetResult();

        protected override async Task SerializeToStreamAsync(Stream stream, TransportContext? context, CancellationToken ct)
        {
            try
            {
                await stream.FlushAsync(ct);
            }
            catch (Exception e)
            {
                // The call ended (answered, reset, cancelled) before the stream opened: whoever waits
                // for the stream must learn that, not wait for ever.
                _stream.TrySetException(e);
                throw;
            }
            _stream.TrySetResult(stream);
            await _done.Task;
        }

        protected override Task SerializeToStreamAsync(Stream stream, TransportContext? context) =>
            SerializeToStreamAsync(stream, context, CancellationToken.None);

        protected override bool TryComputeLength(out long length)
        {
            length = -1;
            return false;
        }
    }
}
