using System.Net;
using System.Net.Sockets;

namespace FaaST.TestSupport;

/// <summary>Loopback ports for tests.</summary>
public static class Ports
{
    /// <summary>A loopback port nothing listens on (free when this returns; the OS rarely hands it out again soon).</summary>
    public static int Free()
    {
        using var listener = new TcpListener(IPAddress.Loopback, 0);
        listener.Start();
        return ((IPEndPoint)listener.LocalEndpoint).Port;
    }
}
