using System.Buffers;
using System.IO.Pipelines;
using Google.Protobuf;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Connections;
using Microsoft.AspNetCore.Http;
using Microsoft.AspNetCore.Http.Features;
using Microsoft.AspNetCore.Routing;
using Microsoft.AspNetCore.Server.Kestrel.Core.Features;

namespace FaaST.Rpc;

/// <summary>Maps gRPC methods onto ASP.NET Core endpoints served by Kestrel over HTTP/2.</summary>
public static class GrpcServer
{
    public const int DefaultMaxMessageSize = 256 * 1024 * 1024;

    /// <summary>A bidirectional-streaming method at /package.Service/Method.</summary>
    public static IEndpointConventionBuilder MapGrpcDuplex<TRequest, TResponse>(
        this IEndpointRouteBuilder routes, string path, MessageParser<TRequest> parser,
        Func<GrpcServerStream<TRequest, TResponse>, Task> handler, int maxMessageSize = DefaultMaxMessageSize)
        where TRequest : class, IMessage<TRequest>
        where TResponse : class, IMessage<TResponse>
    {
        return routes.MapPost(path, async context =>
        {
            if (!Prepare(context))
                return;
            await context.Response.StartAsync(context.RequestAborted);
            var stream = new GrpcServerStream<TRequest, TResponse>(context, parser, maxMessageSize);
            await RunAsync(context, () => handler(stream));
        });
    }

    /// <summary>A unary method at /package.Service/Method.</summary>
    /// <param name="admit">Runs before the request is read (e.g. a credentials check that throws
    /// <see cref="GrpcException"/>), so that a refused caller's message is never buffered or parsed.</param>
    public static IEndpointConventionBuilder MapGrpcUnary<TRequest, TResponse>(
        this IEndpointRouteBuilder routes, string path, MessageParser<TRequest> parser,
        Func<TRequest, HttpContext, Task<TResponse>> handler, int maxMessageSize = DefaultMaxMessageSize,
        Action<HttpContext>? admit = null)
        where TRequest : class, IMessage<TRequest>
        where TResponse : class, IMessage<TResponse>
    {
        return routes.MapPost(path, async context =>
        {
            if (!Prepare(context))
                return;
            await RunAsync(context, async () =>
            {
                admit?.Invoke(context);
                var stream = new GrpcServerStream<TRequest, TResponse>(context, parser, maxMessageSize);
                var request = await stream.ReadAsync(context.RequestAborted)
                    ?? throw new GrpcException(GrpcStatus.InvalidArgument, "the request carried no message");
                var response = await handler(request, context);
                await stream.WriteAsync(response, context.RequestAborted);
            });
        });
    }

    private static bool Prepare(HttpContext context)
    {
        var contentType = context.Request.ContentType;
        if (contentType is null || !contentType.StartsWith("application/grpc", StringComparison.Ordinal))
        {
            context.Response.StatusCode = StatusCodes.Status415UnsupportedMediaType;
            return false;
        }
        // A gRPC stream lives as long as its worker or peer: no body size cap, no minimum data rate.
        if (context.Features.Get<IHttpMaxRequestBodySizeFeature>() is { IsReadOnly: false } size)
            size.MaxRequestBodySize = null;
        if (context.Features.Get<IHttpMinRequestBodyDataRateFeature>() is { } minRequestRate)
            minRequestRate.MinDataRate = null;
        if (context.Features.Get<IHttpMinResponseDataRateFeature>() is { } minResponseRate)
            minResponseRate.MinDataRate = null;
        context.Response.ContentType = "application/grpc";
        context.Response.Headers["grpc-accept-encoding"] = "identity";
        return true;
    }

    private static async Task RunAsync(HttpContext context, Func<Task> body)
    {
        var status = GrpcStatus.Ok;
        string? message = null;
        try
        {
            await body();
        }
        catch (GrpcException e)
        {
            (status, message) = (e.Status, e.Message);
        }
        catch (OperationCanceledException) when (context.RequestAborted.IsCancellationRequested)
        {
            (status, message) = (GrpcStatus.Cancelled, "the call was cancelled");
        }
        catch (Exception e) when (e is IOException or ConnectionAbortedException)
        {
            (status, message) = (GrpcStatus.Unavailable, e.Message);
        }
        if (context.RequestAborted.IsCancellationRequested)
            return;
        context.Response.AppendTrailer("grpc-status", ((int)status).ToString(System.Globalization.CultureInfo.InvariantCulture));
        if (message is not null)
            context.Response.AppendTrailer("grpc-message", Uri.EscapeDataString(message));
    }
}

/// <summary>
/// One call's message streams. Reads and writes may run at the same time, but only one reader
/// and one writer at a time (the caller serializes writes, e.g. with a single writer loop).
/// </summary>
public sealed class GrpcServerStream<TRequest, TResponse>
    where TRequest : class, IMessage<TRequest>
    where TResponse : class, IMessage<TResponse>
{
    private readonly PipeReader _reader;
    private readonly PipeWriter _writer;
    private readonly MessageParser<TRequest> _parser;
    private readonly int _maxMessageSize;

    internal GrpcServerStream(HttpContext context, MessageParser<TRequest> parser, int maxMessageSize)
    {
        Context = context;
        _reader = context.Request.BodyReader;
        _writer = context.Response.BodyWriter;
        _parser = parser;
        _maxMessageSize = maxMessageSize;
    }

    public HttpContext Context { get; }

    /// <summary>The next message, or null when the client has finished sending.</summary>
    public async ValueTask<TRequest?> ReadAsync(CancellationToken ct)
    {
        while (true)
        {
            var result = await _reader.ReadAsync(ct);
            var buffer = result.Buffer;
            if (GrpcFraming.TryRead(ref buffer, _maxMessageSize, out var payload))
            {
                TRequest message;
                try
                {
                    message = _parser.ParseFrom(payload);
                }
                catch (InvalidProtocolBufferException e)
                {
                    throw new GrpcException(GrpcStatus.InvalidArgument, $"malformed {typeof(TRequest).Name} message: {e.Message}");
                }
                finally
                {
                    _reader.AdvanceTo(buffer.Start);
                }
                return message;
            }
            if (result.IsCompleted)
            {
                if (!buffer.IsEmpty)
                    throw new GrpcException(GrpcStatus.Internal, "the stream ended inside a message");
                _reader.AdvanceTo(buffer.End);
                return null;
            }
            _reader.AdvanceTo(buffer.Start, buffer.End);
        }
    }

    /// <summary>
    /// The next message's undecoded bytes, handed to <paramref name="handle"/> (valid only during the
    /// call), so bulk data can be copied once to where it belongs; false when the client has finished.
    /// </summary>
    public async ValueTask<bool> ReadPayloadAsync(Action<ReadOnlySequence<byte>> handle, CancellationToken ct)
    {
        while (true)
        {
            var result = await _reader.ReadAsync(ct);
            var buffer = result.Buffer;
            if (GrpcFraming.TryRead(ref buffer, _maxMessageSize, out var payload))
            {
                try
                {
                    handle(payload);
                }
                finally
                {
                    _reader.AdvanceTo(buffer.Start);
                }
                return true;
            }
            if (result.IsCompleted)
            {
                if (!buffer.IsEmpty)
                    throw new GrpcException(GrpcStatus.Internal, "the stream ended inside a message");
                _reader.AdvanceTo(buffer.End);
                return false;
            }
            _reader.AdvanceTo(buffer.Start, buffer.End);
        }
    }

    /// <summary>Frames a message into the response buffer without sending it yet.</summary>
    public void Write(TResponse message) => GrpcFraming.Write(_writer, message);

    /// <summary>Frames a message of one bytes field (see <see cref="GrpcFraming.WriteBytesField"/>) without sending it yet.</summary>
    public void WriteBytesField(int fieldNumber, ReadOnlySpan<byte> data) => GrpcFraming.WriteBytesField(_writer, fieldNumber, data);

    /// <summary>Sends everything written so far.</summary>
    public async ValueTask FlushAsync(CancellationToken ct)
    {
        var result = await _writer.FlushAsync(ct);
        if (result.IsCanceled || result.IsCompleted)
            throw new IOException("the gRPC response stream was closed");
    }

    public ValueTask WriteAsync(TResponse message, CancellationToken ct)
    {
        Write(message);
        return FlushAsync(ct);
    }
}
