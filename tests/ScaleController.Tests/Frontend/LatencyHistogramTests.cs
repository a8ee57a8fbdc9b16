using FaaST.ScaleController.Frontend;

namespace FaaST.ScaleController.Tests.Frontend;

/// <summary>The frontend's per-interval latency histogram.</summary>
public sealed class LatencyHistogramTests
{
    [Fact]
    public void Every_value_lands_in_a_bucket_whose_upper_bound_is_at_most_an_eighth_above_it()
    {
        var random = new Random(13);
        for (var i = 0; i < 100_000; i++)
        {
            var value = (long)Math.Pow(2, random.NextDouble() * 39);
            var bound = LatencyHistogram.UpperBoundOf(LatencyHistogram.BucketOf(value));
            Assert.InRange(bound, value, value + (value / 8) + 1);
        }
    }

    [Fact]
    public void Buckets_are_in_order_of_their_bounds()
    {
        for (var b = 1; b < LatencyHistogram.BucketCount; b++)
            Assert.True(LatencyHistogram.UpperBoundOf(b) > LatencyHistogram.UpperBoundOf(b - 1), $"bucket {b}");
        Assert.Equal(LatencyHistogram.BucketCount - 1, LatencyHistogram.BucketOf(long.MaxValue));
        Assert.Equal(0, LatencyHistogram.BucketOf(-5));
    }

    [Fact]
    public void Percentiles_of_1_to_1000_microseconds_are_within_an_eighth_of_the_true_ones()
    {
        var histogram = new LatencyHistogram();
        for (var us = 1; us <= 1000; us++)
            histogram.RecordCompleted(us);

        Assert.InRange(histogram.PercentileMs(0.50), 0.500, 0.500 * 1.125);
        Assert.InRange(histogram.PercentileMs(0.99), 0.990, 0.990 * 1.125);
        Assert.Equal(1000, histogram.Completed);
    }

    [Fact]
    public void An_interval_with_nothing_completed_reports_zero_latency()
    {
        var histogram = new LatencyHistogram();
        histogram.RecordFailed();

        Assert.Equal(0, histogram.PercentileMs(0.5));
        Assert.Equal(1, histogram.Failed);
    }
}
