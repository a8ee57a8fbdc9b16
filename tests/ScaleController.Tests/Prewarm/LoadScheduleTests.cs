using FaaST.Prewarm.Timing;
using FaaST.ScaleController.Frontend;
using FaaST.ScaleController.Prewarm;
using FaaST.ScaleController.Tests.Frontend;
using Microsoft.Extensions.Time.Testing;

namespace FaaST.ScaleController.Tests.Prewarm;

/// <summary>The platform's side of Faa$T §3.3: when an app is unloaded and loaded again, from the idle times its frontend records.</summary>
public sealed class LoadScheduleTests
{
    private static readonly DateTimeOffset Last = DateTimeOffset.Parse("2026-11-28T12:00:00Z", System.Globalization.CultureInfo.InvariantCulture);
    private static readonly TimeSpan FixedKeepAlive = TimeSpan.FromMinutes(10);

    private static AppLoadSchedule Learnt(IEnumerable<double> idleMinutes, LoadScheduleOptions? options = null)
    {
        var schedule = new AppLoadSchedule(options ?? LoadScheduleOptions.Default);
        foreach (var m in idleMinutes)
            schedule.InvocationArrived(TimeSpan.FromMinutes(m));
        return schedule;
    }

    [Fact]
    public void An_app_reloaded_ahead_of_a_prediction_stays_until_the_window_closes_even_past_the_fixed_keep_alive_after_the_reload()
    {
        // Idle 30 minutes: reloaded at 26 minutes, the window closes at 34.1. A 5-minute scale.keepAlive counted from the
        // reload would unload it at 31, so an invocation at 32 (late in its window) would be a cold start.
        var schedule = Learnt(Enumerable.Repeat(30.5, 20));
        var keepAlive = TimeSpan.FromMinutes(5);
        var reload = Last + TimeSpan.FromMinutes(26);
        Assert.Equal(reload, schedule.ReloadAt(Last, Last));

        // Before the reload: unloaded a lead after the invocation, within the keep-alive.
        Assert.Equal(Last + TimeSpan.FromMinutes(1), schedule.UnloadAt(Last, Last - TimeSpan.FromHours(1), keepAlive).At);

        schedule.Reloaded(Last);
        var (at, why) = schedule.UnloadAt(Last, reload, keepAlive);

        Assert.Equal(Last + TimeSpan.FromMinutes(31 * 1.1), at);
        Assert.Contains("kept until its window closes", why, StringComparison.Ordinal);
    }

    [Fact]
    public void An_app_loaded_by_a_request_is_never_kept_longer_than_the_fixed_keep_alive_after_its_last_activity()
    {
        // Frequent idle times of 0–1 minute with a rare long one: the policy keeps the app loaded to the tail (well past
        // 5 minutes); the fixed keep-alive bounds it, counted from the later of the last request and the load.
        var schedule = Learnt(Enumerable.Repeat(0.5, 95).Concat(Enumerable.Repeat(40.5, 5)));
        var keepAlive = TimeSpan.FromMinutes(5);
        Assert.True(schedule.UnloadAt(Last, keepAlive).At > Last + keepAlive);

        var (at, why) = schedule.UnloadAt(Last, Last + TimeSpan.FromMinutes(2), keepAlive);

        Assert.Equal(Last + TimeSpan.FromMinutes(7), at);
        Assert.Contains("the longest an idle app stays loaded", why, StringComparison.Ordinal);
    }

    [Fact]
    public void An_app_invoked_every_half_hour_is_unloaded_a_minute_after_each_invocation_and_reloaded_a_minute_before_the_window()
    {
        var schedule = Learnt(Enumerable.Repeat(30.5, 20));

        var (unload, why) = schedule.UnloadAt(Last, FixedKeepAlive);
        Assert.Equal(Last + TimeSpan.FromMinutes(1), unload);
        Assert.Contains("unloaded 60 s after an invocation", why, StringComparison.Ordinal);
        // The 30-minute bin less 10 % is the window (27 min); the reload comes one lead before it.
        Assert.Equal(Last + TimeSpan.FromMinutes(26), schedule.ReloadAt(Last, Last));

        schedule.Reloaded(Last);
        Assert.True(schedule.LoadedByPrediction);
        // Unloaded again at the window's end with no invocation: no second reload for the same prediction.
        Assert.Null(schedule.ReloadAt(Last, Last + TimeSpan.FromMinutes(35)));
        Assert.Null(schedule.ReloadAt(Last, Last + TimeSpan.FromMinutes(27)));
        // Loaded ahead of the prediction: kept until the window closes (the 31st minute plus 10 %).
        Assert.Equal(Last + TimeSpan.FromMinutes(31 * 1.1), schedule.UnloadAt(Last, FixedKeepAlive).At);
        Assert.Equal(1, schedule.Reloads);

        schedule.InvocationArrived(TimeSpan.FromMinutes(30.5));
        Assert.False(schedule.LoadedByPrediction);
    }

    [Fact]
    public void A_reload_whose_time_has_passed_comes_at_once_while_the_window_is_open_and_never_after_it_closed()
    {
        var schedule = Learnt(Enumerable.Repeat(30.5, 20));

        // An unload that came late (a long invocation, a slow drain): the reload time is past, the window still open.
        Assert.Equal(Last + TimeSpan.FromMinutes(26), schedule.ReloadAt(Last, Last + TimeSpan.FromMinutes(28)));
        // The window (until the 34.1th minute) has closed: the next invocation loads the app on demand.
        Assert.Null(schedule.ReloadAt(Last, Last + TimeSpan.FromMinutes(34.2)));
    }

    [Fact]
    public void An_app_whose_idle_times_start_within_two_reload_leads_stays_loaded_and_is_never_reloaded_ahead()
    {
        var random = new Random(7);
        var schedule = Learnt(Enumerable.Range(0, 500).Select(_ => -5 * Math.Log(1 - random.NextDouble())));

        Assert.Null(schedule.ReloadAt(Last, Last));
        var windows = schedule.Windows;
        Assert.Equal(LoadMode.Histogram, windows.Mode);
        Assert.Equal(Last + windows.PrewarmWindow + windows.KeepAlive, schedule.UnloadAt(Last, FixedKeepAlive).At);
    }

    [Fact]
    public void Until_the_policy_has_learnt_enough_the_fixed_keep_alive_applies_and_nothing_is_reloaded()
    {
        var schedule = Learnt([30.5, 30.5]);

        var (unload, why) = schedule.UnloadAt(Last, FixedKeepAlive);

        Assert.Equal(Last + FixedKeepAlive, unload);
        Assert.Contains("keepAlive 600 s", why, StringComparison.Ordinal);
        Assert.Contains("fewer than minSamples", why, StringComparison.Ordinal);
        Assert.Null(schedule.ReloadAt(Last, Last));
    }

    [Fact]
    public void With_prewarm_off_the_fixed_keep_alive_applies_whatever_was_learnt()
    {
        var schedule = Learnt(Enumerable.Repeat(30.5, 20), LoadScheduleOptions.Default with { Enabled = false });

        Assert.Equal(Last + FixedKeepAlive, schedule.UnloadAt(Last, FixedKeepAlive).At);
        Assert.Null(schedule.ReloadAt(Last, Last));
    }

    [Fact]
    public void A_changed_bin_width_keeps_what_was_learnt()
    {
        var schedule = Learnt(Enumerable.Repeat(30.5, 20));

        var rebinned = new AppLoadSchedule(LoadScheduleOptions.Default with { Histogram = HistogramOptions.Default with { BinWidth = TimeSpan.FromMinutes(2) } },
            schedule.Histogram);

        Assert.Equal(20, rebinned.Histogram.Total);
        Assert.Equal(20, rebinned.Histogram.Counts()[15]);
    }

    [Fact]
    public async Task The_frontend_reports_the_idle_time_between_the_end_of_one_request_and_the_next()
    {
        var time = new FakeTimeProvider(Last);
        await using var backend = await Backend.StartAsync("i1");
        await using var host = await FrontendHost.StartAsync(new FrontendOptions(), time);
        host.Frontend.AddInstance(backend.Endpoint);
        var idle = new List<TimeSpan>();
        host.Frontend.IdleEnded = t =>
        {
            lock (idle)
                idle.Add(t);
        };

        (await host.Client.GetAsync("/api/one")).EnsureSuccessStatusCode();
        time.Advance(TimeSpan.FromMinutes(5));
        (await host.Client.GetAsync("/api/two")).EnsureSuccessStatusCode();
        time.Advance(TimeSpan.FromSeconds(90));
        (await host.Client.GetAsync("/api/three")).EnsureSuccessStatusCode();

        // The first request of a new frontend has no idle time before it; the clock stood still during each request.
        lock (idle)
            Assert.Equal([TimeSpan.FromMinutes(5), TimeSpan.FromSeconds(90)], idle);
    }
}
