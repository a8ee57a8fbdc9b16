using System.Diagnostics.Metrics;
using FaaST.Cachelet.Telemetry;

namespace FaaST.Runtime.Flash;

/// <summary>
/// What the flash tier did for this instance (issue 22): reads it answered (hits), reads it had nothing current for
/// (misses; stale copies counted apart), reads that fell back to storage because the tier failed or was slow, reads that
/// skipped it while it was down, and demotions (objects and bytes written to it, those skipped by size, those that
/// failed). On the cachelet's meter, tagged with the app like it (the prewarm component's pattern), so the host's
/// exporter takes them with no change to the telemetry set-up; plain totals beside them for tests and /admin/flash. The
/// read path only increments fields: no allocation per read.
/// </summary>
internal sealed class FlashMetrics : IDisposable
{
    private readonly Meter _meter;
    private long _hits, _hitBytes, _hitMicros, _misses, _stale, _fallbacks, _skipped;
    private long _demotions, _demotionBytes, _demotionsSkipped, _demotionsHeld, _demotionFailures;

    public FlashMetrics(string app)
    {
        _meter = new Meter(CacheletMetrics.Name, "1.0", [new KeyValuePair<string, object?>("app", app)]);
        _meter.CreateObservableCounter("faast.flash.hits", () => Hits, "{read}", "Misses of the cache served by the flash tier (current version)");
        _meter.CreateObservableCounter("faast.flash.hit.bytes", () => HitBytes, "By", "Bytes the flash tier served");
        _meter.CreateObservableCounter("faast.flash.misses", () => Misses, "{read}", "Reads the flash tier held no copy of");
        _meter.CreateObservableCounter("faast.flash.stale", () => Stale, "{read}", "Flash copies not served: storage holds another version");
        _meter.CreateObservableCounter("faast.flash.fallbacks", () => Fallbacks, "{read}", "Reads sent to storage because the flash tier failed or timed out");
        _meter.CreateObservableCounter("faast.flash.skipped", () => SkippedReads, "{read}", "Reads that skipped the flash tier while it was down");
        _meter.CreateObservableCounter("faast.flash.demotions", () => Demotions, "{object}", "Evicted objects written to the flash tier");
        _meter.CreateObservableCounter("faast.flash.demotion.bytes", () => DemotionBytes, "By", "Bytes of evicted objects written to the flash tier");
        _meter.CreateObservableCounter("faast.flash.demotions.skipped", () => DemotionsSkipped, "{object}",
            "Evicted objects not demoted: under flash.minDemoteBytes, over the tier's largest value, expired, or the tier down");
        _meter.CreateObservableCounter("faast.flash.demotions.held", () => DemotionsHeld, "{object}",
            "Evicted objects not demoted because the tier already holds that version (it served or stored it)");
        _meter.CreateObservableCounter("faast.flash.demotion.failures", () => DemotionFailures, "{object}", "Demotions the tier refused or failed");
    }

    public long Hits => Volatile.Read(ref _hits);
    public long HitBytes => Volatile.Read(ref _hitBytes);
    /// <summary>Total time of the hits (from asking the tier to the bytes in the cache), microseconds.</summary>
    public long HitMicros => Volatile.Read(ref _hitMicros);
    public long Misses => Volatile.Read(ref _misses);
    public long Stale => Volatile.Read(ref _stale);
    public long Fallbacks => Volatile.Read(ref _fallbacks);
    public long SkippedReads => Volatile.Read(ref _skipped);
    public long Demotions => Volatile.Read(ref _demotions);
    public long DemotionBytes => Volatile.Read(ref _demotionBytes);
    public long DemotionsSkipped => Volatile.Read(ref _demotionsSkipped);
    public long DemotionsHeld => Volatile.Read(ref _demotionsHeld);
    public long DemotionFailures => Volatile.Read(ref _demotionFailures);

    public void Hit(long bytes, TimeSpan took)
    {
        Interlocked.Increment(ref _hits);
        Interlocked.Add(ref _hitBytes, bytes);
        Interlocked.Add(ref _hitMicros, (long)took.TotalMicroseconds);
    }

    public void Miss() => Interlocked.Increment(ref _misses);

    public void StaleCopy() => Interlocked.Increment(ref _stale);

    public void Fallback() => Interlocked.Increment(ref _fallbacks);

    public void Skipped() => Interlocked.Increment(ref _skipped);

    public void Demoted(long bytes)
    {
        Interlocked.Increment(ref _demotions);
        Interlocked.Add(ref _demotionBytes, bytes);
    }

    public void DemotionSkipped() => Interlocked.Increment(ref _demotionsSkipped);

    public void DemotionHeld() => Interlocked.Increment(ref _demotionsHeld);

    public void DemotionFailed() => Interlocked.Increment(ref _demotionFailures);

    public void Dispose() => _meter.Dispose();
}
