using System.Text;
using FaaST.Prewarm.Timing;

namespace FaaST.Prewarm.Tests.Timing;

/// <summary>The hybrid histogram policy (ATC'20 §4.2) on arrival patterns of known shape, each generated from a fixed seed.</summary>
public sealed class HybridHistogramPolicyTests
{
    private static readonly HistogramOptions Options = HistogramOptions.Default;

    private static IdleTimeHistogram Learn(IEnumerable<TimeSpan> idleTimes, HistogramOptions? options = null)
    {
        var histogram = new IdleTimeHistogram(options ?? Options);
        foreach (var idle in idleTimes)
            histogram.Record(idle);
        return histogram;
    }

    private static IEnumerable<TimeSpan> Minutes(IEnumerable<double> minutes) => minutes.Select(TimeSpan.FromMinutes);

    [Fact]
    public void A_periodic_app_is_reloaded_shortly_before_its_period_and_kept_until_just_after_it()
    {
        var random = new Random(1);
        var histogram = Learn(Minutes(Enumerable.Range(0, 100).Select(_ => 30.2 + (random.NextDouble() * 0.5))));

        var windows = HybridHistogramPolicy.Decide(histogram, Options);

        Assert.Equal(LoadMode.Histogram, windows.Mode);
        // The 30-minute bin less 10 %, until the 31st minute plus 10 %.
        Assert.Equal(TimeSpan.FromMinutes(27), windows.PrewarmWindow);
        Assert.Equal(TimeSpan.FromMinutes(31 * 1.1) - TimeSpan.FromMinutes(27), windows.KeepAlive);
        var next = TimeSpan.FromMinutes(30.4);
        Assert.InRange(next, windows.PrewarmWindow, windows.PrewarmWindow + windows.KeepAlive);
        var end = DateTimeOffset.UnixEpoch;
        Assert.Equal(end + TimeSpan.FromMinutes(27), windows.PredictedAfter(end));
    }

    [Fact]
    public void A_Poisson_app_is_kept_loaded_after_each_invocation_until_the_tail_of_its_idle_times()
    {
        var random = new Random(2);
        // Exponential idle times with a 10-minute mean: the head is in the first bin, so no unload-and-reload.
        var histogram = Learn(Minutes(Enumerable.Range(0, 2000).Select(_ => -10 * Math.Log(1 - random.NextDouble()))));

        var windows = HybridHistogramPolicy.Decide(histogram, Options);

        Assert.Equal(LoadMode.Histogram, windows.Mode);
        Assert.Equal(TimeSpan.Zero, windows.PrewarmWindow);
        // The 99th percentile of Exp(10 min) is 46 min; its bin's end plus 10 %.
        Assert.InRange(windows.KeepAlive.TotalMinutes, 44 * 1.1, 52 * 1.1);
    }

    [Fact]
    public void A_bursty_app_with_long_gaps_between_bursts_is_kept_loaded_through_the_gap()
    {
        var random = new Random(3);
        var idle = new List<TimeSpan>();
        for (var burst = 0; burst < 30; burst++)
        {
            for (var i = 0; i < 20; i++)
                idle.Add(TimeSpan.FromSeconds(random.Next(1, 20)));
            idle.Add(TimeSpan.FromMinutes(115 + random.Next(0, 10)));
        }
        var windows = HybridHistogramPolicy.Decide(Learn(idle), Options);

        Assert.Equal(LoadMode.Histogram, windows.Mode);
        Assert.Equal(TimeSpan.Zero, windows.PrewarmWindow);
        Assert.True(windows.KeepAlive >= TimeSpan.FromMinutes(125), windows.Reason);
    }

    [Fact]
    public void Too_few_idle_times_give_the_fixed_keep_alive_and_no_prediction()
    {
        var windows = HybridHistogramPolicy.Decide(Learn(Minutes([30, 31, 30, 30])), Options);

        Assert.Equal(LoadMode.FixedKeepAlive, windows.Mode);
        Assert.Equal(TimeSpan.Zero, windows.PrewarmWindow);
        Assert.Equal(Options.Range, windows.KeepAlive);
        Assert.Null(windows.PredictedAfter(DateTimeOffset.UnixEpoch));
        Assert.Contains("fewer than minSamples 5", windows.Reason, StringComparison.Ordinal);
    }

    [Fact]
    public void Idle_times_spread_evenly_over_the_range_are_not_representative()
    {
        var random = new Random(4);
        var histogram = Learn(Minutes(Enumerable.Range(0, 2000).Select(_ => random.NextDouble() * 239)));

        var windows = HybridHistogramPolicy.Decide(histogram, Options);

        Assert.Equal(LoadMode.FixedKeepAlive, windows.Mode);
        Assert.Contains("not representative", windows.Reason, StringComparison.Ordinal);
        Assert.True(HybridHistogramPolicy.CoefficientOfVariation(histogram.Counts(), histogram.InRange) < 2);
    }

    [Fact]
    public void A_daily_app_beyond_the_range_is_reloaded_at_85_percent_of_its_forecast_period()
    {
        var random = new Random(5);
        var histogram = Learn(Enumerable.Range(0, 10).Select(_ => TimeSpan.FromHours(24) + TimeSpan.FromMinutes(random.Next(-5, 6))));

        var windows = HybridHistogramPolicy.Decide(histogram, Options);

        Assert.Equal(LoadMode.Forecast, windows.Mode);
        Assert.Equal(10, histogram.OutOfBounds);
        Assert.InRange(windows.PrewarmWindow.TotalHours, 24 * 0.85 - 0.1, 24 * 0.85 + 0.1);
        Assert.InRange((windows.PrewarmWindow + windows.KeepAlive).TotalHours, 24 * 1.15 - 0.1, 24 * 1.15 + 0.1);
    }

    [Fact]
    public void A_forecast_follows_a_period_that_changes()
    {
        var histogram = Learn(Enumerable.Repeat(TimeSpan.FromHours(6), 6).Concat(Enumerable.Repeat(TimeSpan.FromHours(12), 8)));

        Assert.InRange(histogram.Forecast!.Value.TotalHours, 11.9, 12);
    }

    [Fact]
    public void A_negative_idle_time_from_a_clock_step_counts_in_the_first_bin()
    {
        var histogram = Learn([TimeSpan.FromSeconds(-5)]);

        Assert.Equal(1, histogram.Counts()[0]);
    }

    [Fact]
    public void The_state_round_trips_and_is_rebinned_when_the_bins_change()
    {
        var histogram = Learn(Minutes([0.5, 30.5, 30.7, 90.5]).Append(TimeSpan.FromHours(30)));

        var same = IdleTimeHistogram.Read(histogram.Write(), "state.json", Options);
        Assert.Equal(histogram.Counts(), same.Counts());
        Assert.Equal(1, same.OutOfBounds);
        Assert.Equal(TimeSpan.FromHours(30), same.Forecast);

        // Two-minute bins over two hours: 30.5 and 30.7 share bin 15, 90.5 is beyond the range now.
        var coarser = IdleTimeHistogram.Read(histogram.Write(), "state.json",
            Options with { BinWidth = TimeSpan.FromMinutes(2), Range = TimeSpan.FromHours(1) });
        Assert.Equal(1, coarser.Counts()[0]);
        Assert.Equal(2, coarser.Counts()[15]);
        Assert.Equal(2, coarser.OutOfBounds);
    }

    [Theory]
    [InlineData("not json", "state.json: not an idle-time histogram state")]
    [InlineData("[]", "must be a JSON object")]
    [InlineData("{\"format\":2,\"binWidthSeconds\":60,\"rangeSeconds\":600,\"outOfBounds\":0,\"bins\":{}}", "format 2 is not the supported 1")]
    [InlineData("{\"format\":1,\"binWidthSeconds\":60,\"rangeSeconds\":600,\"bins\":{}}", "\"outOfBounds\" is missing")]
    [InlineData("{\"format\":1,\"binWidthSeconds\":60,\"rangeSeconds\":600,\"outOfBounds\":0,\"bins\":{\"10\":1}}", "\"10\" is not a bin")]
    [InlineData("{\"format\":1,\"binWidthSeconds\":60,\"rangeSeconds\":600,\"outOfBounds\":0,\"bins\":{\"1\":-1}}", "bins.1: a count must be >= 0")]
    [InlineData("{\"format\":1,\"binWidthSeconds\":0,\"rangeSeconds\":600,\"outOfBounds\":0,\"bins\":{}}", "do not make a histogram")]
    [InlineData("{\"format\":\"1\",\"binWidthSeconds\":60,\"rangeSeconds\":600,\"outOfBounds\":0,\"bins\":{}}", "a value of the wrong kind")]
    public void A_corrupt_state_is_refused_with_its_name_and_what_is_wrong(string json, string expected)
    {
        var e = Assert.Throws<FormatException>(() => IdleTimeHistogram.Read(Encoding.UTF8.GetBytes(json), "state.json", Options));

        Assert.StartsWith("state.json: ", e.Message, StringComparison.Ordinal);
        Assert.Contains(expected, e.Message, StringComparison.Ordinal);
    }

    [Fact]
    public void Options_out_of_range_are_refused_naming_the_value()
    {
        Assert.Contains("margin", Assert.Throws<ArgumentException>(() => (Options with { Margin = 1 }).Validate()).Message, StringComparison.Ordinal);
        Assert.Contains("percentiles", Assert.Throws<ArgumentException>(() => (Options with { HeadPercentile = 99, TailPercentile = 5 }).Validate()).Message, StringComparison.Ordinal);
        Assert.Contains("at least one bin", Assert.Throws<ArgumentException>(() => (Options with { Range = TimeSpan.FromSeconds(1) }).Validate()).Message, StringComparison.Ordinal);
    }

    [Fact]
    public void Recording_from_many_threads_at_once_loses_no_idle_time()
    {
        var histogram = new IdleTimeHistogram(Options);
        Parallel.For(0, 8, t =>
        {
            for (var i = 0; i < 10_000; i++)
                histogram.Record(TimeSpan.FromSeconds(i % 600));
        });

        Assert.Equal(80_000, histogram.Total);
    }
}
