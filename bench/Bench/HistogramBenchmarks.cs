using BenchmarkDotNet.Attributes;
using FaaST.ScaleController.Frontend;
using HdrHistogram;

namespace FaaST.Bench;

/// <summary>
/// Issue 20, "hand-written where a maintained library fits": the frontend's <see cref="LatencyHistogram"/> against
/// HdrHistogram's concurrent histogram (what the frontend would need: requests complete on many threads and are
/// recorded without a lock). One operation records 1,024 latencies from a realistic distribution (log-normal around
/// 0.4 ms with a tail to ~50 ms), on one thread and on two threads at once (the machine has 2 cores). Allocation is
/// per operation; the frontend makes one histogram per stats interval, so <see cref="NewHistogram"/> and
/// <see cref="NewHdr"/> show that cost too.
/// </summary>
[MemoryDiagnoser]
public class HistogramBenchmarks
{
    private const int Values = 1024;
    private readonly long[] _latencies = LatencySample.Microseconds(Values, seed: 1);
    private readonly LatencyHistogram _ours = new();
    private readonly LongConcurrentHistogram _hdr = LatencySample.NewHdr();

    /// <summary>Both hold the sample before any benchmark, so the percentile readouts have something to read.</summary>
    [GlobalSetup]
    public void Fill()
    {
        Ours();
        Hdr();
    }

    [Benchmark(Baseline = true, OperationsPerInvoke = Values)]
    public void Ours()
    {
        foreach (var v in _latencies)
            _ours.RecordCompleted(v);
    }

    [Benchmark(OperationsPerInvoke = Values)]
    public void Hdr()
    {
        foreach (var v in _latencies)
            _hdr.RecordValue(v);
    }

    [Benchmark(OperationsPerInvoke = Values)]
    public void OursTwoThreads() => Parallel.For(0, 2, _ => Ours());

    [Benchmark(OperationsPerInvoke = Values)]
    public void HdrTwoThreads() => Parallel.For(0, 2, _ => Hdr());

    [Benchmark]
    public object NewHistogram() => new LatencyHistogram();

    [Benchmark]
    public object NewHdr() => LatencySample.NewHdr();

    [Benchmark]
    public double OursP99() => _ours.PercentileMs(0.99);

    [Benchmark]
    public double HdrP99() => _hdr.GetValueAtPercentile(99) / 1000.0;
}

/// <summary>Latencies like the frontend's: log-normal (median ~400 µs), 1 % slow tail up to ~50 ms.</summary>
internal static class LatencySample
{
    /// <summary>1 µs to 1 hour at 3 significant digits (HdrHistogram's usual setting for latencies).</summary>
    public static LongConcurrentHistogram NewHdr() => new(1, 3_600_000_000, 3);

    public static long[] Microseconds(int count, int seed)
    {
        var random = new Random(seed);
        var values = new long[count];
        for (var i = 0; i < count; i++)
        {
            var normal = Math.Sqrt(-2 * Math.Log(1 - random.NextDouble())) * Math.Cos(2 * Math.PI * random.NextDouble());
            var micros = Math.Exp(Math.Log(400) + 0.5 * normal);
            if (random.NextDouble() < 0.01)
                micros = 5_000 + random.NextDouble() * 45_000;
            values[i] = Math.Max(1, (long)micros);
        }
        return values;
    }

    /// <summary>p50/p99 of both against the exact quantiles of the same 1,000,000 values; printed for docs/libraries.md.</summary>
    public static void Accuracy()
    {
        var values = Microseconds(1_000_000, seed: 7);
        var ours = new LatencyHistogram();
        var hdr = NewHdr();
        foreach (var v in values)
        {
            ours.RecordCompleted(v);
            hdr.RecordValue(v);
        }
        var sorted = values.Order().ToArray();
        foreach (var q in new[] { 0.5, 0.9, 0.99, 0.999 })
        {
            var exact = sorted[Math.Max(0, (int)Math.Ceiling(q * sorted.Length) - 1)] / 1000.0;
            var o = ours.PercentileMs(q);
            var h = hdr.GetValueAtPercentile(q * 100) / 1000.0;
            Console.WriteLine($"p{q * 100:0.#}: exact {exact:0.000} ms, ours {o:0.000} ms ({(o - exact) / exact:+0.0%;-0.0%}), hdr {h:0.000} ms ({(h - exact) / exact:+0.0%;-0.0%})");
        }
        Console.WriteLine($"memory: ours {LatencyHistogram.BucketCount * 8 + 40} bytes of buckets, hdr {hdr.GetEstimatedFootprintInBytes()} bytes");
    }
}
