using System.Diagnostics;
using System.Numerics;

namespace FaaST.Runtime.Scaling;

/// <summary>What <see cref="InvocationLoad.TakeSample"/> measured over one interval.</summary>
/// <param name="IntervalSeconds">The interval's length.</param>
/// <param name="Completed">Invocations that ended in it.</param>
/// <param name="InFlight">Invocations running at its end.</param>
/// <param name="BusySlots">The mean number of invocations running during it (the integral of in-flight over time / length).</param>
/// <param name="LatencyP50Ms">The median duration of the invocations that ended in it (0 when none did), to about 12 % (the half-width of its bucket).</param>
internal readonly record struct LoadSample(double IntervalSeconds, long Completed, long InFlight, double BusySlots, double LatencyP50Ms)
{
    public double InvocationsPerSecond => IntervalSeconds > 0 ? Completed / IntervalSeconds : 0;
}

/// <summary>
/// The instance's invocation load for the compute vote (Faa$T §4): the rate, the invocations in flight,
/// the median latency and the mean concurrency over each interval between two samples. Every
/// invocation passes here twice (start, end), so the hot path is a handful of interlocked adds, no lock
/// and no allocation.
/// </summary>
/// <remarks>
/// The mean concurrency is exact without a timer: the time all invocations spent running up to t is
/// Σ_ended (end − start) + Σ_running (t − start) = Σ ends + running·t − Σ starts, so three running sums
/// give it at any t and two samples give it over their interval. The sums wrap around (64-bit
/// timestamps add up past long's range over a long life); the wrap cancels in the differences, which
/// stay far inside the range. Latencies go to buckets of a quarter power of two of microseconds.
/// </remarks>
internal sealed class InvocationLoad
{
    private const int Buckets = 128;

    private readonly long _origin;
    private readonly long[] _latency = new long[Buckets];
    private readonly long[] _drained = new long[Buckets];
    private readonly Lock _sampling = new();
    private long _inFlight;
    private long _sumStarts;
    private long _sumEnds;
    private long _completed;
    // The previous sample's marks (under _sampling).
    private long _lastAt;
    private long _lastBusy;
    private long _lastCompleted;

    /// <param name="origin">The Stopwatch timestamp the first interval starts at.</param>
    public InvocationLoad(long origin)
    {
        _origin = origin;
        _lastAt = origin;
    }

    public InvocationLoad() : this(Stopwatch.GetTimestamp())
    {
    }

    /// <summary>Invocations running now.</summary>
    public long InFlight => Volatile.Read(ref _inFlight);

    /// <summary>An invocation started at <paramref name="timestamp"/> (Stopwatch).</summary>
    public void Started(long timestamp)
    {
        Interlocked.Add(ref _sumStarts, unchecked(timestamp - _origin));
        Interlocked.Increment(ref _inFlight);
    }

    /// <summary>The invocation that started at <paramref name="started"/> ended at <paramref name="ended"/> (Stopwatch).</summary>
    public void Finished(long started, long ended)
    {
        Interlocked.Add(ref _sumEnds, unchecked(ended - _origin));
        Interlocked.Decrement(ref _inFlight);
        Interlocked.Increment(ref _completed);
        Interlocked.Increment(ref _latency[Bucket(ended - started)]);
    }

    /// <summary>What happened since the previous sample (or since the tracker was made), at <paramref name="now"/> (Stopwatch).</summary>
    public LoadSample TakeSample(long now)
    {
        lock (_sampling)
        {
            var inFlight = Volatile.Read(ref _inFlight);
            var busy = Busy(now, inFlight);
            var completed = Volatile.Read(ref _completed);
            var ticks = now - _lastAt;
            var seconds = ticks / (double)Stopwatch.Frequency;
            // A finish between the reads can make one interval's busy time off by that invocation's
            // running time; never below zero.
            var busySlots = ticks > 0 ? Math.Max(0, unchecked(busy - _lastBusy)) / (double)ticks : 0;
            long total = 0;
            for (var i = 0; i < Buckets; i++)
                total += _drained[i] = Interlocked.Exchange(ref _latency[i], 0);
            var sample = new LoadSample(seconds, completed - _lastCompleted, Math.Max(0, inFlight), busySlots, Median(_drained, total));
            (_lastAt, _lastBusy, _lastCompleted) = (now, busy, completed);
            return sample;
        }
    }

    /// <summary>Total running time of all invocations up to <paramref name="now"/>, in Stopwatch ticks (wrapping).</summary>
    private long Busy(long now, long inFlight) => unchecked(Volatile.Read(ref _sumEnds) + inFlight * (now - _origin) - Volatile.Read(ref _sumStarts));

    /// <summary>The bucket of a duration: 4 per power of two of microseconds (the top two bits after the leading one).</summary>
    internal static int Bucket(long ticks)
    {
        var us = (ulong)Math.Max(0, ticks) * 1_000_000UL / (ulong)Stopwatch.Frequency;
        if (us < 4)
            return (int)us;
        var log = BitOperations.Log2(us);
        var index = 4 * log + (int)((us >> (log - 2)) & 3);
        return Math.Min(Buckets - 1, index);
    }

    /// <summary>The smallest duration in microseconds that falls in <paramref name="bucket"/>.</summary>
    internal static double LowerMicroseconds(int bucket) =>
        bucket < 8 ? bucket : (4 + (bucket & 3)) * Math.Pow(2, (bucket >> 2) - 2);

    private static double Median(long[] counts, long total)
    {
        if (total == 0)
            return 0;
        var half = (total + 1) / 2;
        long seen = 0;
        for (var i = 0; i < counts.Length; i++)
        {
            seen += counts[i];
            if (seen >= half)
                return (LowerMicroseconds(i) + LowerMicroseconds(Math.Min(i + 1, counts.Length - 1))) / 2 / 1000.0;
        }
        return LowerMicroseconds(counts.Length - 1) / 1000.0;
    }
}
