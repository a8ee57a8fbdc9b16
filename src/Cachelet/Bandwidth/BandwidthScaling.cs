using System.Buffers;
using System.Runtime.InteropServices;
using FaaST.Cachelet.Memory;

namespace FaaST.Cachelet.Bandwidth;

/// <summary>
/// Decides how many instances fetch one large object together and learns the numbers it decides with
/// (Faa$T §4, "Bandwidth scaling"). The runtime implements it with src/Scaling's BandwidthPlanner and
/// ProfiledBandwidth; the cache core knows only this.
/// </summary>
public interface IBandwidthPlanner
{
    /// <summary>N for an object of <paramref name="objectBytes"/> with <paramref name="running"/> instances up (at least 1).</summary>
    int PlanInstances(long objectBytes, int running);

    /// <summary>This instance downloaded <paramref name="bytes"/> from storage in <paramref name="elapsed"/> (BW_BS).</summary>
    void ObserveStorageTransfer(long bytes, TimeSpan elapsed);

    /// <summary>This instance received <paramref name="bytes"/> from another instance's memory in <paramref name="elapsed"/> (BW_Inst).</summary>
    void ObserveInstanceTransfer(long bytes, TimeSpan elapsed);

    /// <summary>Instances asked for became usable members after <paramref name="elapsed"/> (T_Load).</summary>
    void ObserveLoad(TimeSpan elapsed);
}

/// <summary>
/// Asks the platform for instances at once (an unrequested scale-out vote, protos/scale.proto
/// ScaleControl.RequestScaleOut). The runtime implements it when it knows its scale controller.
/// </summary>
public interface IInstanceScaler
{
    /// <summary>Asks for <paramref name="target"/> instances in all; how many the app will have (may be fewer).</summary>
    Task<int> RequestInstancesAsync(int target, string reason, CancellationToken ct);
}

/// <summary>The cache's side of bandwidth scaling. Defaults are documented on each option; docs/scaling.md.</summary>
public sealed record BandwidthScalingOptions
{
    /// <summary>
    /// The smallest object fetched in parallel ranges (default 64 MiB; faast.json's
    /// <c>scale.bandwidth.minObjectSize</c> sets it). Below it a miss is one download, whatever the plan.
    /// </summary>
    public long MinObjectSize { get; init; } = 64L << 20;

    /// <summary>The most instances one object is split over (default 8; the policy's maxInstances caps it further).</summary>
    public int MaxInstances { get; init; } = 8;

    /// <summary>How long a fetch waits for asked-for instances to join the view (default 30 s); it then uses those there are.</summary>
    public TimeSpan InstanceWait { get; init; } = TimeSpan.FromSeconds(30);

    /// <summary>Transfers smaller than this do not update the profile (default 1 MiB: their time is mostly latency).</summary>
    public long ObserveMinBytes { get; init; } = 1L << 20;

    internal void Validate()
    {
        if (MinObjectSize < 1)
            throw new ArgumentOutOfRangeException(nameof(MinObjectSize), MinObjectSize, "bandwidth scaling's MinObjectSize must be at least 1 byte");
        if (MaxInstances < 1)
            throw new ArgumentOutOfRangeException(nameof(MaxInstances), MaxInstances, "bandwidth scaling's MaxInstances must be at least 1");
        if (InstanceWait < TimeSpan.Zero)
            throw new ArgumentOutOfRangeException(nameof(InstanceWait), InstanceWait, "bandwidth scaling's InstanceWait must not be negative");
    }
}

/// <summary>
/// Writes one range of an extent, from its start: a download or a peer's bytes land at their offset
/// in the object's shared memory with no buffer in between (an <see cref="IBufferWriter{T}"/>, so a
/// socket receives straight into the mapping). Writing past the range throws; rewinding (a range
/// fetched again after a failure) starts it over.
/// </summary>
internal sealed class ExtentRangeStream(Extent extent, long offset, long length) : Stream, IBufferWriter<byte>
{
    private long _position;

    public long Written => _position;

    public override bool CanRead => false;
    public override bool CanSeek => false;
    public override bool CanWrite => true;
    public override long Length => length;

    public override long Position
    {
        get => _position;
        set => throw new NotSupportedException("a range is written once, in order");
    }

    public void Restart() => _position = 0;

    public override void Write(ReadOnlySpan<byte> buffer)
    {
        if (buffer.Length > length - _position)
            throw new IOException($"{buffer.Length} bytes at {_position} overflow the range {offset}+{length}");
        buffer.CopyTo(extent.GetSpan(offset + _position, buffer.Length));
        _position += buffer.Length;
    }

    public override void Write(byte[] buffer, int offset, int count) => Write(buffer.AsSpan(offset, count));

    public override ValueTask WriteAsync(ReadOnlyMemory<byte> buffer, CancellationToken ct = default)
    {
        Write(buffer.Span);
        return ValueTask.CompletedTask;
    }

    public override Task WriteAsync(byte[] buffer, int offset, int count, CancellationToken ct)
    {
        Write(buffer.AsSpan(offset, count));
        return Task.CompletedTask;
    }

    public Memory<byte> GetMemory(int sizeHint = 0)
    {
        var left = (int)Math.Min(length - _position, 1 << 30);
        if (left < Math.Max(sizeHint, 1))
            throw new InvalidOperationException($"the range {offset}+{length} is full");
        return MemoryMarshal.AsMemory(extent.GetMemory(offset + _position, left));
    }

    public Span<byte> GetSpan(int sizeHint = 0) => GetMemory(sizeHint).Span;

    public void Advance(int count)
    {
        ArgumentOutOfRangeException.ThrowIfNegative(count);
        if (count > length - _position)
            throw new InvalidOperationException($"advanced past the range {offset}+{length}");
        _position += count;
    }

    public override void Flush()
    {
    }

    public override int Read(byte[] buffer, int offset, int count) => throw new NotSupportedException("the stream is write-only");

    public override long Seek(long offset, SeekOrigin origin) => throw new NotSupportedException("a range is written once, in order");

    public override void SetLength(long value) => throw new NotSupportedException("a range's length is fixed");
}
