using System.Collections.Concurrent;
using System.Globalization;
using System.Net;
using System.Net.Sockets;
using System.Text;

namespace FaaST.TestSupport;

public sealed record RecordedRequest(string Method, string Target, IReadOnlyDictionary<string, string> Headers, byte[] Body);

/// <summary>What the fault server does with one request.</summary>
public abstract record FaultReply
{
    /// <summary>A complete response; the connection stays open for the next request.</summary>
    public static FaultReply Status(int status, string? errorCode = null, params (string Name, string Value)[] headers) =>
        new Raw(Head(status, 0, errorCode, headers), Array.Empty<byte>(), Close: false);

    /// <summary>Headers announcing <paramref name="announced"/> bytes, then only <paramref name="body"/>, then a closed socket.</summary>
    public static FaultReply Truncated(int status, long announced, byte[] body, params (string Name, string Value)[] headers) =>
        new Raw(Head(status, announced, null, headers), body, Close: true);

    public static FaultReply Body(int status, byte[] body, params (string Name, string Value)[] headers) =>
        new Raw(Head(status, body.Length, null, headers), body, Close: false);

    /// <summary>Headers and the start of a body, then silence.</summary>
    public static FaultReply Stall(int status, long announced, byte[] start, params (string Name, string Value)[] headers) =>
        new Raw(Head(status, announced, null, headers), start, Close: false, HangAfter: true);

    public static readonly FaultReply Hang = new HangReply();

    internal sealed record Raw(byte[] HeadBytes, byte[] BodyBytes, bool Close, bool HangAfter = false) : FaultReply;

    internal sealed record HangReply : FaultReply;

    private static byte[] Head(int status, long contentLength, string? errorCode, (string Name, string Value)[] headers)
    {
        var sb = new StringBuilder();
        sb.Append(CultureInfo.InvariantCulture, $"HTTP/1.1 {status} Fault\r\nContent-Length: {contentLength}\r\n");
        if (errorCode is not null)
        {
            sb.Append(CultureInfo.InvariantCulture, $"x-ms-error-code: {errorCode}\r\n");
        }

        foreach (var (name, value) in headers)
        {
            sb.Append(CultureInfo.InvariantCulture, $"{name}: {value}\r\n");
        }

        sb.Append("\r\n");
        return Encoding.ASCII.GetBytes(sb.ToString());
    }
}

/// <summary>
/// A tiny HTTP/1.1 server on a loopback port that misbehaves on purpose (5xx, hangs, truncated bodies), and
/// records every request it got. It only ever listens on 127.0.0.1 and stops on dispose.
/// </summary>
public sealed class FaultServer : IAsyncDisposable
{
    private readonly TcpListener _listener = new(IPAddress.Loopback, 0);
    private readonly Func<int, RecordedRequest, FaultReply> _reply;
    private readonly CancellationTokenSource _stop = new();
    private readonly ConcurrentQueue<RecordedRequest> _requests = new();
    private readonly ConcurrentBag<TcpClient> _clients = new();
    private readonly Task _acceptLoop;
    private int _count;

    public FaultServer(Func<int, RecordedRequest, FaultReply> reply)
    {
        _reply = reply;
        _listener.Start();
        Port = ((IPEndPoint)_listener.LocalEndpoint).Port;
        _acceptLoop = AcceptLoopAsync();
    }

    public int Port { get; }

    public string ConnectionString => FaaST.Storage.StorageConnectionString.ForAzurite(Port);

    public IReadOnlyList<RecordedRequest> Requests => _requests.ToArray();

    public async ValueTask DisposeAsync()
    {
        await _stop.CancelAsync();
        _listener.Stop();
        foreach (var client in _clients)
        {
            client.Dispose();
        }

        try
        {
            await _acceptLoop;
        }
        catch (Exception ex) when (ex is OperationCanceledException or SocketException or ObjectDisposedException)
        {
        }

        _stop.Dispose();
    }

    private async Task AcceptLoopAsync()
    {
        while (!_stop.IsCancellationRequested)
        {
            var client = await _listener.AcceptTcpClientAsync(_stop.Token);
            _clients.Add(client);
            _ = ServeAsync(client);
        }
    }

    private async Task ServeAsync(TcpClient client)
    {
        try
        {
            var stream = client.GetStream();
            while (!_stop.IsCancellationRequested)
            {
                var request = await ReadRequestAsync(stream, _stop.Token);
                if (request is null)
                {
                    return;
                }

                _requests.Enqueue(request);
                var reply = _reply(Interlocked.Increment(ref _count), request);
                switch (reply)
                {
                    case FaultReply.HangReply:
                        await Task.Delay(Timeout.Infinite, _stop.Token);
                        return;
                    case FaultReply.Raw raw:
                        await stream.WriteAsync(raw.HeadBytes, _stop.Token);
                        if (request.Method != "HEAD")
                        {
                            await stream.WriteAsync(raw.BodyBytes, _stop.Token);
                        }

                        await stream.FlushAsync(_stop.Token);
                        if (raw.HangAfter)
                        {
                            await Task.Delay(Timeout.Infinite, _stop.Token);
                        }

                        if (raw.Close)
                        {
                            client.Client.Shutdown(SocketShutdown.Both);
                            return;
                        }

                        break;
                }
            }
        }
        catch (Exception ex) when (ex is IOException or SocketException or OperationCanceledException or ObjectDisposedException)
        {
            // client went away or server stopped
        }
        finally
        {
            client.Dispose();
        }
    }

    private static async Task<RecordedRequest?> ReadRequestAsync(NetworkStream stream, CancellationToken ct)
    {
        var head = new List<byte>(1024);
        var one = new byte[1];
        while (head.Count < 4 || !(head[^4] == '\r' && head[^3] == '\n' && head[^2] == '\r' && head[^1] == '\n'))
        {
            if (await stream.ReadAsync(one, ct) == 0)
            {
                return null;
            }

            head.Add(one[0]);
        }

        var lines = Encoding.UTF8.GetString(head.ToArray()).Split("\r\n", StringSplitOptions.RemoveEmptyEntries);
        var first = lines[0].Split(' ');
        var headers = new Dictionary<string, string>(StringComparer.OrdinalIgnoreCase);
        foreach (var line in lines.Skip(1))
        {
            var colon = line.IndexOf(':', StringComparison.Ordinal);
            headers[line[..colon].Trim()] = line[(colon + 1)..].Trim();
        }

        var body = Array.Empty<byte>();
        if (headers.TryGetValue("Content-Length", out var lengthText) && int.Parse(lengthText, CultureInfo.InvariantCulture) > 0)
        {
            body = new byte[int.Parse(lengthText, CultureInfo.InvariantCulture)];
            await stream.ReadExactlyAsync(body, ct);
        }

        return new RecordedRequest(first[0], first[1], headers, body);
    }
}
