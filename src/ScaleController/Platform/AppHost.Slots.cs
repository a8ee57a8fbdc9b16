using FaaST.ScaleController.Providers;

namespace FaaST.ScaleController.Platform;

/// <summary>An app's slots in the platform's budget (instances and workers), and its lifecycle events handed to the
/// <see cref="IAppLifecycle"/> handlers in order, off the lock.</summary>
internal sealed partial class AppHost
{
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
