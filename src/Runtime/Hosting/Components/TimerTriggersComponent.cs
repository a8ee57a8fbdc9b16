using FaaST.Hosting;
using FaaST.Runtime.Triggers;

namespace FaaST.Runtime.Hosting.Components;

/// <summary>
/// Timer triggers (<see cref="TimerTriggerListener"/>): at <see cref="ServiceLifecycleStage.Triggers"/>, after the queue
/// triggers, each timer function starts competing for its listener lease; stopping it (while draining) fires no new
/// occurrence, waits for the one running, and releases the leases so another instance takes over at once.
/// </summary>
internal sealed class TimerTriggersComponent(FunctionApp app, StorageComponent storage, WorkersComponent workers, ILoggerFactory loggers)
    : ILifecycleParticipant
{
    private TimerTriggerListener? _listener;

    /// <summary>Timer invocations finished by this host since start.</summary>
    public long Completed => _listener?.Completed ?? 0;

    public void Participate(IHostLifecycle lifecycle) =>
        lifecycle.Subscribe(nameof(TimerTriggersComponent), ServiceLifecycleStage.Triggers + 10, new LifecycleObserver(Start, StopAsync));

    private Task Start(CancellationToken ct)
    {
        var listener = new TimerTriggerListener(app, workers.Invoker, storage.Accounts, Http.FunctionKeys.HostId(app),
            loggers.CreateLogger("FaaST.TimerTrigger"));
        if (!listener.HasTriggers)
            return Task.CompletedTask;
        _listener = listener;
        listener.Start();
        return Task.CompletedTask;
    }

    private async Task StopAsync(CancellationToken ct)
    {
        if (_listener is not null)
            await _listener.DisposeAsync();
    }
}
