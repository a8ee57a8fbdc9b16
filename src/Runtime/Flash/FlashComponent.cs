using System.Text.Json;
using System.Text.Json.Serialization;
using FaaST.Hosting;
using FaaST.Runtime.Hosting.Components;

namespace FaaST.Runtime.Flash;

/// <summary>
/// The flash tier in the host (issue 22): opens this instance's flow when the cache starts (so the first miss does not
/// pay for the connection) and closes it after the cache stopped (demotions during the cache's shutdown still reach the
/// tier), and serves <c>/admin/flash</c>: this instance's counters and its app's own stats on the server (IOPS, p95 and
/// goodput against the SLO). The read source and the demotion sink are registered beside it
/// (<see cref="FlashRegistration"/>).
/// </summary>
internal sealed class FlashComponent : ILifecycleParticipant, IDisposable
{
    private readonly FlashClient _client;
    private readonly FlashMetrics _metrics;
    private readonly FlashSettings _settings;

    public FlashComponent(FlashClient client, FlashMetrics metrics, FlashSettings settings, ServingComponent web)
    {
        _client = client;
        _metrics = metrics;
        _settings = settings;
        // Behind the admin guard like /admin/cache (the master key when keys are checked).
        web.MapEndpoints(routes => routes.MapGet("/admin/flash", async (CancellationToken ct) =>
            Results.Json(await StatusAsync(ct), FlashJsonContext.Default.FlashStatus)));
    }

    public void Participate(IHostLifecycle lifecycle) =>
        // Just before the cache: started first, stopped after it.
        lifecycle.Subscribe(nameof(FlashComponent), ServiceLifecycleStage.Cache - 1, new LifecycleObserver(StartAsync, StopAsync));

    private async Task StartAsync(CancellationToken ct)
    {
        var p = _client.Policy;
        Log.TierOn(_client.Logger, _client.Address, p.LatencyCritical ? $"LC {p.IopsSlo} IOPS at p95 {p.P95LatencyUs} us" : "best-effort",
            p.Timeout, p.RetryAfter, p.Demote, p.MinDemoteBytes);
        // A tier that is down now is only skipped: the host serves from storage and tries again after RetryAfter.
        await _client.FlowAsync(ct);
    }

    private Task StopAsync(CancellationToken ct) => _client.CloseAsync(ct);

    /// <summary>What /admin/flash shows.</summary>
    public async Task<FlashStatus> StatusAsync(CancellationToken ct)
    {
        var (stats, error) = await _client.StatsAsync(ct);
        var m = _metrics;
        return new FlashStatus(
            _client.Address.ToString(), _settings.AddressSource, _client.Flow, _client.MaxValueBytes, _client.Usable,
            _client.SkippedFor?.TotalSeconds,
            new FlashCounters(m.Hits, m.HitBytes, m.Hits == 0 ? null : m.HitMicros / 1000.0 / m.Hits, m.Misses, m.Stale, m.Fallbacks,
                m.SkippedReads, m.Demotions, m.DemotionBytes, m.DemotionsSkipped, m.DemotionsHeld, m.DemotionFailures),
            stats is null ? null : new FlashTenantStats(stats.Tenant, stats.Class, stats.IopsSlo, stats.P95LatencySloUs, stats.Flows,
                stats.Gets, stats.Hits, stats.Misses, stats.Puts, stats.BytesRead, stats.BytesWritten, stats.Iops, stats.ReadP95Us,
                stats.GoodputFrac, stats.Throttled, stats.ChecksumFailures),
            error);
    }

    public void Dispose()
    {
        _client.Dispose();
        _metrics.Dispose();
    }
}

/// <summary>/admin/flash: this instance's use of the flash tier and the app's stats on the server (null with the reason
/// when the server could not be asked).</summary>
internal sealed record FlashStatus(string Address, string AddressSource, int? Flow, long MaxValueBytes, bool Usable, double? SkippedForSeconds,
    FlashCounters Instance, FlashTenantStats? Server, string? ServerError);

/// <summary>This instance's counters (<see cref="FlashMetrics"/>); <see cref="HitMeanMs"/> is a hit's mean time.</summary>
internal sealed record FlashCounters(long Hits, long HitBytes, double? HitMeanMs, long Misses, long Stale, long Fallbacks, long SkippedReads,
    long Demotions, long DemotionBytes, long DemotionsSkipped, long DemotionsHeld, long DemotionFailures);

/// <summary>The app's own counters on the server (FlashTier.Stats; IOPS, p95 and goodput over the server's window).</summary>
internal sealed record FlashTenantStats(string Tenant, string Class, double IopsSlo, int P95LatencySloUs, int Flows, long Gets, long Hits,
    long Misses, long Puts, long BytesRead, long BytesWritten, double Iops, double ReadP95Us, double GoodputFrac, long Throttled,
    long ChecksumFailures);

[JsonSourceGenerationOptions(JsonSerializerDefaults.Web)]
[JsonSerializable(typeof(FlashStatus))]
internal sealed partial class FlashJsonContext : JsonSerializerContext;
