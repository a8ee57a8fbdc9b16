using System.Diagnostics;
using System.Numerics;
using System.Runtime.CompilerServices;

namespace FaaST.Cachelet.Index;

/// <summary>
/// The gaps between one key's recorded accesses as a histogram of fixed log-scale buckets (powers of
/// 4 milliseconds), kept inside <see cref="ObjectStats"/> without any allocation per access: one
/// Interlocked increment of an inline counter. Bucket 0 holds gaps under 1 ms; bucket k (1 ≤ k &lt;
/// <see cref="BucketCount"/> − 1) holds [4^(k−1), 4^k) ms; the last bucket holds everything from
/// 4^(BucketCount−2) ms ≈ 70 minutes on. Powers of 4 give 13 buckets from sub-millisecond bursts to
/// hourly reuse — the range a prewarm or a keep-alive decision looks at — in 52 bytes per key
/// (int counters: 100,000 tracked keys cost 5 MB; a bucket of one key wraps only after 2^31 gaps).
/// </summary>
public static class InterArrival
{
    public const int BucketCount = 13;

    private static readonly long TicksPerMillisecond = Math.Max(1, Stopwatch.Frequency / 1000);

    /// <summary>The bucket of a gap of <paramref name="ticks"/> Stopwatch ticks.</summary>
    public static int BucketOf(long ticks)
    {
        var ms = ticks / TicksPerMillisecond;
        if (ms <= 0)
            return 0;
        return Math.Min(BucketCount - 1, 1 + BitOperations.Log2((ulong)ms) / 2);
    }

    /// <summary>The exclusive upper bound of bucket <paramref name="bucket"/>; <see cref="TimeSpan.MaxValue"/> for the last.</summary>
    public static TimeSpan UpperBound(int bucket)
    {
        ArgumentOutOfRangeException.ThrowIfNegative(bucket);
        ArgumentOutOfRangeException.ThrowIfGreaterThanOrEqual(bucket, BucketCount);
        return bucket == BucketCount - 1 ? TimeSpan.MaxValue : TimeSpan.FromMilliseconds(1L << (2 * bucket));
    }

    /// <summary>The inclusive lower bound of bucket <paramref name="bucket"/>.</summary>
    public static TimeSpan LowerBound(int bucket) => bucket == 0 ? TimeSpan.Zero : UpperBound(bucket - 1);
}

/// <summary>The inline counters of <see cref="InterArrival"/> (no array object per key).</summary>
[InlineArray(InterArrival.BucketCount)]
internal struct InterArrivalBuckets
{
    private int _first;
}

/// <summary>
/// A key's inter-arrival times at one moment: how many gaps, their mean, shortest and longest, and
/// how many fell in each of <see cref="InterArrival"/>'s buckets (enough to draw or compare a
/// histogram, e.g. Faa$T's keep-alive or a prewarm's "will it be read again soon").
/// </summary>
/// <param name="Count">Gaps recorded (accesses − 1, modulo accesses that raced).</param>
/// <param name="Mean">Mean gap; zero below two accesses.</param>
/// <param name="Min">Shortest gap; zero if none.</param>
/// <param name="Max">Longest gap; zero if none.</param>
/// <param name="Buckets">Gaps per bucket, <see cref="InterArrival.BucketCount"/> of them (bounds: <see cref="InterArrival.UpperBound"/>).</param>
public sealed record InterArrivalSummary(long Count, TimeSpan Mean, TimeSpan Min, TimeSpan Max, IReadOnlyList<long> Buckets);
