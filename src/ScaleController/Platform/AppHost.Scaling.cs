using FaaST.Policy;
using FaaST.ScaleController.Deploy;
using FaaST.ScaleController.Providers;

namespace FaaST.ScaleController.Platform;

/// <summary>Changing an app's instance set: scaling to a target, unloading, rolling to a new deployment, draining and
/// stopping, and replacing an instance that exited.</summary>
internal sealed partial class AppHost
{
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
        ScheduleReload();
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
        CancellationToken ct, Prewarm.LoadScheduleOptions? loadSchedule = null)
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
            if (loadSchedule is not null)
                UpdateLoadSchedule(loadSchedule);
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
        await _platform.Registry.ForgetAsync(handle, CancellationToken.None);
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
        _ = _platform.Registry.ForgetAsync(handle, CancellationToken.None);
        if (!_disposed && slot.State != InstanceState.Draining)
            _ = ReplaceAsync();
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
}
