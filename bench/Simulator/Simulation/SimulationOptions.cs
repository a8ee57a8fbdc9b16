using FaaST.Policy;
using FaaST.Prewarm.Timing;

namespace FaaST.Simulator.Simulation;

/// <summary>How a simulated app is unloaded and loaded again.</summary>
public enum LoadModel
{
    /// <summary>Never unloaded: the cache only loses what LRU evicts (an upper bound a provider would not pay for).</summary>
    NeverUnloaded,
    /// <summary>Unloaded after a fixed idle period; the next invocation is a cold start with an empty cache (Fig. 8's lines
    /// "with pre-warm disabled").</summary>
    FixedUnload,
    /// <summary>The platform's timing (ATC'20's hybrid histogram, <see cref="HybridHistogramPolicy"/>): unloaded a reload
    /// lead after an invocation and loaded again a lead before the predicted next one, with an empty cache.</summary>
    Histogram,
    /// <summary>The same timing, and the reload pre-warms the cache with <see cref="FaaST.Prewarm.Selection.ObjectSelector"/>'s
    /// choice from the app's unload records (Faa$T §3.3): what the platform does by default.</summary>
    Prewarm,
}

/// <summary>One simulated configuration: a load model, a cache size, and (for <see cref="LoadModel.Prewarm"/>) the
/// selection's hit-rate threshold.</summary>
public sealed record SimulatedConfig(LoadModel Model, long Capacity, TimeSpan UnloadAfter, double HitRateThreshold)
{
    /// <summary>The model's name in tables and JSON: <c>never</c>, <c>unload-10m</c>, <c>histogram</c>, <c>prewarm</c>.</summary>
    public string ModelName => Model switch
    {
        LoadModel.NeverUnloaded => "never",
        LoadModel.FixedUnload => "unload-" + Span(UnloadAfter),
        LoadModel.Histogram => "histogram",
        _ => "prewarm",
    };

    internal static string Span(TimeSpan t) => t.TotalHours >= 1 && t.TotalHours % 1 == 0 ? $"{t.TotalHours:0}h"
        : t.TotalMinutes >= 1 && t.TotalMinutes % 1 == 0 ? $"{t.TotalMinutes:0}m" : $"{t.TotalSeconds:0.###}s";
}

/// <summary>
/// What the simulator varies and what it takes from the platform. The timing and selection defaults are the platform's
/// own (faast.json's <c>prewarm</c> and <c>scale.keepAlive</c> defaults, <see cref="PrewarmPolicy"/> and
/// <see cref="ScalePolicy"/>), so the simulation's prewarm is the one users get.
/// </summary>
public sealed record SimulationOptions
{
    /// <summary>Fig. 8 (right) varies the cache from 1 KB to 128 MB ("larger cache sizes showed no further improvement").</summary>
    public IReadOnlyList<long> CacheSizes { get; init; } = [1L << 10, 16L << 10, 256L << 10, 1L << 20, 4L << 20, 16L << 20, 64L << 20, 128L << 20];

    /// <summary>Fixed unload periods, each simulated without prewarm (Fig. 8's "times").</summary>
    public IReadOnlyList<TimeSpan> UnloadPeriods { get; init; } = [TimeSpan.FromMinutes(1), TimeSpan.FromMinutes(10), TimeSpan.FromHours(1)];

    /// <summary>Thresholds simulated besides <see cref="HitRateThreshold"/> at the largest cache size, to justify the default.</summary>
    public IReadOnlyList<double> ThresholdSweep { get; init; } = [0.0, 0.25, 0.75, 0.9, 1.0];

    public double HitRateThreshold { get; init; } = new PrewarmPolicy().HitRateThreshold;

    public TimeSpan ReloadLead { get; init; } = new PrewarmPolicy().ReloadLead;

    /// <summary>The keep-alive while the histogram predicts nothing (the platform's <c>scale.keepAlive</c>).</summary>
    public TimeSpan KeepAlive { get; init; } = new ScalePolicy().KeepAlive;

    public HistogramOptions Histogram { get; init; } = new PrewarmPolicy().HistogramOptions();

    public TimeSpan HistoryMaxAge { get; init; } = new PrewarmPolicy().HistoryMaxAge;

    public int HistoryMaxRecords { get; init; } = new PrewarmPolicy().HistoryMaxRecords;

    public SimulationOptions Validate()
    {
        if (CacheSizes.Count == 0 || CacheSizes.Any(s => s <= 0))
            throw new ArgumentException($"CacheSizes: need one or more positive sizes (got {string.Join(", ", CacheSizes)})");
        if (UnloadPeriods.Any(p => p <= TimeSpan.Zero))
            throw new ArgumentException($"UnloadPeriods: each must be positive (got {string.Join(", ", UnloadPeriods)})");
        if (ThresholdSweep.Append(HitRateThreshold).Any(t => t is < 0 or > 1 || double.IsNaN(t)))
            throw new ArgumentException("HitRateThreshold and ThresholdSweep: each must be within 0..1");
        if (ReloadLead < TimeSpan.Zero || KeepAlive <= TimeSpan.Zero)
            throw new ArgumentException($"ReloadLead ({ReloadLead}) must not be negative and KeepAlive ({KeepAlive}) must be positive");
        Histogram.Validate();
        return this;
    }

    /// <summary>Every configuration simulated: each size under each model, and the threshold sweep at the largest size.</summary>
    public IReadOnlyList<SimulatedConfig> Configs()
    {
        var list = new List<SimulatedConfig>();
        foreach (var size in CacheSizes)
        {
            list.Add(new SimulatedConfig(LoadModel.NeverUnloaded, size, TimeSpan.Zero, HitRateThreshold));
            foreach (var period in UnloadPeriods)
                list.Add(new SimulatedConfig(LoadModel.FixedUnload, size, period, HitRateThreshold));
            list.Add(new SimulatedConfig(LoadModel.Histogram, size, TimeSpan.Zero, HitRateThreshold));
            list.Add(new SimulatedConfig(LoadModel.Prewarm, size, TimeSpan.Zero, HitRateThreshold));
        }
        var largest = CacheSizes.Max();
        foreach (var t in ThresholdSweep.Where(t => t != HitRateThreshold).Distinct())
            list.Add(new SimulatedConfig(LoadModel.Prewarm, largest, TimeSpan.Zero, t));
        return list;
    }
}
