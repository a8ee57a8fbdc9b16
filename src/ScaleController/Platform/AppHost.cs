using FaaST.AppModel.Policy;
using FaaST.Peers;
using FaaST.ScaleController.Control;
using FaaST.ScaleController.Deploy;
using FaaST.ScaleController.Frontend;
using FaaST.ScaleController.Providers;

namespace FaaST.ScaleController.Platform;

/// <summary>An instance as the platform tracks it.</summary>
public enum InstanceState
{
    Starting,
    Ready,
    Draining,
}

/// <summary>
/// One deployed app on the platform: its current deployment, its instances, its frontend and its scale loop.
/// Changes to the instance set (scale out or in, redeploy, unload, replacing a dead instance) are serialised
/// per app; the request path never waits on them (the frontend reads an immutable snapshot of ready instances).
/// </summary>
internal sealed class AppHost : IScaleTarget, Scaling.IInstanceLoadTime, IAsyncDisposable
{
    private readonly PlatformContext _platform;
    private readonly SemaphoreSlim _changes = new(1, 1);
    private readonly Lock _gate = new();
    private readonly ILogger _logger;
    private List<Slot> _slots = [];
    private int _desired;
    private bool _disposed;
    private DateTimeOffset _loadedAt;
    private ScaleLoop _loop = null!;
    private CancellationTokenSource _loopStop = new();
    private Task _loopTask = Task.CompletedTask;
    private FrontendStats _lastStats;
    // The tail of this app's lifecycle events handed to the handlers (under _gate): each waits for the one before.
    private Task _events = Task.CompletedTask;

    public AppHost(PlatformContext platform, Deployment deployment, string directory, ScalePolicy policy, ILogger logger)
    {
        _platform = platform;
        _logger = logger;
        Deployment = deployment;
        Directory = directory;
        Policy = policy;
        Frontend = new AppFrontend(deployment.App, platform.FrontendOptions(policy), logger, platform.Time)
        {
            ColdStart = ColdStartAsync,
        };
        Frontend.InstanceFailed += OnInstanceFailed;
        _loop = NewLoop(policy);
    }

    private ScaleLoop NewLoop(ScalePolicy policy)
    {
        var secret = _platform.PeerSecretOf(App, Directory);
        // Vote queries are signed with the app's peer secret, as the instances' peer calls are; unrequested votes
        // are accepted only signed with it. The verifier outlives the loop (a policy change makes a new loop): it
        // remembers the nonces it took, and a new one would accept a captured call again for its replay window.
        // Only a changed secret makes a new one (the old secret's calls no longer verify anyway).
        if (_requestAuth is null || !secret.AsSpan().SequenceEqual(_requestSecret))
        {
            _requestAuth = new PeerAuth(secret, App);
            _requestSecret = secret;
        }
        return new ScaleLoop(this, policy, new GrpcVoteClient(new PeerAuth(secret, App), _platform.Time), _platform.Time, _logger,
            new ScaleLoopOptions { RequestCredentials = _requestAuth });
    }

    private PeerAuth? _requestAuth;
    private byte[] _requestSecret = [];

    public string App => Deployment.App;

    public Deployment Deployment { get; private set; }

    /// <summary>The extracted package of <see cref="Deployment"/>.</summary>
    public string Directory { get; private set; }

    public ScalePolicy Policy { get; private set; }

    public AppFrontend Frontend { get; }

    public ScaleLoop Loop => Volatile.Read(ref _loop);

    /// <summary>The frontend's numbers of the controller's last round (in flight and queued now, completed/failed in the interval).</summary>
    public FrontendStats LastStats => _lastStats;

    /// <summary>True between an unload (keep-alive expired) and the next cold start.</summary>
    public bool Unloaded { get; private set; }

    /// <summary>The instance count the platform is working towards.</summary>
    public int Desired => Volatile.Read(ref _desired);

    public IReadOnlyList<(InstanceHandle Handle, InstanceState State)> Instances
    {
        get
        {
            lock (_gate)
                return _slots.Select(s => (s.Handle!, s.State)).Where(s => s.Item1 is not null).ToArray();
        }
    }

    // --- IScaleTarget (the scale loop's view of the app) ---

    public int CurrentInstances
    {
        get
        {
            lock (_gate)
                return _slots.Count(s => s.State != InstanceState.Draining);
        }
    }

    public IReadOnlyList<VoteEndpoint> ReadyInstances
    {
        get
        {
            lock (_gate)
                return _slots.Where(s => s is { State: InstanceState.Ready, Handle.PeerAddress: not null })
                    .Select(s => new VoteEndpoint(s.Handle!.Id, s.Handle.PeerAddress!)).ToArray();
        }
    }

    public DateTimeOffset LastInvocation => Frontend.LastRequest > _loadedAt ? Frontend.LastRequest : _loadedAt;

    public FrontendLoad Load()
    {
        var s = Frontend.TakeStats();
        _lastStats = s;
        return new FrontendLoad(s.InvocationsPerSecond, s.InFlight, s.Queued, s.LatencyP50Ms, s.LatencyP99Ms);
    }

    /// <summary>The mean time an instance of this app took to start (T_Load), 0 before the first start.</summary>
    public double LoadSeconds { get; private set; }

    /// <summary>T_Load for the instances' bandwidth planning: sent with every vote query.</summary>
    public TimeSpan? InstanceLoadTime => LoadSeconds == 0 ? null : TimeSpan.FromSeconds(LoadSeconds);

    /// <summary>
    /// Takes over the instances of this deployment a previous platform process left running (it crashed); the others
    /// it recorded are stopped and forgotten. Call before <see cref="StartAsync"/>, which then starts only what is missing.
    /// </summary>
    public async Task AdoptAsync(IReadOnlyList<InstanceHandle> recorded, CancellationToken ct)
    {
        foreach (var r in recorded)
        {
            var adopted = await _platform.Provider.AdoptAsync(r, new PeerAuth(_platform.PeerSecretOf(App, Directory), App), ct);
            if (adopted is not null && adopted.Version == Deployment.Version)
            {
                var slot = new Slot { Handle = adopted, State = InstanceState.Ready, Started = adopted.Started };
                lock (_gate)
                    _slots = [.. _slots, slot];
                Frontend.AddInstance(new InstanceEndpoint(adopted.Id, adopted.BaseAddress, $"v{adopted.Version}"));
                Log.Adopted(_logger, App, adopted.Id, adopted.Version, adopted.ProcessId);
                continue;
            }
            if (adopted is not null) // alive, but of an older version: a redeploy the crash interrupted
                await _platform.Provider.StopAsync(adopted, _platform.Options.DrainDeadline, ct);
            Log.NotAdopted(_logger, App, r.Id);
            await _platform.Registry!.ForgetAsync(r, ct);
        }
    }

    /// <summary>
    /// Starts the first instances (at least one, counting those taken over). With <paramref name="makeCurrent"/> (a
    /// deploy: its version is not current yet) they join the frontend only after it succeeded, which it is called for
    /// once one is ready; when none starts, or it fails, the started ones are stopped and the error is thrown.
    /// </summary>
    public async Task StartAsync(int instances, Func<CancellationToken, Task>? makeCurrent, CancellationToken ct)
    {
        _loadedAt = _platform.Time.GetUtcNow();
        await _changes.WaitAsync(ct);
        try
        {
            // Instances taken over from a previous platform process run already: they count, even beyond the budget.
            Slot[] adopted;
            lock (_gate)
                adopted = _slots.Where(s => s.Held == 0).ToArray();
            foreach (var slot in adopted)
                Hold(slot, WorkersPerInstance(Directory));
            var target = Math.Clamp(Math.Max(1, instances), 1, Math.Max(1, Policy.MaxInstances));
            var running = CurrentInstances;
            var (slots, capped) = Reserve(target - running, Directory);
            if (running + slots.Length < target)
            {
                Log.BudgetCapped(_logger, App, target, running + slots.Length, capped!);
                if (running + slots.Length == 0)
                    throw new PlatformBudgetException($"no room on the platform for an instance of {App}: {capped}");
                target = running + slots.Length;
            }
            Volatile.Write(ref _desired, target);
            _platform.NotifyChanged(App);
            if (slots.Length > 0)
            {
                Log.ScalingOut(_logger, App, running, target, "deployed");
                var (started, error) = await StartInstancesAsync(slots, Deployment, Directory, join: makeCurrent is null, ct);
                if (CurrentInstances == 0)
                    throw new InstanceStartException(error ?? "no instance started");
                if (makeCurrent is not null)
                    await MakeCurrentOrStopAsync(started, Deployment, error, makeCurrent, ct);
            }
            else if (makeCurrent is not null)
            {
                await makeCurrent(ct);
            }
        }
        finally
        {
            _changes.Release();
        }
        _loopTask = Loop.RunAsync(_loopStop.Token);
    }

    /// <summary>
    /// The new version's instances are ready but not routed to: make the version current, then let them join. When
    /// none is left (they exited since), or making it current fails, they are stopped and nothing else changes.
    /// </summary>
    private async Task MakeCurrentOrStopAsync(IReadOnlyList<Slot> started, Deployment deployment, string? error,
        Func<CancellationToken, Task> makeCurrent, CancellationToken ct)
    {
        Slot[] alive;
        lock (_gate)
            alive = started.Where(_slots.Contains).ToArray();
        try
        {
            if (alive.Length == 0)
                throw new InstanceStartException(error ?? $"every instance of v{deployment.Version} exited right after it was ready");
            await makeCurrent(ct);
        }
        catch
        {
            await Task.WhenAll(alive.Select(StopUnjoinedAsync));
            throw;
        }
        foreach (var slot in alive)
            await JoinAsync(slot, deployment);
    }

    /// <summary>Stops an instance that never joined the frontend (its version did not become current).</summary>
    private async Task StopUnjoinedAsync(Slot slot)
    {
        lock (_gate)
        {
            slot.State = InstanceState.Draining;
            _slots = [.. _slots.Where(s => s != slot)];
        }
        var handle = slot.Handle!;
        await _platform.Provider.StopAsync(handle, _platform.Options.DrainDeadline, CancellationToken.None);
        Free(slot);
        Log.InstanceDiscarded(_logger, App, handle.Id, handle.Version);
        await RaiseAsync(new AppLifecycleEvent(AppLifecycleKind.InstanceStopped, App, handle.Version, handle.Id, "its version did not become current",
            _platform.Time.GetUtcNow()));
    }

    private Task _starting = Task.CompletedTask;

    /// <summary>Completes when the instances being started now are ready (or failed to start).</summary>
    public Task WhenStartedAsync(CancellationToken ct) => Volatile.Read(ref _starting).WaitAsync(ct);

    public async Task ScaleToAsync(int target, string reason, CancellationToken ct)
    {
        target = Math.Clamp(target, 0, Policy.MaxInstances);
        var asked = target;
        await _changes.WaitAsync(ct);
        try
        {
            if (_disposed)
                return;
            var current = CurrentInstances;
            Slot[] slots = [];
            if (target > current)
            {
                // The platform's budget caps every app's scale-out (defect 6): as many as there is room for.
                (slots, var capped) = Reserve(target - current, Directory);
                if (slots.Length < target - current)
                {
                    Log.BudgetCapped(_logger, App, asked, current + slots.Length, capped!);
                    target = current + slots.Length;
                }
            }
            Volatile.Write(ref _desired, target);
            Unloaded = target == 0;
            _platform.NotifyChanged(App);
            // Neither starting nor draining is awaited here: the controller's loop (and an instance's unrequested
            // vote) must not wait seconds for a process; starting slots count as instances at once, so the next
            // round does not ask for them again.
            if (target > current)
            {
                Log.ScalingOut(_logger, App, current, target, reason);
                var started = StartInstancesAsync(slots, Deployment, Directory, join: true, CancellationToken.None);
                var previous = Volatile.Read(ref _starting);
                Volatile.Write(ref _starting, Task.WhenAll(previous, started.ContinueWith(_ => { }, TaskScheduler.Default)));
            }
            else if (target < current)
            {
                Log.ScalingIn(_logger, App, current, target, reason);
                Slot[] victims;
                lock (_gate)
                {
                    // The newest first: the longest-running instances hold the warmest caches. Starting ones are
                    // not drained (they are not routed to yet); they come later, when ready, if still too many.
                    victims = _slots.Where(s => s.State == InstanceState.Ready).OrderByDescending(s => s.Started).Take(current - target).ToArray();
                    foreach (var v in victims)
                        v.State = InstanceState.Draining;
                }
                foreach (var v in victims)
                    _ = DrainAndStopAsync(v, CancellationToken.None);
            }
        }
        finally
        {
            _changes.Release();
        }
    }

    public async Task UnloadAsync(string reason, CancellationToken ct)
    {
        // The unload lifecycle event: every instance drains (each host records and flushes what it holds as it
        // stops); the next request finds no ready instance and loads the app again (a cold start).
        Log.Unloading(_logger, App, reason);
        // Awaited (bounded by PlatformOptions.AppLifecycleTimeout): its handlers run while the instances still serve.
        await RaiseAsync(new AppLifecycleEvent(AppLifecycleKind.Unloading, App, Deployment.Version, null, reason, _platform.Time.GetUtcNow()));
        await ScaleToAsync(0, reason, ct);
    }

    /// <summary>
    /// Rolls the app to a new deployment: as many instances of the new version as there are now start; once one is
    /// ready, <paramref name="makeCurrent"/> makes the version current (app.json) and the ready ones join the frontend;
    /// only then do the old ones drain (no new requests, in-flight ones finish) and stop. No request is dropped: at
    /// every moment some ready instance takes new requests. When no instance of the new version starts (or making it
    /// current fails), the started ones are stopped, the old ones were never touched, the app stays at its version,
    /// and <see cref="InstanceStartException"/> carries the instance's own error (issue 19, defect 7).
    /// </summary>
    public async Task RedeployAsync(Deployment deployment, string directory, ScalePolicy policy, Func<CancellationToken, Task> makeCurrent,
        CancellationToken ct)
    {
        await _changes.WaitAsync(ct);
        try
        {
            Slot[] old;
            lock (_gate)
                old = _slots.ToArray();
            var count = Math.Clamp(Math.Max(1, old.Count(s => s.State != InstanceState.Draining)), policy.MinInstances, policy.MaxInstances);
            // The new version's instances need room beside the old ones while they roll: as many as there is room for,
            // at least one.
            var (slots, capped) = Reserve(count, directory);
            if (slots.Length == 0)
            {
                Log.RollbackKept(_logger, App, deployment.Version, Deployment.Version, capped!);
                throw new PlatformBudgetException(
                    $"no room on the platform to start {App} v{deployment.Version} beside v{Deployment.Version}'s instances, so v{Deployment.Version} stays current: {capped}");
            }
            if (slots.Length < count)
                Log.BudgetCapped(_logger, App, count, slots.Length, capped!);
            Log.Rolling(_logger, App, Deployment.Version, deployment.Version, slots.Length);
            var (started, error) = await StartInstancesAsync(slots, deployment, directory, join: false, ct);
            try
            {
                if (started.Count == 0)
                    throw new InstanceStartException(error ?? "no instance started");
                await MakeCurrentOrStopAsync(started, deployment, error, makeCurrent, ct);
            }
            catch (Exception e) when (e is InstanceStartException or DeployConflictException)
            {
                Log.RollbackKept(_logger, App, deployment.Version, Deployment.Version, e.Message);
                if (e is DeployConflictException)
                    throw;
                throw new InstanceStartException(
                    $"no instance of {App} v{deployment.Version} became ready, so v{Deployment.Version} stays current and keeps serving: {e.Message}");
            }
            Deployment = deployment;
            Directory = directory;
            if (policy != Policy)
            {
                // A new policy is a new loop (cool-downs and hysteresis start afresh under the new numbers).
                await _loopStop.CancelAsync();
                await _loopTask;
                Policy = policy;
                Volatile.Write(ref _loop, NewLoop(policy));
                _loopStop = new CancellationTokenSource();
                _loopTask = _loop.RunAsync(_loopStop.Token);
            }
            Volatile.Write(ref _desired, count);
            Unloaded = false;
            lock (_gate)
                foreach (var s in old)
                    s.State = s.Handle is null ? s.State : InstanceState.Draining;
            await Task.WhenAll(old.Where(s => s.Handle is not null).Select(s => DrainAndStopAsync(s, ct)));
        }
        finally
        {
            _changes.Release();
        }
    }

    /// <summary>
    /// Starts <paramref name="count"/> instances of <paramref name="deployment"/> at once and waits for them. Each that is
    /// ready joins the frontend at once when <paramref name="join"/>, else it waits (state Starting, not routed to)
    /// for its caller's <see cref="JoinAsync"/>. Start failures are logged, not thrown: the ready ones and the last
    /// failure's message (the instance's own error and last lines) are returned.
    /// </summary>
    private async Task<(IReadOnlyList<Slot> Started, string? Error)> StartInstancesAsync(Slot[] reserved, Deployment deployment, string directory, bool join,
        CancellationToken ct)
    {
        InstanceSpec spec;
        try
        {
            spec = _platform.SpecFor(deployment, directory);
        }
        catch
        {
            foreach (var slot in reserved)
                Unreserve(slot);
            throw;
        }
        string? error = null;
        var starts = reserved.Select(async slot =>
        {
            try
            {
                var handle = await _platform.Provider.StartAsync(spec, ct);
                slot.Handle = handle;
                slot.Started = _platform.Time.GetUtcNow();
                LoadSeconds = LoadSeconds == 0 ? handle.LoadTime.TotalSeconds : (0.7 * LoadSeconds) + (0.3 * handle.LoadTime.TotalSeconds);
                _platform.Metrics?.InstanceStart(App, ready: true);
                if (join)
                    await JoinAsync(slot, deployment);
                return slot;
            }
            catch (Exception e) when (e is InstanceStartException or InvalidOperationException or FileNotFoundException or IOException)
            {
                Unreserve(slot);
                error = e.Message;
                _platform.Metrics?.InstanceStart(App, ready: false);
                Log.InstanceStartFailed(_logger, App, e.Message);
                return null;
            }
            catch
            {
                Unreserve(slot);
                throw;
            }
        }).ToArray();
        var slots = await Task.WhenAll(starts);
        return (slots.OfType<Slot>().ToArray(), error);
    }

    /// <summary>
    /// Takes room on the platform for up to <paramref name="count"/> instances of the app in <paramref name="directory"/>
    /// and adds a starting slot for each; fewer when the budget runs out, with the reason.
    /// </summary>
    private (Slot[] Slots, string? Capped) Reserve(int count, string directory)
    {
        var slots = new List<Slot>();
        string? reason = null;
        if (count <= 0)
            return ([], null);
        var workers = WorkersPerInstance(directory);
        while (slots.Count < count && _platform.Budget.TryTake(workers, out reason))
            slots.Add(new Slot { Workers = workers, Held = 1 });
        lock (_gate)
            _slots = [.. _slots, .. slots];
        return (slots.ToArray(), slots.Count < count ? reason : null);
    }

    /// <summary>A reserved slot whose instance did not start: out of the set, its room given back.</summary>
    private void Unreserve(Slot slot)
    {
        lock (_gate)
            _slots = [.. _slots.Where(s => s != slot)];
        Free(slot);
    }

    private void Hold(Slot slot, int workers)
    {
        if (Interlocked.Exchange(ref slot.Held, 1) != 0)
            return;
        slot.Workers = workers;
        _platform.Budget.Hold(workers);
    }

    /// <summary>Gives a slot's room back to the platform's budget (once, whichever path removes it first).</summary>
    private void Free(Slot slot)
    {
        if (Interlocked.Exchange(ref slot.Held, 0) == 1)
            _platform.Budget.Give(slot.Workers);
    }

    /// <summary>The worker processes one instance of the app runs: the platform's --workers N, else FUNCTIONS_WORKER_PROCESS_COUNT, else 1.</summary>
    private int WorkersPerInstance(string directory)
    {
        var arguments = _platform.Options.InstanceArguments;
        for (var i = 0; i + 1 < arguments.Count; i++)
        {
            if (arguments[i] == "--workers" && int.TryParse(arguments[i + 1], System.Globalization.NumberStyles.None,
                    System.Globalization.CultureInfo.InvariantCulture, out var n) && n >= 1)
                return n;
        }
        try
        {
            return PlatformContext.LoadApp(directory).Settings.WorkerProcessCount ?? 1;
        }
        catch (AppConfigException)
        {
            return 1; // its start fails on the same problem, and gives the room back
        }
    }

    /// <summary>A started instance joins the frontend: it is routed to, recorded, and announced.</summary>
    private async Task JoinAsync(Slot slot, Deployment deployment)
    {
        var handle = slot.Handle!;
        var now = _platform.Time.GetUtcNow();
        var routed = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        Task announced;
        lock (_gate)
        {
            var first = !_slots.Any(s => s.State == InstanceState.Ready);
            slot.State = InstanceState.Ready;
            // Queued in the same lock that decides "first", so that a second instance joining at once cannot announce
            // itself before the app's Loaded; handed to the handlers only once the instance is routed to and recorded.
            var started = new AppLifecycleEvent(AppLifecycleKind.InstanceStarted, App, deployment.Version, handle.Id, "ready", now);
            announced = RaiseLocked(routed.Task, first
                ? [new AppLifecycleEvent(AppLifecycleKind.Loaded, App, deployment.Version, null, $"first ready instance after {handle.LoadTime.TotalMilliseconds:0} ms", now), started]
                : [started]);
        }
        try
        {
            Frontend.AddInstance(new InstanceEndpoint(handle.Id, handle.BaseAddress, $"v{deployment.Version}"));
            if (_platform.Registry is { } registry)
                await registry.RecordAsync(handle, CancellationToken.None);
        }
        finally
        {
            routed.SetResult();
        }
        Log.InstanceReady(_logger, App, handle.Id, deployment.Version, handle.BaseAddress, handle.LoadTime.TotalMilliseconds);
        await announced;
    }

    /// <summary>Drains a slot its caller has marked <see cref="InstanceState.Draining"/>, then stops its process.</summary>
    private async Task DrainAndStopAsync(Slot slot, CancellationToken ct)
    {
        if (slot.Handle is null)
            return;
        var handle = slot.Handle;
        using (var deadline = CancellationTokenSource.CreateLinkedTokenSource(ct))
        {
            deadline.CancelAfter(_platform.Options.DrainDeadline);
            try
            {
                // The frontend sends it nothing new and reports when its last forwarded request has ended.
                await Frontend.DrainInstanceAsync(handle.Id, deadline.Token);
            }
            catch (OperationCanceledException) when (!ct.IsCancellationRequested)
            {
                Log.DrainDeadline(_logger, App, handle.Id, _platform.Options.DrainDeadline.TotalSeconds);
            }
        }
        Frontend.RemoveInstance(handle.Id);
        await _platform.Provider.StopAsync(handle, _platform.Options.DrainDeadline, CancellationToken.None);
        // Its room is free once its process is gone, not a storage round trip (its record's removal) later.
        Free(slot);
        if (_platform.Registry is { } registry)
            await registry.ForgetAsync(handle, CancellationToken.None);
        var now = _platform.Time.GetUtcNow();
        var stopped = new AppLifecycleEvent(AppLifecycleKind.InstanceStopped, App, handle.Version, handle.Id, "drained", now);
        Task announced;
        lock (_gate)
        {
            _slots = [.. _slots.Where(s => s != slot)];
            announced = RaiseLocked(Task.CompletedTask, _slots.Count == 0 && Unloaded
                ? [stopped, new AppLifecycleEvent(AppLifecycleKind.Unloaded, App, handle.Version, null, "every instance stopped", now)]
                : [stopped]);
        }
        Log.InstanceStopped(_logger, App, handle.Id);
        await announced;
    }

    private async Task ColdStartAsync(CancellationToken ct)
    {
        if (_disposed)
            return;
        if (Unloaded)
        {
            Log.ColdStart(_logger, App);
            _platform.Metrics?.ColdStart(App);
        }
        await ScaleToAsync(Math.Max(Math.Max(1, Policy.MinInstances), Desired), "cold start: a request found no ready instance", ct);
    }

    /// <summary>The provider saw an instance exit on its own: take it out and start a replacement.</summary>
    internal void OnInstanceExited(InstanceHandle handle, string reason)
    {
        Slot? slot;
        lock (_gate)
        {
            slot = _slots.FirstOrDefault(s => s.Handle?.Id == handle.Id);
            if (slot is null)
                return;
            _slots = [.. _slots.Where(s => s != slot)];
        }
        Free(slot);
        Frontend.RemoveInstance(handle.Id);
        Log.InstanceDied(_logger, App, handle.Id, reason);
        _ = RaiseAsync(new AppLifecycleEvent(AppLifecycleKind.InstanceStopped, App, handle.Version, handle.Id, $"exited: {reason}", _platform.Time.GetUtcNow()));
        if (_platform.Registry is { } registry)
            _ = registry.ForgetAsync(handle, CancellationToken.None);
        if (!_disposed && slot.State != InstanceState.Draining)
            _ = ReplaceAsync();
    }

    /// <summary>Hands <paramref name="e"/> to the app lifecycle handlers after this app's earlier events; never throws.</summary>
    private Task RaiseAsync(AppLifecycleEvent e)
    {
        lock (_gate)
            return RaiseLocked(Task.CompletedTask, [e]);
    }

    /// <summary>
    /// Queues <paramref name="events"/> behind this app's earlier ones (handlers see an app's events one at a time, in
    /// order), to be handed over once <paramref name="ready"/> completes. Called under <see cref="_gate"/>; the handlers
    /// run off the lock (the dispatch yields first). The returned task never faults.
    /// </summary>
    private Task RaiseLocked(Task ready, AppLifecycleEvent[] events)
    {
        _events = DispatchAfterAsync(_events, ready, events);
        return _events;
    }

    private async Task DispatchAfterAsync(Task previous, Task ready, AppLifecycleEvent[] events)
    {
        await previous.ConfigureAwait(ConfigureAwaitOptions.ForceYielding | ConfigureAwaitOptions.SuppressThrowing);
        await ready.ConfigureAwait(ConfigureAwaitOptions.SuppressThrowing);
        foreach (var e in events)
            await _platform.AppEvents.DispatchAsync(e).ConfigureAwait(false);
    }

    private void OnInstanceFailed(string id, Exception e)
    {
        // The frontend could not connect: the process may be gone (the provider reports that) or wedged.
        Log.InstanceUnreachable(_logger, App, id, e.Message);
    }

    private async Task ReplaceAsync()
    {
        try
        {
            await ScaleToAsync(Math.Max(Desired, 1), "replacing an instance that exited", CancellationToken.None);
        }
        catch (Exception e) when (e is InstanceStartException or InvalidOperationException or OperationCanceledException)
        {
            Log.InstanceStartFailed(_logger, App, e.Message);
        }
    }

    public async ValueTask DisposeAsync()
    {
        await _loopStop.CancelAsync();
        await _loopTask;
        await _changes.WaitAsync();
        try
        {
            _disposed = true;
            // Instances still starting are waited for (bounded by the provider's start timeout), then drained
            // with the rest: none is left running behind a stopped platform.
            await Volatile.Read(ref _starting);
            Slot[] all;
            lock (_gate)
                all = _slots.ToArray();
            lock (_gate)
                foreach (var s in all)
                    s.State = InstanceState.Draining;
            await Task.WhenAll(all.Select(s => DrainAndStopAsync(s, CancellationToken.None)));
        }
        finally
        {
            _changes.Release();
        }
        await Frontend.DisposeAsync();
        _loopStop.Dispose();
    }

    private sealed class Slot
    {
        public InstanceHandle? Handle { get; set; }

        public InstanceState State { get; set; } = InstanceState.Starting;

        public DateTimeOffset Started { get; set; } = DateTimeOffset.MaxValue;

        /// <summary>The workers this instance holds of the platform's budget.</summary>
        public int Workers { get; set; }

        /// <summary>1 while it holds its share of the platform's budget (given back once, when it is gone).</summary>
        public int Held;
    }
}
