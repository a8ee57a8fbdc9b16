using System.Globalization;
using FaaST.Prewarm.Timing;

namespace FaaST.ScaleController.Prewarm;

/// <summary>An app's reload settings: <c>faast.json</c>'s <c>prewarm</c> section as the platform uses it.</summary>
/// <param name="Enabled"><c>prewarm.enabled</c>: false keeps the plain keep-alive (<c>scale.keepAlive</c>) and never reloads ahead.</param>
/// <param name="Histogram">The hybrid histogram's parameters (<c>prewarm.histogram</c>).</param>
/// <param name="ReloadLead"><c>prewarm.reloadLead</c>: how long before the predicted invocation the app is loaded again (Faa$T
/// §3.3: "just (e.g., 1 minute) before"), so its instances are up and the cachelets pre-warmed when it comes.</param>
internal sealed record LoadScheduleOptions(bool Enabled, HistogramOptions Histogram, TimeSpan ReloadLead)
{
    public static LoadScheduleOptions Default { get; } = From(FaaST.Policy.PrewarmPolicy.Default);

    /// <summary>The options an app's <c>prewarm</c> section sets.</summary>
    public static LoadScheduleOptions From(FaaST.Policy.PrewarmPolicy policy) => new(policy.Enabled, policy.HistogramOptions(), policy.ReloadLead);
}

/// <summary>
/// When one app is loaded (Faa$T §3.3 with ATC'20's hybrid histogram policy): the frontend records each idle time (from the
/// end of the app's last activity to the next invocation); after each invocation the policy's windows say how long to keep
/// the app loaded, or to unload it at once and load it again shortly before the predicted next invocation. The scale loop
/// asks <see cref="UnloadAt(DateTimeOffset, DateTimeOffset, TimeSpan)"/> each round (the keep-alive it applies), the app host asks <see cref="ReloadAt"/> when it has
/// unloaded. Idle times are recorded lock-free; the rest is a few reads per second.
/// </summary>
internal sealed class AppLoadSchedule
{
    private readonly LoadScheduleOptions _options;
    private readonly IdleTimeHistogram _histogram;
    private int _dirty;
    private int _predictedLoad;
    private long _reloads;
    private long _reloadedFor;

    public AppLoadSchedule(LoadScheduleOptions options, IdleTimeHistogram? learnt = null)
    {
        _options = options;
        _histogram = learnt is not null && learnt.Options == options.Histogram ? learnt : Rebin(learnt, options.Histogram);
    }

    public LoadScheduleOptions Options => _options;

    public IdleTimeHistogram Histogram => _histogram;

    /// <summary>Reloads ahead of a prediction so far.</summary>
    public long Reloads => Volatile.Read(ref _reloads);

    /// <summary>True while the app is loaded because of a prediction and no invocation has come since.</summary>
    public bool LoadedByPrediction => Volatile.Read(ref _predictedLoad) != 0;

    /// <summary>Idle times were recorded since the last <see cref="TakeDirty"/>.</summary>
    public bool TakeDirty() => Interlocked.Exchange(ref _dirty, 0) != 0;

    /// <summary>An invocation arrived after the app was idle for <paramref name="idle"/> (the frontend calls this when its
    /// first request after an idle period arrives).</summary>
    public void InvocationArrived(TimeSpan idle)
    {
        _histogram.Record(idle);
        Volatile.Write(ref _predictedLoad, 0);
        Volatile.Write(ref _dirty, 1);
    }

    /// <summary>The app was loaded ahead of the invocation predicted from the one that arrived at <paramref name="lastInvocation"/>.</summary>
    public void Reloaded(DateTimeOffset lastInvocation)
    {
        Volatile.Write(ref _reloadedFor, lastInvocation.UtcTicks);
        Volatile.Write(ref _predictedLoad, 1);
        Interlocked.Increment(ref _reloads);
    }

    /// <summary>The policy's windows now.</summary>
    public LoadWindows Windows => HybridHistogramPolicy.Decide(_histogram, _options.Histogram);

    /// <summary>
    /// When a loaded app with no invocation in flight is unloaded, given its last invocation's arrival and its fixed
    /// keep-alive (<c>scale.keepAlive</c>, which applies while prewarm is off or the policy predicts nothing):
    /// <list type="bullet">
    /// <item>a pre-warm window no longer than twice the reload lead: kept loaded through the window and the keep-alive (an unload
    /// and reload that close together would cost more than they save);</item>
    /// <item>a longer window: unloaded one reload lead after the invocation (a quick follow-up still finds it), loaded again one
    /// lead before the window opens; a reload ahead of a prediction is kept until the window closes.</item>
    /// </list>
    /// </summary>
    public (DateTimeOffset At, string Why) UnloadAt(DateTimeOffset lastInvocation, TimeSpan fixedKeepAlive)
    {
        var windows = Windows;
        if (!_options.Enabled || windows.Mode == LoadMode.FixedKeepAlive)
            return (lastInvocation + fixedKeepAlive, _options.Enabled ? F($"keepAlive {Seconds(fixedKeepAlive)} ({windows.Reason})") : F($"keepAlive {Seconds(fixedKeepAlive)}"));
        var end = lastInvocation + windows.PrewarmWindow + windows.KeepAlive;
        if (windows.PrewarmWindow <= 2 * _options.ReloadLead)
            return (end, F($"kept loaded {Seconds(windows.PrewarmWindow + windows.KeepAlive)} after an invocation ({windows.Reason})"));
        if (LoadedByPrediction)
            return (end, F($"reloaded ahead of the predicted invocation; kept until its window closes ({windows.Reason})"));
        return (lastInvocation + _options.ReloadLead,
            F($"unloaded {Seconds(_options.ReloadLead)} after an invocation, reloaded {Seconds(windows.PrewarmWindow - _options.ReloadLead)} after it ({windows.Reason})"));
    }

    /// <summary>
    /// The scale loop's unload time for a loaded app with no invocation in flight: <see cref="UnloadAt(DateTimeOffset, TimeSpan)"/>
    /// from its last activity (the last request, or its load if later), never later than <paramref name="fixedKeepAlive"/>
    /// after that activity, which bounds how long any idle app holds its memory. Except after a reload ahead of a prediction:
    /// that app stays until the window predicted from its last request closes, even past the fixed keep-alive after the
    /// reload, since the window is the keep-alive the policy learnt for exactly this wait (ATC'20 §4.2). Capping it made
    /// every invocation that came late in its window a cold start: <c>./faast bench prewarm</c> (keep-alive 15 s, reloads
    /// 13.6 s after an invocation, windows to 33 s) found each round after a pre-warmed one cold, 3 of 6 in time.
    /// </summary>
    public (DateTimeOffset At, string Why) UnloadAt(DateTimeOffset lastRequest, DateTimeOffset loadedAt, TimeSpan fixedKeepAlive)
    {
        if (LoadedByPrediction)
            return UnloadAt(lastRequest, fixedKeepAlive);
        var lastActivity = lastRequest > loadedAt ? lastRequest : loadedAt;
        var (at, why) = UnloadAt(lastActivity, fixedKeepAlive);
        var cap = lastActivity + fixedKeepAlive;
        return at <= cap ? (at, why) : (cap, F($"keepAlive {Seconds(fixedKeepAlive)}, the longest an idle app stays loaded ({why})"));
    }

    /// <summary>
    /// When an unloaded app whose last invocation arrived at <paramref name="lastInvocation"/> is loaded again ahead of the
    /// predicted next one; null: only on demand (prewarm off, nothing predicted, a window too short to unload for, the
    /// window closed by <paramref name="now"/>, or a reload already made for this prediction: the unload at the end of a
    /// reload's window that saw no invocation must not reload again, or the app would be loaded and unloaded in a loop).
    /// A reload whose time has passed while the window is still open comes at once.
    /// </summary>
    public DateTimeOffset? ReloadAt(DateTimeOffset lastInvocation, DateTimeOffset now)
    {
        var windows = Windows;
        if (!_options.Enabled || windows.Mode == LoadMode.FixedKeepAlive || windows.PrewarmWindow <= 2 * _options.ReloadLead)
            return null;
        if (Volatile.Read(ref _reloadedFor) == lastInvocation.UtcTicks || now >= lastInvocation + windows.PrewarmWindow + windows.KeepAlive)
            return null;
        return lastInvocation + windows.PrewarmWindow - _options.ReloadLead;
    }

    private static IdleTimeHistogram Rebin(IdleTimeHistogram? learnt, HistogramOptions options) =>
        learnt is null ? new IdleTimeHistogram(options) : IdleTimeHistogram.Read(learnt.Write(), "the learnt histogram", options);

    private static string Seconds(TimeSpan t) => t.TotalSeconds.ToString("0.#", CultureInfo.InvariantCulture) + " s";

    private static string F(FormattableString s) => s.ToString(CultureInfo.InvariantCulture);
}
