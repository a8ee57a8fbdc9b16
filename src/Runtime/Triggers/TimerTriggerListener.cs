using System.Text;
using System.Text.Json;
using System.Text.Json.Nodes;
using FaaST.Protos.Worker;
using FaaST.Runtime.Invocation;
using FaaST.Storage;

namespace FaaST.Runtime.Triggers;

/// <summary>
/// Timer triggers (timerTrigger, Python v2 <c>@app.schedule</c>, Node v4 <c>app.timer</c>): each function fires at its
/// schedule's occurrences (NCRONTAB with seconds or a TimeSpan, <see cref="TimerSchedule"/>, UTC), once per occurrence
/// across all instances of the app, as the Functions host's singleton does it: only the instance holding the lease on
/// <c>azure-webjobs-hosts/locks/{hostId}/{function}.Listener</c> (15 s, renewed every 5 s) fires; another takes over
/// within a lease period when it dies. With useMonitor the schedule status {Last, Next, LastUpdated} is kept in
/// <c>azure-webjobs-hosts/timers/{hostId}/{function}/status</c> as Azure keeps it, so an instance that takes over (or a
/// restarted app) finds an occurrence that nobody ran (Next in the past) and runs it once at once, past due.
/// runOnStartup runs the function once when this instance starts to hold the lease. The payload is Azure's:
/// {"Schedule":{"AdjustForDST":true},"ScheduleStatus":{...} or null,"IsPastDue":bool}.
/// </summary>
internal sealed partial class TimerTriggerListener : IAsyncDisposable
{
    public const string Container = "azure-webjobs-hosts";
    private const string HostStorage = "AzureWebJobsStorage";

    /// <summary>The listener lease: 15 s (the service's shortest), renewed every 5 s, as the host's singleton does.</summary>
    internal static readonly TimeSpan LeaseDuration = TimeSpan.FromSeconds(15);
    private static readonly TimeSpan RenewEvery = TimeSpan.FromSeconds(5);
    private static readonly TimeSpan MaxWait = TimeSpan.FromDays(1);

    private readonly FunctionInvoker _invoker;
    private readonly StorageAccounts _accounts;
    private readonly string _hostId;
    private readonly ILogger _logger;
    private readonly TimeProvider _time;
    private readonly (FunctionDefinition Function, TimerTriggerSettings Timer)[] _timers;
    private readonly CancellationTokenSource _stop = new();
    private readonly List<Task> _loops = [];
    private long _completed;

    public TimerTriggerListener(FunctionApp app, FunctionInvoker invoker, StorageAccounts accounts, string hostId, ILogger logger,
        TimeProvider? time = null)
    {
        _invoker = invoker;
        _accounts = accounts;
        _hostId = hostId;
        _logger = logger;
        _time = time ?? TimeProvider.System;
        _timers = app.Runnable.Where(f => f.Trigger is { Type: BindingMetadata.TimerTrigger, Timer: not null })
            .Select(f => (f, f.Trigger!.Timer!)).ToArray();
    }

    public bool HasTriggers => _timers.Length > 0;

    /// <summary>Timer invocations finished (succeeded or failed) since start (tests wait on it).</summary>
    public long Completed => Interlocked.Read(ref _completed);

    public void Start()
    {
        foreach (var (function, timer) in _timers)
            _loops.Add(Task.Run(() => RunAsync(function, timer, _stop.Token)));
    }

    private string LockBlob(string function) => $"locks/{_hostId}/{function}.Listener";

    private string StatusBlob(string function) => $"timers/{_hostId}/{function}/status";

    /// <summary>One function: take the listener lease (waiting while another instance holds it), then fire its
    /// occurrences while the lease holds; a lost lease (storage out, renewal refused) goes back to waiting for it.</summary>
    private async Task RunAsync(FunctionDefinition function, TimerTriggerSettings timer, CancellationToken stop)
    {
        var store = _accounts.Get(HostStorage);
        var lockBlob = LockBlob(function.Name);
        var first = true;
        while (!stop.IsCancellationRequested)
        {
            BlobLeaseInfo? lease;
            try
            {
                lease = await TryAcquireAsync(store, lockBlob, stop);
            }
            catch (OperationCanceledException) when (stop.IsCancellationRequested)
            {
                return;
            }
            catch (Exception e)
            {
                Log.TimerLeaseFailed(_logger, e, function.Name, lockBlob);
                await DelayAsync(RenewEvery, stop);
                continue;
            }
            if (lease is null)
            {
                // Another instance fires this function; try again within the lease's life.
                await DelayAsync(RenewEvery, stop);
                continue;
            }
            Log.TimerListening(_logger, function.Name, timer.Schedule.Expression, lockBlob);
            using var held = CancellationTokenSource.CreateLinkedTokenSource(stop);
            var renewal = RenewAsync(store, lockBlob, lease.LeaseId, function.Name, held);
            try
            {
                await FireWhileHeldAsync(store, function, timer, runOnStartup: first && timer.RunOnStartup,
                    () => RenewBeforeRunAsync(store, lockBlob, lease.LeaseId, function.Name, held), held.Token);
            }
            catch (OperationCanceledException) when (held.IsCancellationRequested)
            {
                // stopping, or the lease was lost (logged by the renewal)
            }
            first = false;
            await held.CancelAsync();
            await renewal;
            if (stop.IsCancellationRequested)
            {
                try
                {
                    await store.ReleaseLeaseAsync(Container, lockBlob, lease.LeaseId, CancellationToken.None);
                }
                catch (Exception e) when (e is BlobStorageException or StorageUnavailableException)
                {
                    // it expires within LeaseDuration; another instance then takes over
                }
            }
        }
    }

    private static async Task<BlobLeaseInfo?> TryAcquireAsync(IBlobStore store, string lockBlob, CancellationToken ct)
    {
        try
        {
            return await store.TryAcquireLeaseAsync(Container, lockBlob, LeaseDuration, ct);
        }
        catch (BlobStorageException e) when (e.Status == 404)
        {
            await store.CreateContainerIfNotExistsAsync(Container, ct);
            try
            {
                await store.UploadAsync(Container, lockBlob, ReadOnlyMemory<byte>.Empty, ifNoneMatch: "*", ct: ct);
            }
            catch (BlobConditionFailedException)
            {
                // another instance created it first
            }
            return await store.TryAcquireLeaseAsync(Container, lockBlob, LeaseDuration, ct);
        }
    }

    /// <summary>A renewal right before a run; false (and <paramref name="held"/> cancelled) when the lease is lost.</summary>
    private async Task<bool> RenewBeforeRunAsync(IBlobStore store, string lockBlob, string leaseId, string function, CancellationTokenSource held)
    {
        try
        {
            await store.RenewLeaseAsync(Container, lockBlob, leaseId, held.Token);
            return true;
        }
        catch (OperationCanceledException) when (held.IsCancellationRequested)
        {
            return false;
        }
        catch (Exception e)
        {
            Log.TimerLeaseLost(_logger, e, function, lockBlob);
            await held.CancelAsync();
            return false;
        }
    }

    /// <summary>Renews the lease every 5 s until <paramref name="held"/> ends; a refused or failing renewal cancels
    /// <paramref name="held"/> (the firing loop stops before its next occurrence) after logging it.</summary>
    private async Task RenewAsync(IBlobStore store, string lockBlob, string leaseId, string function, CancellationTokenSource held)
    {
        while (!held.IsCancellationRequested)
        {
            if (!await DelayAsync(RenewEvery, held.Token))
                return;
            try
            {
                await store.RenewLeaseAsync(Container, lockBlob, leaseId, held.Token);
            }
            catch (OperationCanceledException) when (held.IsCancellationRequested)
            {
                return;
            }
            catch (Exception e)
            {
                Log.TimerLeaseLost(_logger, e, function, lockBlob);
                await held.CancelAsync();
                return;
            }
        }
    }

    private async Task FireWhileHeldAsync(IBlobStore store, FunctionDefinition function, TimerTriggerSettings timer, bool runOnStartup,
        Func<Task<bool>> stillHeld, CancellationToken held)
    {
        var schedule = timer.Schedule;
        var now = _time.GetUtcNow().UtcDateTime;
        JsonObject? status = timer.UseMonitor ? await ReadStatusAsync(store, function.Name, held) : null;
        // An occurrence nobody ran (this app was down, or the instance that held the lease died before it): once, now.
        if (status is not null && ReadTime(status, "Next") is { } missed && missed < now)
        {
            Log.TimerPastDue(_logger, function.Name, missed);
            status = await InvokeAsync(store, function, timer, missed, status, isPastDue: true, held);
        }
        else if (runOnStartup)
        {
            status = await InvokeAsync(store, function, timer, now, status, isPastDue: false, held);
        }
        else if (timer.UseMonitor && status is null)
        {
            // The first holder ever: record the next occurrence, so that a later holder can tell it was missed.
            status = await WriteStatusAsync(store, function.Name, last: null, next: schedule.NextAfter(now), held);
        }
        var fired = DateTime.MinValue;
        while (!held.IsCancellationRequested)
        {
            now = _time.GetUtcNow().UtcDateTime;
            // After the last occurrence fired, never at it again (a timer that woke a tick early must not repeat it).
            // An interval (TimeSpan) schedule counts from the last occurrence, not from when its run ended.
            var nextOrNull = schedule.Interval is { } interval && fired != DateTime.MinValue
                ? (fired + interval > now ? fired + interval : now)
                : schedule.NextAfter(now > fired ? now : fired);
            if (nextOrNull is not { } next)
                return; // no occurrence left (a schedule that never matches again)
            var wait = next - now;
            if (wait > MaxWait)
            {
                // Task.Delay takes at most ~49 days; a yearly schedule waits a day at a time.
                if (!await DelayAsync(MaxWait, held))
                    return;
                continue;
            }
            if (!await DelayAsync(wait, held))
                return;
            // Renewed once more right before the run: a holder stalled past the lease's 15 s (a paused VM, a starved
            // process) finds out here, before it runs an occurrence the instance that took over may have run.
            if (!await stillHeld())
                return;
            fired = next;
            status = await InvokeAsync(store, function, timer, next, status, isPastDue: false, held);
        }
    }

    /// <summary>Runs one occurrence (<paramref name="scheduled"/>) and, with useMonitor, records it as run.</summary>
    private async Task<JsonObject?> InvokeAsync(IBlobStore store, FunctionDefinition function, TimerTriggerSettings timer, DateTime scheduled,
        JsonObject? status, bool isPastDue, CancellationToken held)
    {
        var payload = new JsonObject
        {
            ["Schedule"] = new JsonObject { ["AdjustForDST"] = true },
            ["ScheduleStatus"] = status?.DeepClone(),
            ["IsPastDue"] = isPastDue,
        };
        var started = _time.GetUtcNow().UtcDateTime;
        await using var invocation = new InvocationContext(function.Name);
        Log.TimerExecuting(_logger, function.Name, invocation.InvocationId, scheduled, (started - scheduled).TotalMilliseconds, isPastDue);
        try
        {
            await _invoker.InvokeAsync(function, invocation, new TypedData { Json = payload.ToJsonString() }, held);
            Log.TimerExecuted(_logger, function.Name, invocation.InvocationId);
        }
        catch (OperationCanceledException) when (held.IsCancellationRequested)
        {
            throw;
        }
        catch (Exception e)
        {
            // A failed run is not retried (Azure's timer does not retry either); the next occurrence runs as scheduled.
            Log.TimerFailed(_logger, function.Name, invocation.InvocationId, LogText.Escape(e.Message));
        }
        finally
        {
            Interlocked.Increment(ref _completed);
        }
        if (!timer.UseMonitor)
            return null;
        var after = scheduled > started ? scheduled : started;
        return await WriteStatusAsync(store, function.Name, last: scheduled, next: timer.Schedule.NextAfter(after), held);
    }

    private async Task<JsonObject?> ReadStatusAsync(IBlobStore store, string function, CancellationToken ct)
    {
        try
        {
            var content = await store.DownloadAsync(Container, StatusBlob(function), ct);
            return content is null ? null : JsonNode.Parse(content.Data) as JsonObject;
        }
        catch (JsonException e)
        {
            Log.TimerStatusUnreadable(_logger, function, StatusBlob(function), e.Message);
            return null;
        }
    }

    private async Task<JsonObject> WriteStatusAsync(IBlobStore store, string function, DateTime? last, DateTime? next, CancellationToken ct)
    {
        var now = _time.GetUtcNow().UtcDateTime;
        var status = new JsonObject
        {
            ["Last"] = (last ?? DateTime.MinValue).ToString("o", System.Globalization.CultureInfo.InvariantCulture),
            ["Next"] = next?.ToString("o", System.Globalization.CultureInfo.InvariantCulture),
            ["LastUpdated"] = now.ToString("o", System.Globalization.CultureInfo.InvariantCulture),
        };
        try
        {
            await store.UploadAsync(Container, StatusBlob(function), Encoding.UTF8.GetBytes(status.ToJsonString()), contentType: "application/json", ct: ct);
        }
        catch (Exception e) when (e is BlobStorageException or StorageUnavailableException)
        {
            // The run happened; a later holder may run this occurrence again as past due (at-least-once).
            Log.TimerStatusNotWritten(_logger, e, function, StatusBlob(function));
        }
        return status;
    }

    private static DateTime? ReadTime(JsonObject status, string name) =>
        status[name] is JsonValue v && v.TryGetValue(out string? text) &&
        DateTime.TryParse(text, System.Globalization.CultureInfo.InvariantCulture,
            System.Globalization.DateTimeStyles.AdjustToUniversal | System.Globalization.DateTimeStyles.AssumeUniversal, out var t)
            ? t : null;

    /// <summary>False when cancelled.</summary>
    private async Task<bool> DelayAsync(TimeSpan delay, CancellationToken ct)
    {
        try
        {
            if (delay > TimeSpan.Zero)
                await Task.Delay(delay, _time, ct);
            return !ct.IsCancellationRequested;
        }
        catch (OperationCanceledException)
        {
            return false;
        }
    }

    public async ValueTask DisposeAsync()
    {
        await _stop.CancelAsync();
        try
        {
            await Task.WhenAll(_loops);
        }
        catch (OperationCanceledException)
        {
        }
        _stop.Dispose();
    }

    private static partial class Log
    {
        [LoggerMessage(EventId = 5700, Level = LogLevel.Information, Message = "Timer {Function} ({Schedule}): this instance fires it (lease on {Lock})")]
        public static partial void TimerListening(ILogger logger, string function, string schedule, string @lock);

        [LoggerMessage(EventId = 5701, Level = LogLevel.Information,
            Message = "Executing {Function} ({InvocationId}) for the timer occurrence {Scheduled:o} ({LateMs:0.0} ms after it; past due: {PastDue})")]
        public static partial void TimerExecuting(ILogger logger, string function, string invocationId, DateTime scheduled, double lateMs, bool pastDue);

        [LoggerMessage(EventId = 5702, Level = LogLevel.Information, Message = "Executed {Function} ({InvocationId})")]
        public static partial void TimerExecuted(ILogger logger, string function, string invocationId);

        [LoggerMessage(EventId = 5703, Level = LogLevel.Error,
            Message = "Executed {Function} ({InvocationId}) failed; the timer runs it again at its next occurrence: {Error}")]
        public static partial void TimerFailed(ILogger logger, string function, string invocationId, string error);

        [LoggerMessage(EventId = 5704, Level = LogLevel.Warning, Message = "Timer {Function}: the occurrence {Missed:o} was not run (past due); running it now")]
        public static partial void TimerPastDue(ILogger logger, string function, DateTime missed);

        [LoggerMessage(EventId = 5705, Level = LogLevel.Warning, Message = "Timer {Function}: lost the lease on {Lock}; another instance fires it now")]
        public static partial void TimerLeaseLost(ILogger logger, Exception e, string function, string @lock);

        [LoggerMessage(EventId = 5706, Level = LogLevel.Warning, Message = "Timer {Function}: cannot take the lease on {Lock}; trying again in 5 s")]
        public static partial void TimerLeaseFailed(ILogger logger, Exception e, string function, string @lock);

        [LoggerMessage(EventId = 5707, Level = LogLevel.Warning, Message = "Timer {Function}: the schedule status {Blob} is not JSON ({Error}); starting afresh")]
        public static partial void TimerStatusUnreadable(ILogger logger, string function, string blob, string error);

        [LoggerMessage(EventId = 5708, Level = LogLevel.Warning, Message = "Timer {Function}: could not write the schedule status {Blob}")]
        public static partial void TimerStatusNotWritten(ILogger logger, Exception e, string function, string blob);
    }
}
