namespace FaaST.Simulator.Trace;

/// <summary>What <see cref="SyntheticTrace"/> generates.</summary>
/// <param name="Apps">How many applications (the paper's log: 855).</param>
/// <param name="Accesses">How many rows: the trace stops at exactly this many.</param>
/// <param name="Duration">The span the trace is built to cover (default 1 day): the frequent apps' rates are set so
/// that <paramref name="Accesses"/> rows take about this long. That needs about the paper's density, 3,700 rows per
/// app per day (44.3 M accesses over 855 apps and 14 days); with fewer, 20 % of the apps invoked at least once a minute
/// (§2.1) fill the rows sooner and the trace covers a shorter span (the defaults' 500 rows per app per day: about
/// 8 hours). The rates, not the span, carry the paper's statistics.</param>
/// <param name="Seed">The same options and seed give the same trace, row for row.</param>
public sealed record SyntheticTraceOptions(int Apps = 2000, long Accesses = 1_000_000, TimeSpan? Duration = null, int Seed = 1)
{
    /// <summary>The span used when <see cref="Duration"/> is not given.</summary>
    public static TimeSpan DefaultDuration { get; } = TimeSpan.FromDays(1);

    /// <summary>The shortest span: the rarely invoked apps' rates range from once per span up to once per 5 minutes.</summary>
    public static TimeSpan MinDuration { get; } = TimeSpan.FromMinutes(10);

    /// <summary>The longest span (timestamps stay well inside a long, and rates above once per 100 years mean nothing).</summary>
    public static TimeSpan MaxDuration { get; } = TimeSpan.FromDays(3650);

    /// <summary><see cref="Duration"/>, or <see cref="DefaultDuration"/>.</summary>
    public TimeSpan Span => Duration ?? DefaultDuration;

    /// <summary>Checks the values.</summary>
    /// <exception cref="ArgumentException">A value out of its range, named.</exception>
    public SyntheticTraceOptions Validate()
    {
        if (Apps < 1 || Apps > 10_000_000)
            throw new ArgumentException($"SyntheticTraceOptions.Apps must be between 1 and 10000000, not {Apps}");
        if (Accesses < 1)
            throw new ArgumentException($"SyntheticTraceOptions.Accesses must be at least 1, not {Accesses}");
        if (Span < MinDuration || Span > MaxDuration)
            throw new ArgumentException($"SyntheticTraceOptions.Duration must be between {MinDuration} and {MaxDuration}, not {Span}");
        return this;
    }
}
