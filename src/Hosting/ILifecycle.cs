namespace FaaST.Hosting;

/// <summary>What a component does when its stage starts and stops.</summary>
public interface ILifecycleObserver
{
    /// <summary>Starts this component's part of the stage; a throw fails the host's start (what started is stopped).</summary>
    Task OnStart(CancellationToken ct);

    /// <summary>Stops it; called only if <see cref="OnStart"/> completed. <paramref name="ct"/> is cancelled when stopping must hurry.</summary>
    Task OnStop(CancellationToken ct);
}

/// <summary>The states a host goes through, in order (a failed start goes from Starting to Stopping).</summary>
public enum LifecycleState
{
    Created,
    Starting,
    Started,

    /// <summary>Takes no new work (HTTP, triggers, peers) and finishes what is in flight.</summary>
    Draining,

    /// <summary>Work is done; workers, endpoints, cache and storage are being stopped.</summary>
    Unloading,
    Stopped,
}

/// <summary>A host's lifecycle, as components see it: stages to subscribe to, states to observe.</summary>
public interface IHostLifecycle
{
    /// <summary>The current state.</summary>
    LifecycleState State { get; }

    /// <summary>
    /// Subscribes <paramref name="observer"/> to <paramref name="stage"/> (see <see cref="ServiceLifecycleStage"/>).
    /// Within a stage, observers start in subscription order and stop in reverse. Only before start.
    /// </summary>
    /// <param name="name">Names the component in logs and errors.</param>
    void Subscribe(string name, int stage, ILifecycleObserver observer);

    /// <summary>
    /// Calls <paramref name="callback"/> each time the host enters a state (<see cref="LifecycleState.Started"/>,
    /// <see cref="LifecycleState.Draining"/>, <see cref="LifecycleState.Unloading"/>, <see cref="LifecycleState.Stopped"/>),
    /// in order. The host waits for the callback: a draining callback may finish its own in-flight work.
    /// A throwing callback is logged and does not stop the others. The returned handle unsubscribes.
    /// </summary>
    IDisposable OnState(Func<LifecycleState, CancellationToken, Task> callback);
}

/// <summary>A component that joins a host's lifecycle: it subscribes to its stages and states.</summary>
public interface ILifecycleParticipant
{
    void Participate(IHostLifecycle lifecycle);
}

/// <summary>An observer from two delegates (for components whose start and stop are a line each).</summary>
public sealed class LifecycleObserver(Func<CancellationToken, Task> start, Func<CancellationToken, Task>? stop = null) : ILifecycleObserver
{
    public Task OnStart(CancellationToken ct) => start(ct);

    public Task OnStop(CancellationToken ct) => stop is null ? Task.CompletedTask : stop(ct);
}
