using System.Diagnostics;
using System.Text.Json;
using System.Text.Json.Serialization;
using FaaST.FlashBackend.Engine;
using FaaST.FlashBackend.Scheduling;

namespace FaaST.FlashBackend.Calibration;

/// <summary>One measured point of the sweep: a read ratio at a queue depth.</summary>
public sealed record SweepPoint(
    [property: JsonPropertyName("read_ratio")] double ReadRatio,
    [property: JsonPropertyName("queue_depth")] int QueueDepth,
    [property: JsonPropertyName("iops")] double Iops,
    [property: JsonPropertyName("read_p50_us")] double ReadP50Us,
    [property: JsonPropertyName("read_p95_us")] double ReadP95Us,
    [property: JsonPropertyName("write_p95_us")] double WriteP95Us);

/// <summary>
/// The device profile the fit writes (JSON, snake_case): the read peak in tokens per second (a 4 KiB read = 1 token),
/// the write-cost tiers C*(WR, r) as <see cref="CostTable"/> takes them, the token rate by p95 bound as
/// <see cref="DeviceProfile.TokenLimits"/> takes it, and every measured point.
/// </summary>
public sealed record DeviceFitResult(
    [property: JsonPropertyName("device")] string Device,
    [property: JsonPropertyName("measured_at")] DateTimeOffset MeasuredAt,
    [property: JsonPropertyName("block_bytes")] int BlockBytes,
    [property: JsonPropertyName("tokens_per_second")] double TokensPerSecond,
    [property: JsonPropertyName("peak_queue_depth")] int PeakQueueDepth,
    [property: JsonPropertyName("write_cost_tiers")] IReadOnlyList<FittedTier> WriteCostTiers,
    [property: JsonPropertyName("token_limits")] IReadOnlyList<FittedLimit> TokenLimits,
    [property: JsonPropertyName("points")] IReadOnlyList<SweepPoint> Points)
{
    public CostTable ToCostTable() => new(WriteCostTiers.Select(t => new WriteCostTier(t.MinReadRatio, t.WriteCost)).ToList());

    /// <summary>The measured device as the scheduler's profile: its token rate, its latency-bounded rows, and its unloaded
    /// (queue depth 1) read latency; the rest keeps the documented defaults.</summary>
    public DeviceProfile ToDeviceProfile() => DeviceProfile.I3XLarge with
    {
        TokensPerSecond = TokensPerSecond,
        TokenLimits = TokenLimits.Select(l => new TokenLimit(l.P95LatencyUs, l.TokensPerSecond)).ToList(),
        ReadServiceNs = (long)(Points.Where(p => p.QueueDepth == Points.Min(q => q.QueueDepth) && p.ReadRatio == 1.0)
            .Select(p => p.ReadP50Us).DefaultIfEmpty(90).First() * 1000),
    };

    public string ToJson() => JsonSerializer.Serialize(this, JsonOptions);

    public static DeviceFitResult Load(string path)
    {
        var result = JsonSerializer.Deserialize<DeviceFitResult>(File.ReadAllText(path), JsonOptions)
            ?? throw new InvalidDataException($"device profile {path}: empty");
        _ = result.ToCostTable(); // validates the tiers, naming the one that is wrong
        return result;
    }

    internal static readonly JsonSerializerOptions JsonOptions = new() { WriteIndented = true };
}

public sealed record FittedTier(
    [property: JsonPropertyName("min_read_ratio")] double MinReadRatio,
    [property: JsonPropertyName("write_cost")] double WriteCost);

public sealed record FittedLimit(
    [property: JsonPropertyName("p95_latency_us")] int P95LatencyUs,
    [property: JsonPropertyName("tokens_per_second")] double TokensPerSecond);

/// <summary>
/// The cost-model fit on a real device (issue 22 item 3; En4S §5.3.3): random 4 KiB O_DIRECT I/O through
/// <see cref="DirectFile"/> at each read ratio and queue depth; the read-only peak is the device's token rate T; at read
/// ratio r a device doing X IOPS spends T tokens/s, so X·(r·1 + (1 − r)·C) = T gives C*(WR, r) = (T/X − r)/(1 − r),
/// fitted at the depth of the read peak, at least 1 (a write never costs less than a read) and not falling as r falls
/// (CostTable's rule). The read-only points at each depth give the token rate by p95 bound.
/// </summary>
public static class DeviceFit
{
    public static async Task<DeviceFitResult> RunAsync(DeviceFitOptions options, TextWriter log)
    {
        ArgumentNullException.ThrowIfNull(options);
        ArgumentNullException.ThrowIfNull(log);
        options.Validate();
        if (!options.ReadRatios.Any(r => r < 1))
            throw new ArgumentException($"device fit {options.Path}: no read ratio below 1; a write cost needs writes");
        bool existed = File.Exists(options.Path) || Directory.Exists(options.Path);
        bool isBlock = existed && (File.GetAttributes(options.Path) & FileAttributes.Device) != 0
            || options.Path.StartsWith("/dev/", StringComparison.Ordinal);
        if (isBlock && !options.AllowWritesToBlockDevice)
            throw new InvalidOperationException($"device fit {options.Path}: a block device; the sweep writes random blocks over its data — set AllowWritesToBlockDevice to agree");
        using var file = DirectFile.Open(options.Path, options.SizeBytes);
        try
        {
            if (!isBlock)
            {
                await log.WriteLineAsync($"device fit: filling {options.Path} ({options.SizeBytes >> 20} MiB of random data)");
                Fill(file, options.SizeBytes, options.Seed);
            }
            var points = new List<SweepPoint>();
            foreach (int qd in options.QueueDepths)
                foreach (double r in options.ReadRatios)
                {
                    var p = Measure(file, options.SizeBytes, r, qd, options.PointDuration, options.Seed + (ulong)qd * 1000 + (ulong)(r * 100));
                    points.Add(p);
                    await log.WriteLineAsync($"device fit: read {r:P0} qd {qd}: {p.Iops:0} IOPS, read p50 {p.ReadP50Us:0} µs p95 {p.ReadP95Us:0} µs, write p95 {p.WriteP95Us:0} µs");
                }
            var result = Fit(options.Path, points);
            if (options.OutputPath is { } output)
            {
                await File.WriteAllTextAsync(output, result.ToJson() + "\n");
                await log.WriteLineAsync($"device fit: wrote {output}");
            }
            return result;
        }
        finally
        {
            if (!existed && !isBlock && options.DeleteCreatedFile)
                File.Delete(options.Path);
        }
    }

    /// <summary>Random 4 KiB O_DIRECT reads only, at one queue depth, on an existing file: the real-device latency the
    /// flash benchmark puts beside fio's (the same file read the same way).</summary>
    public static SweepPoint MeasureReads(string path, long sizeBytes, int queueDepth, TimeSpan duration, ulong seed = 1)
    {
        using var file = DirectFile.Open(path, sizeBytes);
        return Measure(file, sizeBytes, 1.0, queueDepth, duration, seed);
    }

    /// <summary>Creates <paramref name="path"/> filled with random data through O_DIRECT (the benchmark's shared file).</summary>
    public static void CreateFilled(string path, long sizeBytes, ulong seed = 1)
    {
        using var file = DirectFile.Open(path, sizeBytes);
        Fill(file, sizeBytes, seed);
    }

    internal static DeviceFitResult Fit(string device, IReadOnlyList<SweepPoint> points)
    {
        var reads = points.Where(p => p.ReadRatio == 1.0).ToList();
        var peak = reads.MaxBy(p => p.Iops) ?? throw new InvalidOperationException($"device fit {device}: no read-only point");
        double tokens = peak.Iops;
        var atPeak = points.Where(p => p.QueueDepth == peak.QueueDepth && p.ReadRatio < 1).OrderByDescending(p => p.ReadRatio).ToList();
        var tiers = new List<FittedTier>();
        double floor = CostTable.ReadCost;
        foreach (var p in atPeak)
        {
            double c = (tokens / p.Iops - p.ReadRatio) / (1 - p.ReadRatio);
            floor = Math.Max(floor, double.IsFinite(c) ? c : floor);
            tiers.Add(new FittedTier(p.ReadRatio, Math.Round(floor, 3)));
        }
        tiers[^1] = tiers[^1] with { MinReadRatio = 0 };
        var limits = new List<FittedLimit>();
        foreach (var p in reads.OrderBy(p => p.ReadP95Us))
        {
            int bound = (int)Math.Ceiling(p.ReadP95Us);
            if (limits.Count == 0 || p.Iops > limits[^1].TokensPerSecond && bound > limits[^1].P95LatencyUs)
                limits.Add(new FittedLimit(bound, Math.Min(Math.Round(p.Iops), tokens)));
        }
        return new DeviceFitResult(device, DateTimeOffset.UtcNow, CostTable.BlockBytes, Math.Round(tokens), peak.QueueDepth, tiers, limits, points);
    }

    private static void Fill(DirectFile file, long size, ulong seed)
    {
        const int Chunk = 1 << 20;
        using var pool = new AlignedBufferPool(Chunk);
        using var lease = pool.Rent();
        var rng = new SeededRng(seed);
        var span = lease.Span;
        for (long offset = 0; offset < size; offset += Chunk)
        {
            for (int i = 0; i + 8 <= span.Length; i += 8)
                BitConverter.TryWriteBytes(span[i..], rng.NextULong());
            int n = (int)Math.Min(Chunk, size - offset);
            file.Write(span[..n], offset);
        }
    }

    private static SweepPoint Measure(DirectFile file, long size, double readRatio, int qd, TimeSpan duration, ulong seed)
    {
        long blocks = size / DirectFile.Alignment;
        using var pool = new AlignedBufferPool(DirectFile.Alignment);
        var readLat = new List<long>[qd];
        var writeLat = new List<long>[qd];
        var ops = new long[qd];
        var threads = new Thread[qd];
        long deadline = 0;
        using var start = new ManualResetEventSlim();
        for (int w = 0; w < qd; w++)
        {
            int worker = w;
            readLat[w] = [];
            writeLat[w] = [];
            threads[w] = new Thread(() =>
            {
                var rng = new SeededRng(seed * 7919 + (ulong)worker);
                using var lease = pool.Rent();
                var span = lease.Span;
                for (int i = 0; i + 8 <= span.Length; i += 8)
                    BitConverter.TryWriteBytes(span[i..], rng.NextULong());
                start.Wait();
                long count = 0;
                while (Stopwatch.GetTimestamp() < Volatile.Read(ref deadline))
                {
                    long offset = (long)(rng.NextULong() % (ulong)blocks) * DirectFile.Alignment;
                    bool read = rng.NextDouble() < readRatio;
                    long t0 = Stopwatch.GetTimestamp();
                    if (read) file.Read(span, offset);
                    else file.Write(span, offset);
                    long t1 = Stopwatch.GetTimestamp();
                    (read ? readLat[worker] : writeLat[worker]).Add(t1 - t0);
                    count++;
                }
                ops[worker] = count;
            }) { IsBackground = true, Name = $"device-fit-{worker}" };
            threads[w].Start();
        }
        long begin = Stopwatch.GetTimestamp();
        Volatile.Write(ref deadline, begin + (long)(duration.TotalSeconds * Stopwatch.Frequency));
        start.Set();
        foreach (var t in threads) t.Join();
        double seconds = (Stopwatch.GetTimestamp() - begin) / (double)Stopwatch.Frequency;
        var reads = readLat.SelectMany(l => l).ToArray();
        var writes = writeLat.SelectMany(l => l).ToArray();
        Array.Sort(reads);
        Array.Sort(writes);
        return new SweepPoint(readRatio, qd, ops.Sum() / seconds, Percentile(reads, 0.50), Percentile(reads, 0.95), Percentile(writes, 0.95));
    }

    private static double Percentile(long[] sorted, double q) =>
        sorted.Length == 0 ? 0 : Math.Round(sorted[(int)Math.Ceiling(q * sorted.Length) - 1] * 1e6 / Stopwatch.Frequency, 1);
}
