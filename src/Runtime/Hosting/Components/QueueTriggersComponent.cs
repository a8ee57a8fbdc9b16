using System.Globalization;
using FaaST.Hosting;
using FaaST.Runtime.Bindings;
using FaaST.Runtime.Triggers;

namespace FaaST.Runtime.Hosting.Components;

/// <summary>
/// Queue outputs and queue triggers. Just after the invocation pipeline is built (<see cref="ServiceLifecycleStage.Invocation"/>
/// + 100) the invoker gets its queue writer, so every trigger can write queue outputs; at
/// <see cref="ServiceLifecycleStage.Triggers"/> the queue-trigger pollers start. Stopping it (while draining) takes no
/// new messages and waits for the queue-triggered invocations in flight.
/// </summary>
internal sealed class QueueTriggersComponent(FunctionApp app, StorageComponent storage, WorkersComponent workers, ILoggerFactory loggers)
    : ILifecycleParticipant
{
    /// <summary>The app setting that shortens (or lengthens) a running message's lease; Azure's is 10 minutes.</summary>
    public const string LeaseSetting = "FAAST_QUEUE_MESSAGE_LEASE";

    private QueueOutput? _output;
    private QueueTriggerListener? _listener;

    /// <summary>Queue messages finished by this host's queue triggers since start.</summary>
    public long Completed => _listener?.Completed ?? 0;

    public void Participate(IHostLifecycle lifecycle)
    {
        lifecycle.Subscribe("QueueOutputs", ServiceLifecycleStage.Invocation + 100, new LifecycleObserver(BuildOutputs, _ => Task.CompletedTask));
        lifecycle.Subscribe(nameof(QueueTriggersComponent), ServiceLifecycleStage.Triggers, new LifecycleObserver(Start, StopAsync));
    }

    private Task BuildOutputs(CancellationToken ct)
    {
        _output = new QueueOutput(storage.Accounts, app.Host);
        workers.Invoker.QueueOutput = _output;
        return Task.CompletedTask;
    }

    private Task Start(CancellationToken ct)
    {
        var listener = new QueueTriggerListener(app, workers.Invoker, storage.Accounts, Lease(app.Settings), loggers.CreateLogger("FaaST.QueueTrigger"));
        if (!listener.HasTriggers)
            return Task.CompletedTask;
        _listener = listener;
        (_output ?? throw new InvalidOperationException("the queue outputs were not built (stage Invocation + 100)")).Observer = listener;
        listener.Start();
        return Task.CompletedTask;
    }

    /// <summary>FAAST_QUEUE_MESSAGE_LEASE: a time span from 00:00:02 to 7.00:00:00; default 10 minutes.</summary>
    internal static TimeSpan Lease(AppSettings settings)
    {
        var text = settings[LeaseSetting];
        if (string.IsNullOrWhiteSpace(text))
            return QueueTriggerListener.DefaultMessageLease;
        if (!TimeSpan.TryParse(text, CultureInfo.InvariantCulture, out var lease) || lease < TimeSpan.FromSeconds(2) || lease > TimeSpan.FromDays(7))
            throw new AppConfigException($"{settings.SourceOf(LeaseSetting)} must be a time span from 00:00:02 to 7.00:00:00 (how long a running " +
                $"queue message stays invisible to other instances, renewed at half time), not \"{LogText.Escape(text)}\"");
        return lease;
    }

    private async Task StopAsync(CancellationToken ct)
    {
        if (_output is not null)
            _output.Observer = null;
        if (_listener is not null)
            await _listener.DisposeAsync();
    }
}
