using System.Net;
using System.Net.Sockets;

namespace FaaST.TestSupport;

/// <summary>
/// A TCP proxy on a free loopback port in front of a real server that holds every connection's server-to-client
/// bytes past <see cref="HoldAfter"/> until <see cref="Release"/>: a download that has started and cannot finish
/// until the test says so (storage slow at exactly the moment a test needs, without timing).
/// </summary>
public sealed class GatedProxy : IAsyncDisposable
{
    private readonly TcpListener _listener = new(IPAddress.Loopback, 0);
    private readonly int _target;
    private readonly CancellationTokenSource _stop = new();
    private readonly TaskCompletionSource _released = new(TaskCreationOptions.RunContinuationsAsynchronously);
    private readonly Task _accepting;

    public GatedProxy(int targetPort, long holdAfter)
    {
        _target = targetPort;
        HoldAfter = holdAfter;
        _listener.Start();
        Port = ((IPEndPoint)_listener.LocalEndpoint).Port;
        _accepting = AcceptAsync();
    }

    public int Port { get; }

    /// <summary>Bytes one connection sends its client before it waits for <see cref="Release"/>.</summary>
    public long HoldAfter { get; }

    /// <summary>Completes when a connection first reached <see cref="HoldAfter"/> and is holding.</summary>
    public TaskCompletionSource Holding { get; } = new(TaskCreationOptions.RunContinuationsAsynchronously);

    /// <summary>Lets every held connection go on (and later ones pass freely).</summary>
    public void Release() => _released.TrySetResult();

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
                var up = CopyAsync(client.GetStream(), server.GetStream(), gated: false, both.Token);
                var down = CopyAsync(server.GetStream(), client.GetStream(), gated: true, both.Token);
                await Task.WhenAny(up, down);
                await both.CancelAsync();
            }
            catch (Exception e) when (e is IOException or SocketException or OperationCanceledException or ObjectDisposedException)
            {
                // a side closed: so does the other
            }
        }
    }

    private async Task CopyAsync(NetworkStream from, NetworkStream to, bool gated, CancellationToken ct)
    {
        var buffer = new byte[16 * 1024];
        long sent = 0;
        try
        {
            while (true)
            {
                var n = await from.ReadAsync(buffer, ct);
                if (n == 0)
                    break;
                var offset = 0;
                if (gated && !_released.Task.IsCompleted && sent + n > HoldAfter)
                {
                    var before = (int)Math.Max(0, HoldAfter - sent);
                    await to.WriteAsync(buffer.AsMemory(0, before), ct);
                    sent += before;
                    offset = before;
                    Holding.TrySetResult();
                    await _released.Task.WaitAsync(ct);
                }
                await to.WriteAsync(buffer.AsMemory(offset, n - offset), ct);
                sent += n - offset;
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
        Release();
        await _stop.CancelAsync();
        _listener.Stop();
        await _accepting;
        _stop.Dispose();
    }
}
