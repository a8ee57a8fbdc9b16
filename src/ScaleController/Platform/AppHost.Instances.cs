using FaaST.Peers;
using FaaST.ScaleController.Deploy;
using FaaST.ScaleController.Frontend;
using FaaST.ScaleController.Providers;

namespace FaaST.ScaleController.Platform;

/// <summary>Starting an app's instances: taking over a crashed platform's, the first ones of a deploy (current only once
/// one is ready), each joining the frontend once ready, and a cold start after an unload.</summary>
internal sealed partial class AppHost
{
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
            await _platform.Registry.ForgetAsync(r, ct);
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

    /// <summary>
    /// Starts an instance in each of the <paramref name="reserved"/> slots, of <paramref name="deployment"/> at once and waits for them. Each that is
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
                _platform.Metrics.InstanceStart(App, ready: true);
                if (join)
                    await JoinAsync(slot, deployment);
                return slot;
            }
            catch (Exception e) when (e is InstanceStartException or InvalidOperationException or FileNotFoundException or IOException)
            {
                Unreserve(slot);
                error = e.Message;
                _platform.Metrics.InstanceStart(App, ready: false);
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
            await _platform.Registry.RecordAsync(handle, CancellationToken.None);
        }
        finally
        {
            routed.SetResult();
        }
        Log.InstanceReady(_logger, App, handle.Id, deployment.Version, handle.BaseAddress, handle.LoadTime.TotalMilliseconds);
        await announced;
    }

    private async Task ColdStartAsync(CancellationToken ct)
    {
        if (_disposed)
            return;
        if (Unloaded)
        {
            Log.ColdStart(_logger, App);
            _platform.Metrics.ColdStart(App);
        }
        await ScaleToAsync(Math.Max(Math.Max(1, Policy.MinInstances), Desired), "cold start: a request found no ready instance", ct);
    }
}
