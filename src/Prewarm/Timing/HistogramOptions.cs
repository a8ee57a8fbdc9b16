namespace FaaST.Prewarm.Timing;

/// <summary>
/// The hybrid histogram policy's parameters (Shahrad et al., "Serverless in the Wild", USENIX ATC'20, §4.2), with its
/// published values as defaults; <c>faast.json</c>'s <c>prewarm.histogram</c> section sets them per app.
/// </summary>
/// <param name="BinWidth">Width of a histogram bin (ATC'20: 1 minute).</param>
/// <param name="Range">The histogram's range; longer idle times are out of bounds (ATC'20: 4 hours).</param>
/// <param name="HeadPercentile">The percentile that sets the pre-warm window (ATC'20: 5th).</param>
/// <param name="TailPercentile">The percentile that sets the keep-alive window's end (ATC'20: 99th).</param>
/// <param name="Margin">Taken off the head and added to the tail (ATC'20: 10 %).</param>
/// <param name="MinCv">The histogram is representative only when the coefficient of variation of its bin counts is at
/// least this (ATC'20: 2); below it the idle times are spread too evenly to predict.</param>
/// <param name="MaxOutOfBounds">The share of idle times beyond <paramref name="Range"/> above which the next idle time is
/// forecast from the out-of-bounds ones instead (ATC'20 uses ARIMA there; see <see cref="HybridHistogramPolicy"/>).</param>
/// <param name="MinSamples">Fewer idle times than this: nothing to learn from yet, the fixed keep-alive.</param>
public sealed record HistogramOptions(
    TimeSpan BinWidth,
    TimeSpan Range,
    double HeadPercentile,
    double TailPercentile,
    double Margin,
    double MinCv,
    double MaxOutOfBounds,
    int MinSamples)
{
    /// <summary>ATC'20's values: 1-minute bins over 4 hours, 5th and 99th percentiles, 10 % margin, CV ≥ 2; half the
    /// idle times out of bounds switches to the forecast; 5 idle times before anything is predicted.</summary>
    public static HistogramOptions Default { get; } = new(TimeSpan.FromMinutes(1), TimeSpan.FromHours(4), 5, 99, 0.10, 2.0, 0.5, 5);

    /// <summary>How many bins the range holds.</summary>
    public int BinCount => (int)Math.Ceiling(Range.Ticks / (double)BinWidth.Ticks);

    /// <summary>Checks the values (a policy file's parser checks them first, naming the key).</summary>
    /// <exception cref="ArgumentException">A value out of its range, named.</exception>
    public HistogramOptions Validate()
    {
        if (BinWidth <= TimeSpan.Zero)
            throw new ArgumentException($"histogram binWidth must be greater than 0, not {BinWidth}");
        if (Range < BinWidth)
            throw new ArgumentException($"histogram range ({Range}) must be at least one bin ({BinWidth})");
        if (Range.Ticks / BinWidth.Ticks > 100_000)
            throw new ArgumentException($"histogram range ({Range}) over binWidth ({BinWidth}) makes more than 100000 bins");
        if (!(HeadPercentile >= 0 && HeadPercentile < TailPercentile && TailPercentile <= 100))
            throw new ArgumentException($"histogram percentiles must satisfy 0 <= head ({HeadPercentile}) < tail ({TailPercentile}) <= 100");
        if (!(Margin >= 0 && Margin < 1))
            throw new ArgumentException($"histogram margin must be in [0, 1), not {Margin}");
        if (!(MinCv >= 0) || double.IsInfinity(MinCv))
            throw new ArgumentException($"histogram minCv must be a finite number >= 0, not {MinCv}");
        if (!(MaxOutOfBounds > 0 && MaxOutOfBounds <= 1))
            throw new ArgumentException($"histogram maxOutOfBounds must be in (0, 1], not {MaxOutOfBounds}");
        if (MinSamples < 1)
            throw new ArgumentException($"histogram minSamples must be at least 1, not {MinSamples}");
        return this;
    }
}

/// <summary>Which branch of the hybrid policy produced a <see cref="LoadWindows"/>.</summary>
public enum LoadMode
{
    /// <summary>The idle times fall in the range and cluster: windows from the histogram's head and tail.</summary>
    Histogram,
    /// <summary>Most idle times are beyond the range: windows around a forecast of the next one.</summary>
    Forecast,
    /// <summary>Too few idle times, or spread too evenly to predict: no pre-warming, the fixed keep-alive.</summary>
    FixedKeepAlive,
}

/// <summary>
/// When to have the app loaded after an invocation ends at t (ATC'20 §4.2). <see cref="PrewarmWindow"/> &gt; 0: unload, load
/// again at t + <see cref="PrewarmWindow"/> and keep it loaded until t + <see cref="PrewarmWindow"/> + <see cref="KeepAlive"/>;
/// 0: keep it loaded until t + <see cref="KeepAlive"/>. Under <see cref="LoadMode.FixedKeepAlive"/> both are the caller's
/// fixed keep-alive (<see cref="PrewarmWindow"/> 0).
/// </summary>
/// <param name="Reason">One line saying why (logs, /admin).</param>
public readonly record struct LoadWindows(LoadMode Mode, TimeSpan PrewarmWindow, TimeSpan KeepAlive, string Reason)
{
    /// <summary>The predicted next invocation after an invocation ended at <paramref name="end"/>: the start of the loaded
    /// window, or null when nothing is predicted.</summary>
    public DateTimeOffset? PredictedAfter(DateTimeOffset end) => Mode == LoadMode.FixedKeepAlive ? null : end + PrewarmWindow;
}

/// <summary>The policy file's section as the policy's options.</summary>
public static class PrewarmPolicyExtensions
{
    /// <summary>The histogram options <c>prewarm.histogram</c> sets (the parser has checked them).</summary>
    public static HistogramOptions HistogramOptions(this FaaST.Policy.PrewarmPolicy policy)
    {
        ArgumentNullException.ThrowIfNull(policy);
        return new HistogramOptions(policy.HistogramBinWidth, policy.HistogramRange, policy.HeadPercentile, policy.TailPercentile,
            policy.Margin, policy.MinCv, policy.MaxOutOfBounds, policy.MinSamples).Validate();
    }
}
