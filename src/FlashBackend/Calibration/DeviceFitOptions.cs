namespace FaaST.FlashBackend.Calibration;

/// <summary>
/// What <see cref="DeviceFit"/> sweeps (issue 22 item 3: "a sweep tool that fits the cost model C*(type, read ratio) on
/// the real file device here, and on any NVMe a user has"). Defaults are documented beside each value.
/// </summary>
public sealed record DeviceFitOptions
{
    /// <summary>The file or block device to sweep. A regular file is created and filled with random data first (reads of
    /// never-written extents return zeros without touching the disk and would measure nothing).</summary>
    public required string Path { get; init; }

    /// <summary>Bytes of the file (or of the block device, from offset 0) the random I/O covers. 1 GiB: far above any
    /// drive's DRAM cache, small enough to fill in seconds.</summary>
    public long SizeBytes { get; init; } = 1L << 30;

    /// <summary>The sweep writes random 4 KiB blocks: on a block device that destroys its data, so it is refused unless
    /// this is set (a regular file is the tool's own scratch and always allowed).</summary>
    public bool AllowWritesToBlockDevice { get; init; }

    /// <summary>Read ratios swept: En4S §2.3's Fig. 1 axis, with the 90 % step §5.3.3's table has.</summary>
    public IReadOnlyList<double> ReadRatios { get; init; } = [1.0, 0.9, 0.75, 0.5, 0.25, 0.0];

    /// <summary>Outstanding requests (one synchronous O_DIRECT thread each, as the engine issues them). 1 gives the unloaded
    /// latency, 32 the ~32 outstanding 4 KiB reads an NVMe needs for its peak; 8 a point on the bend between.</summary>
    public IReadOnlyList<int> QueueDepths { get; init; } = [1, 8, 32];

    /// <summary>Measured time per (ratio, depth) point: 2 s gives ~10^4–10^5 requests on a virtio disk, a stable p95.</summary>
    public TimeSpan PointDuration { get; init; } = TimeSpan.FromSeconds(2);

    /// <summary>Seed of the offsets and read/write choices (the same seed issues the same request sequence).</summary>
    public ulong Seed { get; init; } = 1;

    /// <summary>Where to write the device profile JSON (<see cref="DeviceFitResult"/>); null: not written.</summary>
    public string? OutputPath { get; init; }

    /// <summary>Remove the file after the sweep when the tool created it.</summary>
    public bool DeleteCreatedFile { get; init; } = true;

    public void Validate()
    {
        if (string.IsNullOrWhiteSpace(Path))
            throw new ArgumentException("device fit: no path to sweep");
        if (SizeBytes < 16 * 4096 || SizeBytes % 4096 != 0)
            throw new ArgumentException($"device fit {Path}: size {SizeBytes} must be a multiple of 4096 of at least 64 KiB");
        if (ReadRatios.Count == 0 || ReadRatios.Any(r => !(r >= 0 && r <= 1)) || !ReadRatios.Contains(1.0))
            throw new ArgumentException($"device fit {Path}: read ratios must lie in [0, 1] and include 1.0 (the read peak every cost is measured against)");
        if (QueueDepths.Count == 0 || QueueDepths.Any(q => q < 1 || q > 256))
            throw new ArgumentException($"device fit {Path}: queue depths must lie in [1, 256]");
        if (PointDuration <= TimeSpan.Zero)
            throw new ArgumentException($"device fit {Path}: point duration {PointDuration} must be positive");
    }
}
