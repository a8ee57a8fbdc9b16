using System.Net;
using System.Net.Sockets;

namespace FaaST.TestSupport;

/// <summary>
/// A TCP proxy on a free loopback port in front of a real server: client-to-server bytes pass as they come, and each
/// connection's server-to-client bytes go through the writer <see cref="NewDownlink"/> makes for it (a derived proxy
/// slows, holds or counts them). Every connection ends when either side closes.
/// </summary>
public abstract class LoopbackProxy : IAsyncDisposable
{
    private readonly TcpListener _listener = new(IPAddress.Loopback, 0);
    private readonly int _target;
    private readonly CancellationTokenSource _stop = new();
    private Task _accepting = Task.CompletedTask;

    protected LoopbackProxy(int targetPort)
    {
        _target = targetPort;
        _listener.Start();
        Port = ((IPEndPoint)_listener.LocalEndpoint).Port;
    }

    public int Port { get; }

    /// <summary>Starts accepting; a derived proxy calls it last in its constructor, once its own fields are set.</summary>
    protected void Start() => _accepting = AcceptAsync();

    /// <summary>A writer for one connection's server-to-client bytes (its state is the connection's).</summary>
    protected abstract Func<ReadOnlyMemory<byte>, CancellationToken, ValueTask> NewDownlink(NetworkStream toClient);

    /// <summary>Before the proxy stops (e.g. let held connections go).</summary>
    protected virtual void OnStopping()
    {
    }

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
                var toServer = server.GetStream();
                var up = PumpAsync(client.GetStream(), toServer, (data, ct) => toServer.WriteAsync(data, ct), both.Token);
                var down = PumpAsync(server.GetStream(), client.GetStream(), NewDownlink(client.GetStream()), both.Token);
                await Task.WhenAny(up, down);
                await both.CancelAsync();
            }
            catch (Exception e) when (e is IOException or SocketException or OperationCanceledException or ObjectDisposedException)
            {
                // a side closed: so does the other
            }
        }
    }

    private static async Task PumpAsync(NetworkStream from, NetworkStream to, Func<ReadOnlyMemory<byte>, CancellationToken, ValueTask> write, CancellationToken ct)
    {
        var buffer = new byte[16 * 1024];
        try
        {
            while (true)
            {
                var n = await from.ReadAsync(buffer, ct);
                if (n == 0)
                    break;
                await write(buffer.AsMemory(0, n), ct);
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
        OnStopping();
        await _stop.CancelAsync();
        _listener.Stop();
        await _accepting;
        _stop.Dispose();
        GC.SuppressFinalize(this);
    }
}
