using System.Collections.Concurrent;
using System.Globalization;
using System.Text.Json;
using FaaST.Protos.Worker;
using FaaST.Runtime.Bindings;
using FaaST.Runtime.Invocation;
using FaaST.Storage;
using Google.Protobuf;

namespace FaaST.Runtime.Triggers;

/// <summary>
/// Runs queueTrigger functions with the queue extension's semantics (host.json <c>extensions.queues</c>): each
/// function polls its queue, taking up to batchSize messages at a time while at most newBatchThreshold are in
/// flight; an empty queue is polled again after a wait that doubles from 100 ms up to maxPollingInterval, and a
/// message this instance writes through a queue output wakes the poller at once (it still goes through the
/// queue, so whichever instance dequeues it runs it, once). A taken message stays invisible to others while its
/// invocation runs (the lease, renewed at half time); success deletes it, failure makes it visible again after
/// visibilityTimeout, and the maxDequeueCount-th failure moves it to QUEUE-poison. A host that dies mid-invocation
/// loses nothing: the message reappears when its lease runs out (at-least-once).
/// </summary>
internal sealed class QueueTriggerListener : IQueueWriteObserver, IAsyncDisposable
{
    /// <summary>The shortest wait between polls of an empty queue (and the first one), as in Azure Functions.</summary>
    public static readonly TimeSpan MinPollingInterval = TimeSpan.FromMilliseconds(100);

    /// <summary>How long a taken message stays invisible while it runs, by default (Azure's: 10 minutes, renewed).</summary>
    public static readonly TimeSpan DefaultMessageLease = TimeSpan.FromMinutes(10);

    private readonly FunctionApp _app;
    private readonly FunctionInvoker _invoker;
    private readonly StorageAccounts _accounts;
    private readonly ILogger _logger;
    private readonly Watch[] _watches;
    private readonly TimeSpan _lease;
    private readonly int _threshold;
    private readonly CancellationTokenSource _stopPolling = new();
    private readonly CancellationTokenSource _abort = new();
    private readonly List<Task> _pollers = [];
    private readonly ConcurrentDictionary<long, Task> _inFlight = new();
    private long _nextId;
    private long _completed;

    private sealed class Watch(FunctionDefinition function, BindingMetadata trigger, string queue, string? account)
    {
        public FunctionDefinition Function { get; } = function;
        public BindingMetadata Trigger { get; } = trigger;
        public string Queue { get; } = queue;
        public string Poison { get; } = queue + "-poison";
        public string? Account { get; } = account;

        /// <summary>Released by own writes and by finished invocations: the poller looks again at once.</summary>
        public SemaphoreSlim Wake { get; } = new(0, 1);

        public int InFlight;
    }

    /// <summary>A taken message's pop receipt, which each renewal replaces.</summary>
    private sealed class Lease(string popReceipt)
    {
        public string PopReceipt = popReceipt;
    }

    public QueueTriggerListener(FunctionApp app, FunctionInvoker invoker, StorageAccounts accounts, TimeSpan lease, ILogger logger)
    {
        _app = app;
        _invoker = invoker;
        _accounts = accounts;
        _lease = lease;
        _logger = logger;
        // newBatchThreshold 0 still lets one batch in at a time.
        _threshold = app.Host.EffectiveQueueNewBatchThreshold;
        _watches = app.Runnable
            .Where(f => f.Trigger is { Type: BindingMetadata.QueueTrigger })
            .Select(f => new Watch(f, f.Trigger!, f.Trigger!.QueueName!.Pattern, accounts.AccountOf(f.Trigger.Connection)))
            .ToArray();
    }

    public bool HasTriggers => _watches.Length > 0;

    /// <summary>Messages finished (run, retried later, or poisoned) since start.</summary>
    public long Completed => Interlocked.Read(ref _completed);

    public void Start()
    {
        var host = _app.Host;
        foreach (var watch in _watches)
        {
            Log.QueueListening(_logger, watch.Function.Name, watch.Queue, host.QueueBatchSize, _threshold, host.QueueMaxDequeueCount,
                host.QueueMaxPollingInterval, host.QueueBase64 ? "base64" : "none");
            _pollers.Add(Task.Run(() => PollAsync(watch, _stopPolling.Token), CancellationToken.None));
        }
    }

    public void OnQueueMessagesWritten(string? account, string queue)
    {
        foreach (var watch in _watches)
            if (watch.Account == account && watch.Queue == queue)
                Signal(watch);
    }

    private static void Signal(Watch watch)
    {
        // At most one pending wake-up: a write during a poll that came back empty still makes the next wait return.
        if (watch.Wake.CurrentCount == 0)
        {
            try
            {
                watch.Wake.Release();
            }
            catch (SemaphoreFullException)
            {
                // another writer woke it first
            }
        }
    }

    private async Task PollAsync(Watch watch, CancellationToken stop)
    {
        var store = _accounts.GetQueues(watch.Trigger.Connection);
        var host = _app.Host;
        var wait = MinPollingInterval;
        var failing = false;
        while (!stop.IsCancellationRequested)
        {
            try
            {
                if (Volatile.Read(ref watch.InFlight) > _threshold)
                {
                    // Enough in flight: the next finished invocation wakes this loop.
                    await watch.Wake.WaitAsync(host.QueueMaxPollingInterval, stop);
                    continue;
                }
                var messages = await store.ReceiveAsync(watch.Queue, host.QueueBatchSize, _lease, stop);
                failing = false;
                if (messages.Count > 0)
                {
                    wait = MinPollingInterval;
                    foreach (var message in messages)
                        Dispatch(watch, store, message);
                    continue;
                }
            }
            catch (OperationCanceledException) when (stop.IsCancellationRequested)
            {
                break;
            }
            catch (QueueStorageException e) when (e.Status == 404)
            {
                // The queue does not exist yet: nothing to run; it is polled as an empty one.
            }
            catch (Exception e) when (e is StorageUnavailableException or QueueStorageException or HttpRequestException)
            {
                if (!failing)
                    Log.QueuePollFailed(_logger, e, watch.Queue, watch.Function.Name, LogText.Escape(e.Message));
                failing = true;
            }
            try
            {
                if (await watch.Wake.WaitAsync(wait, stop))
                    wait = MinPollingInterval;
                else
                    wait = TimeSpan.FromTicks(Math.Min(wait.Ticks * 2, host.QueueMaxPollingInterval.Ticks));
            }
            catch (OperationCanceledException)
            {
                break;
            }
        }
    }

    private void Dispatch(Watch watch, IQueueStore store, ReceivedQueueMessage message)
    {
        Interlocked.Increment(ref watch.InFlight);
        var id = Interlocked.Increment(ref _nextId);
        var task = Task.Run(() => ProcessAsync(watch, store, message), CancellationToken.None);
        _inFlight[id] = task;
        _ = task.ContinueWith((_, state) => _inFlight.TryRemove((long)state!, out Task? _), id, CancellationToken.None,
            TaskContinuationOptions.ExecuteSynchronously, TaskScheduler.Default);
    }

    private async Task ProcessAsync(Watch watch, IQueueStore store, ReceivedQueueMessage message)
    {
        var host = _app.Host;
        var lease = new Lease(message.PopReceipt);
        var abort = _abort.Token;
        try
        {
            // A message already past its attempts (its host died while running it) goes straight to the poison queue.
            if (message.DequeueCount > host.QueueMaxDequeueCount)
            {
                await PoisonAsync(watch, store, message, lease, "its earlier attempts did not finish (the host running it stopped)", null, abort);
                return;
            }
            using var renewing = CancellationTokenSource.CreateLinkedTokenSource(abort);
            var renewal = RenewAsync(watch, store, message, lease, renewing.Token);
            await using var invocation = new InvocationContext(watch.Function.Name);
            Exception? failure = null;
            try
            {
                var value = Bind(watch, message, invocation);
                await _invoker.InvokeAsync(watch.Function, invocation, value, abort);
            }
            catch (Exception e) when (!(e is OperationCanceledException && abort.IsCancellationRequested))
            {
                failure = e;
            }
            finally
            {
                await renewing.CancelAsync();
                await renewal;
            }
            if (failure is null)
            {
                Log.QueueExecuted(_logger, watch.Function.Name, invocation.InvocationId, LogText.Escape(message.Id), watch.Queue, message.DequeueCount);
                await CompleteAsync(watch, store, message, lease, "DeleteMessage", () => store.DeleteAsync(watch.Queue, message.Id, lease.PopReceipt, abort));
                return;
            }
            var detail = Detail(failure);
            if (message.DequeueCount >= host.QueueMaxDequeueCount)
            {
                await PoisonAsync(watch, store, message, lease, detail, failure as FunctionFailedException is null ? failure : null, abort);
                return;
            }
            Log.QueueInvocationFailed(_logger, failure is FunctionFailedException ? null : failure, watch.Function.Name, invocation.InvocationId,
                LogText.Escape(message.Id), watch.Queue, message.DequeueCount, host.QueueMaxDequeueCount, host.QueueVisibilityTimeout, detail);
            await CompleteAsync(watch, store, message, lease, "UpdateMessage",
                () => store.UpdateVisibilityAsync(watch.Queue, message.Id, lease.PopReceipt, host.QueueVisibilityTimeout, abort));
        }
        catch (OperationCanceledException) when (abort.IsCancellationRequested)
        {
            // The host gave up waiting: the message reappears after its lease.
        }
        finally
        {
            // Only a poller held back by newBatchThreshold needs waking; waking it otherwise costs a receive per message.
            if (Interlocked.Decrement(ref watch.InFlight) == _threshold)
                Signal(watch);
            Interlocked.Increment(ref _completed);
        }
    }

    /// <summary>
    /// The trigger's value and binding data: the message as JSON when it is a JSON object or array, else as text
    /// (bytes when it is not UTF-8); its metadata (Id, DequeueCount, InsertionTime, ExpirationTime, NextVisibleTime,
    /// PopReceipt, QueueTrigger); and a JSON message's properties, along paths, for {expressions}.
    /// </summary>
    private TypedData Bind(Watch watch, ReceivedQueueMessage message, InvocationContext invocation)
    {
        var bytes = QueueMessageCodec.Decode(message.Text, _app.Host.QueueBase64, $"message {LogText.Escape(message.Id)} on queue {watch.Queue}");
        var data = invocation.BindingData;
        data["Id"] = message.Id;
        data["PopReceipt"] = message.PopReceipt;
        data["DequeueCount"] = message.DequeueCount.ToString(CultureInfo.InvariantCulture);
        if (message.InsertionTime is { } inserted)
            data["InsertionTime"] = inserted.ToString("o", CultureInfo.InvariantCulture);
        if (message.ExpirationTime is { } expires)
            data["ExpirationTime"] = expires.ToString("o", CultureInfo.InvariantCulture);
        if (message.NextVisibleTime is { } visible)
            data["NextVisibleTime"] = visible.ToString("o", CultureInfo.InvariantCulture);
        // A number for the workers (Node's context.bindingData.dequeueCount), a string for {expressions}.
        invocation.TriggerMetadata["DequeueCount"] = new TypedData { Json = data["DequeueCount"] };
        var text = QueueMessageCodec.TryText(bytes);
        if (text is null)
            return new TypedData { Bytes = ByteString.CopyFrom(bytes) };
        data["QueueTrigger"] = text;
        if (QueueJson.IsJson(text))
        {
            invocation.SetJsonPayload(bytes, "the queue message");
            return new TypedData { Json = text };
        }
        return new TypedData { String = text };
    }

    /// <summary>Keeps a running message invisible: every half lease, another lease (a new pop receipt).</summary>
    private async Task RenewAsync(Watch watch, IQueueStore store, ReceivedQueueMessage message, Lease lease, CancellationToken ct)
    {
        var half = _lease / 2;
        try
        {
            while (true)
            {
                await Task.Delay(half, ct);
                lease.PopReceipt = await store.UpdateVisibilityAsync(watch.Queue, message.Id, lease.PopReceipt, _lease, ct);
            }
        }
        catch (OperationCanceledException) when (ct.IsCancellationRequested)
        {
            // the invocation ended
        }
        catch (Exception e) when (e is QueueStorageException or StorageUnavailableException)
        {
            Log.QueueMessageLeaseLost(_logger, e, LogText.Escape(message.Id), watch.Queue, "renewing its visibility", LogText.Escape(e.Message));
        }
    }

    private async Task PoisonAsync(Watch watch, IQueueStore store, ReceivedQueueMessage message, Lease lease, string detail, Exception? exception,
        CancellationToken ct)
    {
        Log.QueueMessagePoisoned(_logger, exception, LogText.Escape(message.Id), watch.Queue, message.DequeueCount, _app.Host.QueueMaxDequeueCount,
            watch.Function.Name, watch.Poison, detail);
        // The text as it was (still encoded): a tool that replays poison messages puts them back unchanged.
        await CompleteAsync(watch, store, message, lease, "moving it to the poison queue", async () =>
        {
            await QueueOutput.SendAsync(store, watch.Poison, message.Text, ct);
            await store.DeleteAsync(watch.Queue, message.Id, lease.PopReceipt, ct);
        });
    }

    /// <summary>The last step on a message; if it fails (storage, or the lease was lost), the message simply runs again later.</summary>
    private async Task CompleteAsync(Watch watch, IQueueStore store, ReceivedQueueMessage message, Lease lease, string operation, Func<Task> step)
    {
        try
        {
            await step();
        }
        catch (Exception e) when (e is QueueStorageException or StorageUnavailableException)
        {
            Log.QueueMessageLeaseLost(_logger, e, LogText.Escape(message.Id), watch.Queue, operation, LogText.Escape(e.Message));
        }
    }

    private static string Detail(Exception e) => e is FunctionFailedException f
        ? $"{LogText.Escape(f.Message)}\n{LogText.EscapeKeepingLines(f.WorkerStackTrace)}"
        : LogText.Escape(e.Message);

    /// <summary>
    /// Stops taking messages, then waits for the invocations in flight (each is bounded by functionTimeout).
    /// Messages taken but not started are not lost: they reappear after their lease.
    /// </summary>
    public async ValueTask DisposeAsync()
    {
        await _stopPolling.CancelAsync();
        await Task.WhenAll(_pollers);
        foreach (var watch in _watches)
            if (Volatile.Read(ref watch.InFlight) > 0)
                Log.QueueDraining(_logger, watch.Function.Name, watch.Queue, Volatile.Read(ref watch.InFlight));
        await Task.WhenAll(_inFlight.Values);
        await _abort.CancelAsync();
        _stopPolling.Dispose();
        _abort.Dispose();
        foreach (var watch in _watches)
            watch.Wake.Dispose();
    }
}

/// <summary>Whether a queue message is JSON (an object or array): then it goes to the worker as JSON, and its
/// properties are binding data along paths ({name}, {a.b}) through <see cref="InvocationContext.SetJsonPayload"/>.</summary>
internal static class QueueJson
{
    public static bool IsJson(string text)
    {
        var span = text.AsSpan().TrimStart();
        if (span.Length == 0 || (span[0] != '{' && span[0] != '['))
            return false;
        try
        {
            using var doc = JsonDocument.Parse(text);
            return true;
        }
        catch (JsonException)
        {
            return false; // text that only looks like JSON
        }
    }
}
