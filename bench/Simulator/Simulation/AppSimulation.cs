using FaaST.Prewarm.Records;
using FaaST.Prewarm.Selection;
using FaaST.Prewarm.Timing;

namespace FaaST.Simulator.Simulation;

/// <summary>
/// One app of the trace under every configuration at once. Objects get dense ids and a version that changes with their
/// ETag. An invocation starts when the trace's invocation id changes after a gap: the gap is an idle time (ATC'20), and
/// before it is learnt each configuration applies what its load model did during the gap (unload, reload, pre-warm).
/// Costs are data-access latencies only, as in Faa$T §6.2: loading the app itself is not counted in either column.
/// </summary>
internal sealed class AppSimulation
{
    private readonly SimulationOptions _options;
    private readonly ConfigState[] _configs;
    private readonly Dictionary<string, int> _ids = new(StringComparer.Ordinal);
    private readonly List<string> _names = [];
    private readonly List<string> _etags = [];
    private readonly List<int> _versions = [];
    private readonly List<long> _sizes = [];
    private readonly IdleTimeHistogram _histogram;
    private readonly List<int> _scratch = [];
    private LoadWindows _windows;
    private bool _windowsStale;
    // A gap this short changes nothing under any load model (shorter than the reload lead, a histogram bin, whose
    // window ends at least 1.1 bins after an invocation, and the keep-alive): the policy is not even asked. Deciding
    // costs ~15 µs (the bins, two percentiles, the CV, the reason text) and most gaps of busy apps are this short.
    private readonly TimeSpan _quiet;
    private string _invocation = "";
    private long _lastMs = long.MinValue;

    public AppSimulation(string app, SimulationOptions options, IReadOnlyList<SimulatedConfig> configs)
    {
        App = app;
        _options = options;
        _configs = configs.Select(c => new ConfigState(c, c.Model == LoadModel.Prewarm)).ToArray();
        _histogram = new IdleTimeHistogram(options.Histogram);
        _windows = HybridHistogramPolicy.Decide(_histogram, options.Histogram);
        _quiet = TimeSpan.FromTicks(Math.Min(options.ReloadLead.Ticks, Math.Min(options.Histogram.BinWidth.Ticks, options.KeepAlive.Ticks)));
    }

    public string App { get; }

    public long Accesses { get; private set; }
    public long Invocations { get; private set; }
    public long Reads { get; private set; }
    public long Writes { get; private set; }

    /// <summary>Storage only: every read a GET, every write a PUT.</summary>
    public double BaselineMs { get; private set; }

    /// <summary>Storage only, the reads alone.</summary>
    public double BaselineReadMs { get; private set; }

    // Writes cost the same under every configuration: a PUT to storage (storage/sync/storage waits for it) and a put into
    // the cachelet (the written object is cached as the output it is).
    private double _writeStorageMs, _writeCacheMs;

    internal IReadOnlyList<ConfigState> Configs => _configs;

    public int Objects => _names.Count;

    /// <summary>One access of the trace (non-decreasing time per app; an earlier one is taken as simultaneous).</summary>
    public void Access(long timestampMs, string invocation, string blob, string etag, long bytes, bool read, bool write, in AccessCosts costs)
    {
        if (_lastMs == long.MinValue)
        {
            _lastMs = timestampMs;
            _invocation = invocation;
            Invocations = 1;
        }
        else if (!string.Equals(invocation, _invocation, StringComparison.Ordinal))
        {
            _invocation = invocation;
            Invocations++;
            if (timestampMs > _lastMs)
            {
                var gap = TimeSpan.FromMilliseconds(timestampMs - _lastMs);
                if (_windowsStale && gap > _quiet)
                {
                    // The windows after the previous invocation: what the histogram held then (nothing since).
                    _windows = HybridHistogramPolicy.Decide(_histogram, _options.Histogram);
                    _windowsStale = false;
                }
                foreach (var c in _configs)
                    Gap(c, _lastMs, gap);
                _histogram.Record(gap);
                _windowsStale = true;
            }
        }
        if (timestampMs > _lastMs)
            _lastMs = timestampMs;
        Accesses++;

        var id = Id(blob, etag, bytes);
        if (read)
        {
            Reads++;
            BaselineMs += costs.StorageRead;
            BaselineReadMs += costs.StorageRead;
            var version = _versions[id];
            foreach (var c in _configs)
                ReadIn(c, id, version, bytes, costs);
        }
        if (write)
        {
            Writes++;
            // A write makes a new version whatever ETag the trace gives it: the cache must not serve the old one.
            var version = _versions[id] = _versions[id] + 1;
            BaselineMs += costs.StorageWrite;
            _writeStorageMs += costs.StorageWrite;
            _writeCacheMs += costs.CacheWrite;
            foreach (var c in _configs)
            {
                c.Cache.Insert(id, bytes, version);
                c.Prewarmed?.Remove(id);
                if (c.Since is { } since)
                {
                    ref var n = ref System.Runtime.InteropServices.CollectionsMarshal.GetValueRefOrAddDefault(since, id, out _);
                    n.Produced++;
                }
            }
        }
    }

    /// <summary>
    /// The app's data-access time under <paramref name="c"/>: with storage/sync/storage (the default: every hit checks the
    /// version with storage, a round trip of <paramref name="versionCheckMs"/>; writes wait for storage) and with
    /// owner/sync/owner (one cachelet owns everything here, so hits need no round trip and writes wait for the cachelet).
    /// </summary>
    public (double Default, double Owner) Totals(ConfigState c, double versionCheckMs) =>
        (c.LocalHitMs + c.Hits * versionCheckMs + c.MissMs + _writeStorageMs + _writeCacheMs,
         c.LocalHitMs + c.MissMs + _writeCacheMs);

    /// <summary>The end of the trace: a prewarm configuration's last pre-warmed objects never read are wasted.</summary>
    public void Finish()
    {
        foreach (var c in _configs)
        {
            if (c.Prewarmed is { } p)
            {
                foreach (var id in p)
                    c.WastedBytes += _sizes[id];
                p.Clear();
            }
        }
    }

    private int Id(string blob, string etag, long bytes)
    {
        ref var id = ref System.Runtime.InteropServices.CollectionsMarshal.GetValueRefOrAddDefault(_ids, blob, out var exists);
        if (!exists)
        {
            id = _names.Count;
            _names.Add(blob);
            _etags.Add(etag);
            _versions.Add(0);
            _sizes.Add(bytes);
            return id;
        }
        if (!string.Equals(_etags[id], etag, StringComparison.Ordinal))
        {
            // Changed in storage (by this app's write, already counted, or by someone else): a new version.
            _etags[id] = etag;
            _versions[id]++;
        }
        _sizes[id] = bytes;
        return id;
    }

    private void ReadIn(ConfigState c, int id, int version, long bytes, in AccessCosts costs)
    {
        bool hit;
        if (c.Cache.TryHit(id, version))
        {
            hit = true;
            c.Hits++;
            c.LocalHitMs += costs.LocalHitRead;
            if (c.Prewarmed is { } p && p.Remove(id))
                c.PrewarmHits++;
        }
        else
        {
            hit = false;
            c.Misses++;
            // The miss streams the object into the cachelet as it arrives: the GET is the cost.
            c.MissMs += costs.StorageRead;
            c.Prewarmed?.Remove(id);
            c.Cache.Insert(id, bytes, version);
        }
        if (c.Since is { } since)
        {
            ref var n = ref System.Runtime.InteropServices.CollectionsMarshal.GetValueRefOrAddDefault(since, id, out _);
            if (hit) n.Hits++; else n.Misses++;
        }
    }

    /// <summary>What <paramref name="c"/>'s load model did between the access at <paramref name="lastMs"/> and the next
    /// invocation, <paramref name="gap"/> later.</summary>
    private void Gap(ConfigState c, long lastMs, TimeSpan gap)
    {
        if (gap <= _quiet)
            return;
        switch (c.Config.Model)
        {
            case LoadModel.NeverUnloaded:
                return;
            case LoadModel.FixedUnload:
                if (gap > c.Config.UnloadAfter)
                    Cold(c, lastMs + (long)c.Config.UnloadAfter.TotalMilliseconds);
                return;
        }
        // The platform's schedule (src/ScaleController/Prewarm/AppLoadSchedule.UnloadAt and ReloadAt).
        var lead = _options.ReloadLead;
        if (_windows.Mode == LoadMode.FixedKeepAlive)
        {
            if (gap > _options.KeepAlive)
                Cold(c, lastMs + (long)_options.KeepAlive.TotalMilliseconds);
            return;
        }
        var end = _windows.PrewarmWindow + _windows.KeepAlive;
        if (_windows.PrewarmWindow <= 2 * lead)
        {
            if (gap > end)
                Cold(c, lastMs + (long)end.TotalMilliseconds);
            return;
        }
        if (gap <= lead)
            return;
        var reloadAt = _windows.PrewarmWindow - lead;
        if (gap < reloadAt)
        {
            // Came before the predicted window: unloaded a lead after the last invocation, and a cold start now.
            Cold(c, lastMs + (long)lead.TotalMilliseconds);
            return;
        }
        Unload(c, lastMs + (long)lead.TotalMilliseconds);
        c.Reloads++;
        if (c.Config.Model == LoadModel.Prewarm)
            Prewarm(c, lastMs + (long)reloadAt.TotalMilliseconds);
        if (gap > end)
            Cold(c, lastMs + (long)end.TotalMilliseconds); // the window closed with no invocation: unloaded again
    }

    private void Cold(ConfigState c, long unloadedAtMs)
    {
        Unload(c, unloadedAtMs);
        c.ColdStarts++;
    }

    /// <summary>The app leaves memory: a prewarm configuration writes its unload record (what the cache held, with the
    /// accesses since it was loaded) and counts pre-warmed bytes never read as wasted.</summary>
    private void Unload(ConfigState c, long atMs)
    {
        if (c.History is { } history)
        {
            _scratch.Clear();
            c.Cache.CopyIds(_scratch);
            var objects = new List<ObjectRecord>(_scratch.Count);
            foreach (var id in _scratch)
            {
                c.Since!.TryGetValue(id, out var n);
                objects.Add(new ObjectRecord("", "", _names[id], _sizes[id], _etags[id], n.Hits, 0, n.Misses, 0, n.Produced, TimeSpan.Zero));
            }
            var at = DateTimeOffset.FromUnixTimeMilliseconds(atMs);
            history.Add(new UnloadRecord(App, "sim", at, objects));
            // Trimmed like PrewarmHistory: by age, then the oldest beyond the count.
            history.RemoveAll(r => at - r.UnloadedAt > _options.HistoryMaxAge);
            if (history.Count > _options.HistoryMaxRecords)
                history.RemoveRange(0, history.Count - _options.HistoryMaxRecords);
            c.Since!.Clear();
            foreach (var id in c.Prewarmed!)
                c.WastedBytes += _sizes[id];
            c.Prewarmed.Clear();
        }
        c.Cache.Clear();
    }

    /// <summary>The platform's reload ahead of a predicted invocation: the cachelet loads the selected objects at their
    /// current versions (the host checks each with storage first), most accessed first, as many as fit.</summary>
    private void Prewarm(ConfigState c, long atMs)
    {
        var history = c.History!;
        if (history.Count == 0)
            return;
        var now = DateTimeOffset.FromUnixTimeMilliseconds(atMs);
        var window = ObjectSelector.WindowFor(history, _options.HistoryMaxAge);
        var selected = ObjectSelector.Select(history, now, window, new SelectionRules(c.Config.HitRateThreshold, c.Config.Capacity));
        // Inserted least accessed first, so the most accessed end up the most recently used.
        for (var i = selected.Count - 1; i >= 0; i--)
        {
            if (!_ids.TryGetValue(selected[i].Blob, out var id))
                continue;
            c.Cache.Insert(id, _sizes[id], _versions[id]);
            if (c.Cache.Contains(id) && c.Prewarmed!.Add(id))
            {
                c.PrewarmedObjects++;
                c.PrewarmedBytes += _sizes[id];
            }
        }
    }
}

/// <summary>The latencies of one access's object size, looked up once and shared by every configuration.</summary>
internal readonly record struct AccessCosts(double StorageRead, double StorageWrite, double LocalHitRead, double CacheWrite);
