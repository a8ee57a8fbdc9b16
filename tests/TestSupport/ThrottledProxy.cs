using System.Diagnostics;
using System.Net.Sockets;

namespace FaaST.TestSupport;

/// <summary>
/// A TCP proxy on a free loopback port in front of a real server, each connection limited to a byte rate in the
/// server-to-client direction: storage as slow per client as a cloud VM's link, for tests where the bandwidth
/// matters (Faa$T §4's bandwidth scaling). The limit is per connection, as a per-VM link would be per instance.
/// </summary>
public sealed class ThrottledProxy : LoopbackProxy
{
    /// <summary>How far ahead of the rate an idle connection may send (a link's buffering, not seconds of saved-up credit).</summary>
    private static readonly TimeSpan Burst = TimeSpan.FromMilliseconds(20);

    private readonly long _bytesPerSecond;
    private long _bytesDown;

    public ThrottledProxy(int targetPort, long bytesPerSecond) : base(targetPort)
    {
        ArgumentOutOfRangeException.ThrowIfLessThan(bytesPerSecond, 1024);
        _bytesPerSecond = bytesPerSecond;
        Start();
    }

    /// <summary>Bytes sent from the server to clients so far.</summary>
    public long BytesDown => Interlocked.Read(ref _bytesDown);

    protected override Func<ReadOnlyMemory<byte>, CancellationToken, ValueTask> NewDownlink(NetworkStream toClient)
    {
        var clock = Stopwatch.StartNew();
        // When the link may have sent all it has sent so far at the rate. It never lags the clock by more than Burst:
        // a link idle for a while has no stored-up bytes to send at once. (Without the cap, a pooled connection opened
        // seconds before sent the next download at loopback speed, so an instance profiled its storage bandwidth as
        // fast and planned one range for a 48 MiB object on a 3 MB/s link.)
        var due = TimeSpan.Zero;
        return async (data, ct) =>
        {
            await toClient.WriteAsync(data, ct);
            Interlocked.Add(ref _bytesDown, data.Length);
            var now = clock.Elapsed;
            due = (due > now - Burst ? due : now - Burst) + TimeSpan.FromSeconds((double)data.Length / _bytesPerSecond);
            // Ahead of the rate: wait until the bytes sent are due.
            if (due - now > TimeSpan.FromMilliseconds(1))
                await Task.Delay(due - now, ct);
        };
    }
}
