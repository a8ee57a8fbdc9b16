using System.Net.Sockets;

namespace FaaST.TestSupport;

/// <summary>
/// A TCP proxy on a free loopback port in front of a real server that holds every connection's server-to-client
/// bytes past <see cref="HoldAfter"/> until <see cref="Release"/>: a download that has started and cannot finish
/// until the test says so (storage slow at exactly the moment a test needs, without timing).
/// </summary>
public sealed class GatedProxy : LoopbackProxy
{
    private readonly TaskCompletionSource _released = new(TaskCreationOptions.RunContinuationsAsynchronously);

    public GatedProxy(int targetPort, long holdAfter) : base(targetPort)
    {
        HoldAfter = holdAfter;
        Start();
    }

    /// <summary>Bytes one connection sends its client before it waits for <see cref="Release"/>.</summary>
    public long HoldAfter { get; }

    /// <summary>Completes when a connection first reached <see cref="HoldAfter"/> and is holding.</summary>
    public TaskCompletionSource Holding { get; } = new(TaskCreationOptions.RunContinuationsAsynchronously);

    /// <summary>Lets every held connection go on (and later ones pass freely).</summary>
    public void Release() => _released.TrySetResult();

    protected override void OnStopping() => Release();

    protected override Func<ReadOnlyMemory<byte>, CancellationToken, ValueTask> NewDownlink(NetworkStream toClient)
    {
        long sent = 0;
        return async (data, ct) =>
        {
            if (!_released.Task.IsCompleted && sent + data.Length > HoldAfter)
            {
                var before = (int)Math.Max(0, HoldAfter - sent);
                await toClient.WriteAsync(data[..before], ct);
                sent += before;
                data = data[before..];
                Holding.TrySetResult();
                await _released.Task.WaitAsync(ct);
            }
            await toClient.WriteAsync(data, ct);
            sent += data.Length;
        };
    }
}
