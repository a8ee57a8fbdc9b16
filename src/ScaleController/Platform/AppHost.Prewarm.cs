using FaaST.ScaleController.Prewarm;

namespace FaaST.ScaleController.Platform;

/// <summary>When the app is loaded (Faa$T §3.3): its idle times, the keep-alive the scale loop applies, and the reload
/// ahead of a predicted invocation after an unload.</summary>
internal sealed partial class AppHost
{
    private AppLoadSchedule _schedule = null!;
    private ITimer? _reloadTimer;
    private long _nextReloadTicks;

    /// <summary>The app's idle-time histogram and what it says.</summary>
    public AppLoadSchedule LoadSchedule => Volatile.Read(ref _schedule);

    /// <summary>When the unloaded app is loaded again ahead of a predicted invocation; null: not scheduled.</summary>
    public DateTimeOffset? NextReload => Volatile.Read(ref _nextReloadTicks) is var t && t != 0 ? new DateTimeOffset(t, TimeSpan.Zero) : null;

    private void InitLoadSchedule(LoadScheduleOptions options, FaaST.Prewarm.Timing.IdleTimeHistogram? learnt)
    {
        _schedule = new AppLoadSchedule(options, learnt);
        Frontend.IdleEnded = idle =>
        {
            // A request: whatever reload was scheduled is moot (the request loads the app, or it is loaded already).
            Volatile.Read(ref _schedule).InvocationArrived(idle);
            CancelReload();
        };
    }

    /// <summary>A redeploy may change the prewarm settings: what was learnt stays (re-binned to the new bins).</summary>
    private void UpdateLoadSchedule(LoadScheduleOptions options)
    {
        var current = Volatile.Read(ref _schedule);
        if (current.Options != options)
            Volatile.Write(ref _schedule, new AppLoadSchedule(options, current.Histogram));
    }

    /// <summary>The scale loop's keep-alive (<see cref="AppLoadSchedule.UnloadAt(DateTimeOffset, DateTimeOffset, TimeSpan)"/>):
    /// the schedule's, never later than <c>scale.keepAlive</c> after the last invocation or load, except for an app
    /// reloaded ahead of a prediction, which stays until the predicted window closes.</summary>
    public (DateTimeOffset At, string Why)? UnloadAt => Volatile.Read(ref _schedule).UnloadAt(Frontend.LastRequest, _loadedAt, Policy.KeepAlive);

    /// <summary>After an unload: schedules the reload the policy predicts, if any.</summary>
    private void ScheduleReload()
    {
        var schedule = Volatile.Read(ref _schedule);
        var lastRequest = Frontend.LastRequest;
        var now = _platform.Time.GetUtcNow();
        if (schedule.ReloadAt(lastRequest, now) is not { } at)
            return;
        var delay = at > now ? at - now : TimeSpan.Zero;
        var timer = _platform.Time.CreateTimer(_ => _ = ReloadAsync(lastRequest), null, delay, Timeout.InfiniteTimeSpan);
        Interlocked.Exchange(ref _reloadTimer, timer)?.Dispose();
        Volatile.Write(ref _nextReloadTicks, at.UtcTicks);
        Prewarm.Log.ReloadScheduled(_logger, App, at, schedule.Options.ReloadLead, schedule.Windows.Reason);
    }

    private void CancelReload()
    {
        if (Volatile.Read(ref _nextReloadTicks) == 0)
            return;
        Volatile.Write(ref _nextReloadTicks, 0);
        Interlocked.Exchange(ref _reloadTimer, null)?.Dispose();
    }

    private async Task ReloadAsync(DateTimeOffset lastRequest)
    {
        Volatile.Write(ref _nextReloadTicks, 0);
        // Only if nothing happened since: a request loaded the app already, or it was redeployed or removed.
        if (_disposed || !Unloaded || Frontend.LastRequest != lastRequest)
            return;
        try
        {
            Prewarm.Log.Reloading(_logger, App);
            Volatile.Read(ref _schedule).Reloaded(lastRequest);
            _loadedAt = _platform.Time.GetUtcNow();
            _platform.Metrics.Reload(App);
            await ScaleToAsync(Math.Max(1, Policy.MinInstances), "prewarm: loaded ahead of the predicted invocation", CancellationToken.None);
        }
        catch (Exception e)
        {
            Prewarm.Log.ReloadFailed(_logger, e, App);
        }
    }
}
