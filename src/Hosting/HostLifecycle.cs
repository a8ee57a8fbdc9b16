using Microsoft.Extensions.Logging;
using Microsoft.Extensions.Logging.Abstractions;

namespace FaaST.Hosting;

/// <summary>
/// Starts a host's components stage by stage and stops them in reverse (see <see cref="ServiceLifecycleStage"/>).
/// </summary>
/// <remarks>
/// Start goes through the subscriptions in ascending stage order. If one fails, those that started
/// are stopped in reverse and the failure is rethrown unchanged (callers tell a bad app from a port
/// in use by the exception's type). Stop has two halves, each announced to the state callbacks
/// first: <see cref="LifecycleState.Draining"/> stops the stages from <c>drainStage</c> up (the ones
/// that take work from outside: HTTP, triggers, peers) so that nothing new arrives and what is in
/// flight finishes; <see cref="LifecycleState.Unloading"/> stops the rest (workers, endpoints, cache,
/// storage, telemetry). Start and stop happen once per host, so their bookkeeping takes a plain lock;
/// nothing here is on a request's path.
/// </remarks>
public sealed class HostLifecycle : IHostLifecycle
{
    private readonly Lock _lock = new();
    private readonly List<Subscription> _subscriptions = [];
    private readonly List<Subscription> _started = [];
    private readonly ILogger _logger;
    private readonly int _drainStage;
    private Func<LifecycleState, CancellationToken, Task>[] _callbacks = [];
    private LifecycleState _state = LifecycleState.Created;
    private Task? _stopping;

    /// <param name="logger">Where failures of components and callbacks are logged.</param>
    /// <param name="drainStage">The lowest stage that takes work from outside; its stop and those above it are draining.</param>
    public HostLifecycle(ILogger? logger = null, int drainStage = ServiceLifecycleStage.Peers)
    {
        _logger = logger ?? NullLogger.Instance;
        _drainStage = drainStage;
    }

    public LifecycleState State
    {
        get
        {
            lock (_lock)
                return _state;
        }
    }

    public void Subscribe(string name, int stage, ILifecycleObserver observer)
    {
        ArgumentException.ThrowIfNullOrWhiteSpace(name);
        ArgumentNullException.ThrowIfNull(observer);
        lock (_lock)
        {
            if (_state != LifecycleState.Created)
                throw new InvalidOperationException($"{name} cannot join the lifecycle at stage {stage}: the host is already {_state}");
            _subscriptions.Add(new Subscription(name, stage, observer, _subscriptions.Count));
        }
    }

    public IDisposable OnState(Func<LifecycleState, CancellationToken, Task> callback)
    {
        ArgumentNullException.ThrowIfNull(callback);
        lock (_lock)
            _callbacks = [.. _callbacks, callback];
        return new Unsubscriber(this, callback);
    }

    /// <summary>Starts every subscription in stage order, then announces <see cref="LifecycleState.Started"/>.</summary>
    public async Task StartAsync(CancellationToken ct = default)
    {
        Subscription[] order;
        lock (_lock)
        {
            if (_state != LifecycleState.Created)
                throw new InvalidOperationException($"the host lifecycle was already started (it is {_state})");
            _state = LifecycleState.Starting;
            order = Ordered().ToArray();
        }
        foreach (var s in order)
        {
            try
            {
                await s.Observer.OnStart(ct).ConfigureAwait(false);
            }
            catch (Exception e)
            {
                Log.StartFailed(_logger, e, s.Name, s.Stage);
                await StopAsync(CancellationToken.None).ConfigureAwait(false);
                throw;
            }
            lock (_lock)
                _started.Add(s);
        }
        lock (_lock)
        {
            if (_state != LifecycleState.Starting)
                return; // stopped meanwhile
            _state = LifecycleState.Started;
        }
        await AnnounceAsync(LifecycleState.Started, ct).ConfigureAwait(false);
    }

    /// <summary>
    /// Drains (stops the stages that take work, top down), unloads (stops the rest, top down) and
    /// announces each state. Safe to call more than once and after a failed start; later calls wait for the first.
    /// </summary>
    public Task StopAsync(CancellationToken ct = default)
    {
        lock (_lock)
        {
            if (_stopping is null)
            {
                if (_state == LifecycleState.Created)
                {
                    _state = LifecycleState.Stopped;
                    return Task.CompletedTask;
                }
                _stopping = StopCoreAsync(ct);
            }
            return _stopping;
        }
    }

    private async Task StopCoreAsync(CancellationToken ct)
    {
        await Task.Yield(); // the caller holds the lock
        await EnterAsync(LifecycleState.Draining, ct).ConfigureAwait(false);
        await StopStartedAsync(s => s.Stage >= _drainStage, ct).ConfigureAwait(false);
        await EnterAsync(LifecycleState.Unloading, ct).ConfigureAwait(false);
        await StopStartedAsync(_ => true, ct).ConfigureAwait(false);
        await EnterAsync(LifecycleState.Stopped, ct).ConfigureAwait(false);
    }

    private async Task EnterAsync(LifecycleState state, CancellationToken ct)
    {
        lock (_lock)
            _state = state;
        await AnnounceAsync(state, ct).ConfigureAwait(false);
    }

    /// <summary>Stops the started subscriptions that <paramref name="which"/> picks, last started first.</summary>
    private async Task StopStartedAsync(Func<Subscription, bool> which, CancellationToken ct)
    {
        while (true)
        {
            Subscription s;
            lock (_lock)
            {
                if (_started.Count == 0 || !which(_started[^1]))
                    return;
                s = _started[^1];
                _started.RemoveAt(_started.Count - 1);
            }
            try
            {
                await s.Observer.OnStop(ct).ConfigureAwait(false);
            }
            catch (Exception e)
            {
                // One component's failure to stop must not keep the others (and their processes) running.
                Log.StopFailed(_logger, e, s.Name, s.Stage);
            }
        }
    }

    private async Task AnnounceAsync(LifecycleState state, CancellationToken ct)
    {
        Func<LifecycleState, CancellationToken, Task>[] callbacks;
        lock (_lock)
            callbacks = _callbacks;
        foreach (var callback in callbacks)
        {
            try
            {
                await callback(state, ct).ConfigureAwait(false);
            }
            catch (Exception e)
            {
                Log.ObserverFailed(_logger, e, state);
            }
        }
    }

    // Stable: equal stages keep subscription order.
    private IEnumerable<Subscription> Ordered() => _subscriptions.OrderBy(s => s.Stage).ThenBy(s => s.Sequence);

    private sealed record Subscription(string Name, int Stage, ILifecycleObserver Observer, int Sequence);

    private sealed class Unsubscriber(HostLifecycle owner, Func<LifecycleState, CancellationToken, Task> callback) : IDisposable
    {
        public void Dispose()
        {
            lock (owner._lock)
                owner._callbacks = owner._callbacks.Where(c => c != callback).ToArray();
        }
    }
}
