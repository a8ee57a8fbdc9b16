using System.Diagnostics;
using System.Net;
using System.Net.Sockets;

namespace FaaST.TestSupport;

/// <summary>
/// A TCP proxy on a free loopback port in front of a real server, each connection limited to a byte rate in the
/// server-to-client direction: storage as slow per client as a cloud VM's link, for tests where the bandwidth
/// matters (Faa$T §4's bandwidth scaling). The limit is per connection, as a per-VM link would be per instance.
/// </summary>
public sealed class ThrottledProxy : IAsyncDisposable
{
    /// <summary>How far ahead of the rate an idle connection may send (a link's buffering, not seconds of saved-up credit).</summary>
    private static readonly TimeSpan Burst = TimeSpan.FromMilliseconds(20);

    private readonly TcpListener _listener = new(IPAddress.Loopback, 0);
    private readonly int _target;
    private readonly long _bytesPerSecond;
    private readonly CancellationTokenSource _stop = new();
    private readonly Task _accepting;

    public ThrottledProxy(int targetPort, long bytesPerSecond)
    {
        ArgumentOutOfRangeException.ThrowIfLessThan(bytesPerSecond, 1024);
        _target = targetPort;
        _bytesPerSecond = bytesPerSecond;
        _listener.Start();
        Port = ((IPEndPoint)_listener.LocalEndpoint).Port;
        _accepting = AcceptAsync();
    }

    public int Port { get; }

    /// <summary>Bytes sent from the server to clients so far.</summary>
    public long BytesDown => Interlocked.Read(ref _bytesDown);

    private long _bytesDown;

    private async Task AcceptAsync()
    {
        while (!_stop.IsCancellationRequested)
        {
            TcpClient client;
            try
            {
                client = await _listener.AcceptTcpClientAsync(_stop.Token);
            }
            catch (Exception e) when (e is OperationCanceledException or ObjectDisposedException or SocketException)
            {
                return;
            }
            _ = ServeAsync(client);
        }
    }

    private async Task ServeAsync(TcpClient client)
    {
        using (client)
        using (var server = new TcpClient())
        {
            try
            {
                await server.ConnectAsync(IPAddress.Loopback, _target, _stop.Token);
                using var both = CancellationTokenSource.CreateLinkedTokenSource(_stop.Token);
                var up = CopyAsync(client.GetStream(), server.GetStream(), long.MaxValue, both.Token);
                var down = CopyAsync(server.GetStream(), client.GetStream(), _bytesPerSecond, both.Token);
                await Task.WhenAny(up, down);
                await both.CancelAsync();
            }
            catch (Exception e) when (e is IOException or SocketException or OperationCanceledException or ObjectDisposedException)
            {
                // a side closed: so does the other
            }
        }
    }

    private async Task CopyAsync(NetworkStream from, NetworkStream to, long rate, CancellationToken ct)
    {
        var buffer = new byte[16 * 1024];
        var clock = Stopwatch.StartNew();
        // When the link may have sent all it has sent so far at the rate. It never lags the clock by more than Burst:
        // a link idle for a while has no stored-up bytes to send at once. (Without the cap, a pooled connection opened
        // seconds before sent the next download at loopback speed, so an instance profiled its storage bandwidth as
        // fast and planned one range for a 48 MiB object on a 3 MB/s link.)
        var due = TimeSpan.Zero;
        try
        {
            while (true)
            {
                var n = await from.ReadAsync(buffer, ct);
                if (n == 0)
                    break;
                await to.WriteAsync(buffer.AsMemory(0, n), ct);
                if (rate == long.MaxValue)
                    continue;
                Interlocked.Add(ref _bytesDown, n);
                var now = clock.Elapsed;
                due = (due > now - Burst ? due : now - Burst) + TimeSpan.FromSeconds((double)n / rate);
                // Ahead of the rate: wait until the bytes sent are due.
                if (due - now > TimeSpan.FromMilliseconds(1))
                    await Task.Delay(due - now, ct);
            }
        }
        catch (Exception e) when (e is IOException or SocketException or OperationCanceledException or ObjectDisposedException)
        {
        }
        finally
        {
            try
            {
                to.Socket.Shutdown(SocketShutdown.Send);
            }
            catch (Exception e) when (e is SocketException or ObjectDisposedException)
            {
                // already closed
            }
        }
    }

    public async ValueTask DisposeAsync()
    {
        await _stop.CancelAsync();
        _listener.Stop();
        await _accepting;
        _stop.Dispose();
    }
}
