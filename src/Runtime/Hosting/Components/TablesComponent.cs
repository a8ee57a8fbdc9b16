using FaaST.Hosting;
using FaaST.Runtime.Bindings;

namespace FaaST.Runtime.Hosting.Components;

/// <summary>
/// Table bindings (<see cref="TableBindings"/>): just after the invocation pipeline is built
/// (<see cref="ServiceLifecycleStage.Invocation"/> + 100) the invoker gets its table reader and writer, on the app's
/// storage accounts (its own, as for blobs and queues); nothing to stop.
/// </summary>
internal sealed class TablesComponent(StorageComponent storage, WorkersComponent workers) : ILifecycleParticipant
{
    public void Participate(IHostLifecycle lifecycle) =>
        lifecycle.Subscribe(nameof(TablesComponent), ServiceLifecycleStage.Invocation + 100, new LifecycleObserver(Build, _ => Task.CompletedTask));

    private Task Build(CancellationToken ct)
    {
        workers.Invoker.Tables = new TableBindings(storage.Accounts);
        return Task.CompletedTask;
    }
}
