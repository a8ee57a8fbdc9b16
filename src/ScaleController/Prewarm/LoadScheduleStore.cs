using FaaST.Hosting;
using FaaST.Prewarm.Timing;
using FaaST.ScaleController.Platform;
using FaaST.Storage;

namespace FaaST.ScaleController.Prewarm;

/// <summary>
/// Keeps each app's idle-time histogram in the platform's storage (<c>faast-platform/idle-times/APP.json</c>), so what the
/// hybrid histogram policy learnt survives a platform restart or takeover (issue 21). Saved every minute when an app
/// recorded an idle time since, at each unload and when the platform stops; read when the platform loads the app. A
/// missing state starts empty; a corrupt one is logged and starts empty too (it never blocks loading the app).
/// </summary>
/// <remarks>
/// The state is the platform's own (its storage account, not the app's), so a tenant's function cannot write it; it is
/// still parsed as untrusted input (bounded, every value checked) because storage can be damaged.
/// </remarks>
internal sealed class LoadScheduleStore(IBlobStore store, Func<IEnumerable<AppHost>> apps, TimeProvider time, ILogger logger) : ILifecycleParticipant
{
    public const string Container = "faast-platform";

    /// <summary>How often dirty histograms are saved.</summary>
    public static readonly TimeSpan SaveInterval = TimeSpan.FromMinutes(1);

    /// <summary>A state larger than this is refused (a 4-hour range of 1-minute bins is about 4 KB).</summary>
    public const int MaxStateBytes = 4 << 20;

    private CancellationTokenSource? _stop;
    private Task _saver = Task.CompletedTask;

    public static string BlobOf(string app) => $"idle-times/{app}.json";

    public void Participate(IHostLifecycle lifecycle) =>
        lifecycle.Subscribe("load schedules", PlatformLifecycleStage.Controller + 100, new LifecycleObserver(StartAsync, StopAsync));

    private async Task StartAsync(CancellationToken ct)
    {
        await store.CreateContainerIfNotExistsAsync(Container, ct).ConfigureAwait(false);
        _stop = new CancellationTokenSource();
        _saver = SaveEveryIntervalAsync(_stop.Token);
    }

    private async Task StopAsync(CancellationToken ct)
    {
        if (_stop is null)
            return;
        await _stop.CancelAsync().ConfigureAwait(false);
        await _saver.ConfigureAwait(false);
        await SaveDirtyAsync(ct).ConfigureAwait(false);
    }

    private async Task SaveEveryIntervalAsync(CancellationToken ct)
    {
        using var timer = new PeriodicTimer(SaveInterval, time);
        try
        {
            while (await timer.WaitForNextTickAsync(ct).ConfigureAwait(false))
                await SaveDirtyAsync(ct).ConfigureAwait(false);
        }
        catch (OperationCanceledException) when (ct.IsCancellationRequested)
        {
        }
    }

    private async Task SaveDirtyAsync(CancellationToken ct)
    {
        foreach (var app in apps())
            if (app.LoadSchedule.TakeDirty())
                await SaveAsync(app.App, app.LoadSchedule.Histogram, ct).ConfigureAwait(false);
    }

    /// <summary>Saves <paramref name="histogram"/> as <paramref name="app"/>'s; a storage failure is logged, not thrown (the next
    /// save writes it again: the caller marks it dirty).</summary>
    public async Task<bool> SaveAsync(string app, IdleTimeHistogram histogram, CancellationToken ct)
    {
        try
        {
            await store.UploadAsync(Container, BlobOf(app), histogram.Write(), ct: ct).ConfigureAwait(false);
            return true;
        }
        catch (Exception e) when (e is not OperationCanceledException || !ct.IsCancellationRequested)
        {
            Log.IdleTimesNotSaved(logger, e, app, Container, BlobOf(app));
            return false;
        }
    }

    /// <summary>The histogram the platform learnt for <paramref name="app"/> before, in <paramref name="options"/>' bins; null when
    /// there is none or it cannot be read (logged).</summary>
    public async Task<IdleTimeHistogram?> LoadAsync(string app, HistogramOptions options, CancellationToken ct)
    {
        var name = $"{Container}/{BlobOf(app)}";
        try
        {
            var properties = await store.GetPropertiesAsync(Container, BlobOf(app), ct).ConfigureAwait(false);
            if (properties is null)
                return null;
            if (properties.Length > MaxStateBytes)
            {
                Log.IdleTimesUnreadable(logger, app, name, $"{properties.Length} bytes, more than the {MaxStateBytes} a state may have");
                return null;
            }
            var content = await store.DownloadAsync(Container, BlobOf(app), ct).ConfigureAwait(false);
            if (content is null)
                return null;
            var histogram = IdleTimeHistogram.Read(content.Data, name, options);
            Log.IdleTimesLoaded(logger, app, histogram.Total, name);
            return histogram;
        }
        catch (FormatException e)
        {
            Log.IdleTimesUnreadable(logger, app, name, e.Message);
            return null;
        }
        catch (Exception e) when (e is not OperationCanceledException || !ct.IsCancellationRequested)
        {
            Log.IdleTimesUnreadable(logger, app, name, e.Message);
            return null;
        }
    }
}
