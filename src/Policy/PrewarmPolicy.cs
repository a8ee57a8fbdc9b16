namespace FaaST.Policy;

/// <summary>
/// <c>faast.json</c>'s <c>prewarm</c> section: the Load Daemon of Faa$T §3.3 (what a cachelet records at unload, which
/// objects the next cachelets load) and the hybrid histogram policy that times the reload (Shahrad et al., ATC'20 §4).
/// Every key it leaves out is at its default; <see cref="Default"/> is the policy of an app without the section.
/// </summary>
/// <remarks>
/// This record is the one place the defaults live; <c>schemas/faast.schema.json</c> repeats them and a test keeps the
/// two in agreement. The parser checks every range and <c>histogram.headPercentile</c> &lt;
/// <c>histogram.tailPercentile</c>, <c>histogram.binWidth</c> ≤ <c>histogram.range</c>.
/// </remarks>
public sealed record PrewarmPolicy
{
    /// <summary>The policy of an app without a <c>prewarm</c> section.</summary>
    public static PrewarmPolicy Default { get; } = new();

    /// <summary><c>prewarm.enabled</c>, default true: record the cache at unload and load the selected objects at
    /// start. False: neither (the reload is still timed by the histogram).</summary>
    public bool Enabled { get; init; } = true;

    /// <summary><c>prewarm.hitRateThreshold</c>, default 0.5: an object whose local or remote hit rate over the
    /// merged records exceeds this is loaded. 0 to 1.</summary>
    public double HitRateThreshold { get; init; } = 0.5;

    /// <summary><c>prewarm.maxBytes</c>, default none (the cache's capacity is the only cap): the most bytes one
    /// load pre-warms. At least 1 byte.</summary>
    public long? MaxBytes { get; init; }

    /// <summary><c>prewarm.exclude</c>, default none: globs (the syntax of <c>cache.doNotCache</c>) of objects never
    /// pre-warmed; the doNotCache globs are excluded too.</summary>
    public BlobGlobSet Exclude { get; init; } = BlobGlobSet.Empty;

    /// <summary><c>prewarm.reloadLead</c>, default 1 minute: how long before the predicted next invocation the
    /// platform loads the app again. 0 to 1 hour.</summary>
    public TimeSpan ReloadLead { get; init; } = TimeSpan.FromMinutes(1);

    /// <summary><c>prewarm.histogram</c>: the idle-time histogram's parameters (ATC'20 §4).</summary>
    public PrewarmHistogramPolicy Histogram { get; init; } = PrewarmHistogramPolicy.Default;

    /// <summary><c>prewarm.history.maxAge</c>, default 7 days: unload records older than this are neither read
    /// nor kept. 1 minute to 365 days.</summary>
    public TimeSpan HistoryMaxAge { get; init; } = TimeSpan.FromDays(7);

    /// <summary><c>prewarm.history.maxRecords</c>, default 64: the most unload records kept per app (the newest).
    /// 1 to 10000.</summary>
    public int HistoryMaxRecords { get; init; } = 64;
}

/// <summary><c>prewarm.histogram</c>: the hybrid histogram policy's parameters (Shahrad et al., ATC'20 §4).</summary>
public sealed record PrewarmHistogramPolicy
{
    /// <summary>ATC'20's: 1-minute bins over 4 hours, 5th/99th percentiles, 10 % margin, CV ≥ 2.</summary>
    public static PrewarmHistogramPolicy Default { get; } = new();

    /// <summary><c>prewarm.histogram.binWidth</c>, default 1 minute. 1 s to 1 hour, at most <see cref="Range"/>.</summary>
    public TimeSpan BinWidth { get; init; } = TimeSpan.FromMinutes(1);

    /// <summary><c>prewarm.histogram.range</c>, default 4 hours: idle times beyond it are out of bounds. 1 minute
    /// to 30 days, at most 100000 bins.</summary>
    public TimeSpan Range { get; init; } = TimeSpan.FromHours(4);

    /// <summary><c>prewarm.histogram.headPercentile</c>, default 5: the pre-warm window. 0 to 100, below the tail.</summary>
    public double HeadPercentile { get; init; } = 5;

    /// <summary><c>prewarm.histogram.tailPercentile</c>, default 99: the keep-alive. 0 to 100, above the head.</summary>
    public double TailPercentile { get; init; } = 99;

    /// <summary><c>prewarm.histogram.margin</c>, default 0.1: the head less, the tail plus this fraction. 0 to 1 (excluded).</summary>
    public double Margin { get; init; } = 0.1;

    /// <summary><c>prewarm.histogram.minCv</c>, default 2: the coefficient of variation of the bin counts at or
    /// above which the histogram is representative. 0 to 1000.</summary>
    public double MinCv { get; init; } = 2;

    /// <summary><c>prewarm.histogram.maxOutOfBounds</c>, default 0.5: above this fraction of idle times beyond the
    /// range, the histogram is not used. 0 to 1.</summary>
    public double MaxOutOfBounds { get; init; } = 0.5;

    /// <summary><c>prewarm.histogram.minSamples</c>, default 5: fewer idle times than this and the app gets the
    /// fixed keep-alive. 1 to 1000000.</summary>
    public int MinSamples { get; init; } = 5;
}
