namespace FaaST.ScaleController.Frontend;

/// <summary>
/// One interval's latencies and outcome counts, recorded without a lock: a log-linear histogram of
/// microseconds (8 sub-buckets per power of two, so a percentile is within 12.5 % of the true value) whose
/// buckets are bumped with <see cref="Interlocked"/>. The frontend swaps in a fresh one on each
/// <see cref="AppFrontend.TakeStats"/>; a request that read the old one just before the swap may land in it
/// after it was summed (one count lost at most per such request, never a torn value).
/// </summary>
internal sealed class LatencyHistogram
{
    private const int Linear = 16;          // 0..15 µs one bucket each
    private const int SubBits = 3;          // 8 sub-buckets per power of two above that
    private const int MaxExponent = 40;     // 2^40 µs ≈ 12.7 days: everything above lands in the last bucket
    internal const int BucketCount = Linear + ((MaxExponent - 4) << SubBits);

    private readonly long[] _buckets = new long[BucketCount];
    private long _completed;
    private long _failed;

    public long Completed => Volatile.Read(ref _completed);

    public long Failed => Volatile.Read(ref _failed);

    /// <summary>An invocation an instance answered, after <paramref name="microseconds"/>.</summary>
    public void RecordCompleted(long microseconds)
    {
        Interlocked.Increment(ref _buckets[BucketOf(microseconds)]);
        Interlocked.Increment(ref _completed);
    }

    /// <summary>An invocation the frontend answered itself (502, 503) or aborted.</summary>
    public void RecordFailed() => Interlocked.Increment(ref _failed);

    internal static int BucketOf(long microseconds)
    {
        if (microseconds < Linear)
            return microseconds < 0 ? 0 : (int)microseconds;
        var exponent = 63 - (int)long.LeadingZeroCount(microseconds);  // ≥ 4
        if (exponent >= MaxExponent)
            return BucketCount - 1;
        var sub = (int)(microseconds >> (exponent - SubBits)) & ((1 << SubBits) - 1);
        return Linear + ((exponent - 4) << SubBits) + sub;
    }

    /// <summary>The largest value a bucket holds (what a percentile reports: never below the true value).</summary>
    internal static long UpperBoundOf(int bucket)
    {
        if (bucket < Linear)
            return bucket;
        var exponent = ((bucket - Linear) >> SubBits) + 4;
        var sub = (bucket - Linear) & ((1 << SubBits) - 1);
        return (1L << exponent) + ((long)(sub + 1) << (exponent - SubBits)) - 1;
    }

    /// <summary>The <paramref name="quantile"/> (0..1) of the completed latencies in milliseconds; 0 when none completed.</summary>
    public double PercentileMs(double quantile)
    {
        long total = 0;
        for (var i = 0; i < _buckets.Length; i++)
            total += Volatile.Read(ref _buckets[i]);
        if (total == 0)
            return 0;
        var rank = Math.Max(1, (long)Math.Ceiling(quantile * total));
        long seen = 0;
        for (var i = 0; i < _buckets.Length; i++)
        {
            seen += Volatile.Read(ref _buckets[i]);
            if (seen >= rank)
                return UpperBoundOf(i) / 1000.0;
        }
        return UpperBoundOf(_buckets.Length - 1) / 1000.0;
    }
}
