using System.Buffers.Binary;
using System.Net;
using System.Net.Sockets;
using System.Runtime.InteropServices;

namespace FaaST.Common;

/// <summary>
/// A TCP port kept by a supervisor across its server's restarts (Linux). The supervisor holds a socket bound to the port
/// with SO_REUSEPORT that never listens (<see cref="Hold"/>); the server it starts binds its listener to the same port
/// with SO_REUSEPORT too (<see cref="Bind"/>). While the server is down the supervisor's socket keeps the port: no other
/// process can bind it (a plain bind, and one with SO_REUSEADDR, fail with "address already in use"), no outgoing
/// connection is given it as its local port, and a connection attempt is refused at once, as with no socket at all. A
/// socket that never listens receives no connections: they all go to the server's listener.
/// <para>The kernel lets only sockets of the same user share a port with SO_REUSEPORT, so another user cannot take it. A
/// process of the same user that asks for SO_REUSEPORT could (.NET's ReuseAddress does, on Linux), but such a process
/// can signal the server and read its keys anyway.</para>
/// </summary>
public static partial class SharedPort
{
    /// <summary>Linux's constants (asm-generic/socket.h, bits/socket.h); .NET names no SO_REUSEPORT.</summary>
    private const int AfInet = 2, SockStream = 1, SockCloexec = 0x80000, SolSocket = 1, SoReusePort = 15;

    /// <summary>
    /// The supervisor's socket: bound to 127.0.0.1:<paramref name="port"/> (0: a free port, which its LocalEndPoint
    /// names) with SO_REUSEPORT only. Made with libc rather than <see cref="Socket.Bind"/>, because .NET's Bind on Linux
    /// sets SO_REUSEADDR first, and a socket that has SO_REUSEADDR and does not listen lets any other SO_REUSEADDR socket
    /// (most servers set it) bind the port: measured, a second .NET socket bound the held port. Throws IOException
    /// naming the port and the system's reason.
    /// </summary>
    public static Socket Hold(int port = 0)
    {
        if (!OperatingSystem.IsLinux())
            throw new PlatformNotSupportedException("holding a port with SO_REUSEPORT needs Linux");
        int fd = socket(AfInet, SockStream | SockCloexec, 0);
        if (fd < 0)
            throw Failed("socket", port);
        try
        {
            int one = 1;
            if (setsockopt(fd, SolSocket, SoReusePort, ref one, sizeof(int)) != 0)
                throw Failed("setsockopt SO_REUSEPORT", port);
            var address = new SockAddrIn { Family = AfInet, Port = BinaryPrimitives.ReverseEndianness((ushort)port), Address = 0x0100007F };
            if (bind(fd, ref address, Marshal.SizeOf<SockAddrIn>()) != 0)
                throw Failed("bind", port);
        }
        catch
        {
            close(fd);
            throw;
        }
        return new Socket(new SafeSocketHandle(fd, ownsHandle: true));
    }

    /// <summary>The server's listener: a TCP socket bound to <paramref name="endpoint"/> with SO_REUSEPORT (and the
    /// SO_REUSEADDR .NET adds, so a restart is not held up by its predecessor's connections in TIME_WAIT).</summary>
    public static Socket Bind(EndPoint endpoint)
    {
        if (!OperatingSystem.IsLinux())
            throw new PlatformNotSupportedException("a port shared with SO_REUSEPORT needs Linux");
        var socket = new Socket(endpoint.AddressFamily, SocketType.Stream, ProtocolType.Tcp);
        try
        {
            socket.SetRawSocketOption(SolSocket, SoReusePort, BitConverter.GetBytes(1));
            socket.Bind(endpoint);
            return socket;
        }
        catch
        {
            socket.Dispose();
            throw;
        }
    }

    private static IOException Failed(string call, int port)
    {
        int errno = Marshal.GetLastPInvokeError();
        return new IOException($"cannot hold 127.0.0.1:{port} ({call}): {Marshal.GetPInvokeErrorMessage(errno)}");
    }

    [StructLayout(LayoutKind.Sequential)]
    private struct SockAddrIn
    {
        public ushort Family;
        public ushort Port;
        public uint Address;
        public ulong Zero;
    }

    [LibraryImport("libc", SetLastError = true)]
    private static partial int socket(int domain, int type, int protocol);

    [LibraryImport("libc", SetLastError = true)]
    private static partial int setsockopt(int fd, int level, int name, ref int value, int length);

    [LibraryImport("libc", SetLastError = true)]
    private static partial int bind(int fd, ref SockAddrIn address, int length);

    [LibraryImport("libc")]
    private static partial int close(int fd);
}
