using FaaST.Hosting;
using FaaST.Runtime.Triggers;

namespace FaaST.Runtime.Hosting.Components;

/// <summary>
/// Blob triggers (stage <see cref="ServiceLifecycleStage.Triggers"/>): scans for new blobs and fires at
/// once for the runtime's own writes. Stopping it (while draining) takes no new blobs and waits for
/// the triggered invocations in flight.
/// </summary>
internal sealed class TriggersComponent(FunctionApp app, StorageComponent storage, CacheComponent cache,
    WorkersComponent workers, ILoggerFactory loggers) : ILifecycleParticipant
{
    private BlobTriggerListener? _listener;

    /// <summary>Blob-triggered invocations finished since start.</summary>
    public long Completed => _listener?.Completed ?? 0;

    public void Participate(IHostLifecycle lifecycle) =>
        lifecycle.Subscribe(nameof(TriggersComponent), ServiceLifecycleStage.Triggers, new LifecycleObserver(Start, StopAsync));

    private Task Start(CancellationToken ct)
    {
        var invoker = workers.Invoker;
        _listener = new BlobTriggerListener(app, invoker, storage.Accounts, cache.Bindings, loggers.CreateLogger("FaaST.BlobTrigger"));
        invoker.WriteObserver = _listener;
        _listener.Start();
        return Task.CompletedTask;
    }

    private async Task StopAsync(CancellationToken ct)
    {
        if (_listener is not null)
            await _listener.DisposeAsync();
    }
}
