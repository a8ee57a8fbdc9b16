using System.Globalization;
using System.Text.Json;
using System.Text.Json.Nodes;
using FaaST.Common;
using FaaST.Simulator.Simulation;

namespace FaaST.Simulator;

/// <summary>
/// A simulation's result as the other benchmarks write theirs (bench/results/simulation.json: scenario, quick, date,
/// machine, config, metrics) plus the data of Fig. 8 (the CDF of improvement per app at each cache size, and the average
/// by cache size, per load model and consistency preset) and the hit-rate threshold sweep.
/// </summary>
public sealed class SimulationReport(SimulationResult result, SimulationOptions options, string latencySource, string trace, string traceKind,
    long malformed, double accessesPerSecond, double seconds, bool quick)
{
    private static readonly CultureInfo C = CultureInfo.InvariantCulture;

    public static string SizeLabel(long bytes) => bytes >= 1 << 20 && bytes % (1 << 20) == 0 ? $"{bytes >> 20}mb"
        : bytes >= 1 << 10 && bytes % (1 << 10) == 0 ? $"{bytes >> 10}kb" : $"{bytes}b";

    private long Largest => options.CacheSizes.Max();

    private IEnumerable<ConfigSummary> Main => result.Configs.Where(c => c.Config.HitRateThreshold == options.HitRateThreshold);

    private IEnumerable<string> Models => Main.Select(c => c.Config.ModelName).Distinct();

    public void Print(TextWriter o)
    {
        o.WriteLine();
        o.WriteLine(string.Create(C, $"{result.Accesses:N0} accesses of {result.Apps:N0} apps ({result.Objects:N0} objects, {result.Invocations:N0} invocations, {100.0 * result.Reads / Math.Max(1, result.Reads + result.Writes):0.0} % reads) in {seconds:0.0} s: {accessesPerSecond:N0} accesses/s, {Main.Count() + result.Configs.Count(c => c.Config.HitRateThreshold != options.HitRateThreshold)} configurations each"));
        o.WriteLine($"latencies: {latencySource}; version check {result.VersionCheckMs:0.###} ms");
        foreach (var (preset, kind) in new[] { ("storage/sync/storage (default)", 0), ("owner/sync/owner", 1), ("reads only, no version check", 2) })
        {
            o.WriteLine();
            o.WriteLine($"Fig. 8 (right), {preset}: mean improvement over storage per app, % (cache size →)");
            o.Write($"{"model",-12}");
            foreach (var size in options.CacheSizes)
                o.Write($"{SizeLabel(size),8}");
            o.WriteLine();
            foreach (var model in Models)
            {
                o.Write($"{model,-12}");
                foreach (var size in options.CacheSizes)
                {
                    var c = Main.First(x => x.Config.ModelName == model && x.Config.Capacity == size);
                    o.Write(string.Create(C, $"{Mean(c, kind),8:0.0}"));
                }
                o.WriteLine();
            }
        }
        o.WriteLine();
        o.WriteLine($"Fig. 8 (left) at {SizeLabel(Largest)}: apps improved >= 50 % (paper, with prewarm: ~35 %), mean (paper: > 40 %)");
        o.WriteLine($"{"model",-12}{"mean %",9}{">=50 %",9}{"owner mean",12}{"owner >=50",12}{"reads mean",12}{"hit ratio",11}{"cold",9}{"reloads",9}");
        foreach (var c in Main.Where(c => c.Config.Capacity == Largest))
            o.WriteLine(string.Create(C, $"{c.Config.ModelName,-12}{c.MeanImprovementPct,9:0.0}{c.ShareAtLeast(50),9:0.0}{c.MeanOwnerImprovementPct,12:0.0}{c.ShareAtLeast(50, owner: true),12:0.0}{c.MeanReadImprovementPct,12:0.0}{c.HitRatio,11:0.000}{c.ColdStarts,9}{c.Reloads,9}"));
        o.WriteLine();
        o.WriteLine($"prewarm.hitRateThreshold at {SizeLabel(Largest)} (default {options.HitRateThreshold})");
        o.WriteLine($"{"threshold",-10}{"mean %",9}{">=50 %",9}{"prewarmed MB",14}{"wasted MB",11}{"prewarm hits",14}");
        foreach (var c in Sweep())
            o.WriteLine(string.Create(C, $"{c.Config.HitRateThreshold,-10:0.##}{c.MeanImprovementPct,9:0.0}{c.ShareAtLeast(50),9:0.0}{c.PrewarmedBytes / 1e6,14:0.0}{c.WastedPrewarmBytes / 1e6,11:0.0}{c.PrewarmHits,14}"));
    }

    private static double Mean(ConfigSummary c, int kind) => kind switch
    {
        0 => c.MeanImprovementPct,
        1 => c.MeanOwnerImprovementPct,
        _ => c.MeanReadImprovementPct,
    };

    private static double[] Improvements(ConfigSummary c, int kind) => kind switch
    {
        0 => c.ImprovementsPct,
        1 => c.OwnerImprovementsPct,
        _ => c.ReadImprovementsPct,
    };

    private IEnumerable<ConfigSummary> Sweep() => result.Configs
        .Where(c => c.Config.Model == LoadModel.Prewarm && c.Config.Capacity == Largest)
        .OrderBy(c => c.Config.HitRateThreshold);

    public string Write(string dir)
    {
        var metrics = new JsonObject
        {
            ["accesses"] = result.Accesses,
            ["apps"] = result.Apps,
            ["objects"] = result.Objects,
            ["invocations"] = result.Invocations,
            ["reads_pct"] = Round(100.0 * result.Reads / Math.Max(1, result.Reads + result.Writes)),
            ["accesses_per_s"] = Math.Round(accessesPerSecond),
            ["seconds"] = Round(seconds),
            ["version_check_ms"] = Round(result.VersionCheckMs),
        };
        foreach (var c in Main)
        {
            var key = $"{c.Config.ModelName}_{SizeLabel(c.Config.Capacity)}";
            metrics[$"avg_improvement_pct_{key}"] = Round(c.MeanImprovementPct);
            metrics[$"apps_ge50_pct_{key}"] = Round(c.ShareAtLeast(50));
            metrics[$"owner_avg_improvement_pct_{key}"] = Round(c.MeanOwnerImprovementPct);
            metrics[$"owner_apps_ge50_pct_{key}"] = Round(c.ShareAtLeast(50, owner: true));
            metrics[$"reads_avg_improvement_pct_{key}"] = Round(c.MeanReadImprovementPct);
            metrics[$"hit_ratio_{key}"] = Round(c.HitRatio);
            if (c.Config.Model == LoadModel.Prewarm)
            {
                metrics[$"prewarm_hits_{key}"] = c.PrewarmHits;
                metrics[$"prewarmed_mb_{key}"] = Round(c.PrewarmedBytes / 1e6);
                metrics[$"wasted_prewarm_mb_{key}"] = Round(c.WastedPrewarmBytes / 1e6);
            }
        }
        var figure = new JsonObject();
        foreach (var (preset, kind) in new[] { ("storage/sync/storage", 0), ("owner/sync/owner", 1), ("reads only", 2) })
        {
            var cdf = new JsonObject();
            foreach (var size in options.CacheSizes)
            {
                var bySize = new JsonObject();
                foreach (var c in Main.Where(c => c.Config.Capacity == size))
                    bySize[c.Config.ModelName] = Quantiles(Improvements(c, kind));
                cdf[SizeLabel(size)] = bySize;
            }
            var average = new JsonObject();
            foreach (var model in Models)
            {
                var bySize = new JsonObject();
                foreach (var c in Main.Where(c => c.Config.ModelName == model))
                    bySize[SizeLabel(c.Config.Capacity)] = Round(Mean(c, kind));
                average[model] = bySize;
            }
            figure[preset] = new JsonObject { ["cdf"] = cdf, ["average"] = average };
        }
        var sweep = new JsonArray();
        foreach (var c in Sweep())
        {
            sweep.Add(new JsonObject
            {
                ["threshold"] = c.Config.HitRateThreshold,
                ["avg_improvement_pct"] = Round(c.MeanImprovementPct),
                ["apps_ge50_pct"] = Round(c.ShareAtLeast(50)),
                ["owner_avg_improvement_pct"] = Round(c.MeanOwnerImprovementPct),
                ["prewarmed_mb"] = Round(c.PrewarmedBytes / 1e6),
                ["wasted_prewarm_mb"] = Round(c.WastedPrewarmBytes / 1e6),
                ["prewarm_hits"] = c.PrewarmHits,
            });
        }
        var doc = new JsonObject
        {
            ["scenario"] = "simulation",
            ["quick"] = quick,
            ["date"] = DateTime.UtcNow.ToString("yyyy-MM-ddTHH:mm:ssZ", C),
            ["machine"] = MachineDescription.Describe(),
            ["config"] = new JsonObject
            {
                ["trace"] = trace,
                ["trace_kind"] = traceKind,
                ["malformed_lines"] = malformed,
                ["latency"] = latencySource,
                ["cache_sizes"] = new JsonArray(options.CacheSizes.Select(s => (JsonNode)SizeLabel(s)).ToArray()),
                ["unload_periods"] = new JsonArray(options.UnloadPeriods.Select(p => (JsonNode)SimulatedConfig.Span(p)).ToArray()),
                ["hit_rate_threshold"] = options.HitRateThreshold,
                ["reload_lead_s"] = options.ReloadLead.TotalSeconds,
                ["keep_alive_s"] = options.KeepAlive.TotalSeconds,
                ["histogram"] = $"{options.Histogram.BinWidth} bins over {options.Histogram.Range}, p{options.Histogram.HeadPercentile}/p{options.Histogram.TailPercentile}, margin {options.Histogram.Margin}, minCv {options.Histogram.MinCv}",
                ["costs"] = "data-access latency only (app loading not counted); a miss costs the storage GET (streamed into the cachelet); a write costs the storage PUT and the cachelet put (storage/sync/storage) or the cachelet put (owner/sync/owner); a hit costs the local read plus, with storage/sync/storage, a version check of one 1-byte GET",
                ["reads_only"] = "per app that reads: (storage GETs - (local hits + misses)) / storage GETs, no version checks: what the cache itself saves",
                ["not_simulated"] = "scaling (one cachelet per app: every hit is local), remote hits, the memory daemon",
            },
            ["metrics"] = metrics,
            ["figure8"] = figure,
            ["threshold_sweep"] = sweep,
        };
        Directory.CreateDirectory(dir);
        var file = Path.Combine(dir, quick ? "simulation.quick.json" : "simulation.json");
        File.WriteAllText(file, doc.ToJsonString(new JsonSerializerOptions { WriteIndented = true }) + "\n");
        return file;
    }

    /// <summary>The improvement at each percentile 0..100 of apps (101 points of the CDF).</summary>
    private static JsonArray Quantiles(double[] sorted)
    {
        var points = new JsonArray();
        if (sorted.Length == 0)
            return points;
        for (var q = 0; q <= 100; q++)
            points.Add(Round(sorted[(int)Math.Round(q / 100.0 * (sorted.Length - 1))]));
        return points;
    }

    private static double Round(double v) => Math.Round(v, 3);
}
