using System.Globalization;

namespace FaaST.Prewarm.Timing;

/// <summary>
/// The hybrid histogram policy of Shahrad et al. (USENIX ATC'20, §4.2), which Faa$T's frontend uses to time an app's
/// reload (Faa$T §3.3). From an app's idle times:
/// <list type="number">
/// <item>fewer than <see cref="HistogramOptions.MinSamples"/>: nothing to learn yet, the fixed keep-alive;</item>
/// <item>more than <see cref="HistogramOptions.MaxOutOfBounds"/> of them beyond the range: a forecast of the next one
/// (ATC'20 fits ARIMA here; this is a documented stand-in, exponential smoothing of the out-of-bounds idle times, see
/// <see cref="IdleTimeHistogram.ForecastWeight"/>), with ATC'20's 15 % margin on each side: pre-warm at 85 % of the
/// forecast, keep loaded until 115 %;</item>
/// <item>bin counts spread evenly (coefficient of variation below <see cref="HistogramOptions.MinCv"/>): not
/// representative, the fixed keep-alive and no pre-warming;</item>
/// <item>else the histogram: pre-warm window at the head percentile's bin start less the margin, keep-alive until the
/// tail percentile's bin end plus the margin.</item>
/// </list>
/// ARIMA itself is not implemented: fitting it needs tens of out-of-bounds idle times, which an app idle for more than 4
/// hours gathers over weeks; smoothing predicts a steady long period (a daily job) exactly and follows a drifting one.
/// </summary>
public static class HybridHistogramPolicy
{
    /// <summary>ATC'20's margin around a forecast idle time.</summary>
    public const double ForecastMargin = 0.15;

    /// <summary>
    /// The windows after the next invocation ends. Under <see cref="LoadMode.FixedKeepAlive"/> the keep-alive returned is the
    /// histogram's range (ATC'20's standard keep-alive); a platform with a keep-alive setting of its own uses that instead.
    /// </summary>
    public static LoadWindows Decide(IdleTimeHistogram histogram, HistogramOptions options)
    {
        ArgumentNullException.ThrowIfNull(histogram);
        ArgumentNullException.ThrowIfNull(options);
        var counts = histogram.Counts();
        long inRange = 0;
        foreach (var c in counts)
            inRange += c;
        var outOfBounds = histogram.OutOfBounds;
        var total = inRange + outOfBounds;
        if (total < options.MinSamples)
            return Fixed(options, F($"{total} idle time(s) so far, fewer than minSamples {options.MinSamples}"));

        if (outOfBounds > options.MaxOutOfBounds * total && histogram.Forecast is { } forecast)
        {
            var prewarm = forecast * (1 - ForecastMargin);
            return new LoadWindows(LoadMode.Forecast, prewarm, forecast * (1 + ForecastMargin) - prewarm,
                F($"{outOfBounds} of {total} idle times beyond {options.Range}: forecast {Minutes(forecast)} (smoothed)"));
        }
        if (inRange == 0)
            return Fixed(options, F($"no idle time within {options.Range}"));

        var cv = CoefficientOfVariation(counts, inRange);
        if (cv < options.MinCv)
            return Fixed(options, F($"idle times spread evenly (bin counts' CV {cv:0.##} < minCv {options.MinCv}): not representative"));

        var head = Bin(counts, inRange, options.HeadPercentile);
        var tail = Bin(counts, inRange, options.TailPercentile);
        var window = options.BinWidth * head * (1 - options.Margin);
        var end = options.BinWidth * (tail + 1) * (1 + options.Margin);
        return new LoadWindows(LoadMode.Histogram, window, end - window,
            F($"{inRange} idle times, CV {cv:0.##}: p{options.HeadPercentile:0.##} from {Minutes(options.BinWidth * head)}, p{options.TailPercentile:0.##} to {Minutes(options.BinWidth * (tail + 1))}"));
    }

    /// <summary>The coefficient of variation (population) of the bin counts, every bin of the range counted.</summary>
    public static double CoefficientOfVariation(ReadOnlySpan<long> counts, long total)
    {
        if (counts.Length == 0 || total == 0)
            return 0;
        var mean = total / (double)counts.Length;
        double squares = 0;
        foreach (var c in counts)
            squares += (c - mean) * (c - mean);
        return Math.Sqrt(squares / counts.Length) / mean;
    }

    /// <summary>The bin holding the <paramref name="percentile"/>-th idle time (the first bin whose cumulative count reaches it).</summary>
    private static int Bin(ReadOnlySpan<long> counts, long total, double percentile)
    {
        // The rank of the percentile among total idle times, at least the first: the 0th percentile is the smallest.
        var rank = Math.Max(1, (long)Math.Ceiling(percentile / 100 * total));
        long cumulative = 0;
        for (var i = 0; i < counts.Length; i++)
        {
            cumulative += counts[i];
            if (cumulative >= rank)
                return i;
        }
        return counts.Length - 1;
    }

    private static LoadWindows Fixed(HistogramOptions options, string reason) =>
        new(LoadMode.FixedKeepAlive, TimeSpan.Zero, options.Range, reason);

    private static string Minutes(TimeSpan t) => F($"{t.TotalMinutes:0.#} min");

    private static string F(FormattableString s) => s.ToString(CultureInfo.InvariantCulture);
}
