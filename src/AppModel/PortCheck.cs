using System.Net;
using System.Net.Sockets;

namespace FaaST.AppModel;

/// <summary>
/// Finds a port that another process already listens on before anything starts (Azurite, workers), so that
/// `./faast start` says so in one line instead of failing half-way with Kestrel's exception.
/// </summary>
public static class PortCheck
{
    /// <summary>
    /// Null when <paramref name="port"/> on <paramref name="address"/> can be listened on; else one line naming the
    /// port, the address, what it is for (<paramref name="purpose"/>, e.g. "HTTP, from --port") and what to do.
    /// Port 0 (a free one) is never in use. The probe binds and listens as Kestrel would, then lets go at once.
    /// </summary>
    public static string? Problem(IPAddress address, int port, string purpose, string remedy)
    {
        if (port == 0)
            return null;
        try
        {
            using var socket = new Socket(address.AddressFamily, SocketType.Stream, ProtocolType.Tcp);
            socket.Bind(new IPEndPoint(address, port));
            socket.Listen(1);
            return null;
        }
        catch (SocketException e) when (e.SocketErrorCode == SocketError.AddressAlreadyInUse)
        {
            return $"port {port} on {address} ({purpose}) is already in use by another process; {remedy}";
        }
        catch (SocketException e) when (e.SocketErrorCode == SocketError.AccessDenied)
        {
            return $"port {port} on {address} ({purpose}) needs privileges this process lacks (ports below 1024 need root); {remedy}";
        }
        catch (SocketException e) when (e.SocketErrorCode == SocketError.AddressNotAvailable)
        {
            return $"address {address} ({purpose}) is not an address of this machine; pass an address it has";
        }
    }
}
