using System.Diagnostics.Metrics;
using FaaST.Cachelet.Telemetry;

namespace FaaST.Runtime.Prewarm;

/// <summary>
/// What prewarm did in this instance (issue 21): objects and bytes pre-warmed, prewarm hits (pre-warmed objects read
/// at least once: their first access was served from the cache) and wasted bytes (pre-warmed, never read before
/// unload). On the cachelet's meter, tagged with the app like it, so the host's exporter takes them with no change
/// to the telemetry set-up; plain totals beside them for tests and /admin/prewarm.
/// </summary>
internal sealed class PrewarmMetrics : IDisposable
{
    private readonly Meter _meter;
    private long _objects;
    private long _bytes;
    private long _skipped;

    public PrewarmMetrics(string app, Func<(long Hits, long WastedBytes)> usage)
    {
        _meter = new Meter(CacheletMetrics.Name, "1.0", [new KeyValuePair<string, object?>("app", app)]);
        _meter.CreateObservableCounter("faast.prewarm.objects", () => Objects, "{object}", "Objects pre-warmed into this instance's cache");
        _meter.CreateObservableCounter("faast.prewarm.bytes", () => Bytes, "By", "Bytes pre-warmed into this instance's cache");
        _meter.CreateObservableCounter("faast.prewarm.hits", () => usage().Hits, "{object}",
            "Pre-warmed objects read since (their first access was a local hit instead of a miss)");
        _meter.CreateObservableGauge("faast.prewarm.wasted.bytes", () => usage().WastedBytes, "By",
            "Bytes pre-warmed and not read (yet; at unload, wasted)");
    }

    public long Objects => Volatile.Read(ref _objects);

    public long Bytes => Volatile.Read(ref _bytes);

    /// <summary>Selected objects not loaded: another instance owns them, deleted, grown past the budget, or failed.</summary>
    public long Skipped => Volatile.Read(ref _skipped);

    public void Loaded(long bytes)
    {
        Interlocked.Increment(ref _objects);
        Interlocked.Add(ref _bytes, bytes);
    }

    public void Skip() => Interlocked.Increment(ref _skipped);

    public void Dispose() => _meter.Dispose();
}
