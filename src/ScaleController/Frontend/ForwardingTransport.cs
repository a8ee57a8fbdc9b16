using System.Buffers;
using System.Collections.Concurrent;
using System.Net;
using System.Net.Sockets;

namespace FaaST.ScaleController.Frontend;

/// <summary>
/// The HTTP client every app frontend shares: one <see cref="SocketsHttpHandler"/> per connect timeout (in
/// practice one per process), so connections to instances are pooled across requests and apps. No proxy,
/// no redirects, no cookies, no decompression: the frontend is a transparent hop. The connect step is ours so
/// that a refused or timed-out connect surfaces as <see cref="InstanceConnectException"/>: the one failure where
/// the frontend knows for certain that nothing of the request reached the instance.
/// </summary>
/// <remarks>
/// HTTP/1.1 to the instance, one pooled keep-alive connection per concurrent request: an instance's port speaks
/// HTTP/1.1 in cleartext (h2c would need prior knowledge on a port of its own), and on loopback HTTP/2's framing,
/// HPACK and one shared connection cost more per request than they save. An <see cref="HttpMessageInvoker"/>, not an
/// HttpClient: no response buffering, no default headers, no timeout wrapper per request; the answer streams.
/// </remarks>
internal static class ForwardingTransport
{
    private static readonly ConcurrentDictionary<TimeSpan, HttpMessageInvoker> Invokers = new();

    public static HttpMessageInvoker For(TimeSpan connectTimeout) => Invokers.GetOrAdd(connectTimeout, Create);

    private static HttpMessageInvoker Create(TimeSpan connectTimeout) => new(new SocketsHttpHandler
    {
        UseProxy = false,
        AllowAutoRedirect = false,
        UseCookies = false,
        AutomaticDecompression = DecompressionMethods.None,
        PooledConnectionIdleTimeout = TimeSpan.FromSeconds(60),
        ConnectCallback = (context, ct) => ConnectAsync(context.DnsEndPoint, connectTimeout, ct),
    }, disposeHandler: true);

    private static async ValueTask<Stream> ConnectAsync(DnsEndPoint endpoint, TimeSpan timeout, CancellationToken ct)
    {
        var socket = new Socket(SocketType.Stream, ProtocolType.Tcp) { NoDelay = true };
        using var deadline = CancellationTokenSource.CreateLinkedTokenSource(ct);
        deadline.CancelAfter(timeout);
        try
        {
            await socket.ConnectAsync(endpoint, deadline.Token).ConfigureAwait(false);
            return new NetworkStream(socket, ownsSocket: true);
        }
        catch (Exception e) when (!ct.IsCancellationRequested)
        {
            socket.Dispose();
            throw new InstanceConnectException(
                e is OperationCanceledException ? $"connecting to {endpoint.Host}:{endpoint.Port} took longer than {timeout.TotalSeconds:0.###} s" : $"connecting to {endpoint.Host}:{endpoint.Port} failed: {e.Message}",
                e);
        }
        catch
        {
            socket.Dispose();
            throw;
        }
    }

    /// <summary>Whether <paramref name="e"/> (from SendAsync) is a connect failure: nothing of the request was sent.</summary>
    public static bool IsConnectFailure(Exception e)
    {
        for (Exception? x = e; x is not null; x = x.InnerException)
            if (x is InstanceConnectException)
                return true;
        return false;
    }

    /// <summary>One line naming what went wrong, the innermost cause last.</summary>
    public static string Reason(Exception e)
    {
        var inner = e;
        while (inner.InnerException is not null)
            inner = inner.InnerException;
        var text = ReferenceEquals(inner, e) ? e.Message : $"{e.Message} ({inner.Message})";
        return text.ReplaceLineEndings(" ");
    }
}

/// <summary>An instance could not be connected to (refused, unreachable or too slow): nothing was sent to it.</summary>
internal sealed class InstanceConnectException(string message, Exception inner) : IOException(message, inner);

/// <summary>
/// The client's request body, copied to the instance as it arrives through one pooled buffer (never
/// buffered whole). It can be sent once: <see cref="Started"/> tells the frontend whether any of it was read,
/// which decides whether the request may go to another instance.
/// </summary>
internal sealed class ForwardedBody(Stream source, long? length, int bufferSize) : HttpContent
{
    private readonly long? _length = length;
    private int _started;

    public bool Started => Volatile.Read(ref _started) != 0;

    protected override Task SerializeToStreamAsync(Stream stream, TransportContext? context) => SerializeToStreamAsync(stream, context, CancellationToken.None);

    protected override async Task SerializeToStreamAsync(Stream stream, TransportContext? context, CancellationToken cancellationToken)
    {
        if (Interlocked.Exchange(ref _started, 1) != 0)
            throw new InvalidOperationException("the request body was already forwarded once and cannot be sent again");
        var buffer = ArrayPool<byte>.Shared.Rent(bufferSize);
        try
        {
            int read;
            while ((read = await source.ReadAsync(buffer.AsMemory(0, bufferSize), cancellationToken).ConfigureAwait(false)) > 0)
                await stream.WriteAsync(buffer.AsMemory(0, read), cancellationToken).ConfigureAwait(false);
        }
        finally
        {
            ArrayPool<byte>.Shared.Return(buffer);
        }
    }

    protected override bool TryComputeLength(out long length)
    {
        length = _length ?? 0;
        return _length is not null;
    }
}
