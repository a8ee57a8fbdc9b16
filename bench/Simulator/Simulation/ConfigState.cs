using FaaST.Prewarm.Records;

namespace FaaST.Simulator.Simulation;

/// <summary>One app under one configuration: its cache, what its accesses cost, and for prewarm its unload records.</summary>
internal sealed class ConfigState(SimulatedConfig config, bool records)
{
    public SimulatedConfig Config { get; } = config;
    public LruCache Cache { get; } = new(config.Capacity);

    // Costs in ms, split so both consistency presets come out of one pass (see AppSimulation.Totals).
    public double LocalHitMs, MissMs;
    public long Hits, Misses;

    // Loads: a cold start is an invocation that found the app unloaded (empty cache); a reload is the platform's own.
    public long ColdStarts, Reloads;

    // Prewarm only (null otherwise): per object since the last load, the records, and what was pre-warmed and not yet read.
    public readonly Dictionary<int, Counts>? Since = records ? [] : null;
    public readonly List<UnloadRecord>? History = records ? [] : null;
    public readonly HashSet<int>? Prewarmed = records ? [] : null;
    public long PrewarmedObjects, PrewarmedBytes, PrewarmHits, WastedBytes;

    public struct Counts
    {
        public long Hits, Misses, Produced;
    }
}
