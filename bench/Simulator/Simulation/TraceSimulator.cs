using FaaST.Simulator.Latency;
using FaaST.Simulator.Trace;

namespace FaaST.Simulator.Simulation;

/// <summary>
/// Replays a trace, one access at a time (nothing but the apps' state is kept: a trace of millions of rows streams
/// through), under every configuration of <see cref="SimulationOptions.Configs"/> at once, and against storage only.
/// </summary>
public sealed class TraceSimulator
{
    private readonly SimulationOptions _options;
    private readonly LatencyTable _latency;
    private readonly IReadOnlyList<SimulatedConfig> _configs;
    private readonly Dictionary<string, AppSimulation> _apps = new(StringComparer.Ordinal);
    private AppSimulation? _last;
    private long _lastBytes = -1;
    private AccessCosts _lastCosts;

    public TraceSimulator(SimulationOptions options, LatencyTable latency)
    {
        ArgumentNullException.ThrowIfNull(latency);
        _options = (options ?? throw new ArgumentNullException(nameof(options))).Validate();
        _latency = latency;
        _configs = options.Configs();
    }

    public IReadOnlyList<SimulatedConfig> Configs => _configs;

    public long Accesses { get; private set; }

    public void Add(in TraceAccess access)
    {
        var app = _last is not null && ReferenceEquals(_last.App, access.App) ? _last : App(access.App);
        _last = app;
        if (access.Bytes != _lastBytes)
        {
            _lastBytes = access.Bytes;
            _lastCosts = new AccessCosts(_latency.Ms(LatencyKind.StorageRead, access.Bytes), _latency.Ms(LatencyKind.StorageWrite, access.Bytes),
                _latency.Ms(LatencyKind.LocalHitRead, access.Bytes), _latency.Ms(LatencyKind.CacheWrite, access.Bytes));
        }
        app.Access(access.TimestampMs, access.Invocation, access.Blob, access.ETag, access.Bytes, access.Read, access.Write, _lastCosts);
        Accesses++;
    }

    /// <summary>Ends the replay and sums it up per configuration.</summary>
    public SimulationResult Finish()
    {
        foreach (var app in _apps.Values)
            app.Finish();
        // A version check is one round trip with no payload: a 1-byte GET's latency.
        var versionCheckMs = _latency.Ms(LatencyKind.StorageRead, 1);
        var apps = _apps.Values.Where(a => a.BaselineMs > 0).OrderBy(a => a.App, StringComparer.Ordinal).ToArray();
        var summaries = new List<ConfigSummary>(_configs.Count);
        for (var i = 0; i < _configs.Count; i++)
        {
            var improvements = new double[apps.Length];
            var owner = new double[apps.Length];
            var reads = new List<double>(apps.Length);
            long hits = 0, misses = 0, cold = 0, reloads = 0, pwObjects = 0, pwBytes = 0, pwHits = 0, wasted = 0;
            double total = 0, baseline = 0;
            for (var a = 0; a < apps.Length; a++)
            {
                var c = apps[a].Configs[i];
                var (d, o) = apps[a].Totals(c, versionCheckMs);
                improvements[a] = (apps[a].BaselineMs - d) / apps[a].BaselineMs * 100;
                owner[a] = (apps[a].BaselineMs - o) / apps[a].BaselineMs * 100;
                if (apps[a].BaselineReadMs > 0)
                    reads.Add((apps[a].BaselineReadMs - c.LocalHitMs - c.MissMs) / apps[a].BaselineReadMs * 100);
                total += d;
                baseline += apps[a].BaselineMs;
                hits += c.Hits;
                misses += c.Misses;
                cold += c.ColdStarts;
                reloads += c.Reloads;
                pwObjects += c.PrewarmedObjects;
                pwBytes += c.PrewarmedBytes;
                pwHits += c.PrewarmHits;
                wasted += c.WastedBytes;
            }
            Array.Sort(improvements);
            Array.Sort(owner);
            var readsSorted = reads.ToArray();
            Array.Sort(readsSorted);
            summaries.Add(new ConfigSummary(_configs[i], improvements, owner, readsSorted, baseline == 0 ? 0 : (baseline - total) / baseline * 100,
                hits, misses, cold, reloads, pwObjects, pwBytes, pwHits, wasted));
        }
        return new SimulationResult(apps.Length, Accesses, apps.Sum(a => (long)a.Objects), apps.Sum(a => a.Invocations),
            apps.Sum(a => a.Reads), apps.Sum(a => a.Writes), versionCheckMs, summaries);
    }

    private AppSimulation App(string name)
    {
        if (!_apps.TryGetValue(name, out var app))
            _apps[name] = app = new AppSimulation(name, _options, _configs);
        return app;
    }
}

/// <summary>The replay summed up: per configuration the apps' improvements over storage only, sorted (a CDF).</summary>
public sealed record SimulationResult(int Apps, long Accesses, long Objects, long Invocations, long Reads, long Writes, double VersionCheckMs,
    IReadOnlyList<ConfigSummary> Configs)
{
    public ConfigSummary Find(LoadModel model, long capacity, TimeSpan? unloadAfter = null, double? threshold = null) =>
        Configs.First(c => c.Config.Model == model && c.Config.Capacity == capacity
            && (unloadAfter is null || c.Config.UnloadAfter == unloadAfter) && (threshold is null || c.Config.HitRateThreshold == threshold));
}

/// <summary>
/// One configuration over all apps. <see cref="ImprovementsPct"/>: per app, sorted, how much less time its data accesses
/// took than with storage only, in percent (storage/sync/storage; <see cref="OwnerImprovementsPct"/> with
/// owner/sync/owner); <see cref="ReadImprovementsPct"/> the reads alone without version checks (the cache's own worth,
/// apps that read); <see cref="AggregateImprovementPct"/> the same over all apps' time together.
/// </summary>
public sealed record ConfigSummary(SimulatedConfig Config, double[] ImprovementsPct, double[] OwnerImprovementsPct, double[] ReadImprovementsPct,
    double AggregateImprovementPct,
    long Hits, long Misses, long ColdStarts, long Reloads, long PrewarmedObjects, long PrewarmedBytes, long PrewarmHits, long WastedPrewarmBytes)
{
    public double MeanImprovementPct => ImprovementsPct.Length == 0 ? 0 : ImprovementsPct.Average();

    public double MeanOwnerImprovementPct => OwnerImprovementsPct.Length == 0 ? 0 : OwnerImprovementsPct.Average();

    public double MeanReadImprovementPct => ReadImprovementsPct.Length == 0 ? 0 : ReadImprovementsPct.Average();

    /// <summary>The share of apps, in percent, whose improvement is at least <paramref name="pct"/>.</summary>
    public double ShareAtLeast(double pct, bool owner = false)
    {
        var sorted = owner ? OwnerImprovementsPct : ImprovementsPct;
        if (sorted.Length == 0)
            return 0;
        var i = Array.BinarySearch(sorted, pct);
        if (i < 0)
            i = ~i;
        else
            while (i > 0 && sorted[i - 1] >= pct) i--;
        return (sorted.Length - i) * 100.0 / sorted.Length;
    }

    public double HitRatio => Hits + Misses == 0 ? 0 : (double)Hits / (Hits + Misses);
}
