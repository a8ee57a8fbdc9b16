using System.Collections.Immutable;

namespace FaaST.ScaleController.Platform;

/// <summary>What happened to an app on the platform.</summary>
public enum AppLifecycleKind
{
    /// <summary>The app's first instance is ready (a deploy, a cold start, a platform restart); before that instance's <see cref="InstanceStarted"/>.</summary>
    Loaded,
    /// <summary>The keep-alive ran out: every instance is about to drain (the handlers run while they still serve).</summary>
    Unloading,
    /// <summary>The last instance has stopped, after its <see cref="InstanceStopped"/>.</summary>
    Unloaded,
    InstanceStarted,
    InstanceStopped,
}

/// <summary>One lifecycle event of an app: its kind, the app, the version, the instance (for instance events) and why.</summary>
public sealed record AppLifecycleEvent(AppLifecycleKind Kind, string App, int Version, string? Instance, string Reason, DateTimeOffset At);

/// <summary>
/// The apps' lifecycle as a component sees it (the seam prewarm joins: it records an app's working set at
/// <see cref="AppLifecycleKind.Unloading"/> and loads it at <see cref="AppLifecycleKind.InstanceStarted"/>).
/// </summary>
/// <remarks>
/// Resolve it from the platform's services (a <see cref="FaaST.Hosting.ILifecycleParticipant"/> registered there gets it
/// injected) or read <c>PlatformHost.AppLifecycle</c>. Each app's events reach a handler one at a time and in the order
/// they happened (an app's <see cref="AppLifecycleKind.Loaded"/> before its first instance's
/// <see cref="AppLifecycleKind.InstanceStarted"/>; an instance's stop before the app's <see cref="AppLifecycleKind.Unloaded"/>);
/// different apps' events may overlap. The platform waits for the handlers, so an <see cref="AppLifecycleKind.Unloading"/>
/// handler runs while the instances still serve, but at most <see cref="PlatformOptions.AppLifecycleTimeout"/> (default
/// 5 s): then its token is cancelled and the platform goes on. A handler that throws or runs out of time is logged
/// (events 8300, 8301) and never stops scaling.
/// </remarks>
public interface IAppLifecycle
{
    /// <summary>Calls <paramref name="handler"/> with every app's events from now on; disposing the result unsubscribes.</summary>
    /// <param name="name">Names the component in the log lines about its failures.</param>
    IDisposable Subscribe(string name, Func<AppLifecycleEvent, CancellationToken, Task> handler);
}

/// <summary>
/// Runs the subscribed handlers on an event: all at once, each on the thread pool (a handler that blocks its thread is
/// bounded as well) and each under the timeout. Never throws. Ordering per app is its caller's (<c>AppHost</c> chains
/// its events); events are a few per instance start or stop, so nothing here is on a request's path.
/// </summary>
internal sealed class AppLifecycleHub(TimeSpan timeout, ILogger logger) : IAppLifecycle
{
    private ImmutableArray<Subscription> _handlers = [];

    public TimeSpan Timeout => timeout;

    public IDisposable Subscribe(string name, Func<AppLifecycleEvent, CancellationToken, Task> handler)
    {
        ArgumentException.ThrowIfNullOrWhiteSpace(name);
        ArgumentNullException.ThrowIfNull(handler);
        var subscription = new Subscription(this, name, handler);
        ImmutableInterlocked.Update(ref _handlers, h => h.Add(subscription));
        return subscription;
    }

    /// <summary>Completes when every handler has finished with <paramref name="e"/>, failed, or run out of time.</summary>
    public Task DispatchAsync(AppLifecycleEvent e)
    {
        var handlers = _handlers; // one array reference: read whole, replaced whole by Subscribe and Dispose
        if (handlers.IsEmpty)
            return Task.CompletedTask;
        if (handlers.Length == 1)
            return RunAsync(handlers[0], e);
        var runs = new Task[handlers.Length];
        for (var i = 0; i < runs.Length; i++)
            runs[i] = RunAsync(handlers[i], e);
        return Task.WhenAll(runs);
    }

    private async Task RunAsync(Subscription s, AppLifecycleEvent e)
    {
        using var deadline = new CancellationTokenSource(timeout);
        var run = Task.Run(() => s.Handler(e, deadline.Token), CancellationToken.None);
        try
        {
            await run.WaitAsync(deadline.Token).ConfigureAwait(false);
        }
        catch (OperationCanceledException) when (deadline.IsCancellationRequested)
        {
            Log.AppLifecycleHandlerTimedOut(logger, s.Name, e.Kind, e.App, e.Instance ?? "-", timeout.TotalSeconds);
            // Whatever it ends with later is nobody's to handle: observed here, so it is not an unobserved task exception.
            _ = run.ContinueWith(static t => _ = t.Exception, CancellationToken.None, TaskContinuationOptions.OnlyOnFaulted, TaskScheduler.Default);
        }
        catch (Exception ex)
        {
            Log.AppLifecycleHandlerFailed(logger, ex, s.Name, e.Kind, e.App, e.Instance ?? "-");
        }
    }

    private sealed class Subscription(AppLifecycleHub hub, string name, Func<AppLifecycleEvent, CancellationToken, Task> handler) : IDisposable
    {
        public string Name => name;

        public Func<AppLifecycleEvent, CancellationToken, Task> Handler => handler;

        public void Dispose() => ImmutableInterlocked.Update(ref hub._handlers, h => h.Remove(this));
    }
}
