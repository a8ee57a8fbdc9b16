namespace FaaST.Policy;

/// <summary>
/// <c>faast.json</c>'s <c>prewarm</c> section (Faa$T §3.3): whether the platform loads the app ahead of its predicted
/// invocations and the instances fill their caches with the objects the app's unload records select, how the reload is
/// timed (the hybrid histogram policy of ATC'20 §4.2, its published values as defaults), and which objects may be
/// loaded. Every key left out is at its default; <see cref="Default"/> is the policy of an app without the section.
/// </summary>
/// <remarks>
/// This record is the one place the defaults live; <c>schemas/faast.schema.json</c> repeats them and a test keeps the
/// two in agreement. The parser (<see cref="CachePolicyFile"/>) checks every range and the rules between keys
/// (<see cref="HeadPercentile"/> &lt; <see cref="TailPercentile"/>, <see cref="HistogramRange"/> at least one
/// <see cref="HistogramBinWidth"/> and at most 100,000 of them).
/// </remarks>
public sealed record PrewarmPolicy
{
    /// <summary>The most bins a histogram may have (range ÷ bin width).</summary>
    public const int MaxBins = 100_000;

    /// <summary>The policy of an app without a <c>prewarm</c> section.</summary>
    public static PrewarmPolicy Default { get; } = new();

    /// <summary><c>prewarm.enabled</c>, default true. False: no reload ahead of predicted invocations (the fixed
    /// <c>scale.keepAlive</c> applies), no unload records, nothing pre-warmed.</summary>
    public bool Enabled { get; init; } = true;

    /// <summary><c>prewarm.hitRateThreshold</c>, default 0.5: an object is pre-warmed when its local or its remote hit rate
    /// (hits ÷ reads over the merged unload records) is above this (Faa$T §3.3's first rule; the second, an object read
    /// more than once across the records, always applies). 0 to 1.</summary>
    public double HitRateThreshold { get; init; } = 0.5;

    /// <summary><c>prewarm.maxBytes</c>, default none: the most bytes one instance pre-warms (the cache's own capacity
    /// bounds it anyway). 0 pre-warms nothing while the reload is still timed.</summary>
    public long? MaxBytes { get; init; }

    /// <summary><c>prewarm.exclude</c>, default empty: globs over <c>container/blob</c> (the syntax of
    /// <c>cache.doNotCache</c>, whose globs are never pre-warmed either) of objects never pre-warmed.</summary>
    public BlobGlobSet Exclude { get; init; } = BlobGlobSet.Empty;

    /// <summary><c>prewarm.reloadLead</c>, default 1 minute: the app is loaded this long before its predicted invocation
    /// (Faa$T §3.3: "just (e.g., 1 minute) before"), enough to start its instances and pre-warm them. 0 to 1 day.</summary>
    public TimeSpan ReloadLead { get; init; } = TimeSpan.FromMinutes(1);

    /// <summary><c>prewarm.histogram.binWidth</c>, default 1 minute (ATC'20). 100 ms to 1 day.</summary>
    public TimeSpan HistogramBinWidth { get; init; } = TimeSpan.FromMinutes(1);

    /// <summary><c>prewarm.histogram.range</c>, default 4 hours (ATC'20): longer idle times are out of bounds. 1 s to 365 days.</summary>
    public TimeSpan HistogramRange { get; init; } = TimeSpan.FromHours(4);

    /// <summary><c>prewarm.histogram.headPercentile</c>, default 5: sets the pre-warm window. 0 to 100, below the tail.</summary>
    public double HeadPercentile { get; init; } = 5;

    /// <summary><c>prewarm.histogram.tailPercentile</c>, default 99: sets the keep-alive window's end. Above 0, at most 100.</summary>
    public double TailPercentile { get; init; } = 99;

    /// <summary><c>prewarm.histogram.margin</c>, default 0.1: taken off the head, added to the tail. 0 to below 1.</summary>
    public double Margin { get; init; } = 0.1;

    /// <summary><c>prewarm.histogram.minCv</c>, default 2: the histogram is representative only when its bin counts' coefficient
    /// of variation is at least this. 0 to 1000.</summary>
    public double MinCv { get; init; } = 2;

    /// <summary><c>prewarm.histogram.maxOutOfBounds</c>, default 0.5: above this share of idle times beyond the range, the next
    /// one is forecast instead. Above 0, at most 1.</summary>
    public double MaxOutOfBounds { get; init; } = 0.5;

    /// <summary><c>prewarm.histogram.minSamples</c>, default 5: fewer idle times than this and nothing is predicted. 1 to 1,000,000.</summary>
    public int MinSamples { get; init; } = 5;

    /// <summary><c>prewarm.history.maxAge</c>, default 7 days: unload records older than this are dropped. 1 s to 365 days.</summary>
    public TimeSpan HistoryMaxAge { get; init; } = TimeSpan.FromDays(7);

    /// <summary><c>prewarm.history.maxRecords</c>, default 64: the most unload records kept per app (the newest). 1 to 10,000.</summary>
    public int HistoryMaxRecords { get; init; } = 64;
}
