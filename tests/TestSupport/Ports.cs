using System.Globalization;
using System.Net;
using System.Net.Sockets;

namespace FaaST.TestSupport;

/// <summary>Loopback ports for tests.</summary>
public static class Ports
{
    // Ports are handed out below the kernel's ephemeral range (ip_local_port_range, 32768-60999 by default): a port the
    // OS gave a bind to port 0 is one every outgoing connection of the machine may take as its local port next, and
    // with suites running side by side (./faast test's lanes) one did — a platform started on a port from `bind(0)`
    // found it taken by another suite's connection ("address already in use", CI, 2026-11-28). Below that range only
    // another explicit bind can hold a port; each process walks the range from a random start, and every port is
    // checked free by binding it before it is handed out.
    private const int Lowest = 20000;
    private static readonly int Highest = EphemeralLow() - 1;
    private static int s_next = Random.Shared.Next(Lowest, Math.Max(Lowest + 1, Highest));

    /// <summary>A loopback port nothing listens on, outside the range the OS hands to outgoing connections.</summary>
    public static int Free()
    {
        if (Highest - Lowest < 1000)
            return FromKernel(); // a machine whose ephemeral range starts low: nothing below it to pick from
        for (var attempt = 0; attempt < 1000; attempt++)
        {
            var port = Lowest + (int)((uint)(Interlocked.Increment(ref s_next) - Lowest) % (uint)(Highest - Lowest + 1));
            using var socket = new Socket(AddressFamily.InterNetwork, SocketType.Stream, ProtocolType.Tcp);
            try
            {
                socket.Bind(new IPEndPoint(IPAddress.Loopback, port));
                return port;
            }
            catch (SocketException)
            {
                // held by someone: the next one
            }
        }
        throw new InvalidOperationException($"no free loopback port between {Lowest} and {Highest} after 1000 tries");
    }

    private static int FromKernel()
    {
        using var listener = new TcpListener(IPAddress.Loopback, 0);
        listener.Start();
        return ((IPEndPoint)listener.LocalEndpoint).Port;
    }

    private static int EphemeralLow()
    {
        try
        {
            var text = File.ReadAllText("/proc/sys/net/ipv4/ip_local_port_range").Split((char[])['\t', ' ', '\n'], StringSplitOptions.RemoveEmptyEntries);
            return int.Parse(text[0], CultureInfo.InvariantCulture);
        }
        catch (Exception e) when (e is IOException or UnauthorizedAccessException or FormatException or IndexOutOfRangeException)
        {
            return 32768; // Linux's default
        }
    }
}
