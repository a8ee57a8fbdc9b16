using System.Buffers;
using System.IO.Pipelines;
using System.Net;
using System.Net.Http.Headers;
using Google.Protobuf;

namespace FaaST.Rpc;

/// <summary>
/// A gRPC client over HTTP/2 cleartext (prior knowledge) on one shared SocketsHttpHandler.
/// Thread-safe; calls multiplex over pooled connections.
/// </summary>
public sealed class GrpcClient : IDisposable
{
    private static readonly MediaTypeHeaderValue GrpcContentType = new("application/grpc");
    private readonly HttpMessageInvoker _invoker;
    private readonly Uri _baseAddress;
    private readonly int _maxMessageSize;

    public GrpcClient(Uri baseAddress, int maxMessageSize = GrpcServer.DefaultMaxMessageSize, SocketsHttpHandler? handler = null)
    {
        _baseAddress = baseAddress;
        _maxMessageSize = maxMessageSize;
        _invoker = new HttpMessageInvoker(handler ?? new SocketsHttpHandler
        {
            EnableMultipleHttp2Connections = true,
            UseCookies = false,
            AutomaticDecompression = DecompressionMethods.None,
            InitialHttp2StreamWindowSize = 16 * 1024 * 1024,
            PooledConnectionIdleTimeout = TimeSpan.FromMinutes(5),
        });
    }

    /// <summary>Headers added to every call (e.g. a per-app peer secret).</summary>
    public Dictionary<string, string> Headers { get; } = new(StringComparer.OrdinalIgnoreCase);

    /// <summary>A header computed afresh for every call from its path (e.g. a signed, single-use peer
    /// credential, which a fixed header in <see cref="Headers"/> could not be).</summary>
    public (string Name, Func<string, string> Value)? PerCallHeader { get; set; }

    public async Task<TResponse> UnaryAsync<TRequest, TResponse>(string path, TRequest request,
        MessageParser<TResponse> parser, CancellationToken ct = default)
        where TRequest : IMessage<TRequest>
        where TResponse : class, IMessage<TResponse>
    {
        var buffer = new ArrayBufferWriter<byte>(GrpcFraming.HeaderSize + request.CalculateSize());
        GrpcFraming.Write(buffer, request);
        using var message = NewRequest(path, new ReadOnlyMemoryContent(buffer.WrittenMemory));
        return await SingleResponseAsync(path, message, parser, ct);
    }

    /// <summary>Sends a request whose call answers with one message, and reads it and the status.</summary>
    private async Task<TResponse> SingleResponseAsync<TResponse>(string path, HttpRequestMessage message, MessageParser<TResponse> parser, CancellationToken ct)
        where TResponse : class, IMessage<TResponse>
    {
        using var response = await _invoker.SendAsync(message, ct);
        var reader = GrpcClient.ResponseReader(await response.Content.ReadAsStreamAsync(ct));
        var call = new GrpcResponseReader<TResponse>(response, reader, parser, _maxMessageSize);
        var result = await call.ReadAsync(ct);
        while (await call.ReadAsync(ct) is not null)
        {
            // drain to the trailers
        }
        await call.CheckStatusAsync();
        return result ?? throw new GrpcException(GrpcStatus.Internal, $"{path} returned no message");
    }

    /// <summary>
    /// A server-streaming call: one request, then responses read from the returned call as they
    /// arrive. Dispose the call to end it early.
    /// </summary>
    public async Task<GrpcStreamingCall<TResponse>> ServerStreamingAsync<TRequest, TResponse>(string path, TRequest request,
        MessageParser<TResponse> parser, CancellationToken ct = default)
        where TRequest : IMessage<TRequest>
        where TResponse : class, IMessage<TResponse>
    {
        var buffer = new ArrayBufferWriter<byte>(GrpcFraming.HeaderSize + request.CalculateSize());
        GrpcFraming.Write(buffer, request);
        var message = NewRequest(path, new ReadOnlyMemoryContent(buffer.WrittenMemory));
        try
        {
            var response = await _invoker.SendAsync(message, ct);
            var reader = GrpcClient.ResponseReader(await response.Content.ReadAsStreamAsync(ct));
            return new GrpcStreamingCall<TResponse>(new GrpcResponseReader<TResponse>(response, reader, parser, _maxMessageSize), response, message);
        }
        catch
        {
            message.Dispose();
            throw;
        }
    }

    /// <summary>
    /// A client-streaming call: <paramref name="writeBody"/> writes the framed requests to the request
    /// stream (e.g. with <see cref="GrpcFraming"/>), then the single response is read.
    /// </summary>
    public async Task<TResponse> ClientStreamingAsync<TResponse>(string path, Func<Stream, CancellationToken, Task> writeBody,
        MessageParser<TResponse> parser, CancellationToken ct = default)
        where TResponse : class, IMessage<TResponse>
    {
        using var message = NewRequest(path, new PushContent(writeBody));
        return await SingleResponseAsync(path, message, parser, ct);
    }

    /// <summary>
    /// Opens a bidirectional stream: requests are written to the returned call while responses are
    /// read from it (one writer and one reader at a time). Dispose the call to end it.
    /// </summary>
    public async Task<GrpcDuplexCall<TResponse>> DuplexAsync<TResponse>(string path, MessageParser<TResponse> parser, CancellationToken ct = default)
        where TResponse : class, IMessage<TResponse>
    {
        var body = new DuplexContent();
        var message = NewRequest(path, body);
        try
        {
            // The request body stream exists once the handler starts sending the body. The response
            // is not awaited here: SocketsHttpHandler may hold the request headers back until the
            // first request message, and the server answers only once it has them.
            var sending = _invoker.SendAsync(message, ct);
            await Task.WhenAny(body.Stream, sending).WaitAsync(ct);
            if (!body.Stream.IsCompleted && !sending.IsCompletedSuccessfully)
                await sending; // failed before the body started (e.g. refused connection): surface it
            // The response may arrive before the body's first flush returns: a live call (the server
            // starts its response at once), or a call refused on its headers, whose end cancels the
            // body (the flush throws, and DuplexContent passes that on rather than never opening).
            Stream requests;
            try
            {
                requests = await body.Stream.WaitAsync(ct);
            }
            catch (Exception) when (!ct.IsCancellationRequested)
            {
                // The request stream never opened: the call was answered first (its answer, e.g.
                // UNAUTHENTICATED or an HTTP 404 from a server without the method, is the error to
                // report) or it failed (awaiting it throws that).
                using var early = await sending.WaitAsync(ct);
                var answer = new GrpcResponseReader<TResponse>(early, PipeReader.Create(await early.Content.ReadAsStreamAsync(ct)), parser, _maxMessageSize);
                while (await answer.ReadAsync(ct) is not null)
                {
                }
                await answer.CheckStatusAsync();
                throw;
            }
            return new GrpcDuplexCall<TResponse>(requests, body, sending, parser, _maxMessageSize, message, ct);
        }
        catch
        {
            body.Complete();
            message.Dispose();
            throw;
        }
    }

    /// <summary>
    /// A pipe over a response body with large buffers: the default 4 KiB ones cost a read call and a
    /// segment per 4 KiB, which dominates a bulk transfer.
    /// </summary>
    internal static PipeReader ResponseReader(Stream body) =>
        PipeReader.Create(body, new StreamPipeReaderOptions(bufferSize: 256 * 1024, minimumReadSize: 64 * 1024));

    private HttpRequestMessage NewRequest(string path, HttpContent content)
    {
        content.Headers.ContentType = GrpcContentType;
        var message = new HttpRequestMessage(HttpMethod.Post, new Uri(_baseAddress, path))
        {
            Version = HttpVersion.Version20,
            VersionPolicy = HttpVersionPolicy.RequestVersionExact,
            Content = content,
        };
        message.Headers.TE.ParseAdd("trailers");
        foreach (var (name, value) in Headers)
            message.Headers.TryAddWithoutValidation(name, value);
        if (PerCallHeader is { } perCall)
            message.Headers.TryAddWithoutValidation(perCall.Name, perCall.Value(path));
        return message;
    }

    public void Dispose() => _invoker.Dispose();

    /// <summary>
    /// A request body that stays open: it flushes at once (so the headers go out and the server can
    /// answer before any request is written), hands its stream to the caller and ends when told.
    /// </summary>
    internal sealed class DuplexContent : HttpContent
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
                // The call ended (answered, reset, cancelled) before the stream opened: whoever
                // waits for the stream must learn that, not wait for ever.
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

    /// <summary>Request content written by a callback, straight to the HTTP/2 request stream.</summary>
    private sealed class PushContent(Func<Stream, CancellationToken, Task> write) : HttpContent
    {
        protected override Task SerializeToStreamAsync(Stream stream, TransportContext? context, CancellationToken ct) => write(stream, ct);

        protected override Task SerializeToStreamAsync(Stream stream, TransportContext? context) =>
            SerializeToStreamAsync(stream, context, CancellationToken.None);

        protected override bool TryComputeLength(out long length)
        {
            length = -1;
            return false;
        }
    }
}

/// <summary>Reads framed messages of a response and then its grpc-status trailer.</summary>
public sealed class GrpcResponseReader<TResponse>(HttpResponseMessage response, PipeReader reader,
    MessageParser<TResponse> parser, int maxMessageSize)
    where TResponse : class, IMessage<TResponse>
{
    /// <summary>The next message, or null at the end of the stream.</summary>
    public async ValueTask<TResponse?> ReadAsync(CancellationToken ct)
    {
        if (response.StatusCode != HttpStatusCode.OK)
            throw new GrpcException(GrpcStatus.Unavailable, $"HTTP {(int)response.StatusCode} from {response.RequestMessage?.RequestUri}");
        while (true)
        {
            var result = await reader.ReadAsync(ct);
            var buffer = result.Buffer;
            if (GrpcFraming.TryRead(ref buffer, maxMessageSize, out var payload))
            {
                var message = parser.ParseFrom(payload);
                reader.AdvanceTo(buffer.Start);
                return message;
            }
            if (result.IsCompleted)
            {
                reader.AdvanceTo(buffer.End);
                return null;
            }
            reader.AdvanceTo(buffer.Start, buffer.End);
        }
    }

    /// <summary>
    /// The next message's undecoded bytes, handed to <paramref name="handle"/> (valid only during the
    /// call); false at the end of the stream.
    /// </summary>
    public async ValueTask<bool> ReadPayloadAsync(Action<ReadOnlySequence<byte>> handle, CancellationToken ct)
    {
        if (response.StatusCode != HttpStatusCode.OK)
            throw new GrpcException(GrpcStatus.Unavailable, $"HTTP {(int)response.StatusCode} from {response.RequestMessage?.RequestUri}");
        while (true)
        {
            var result = await reader.ReadAsync(ct);
            var buffer = result.Buffer;
            if (GrpcFraming.TryRead(ref buffer, maxMessageSize, out var payload))
            {
                try
                {
                    handle(payload);
                }
                finally
                {
                    reader.AdvanceTo(buffer.Start);
                }
                return true;
            }
            if (result.IsCompleted)
            {
                reader.AdvanceTo(buffer.End);
                return false;
            }
            reader.AdvanceTo(buffer.Start, buffer.End);
        }
    }

    /// <summary>Throws <see cref="GrpcException"/> unless the call ended with status OK.</summary>
    public ValueTask CheckStatusAsync()
    {
        var headers = response.TrailingHeaders.Contains("grpc-status") ? response.TrailingHeaders : (HttpHeaders)response.Headers;
        if (!headers.TryGetValues("grpc-status", out var values))
            throw new GrpcException(GrpcStatus.Internal, "the response carried no grpc-status");
        var status = (GrpcStatus)int.Parse(values.First(), System.Globalization.CultureInfo.InvariantCulture);
        if (status == GrpcStatus.Ok)
            return ValueTask.CompletedTask;
        var message = headers.TryGetValues("grpc-message", out var m) ? Uri.UnescapeDataString(m.First()) : status.ToString();
        throw new GrpcException(status, message);
    }
}

/// <summary>A server-streaming call in progress: read messages until null, then the status.</summary>
public sealed class GrpcStreamingCall<TResponse> : IDisposable
    where TResponse : class, IMessage<TResponse>
{
    private readonly GrpcResponseReader<TResponse> _responses;
    private readonly HttpResponseMessage _response;
    private readonly HttpRequestMessage _request;

    internal GrpcStreamingCall(GrpcResponseReader<TResponse> responses, HttpResponseMessage response, HttpRequestMessage request)
    {
        _responses = responses;
        _response = response;
        _request = request;
    }

    public ValueTask<TResponse?> ReadAsync(CancellationToken ct = default) => _responses.ReadAsync(ct);

    /// <inheritdoc cref="GrpcResponseReader{TResponse}.ReadPayloadAsync"/>
    public ValueTask<bool> ReadPayloadAsync(Action<ReadOnlySequence<byte>> handle, CancellationToken ct = default) =>
        _responses.ReadPayloadAsync(handle, ct);

    public ValueTask CheckStatusAsync() => _responses.CheckStatusAsync();

    /// <summary>Ends the call (a call not read to its end is reset).</summary>
    public void Dispose()
    {
        _response.Dispose();
        _request.Dispose();
    }
}

/// <summary>A bidirectional call in progress: one writer and one reader at a time.</summary>
public sealed class GrpcDuplexCall<TResponse> : IDisposable
    where TResponse : class, IMessage<TResponse>
{
    private readonly Stream _requests;
    private readonly GrpcClient.DuplexContent _body;
    private readonly Task<HttpResponseMessage> _sending;
    private readonly MessageParser<TResponse> _parser;
    private readonly int _maxMessageSize;
    private readonly HttpRequestMessage _request;
    private readonly CancellationToken _callToken;
    private readonly ArrayBufferWriter<byte> _buffer = new();
    private GrpcResponseReader<TResponse>? _responses;

    internal GrpcDuplexCall(Stream requests, GrpcClient.DuplexContent body, Task<HttpResponseMessage> sending,
        MessageParser<TResponse> parser, int maxMessageSize, HttpRequestMessage request, CancellationToken callToken)
    {
        _requests = requests;
        _body = body;
        _sending = sending;
        _parser = parser;
        _maxMessageSize = maxMessageSize;
        _request = request;
        _callToken = callToken;
    }

    /// <summary>Frames a message into the send buffer; <see cref="FlushAsync"/> sends what is buffered.</summary>
    public void Write(IMessage message) => GrpcFraming.Write(_buffer, message);

    public async ValueTask FlushAsync(CancellationToken ct = default)
    {
        if (_buffer.WrittenCount > 0)
        {
            await _requests.WriteAsync(_buffer.WrittenMemory, ct);
            _buffer.ResetWrittenCount();
        }
        await _requests.FlushAsync(ct);
    }

    /// <summary>The next response, or null at the end of the stream (the first read waits for the response headers).</summary>
    public async ValueTask<TResponse?> ReadAsync(CancellationToken ct = default) => await (await ResponsesAsync(ct)).ReadAsync(ct);

    public async ValueTask CheckStatusAsync() => await (await ResponsesAsync(_callToken)).CheckStatusAsync();

    private async ValueTask<GrpcResponseReader<TResponse>> ResponsesAsync(CancellationToken ct)
    {
        if (_responses is null)
        {
            var response = await _sending.WaitAsync(ct);
            var reader = GrpcClient.ResponseReader(await response.Content.ReadAsStreamAsync(ct));
            _responses = new GrpcResponseReader<TResponse>(response, reader, _parser, _maxMessageSize);
        }
        return _responses;
    }

    /// <summary>Ends the requests (the server sees the end of its stream).</summary>
    public void CompleteRequests() => _body.Complete();

    public void Dispose()
    {
        _body.Complete();
        if (_sending.IsCompletedSuccessfully)
            _sending.Result.Dispose();
        _request.Dispose();
    }
}
