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

    public async Task<TResponse> UnaryAsync<TRequest, TResponse>(string path, TRequest request,
        MessageParser<TResponse> parser, CancellationToken ct = default)
        where TRequest : IMessage<TRequest>
        where TResponse : class, IMessage<TResponse>
    {
        var buffer = new ArrayBufferWriter<byte>(GrpcFraming.HeaderSize + request.CalculateSize());
        GrpcFraming.Write(buffer, request);
        using var message = NewRequest(path, new ReadOnlyMemoryContent(buffer.WrittenMemory));
        using var response = await _invoker.SendAsync(message, ct);
        var reader = PipeReader.Create(await response.Content.ReadAsStreamAsync(ct));
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
            var reader = PipeReader.Create(await response.Content.ReadAsStreamAsync(ct));
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
        using var response = await _invoker.SendAsync(message, ct);
        var reader = PipeReader.Create(await response.Content.ReadAsStreamAsync(ct));
        var call = new GrpcResponseReader<TResponse>(response, reader, parser, _maxMessageSize);
        var result = await call.ReadAsync(ct);
        while (await call.ReadAsync(ct) is not null)
        {
            // drain to the trailers
        }
        await call.CheckStatusAsync();
        return result ?? throw new GrpcException(GrpcStatus.Internal, $"{path} returned no message");
    }

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
        return message;
    }

    public void Dispose() => _invoker.Dispose();

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
