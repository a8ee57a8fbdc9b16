namespace FaaST.Runtime;

/// <summary>
/// The runtime's log messages, source-generated (no boxing, no parsing of the template per call), with event ids
/// 5000-5099 (blob triggers and their receipts: 5100-5199, Triggers/Log.BlobTriggers.cs): 5000s the host and its components, 5020s workers, 5050s HTTP, 5060s
/// invocations. Warnings that can come once per request or per message go through a <see cref="LogGate"/>
/// (see <see cref="Pass"/>), so that one misbehaving function or client cannot flood the log. Text that may
/// come from a request is escaped by the caller (<see cref="LogText"/>); such lines pass the message,
/// not the exception, whose ToString() would print it raw.
/// </summary>
internal static partial class Log
{
    /// <summary>
    /// Whether a gated line at <paramref name="level"/> may be logged now; when lines were held back since the
    /// last one passed, says how many first. Touches the gate only when the level is enabled.
    /// </summary>
    public static bool Pass(ILogger logger, LogGate gate, LogLevel level, string kind)
    {
        if (!logger.IsEnabled(level) || !gate.TryPass(out var suppressed))
            return false;
        if (suppressed > 0)
            Suppressed(logger, suppressed, kind);
        return true;
    }

    [LoggerMessage(EventId = 5000, Level = LogLevel.Error, Message = "Function {Function} is disabled: {Error}")]
    public static partial void FunctionDisabled(ILogger logger, string function, string? error);

    [LoggerMessage(EventId = 5001, Level = LogLevel.Warning, Message = "{Warning}")]
    public static partial void AppWarning(ILogger logger, string warning);

    [LoggerMessage(EventId = 5002, Level = LogLevel.Information, Message = "Functions:\n{Functions}")]
    public static partial void FunctionsListed(ILogger logger, string functions);

    [LoggerMessage(EventId = 5003, Level = LogLevel.Information, Message = "Host started: {Workers} {Runtime} worker(s), listening on {Address}")]
    public static partial void HostStarted(ILogger logger, int workers, string runtime, Uri address);

    [LoggerMessage(EventId = 5004, Level = LogLevel.Information, Message = "No storage connection configured: starting Azurite (blob and queue services, loopback)")]
    public static partial void AzuriteStarting(ILogger logger);

    [LoggerMessage(EventId = 5005, Level = LogLevel.Information, Message = "Azurite is listening at {Endpoint}")]
    public static partial void AzuriteListening(ILogger logger, Uri endpoint);

    [LoggerMessage(EventId = 5045, Level = LogLevel.Information,
        Message = "Development storage: the app's own Azurite, given by the platform in {Variable} (blob and queue services); every UseDevelopmentStorage=true setting reaches it")]
    public static partial void DevelopmentStorageGiven(ILogger logger, string variable);

    [LoggerMessage(EventId = 5006, Level = LogLevel.Warning, Message = "{File}: {Warning}")]
    public static partial void CachePolicyWarning(ILogger logger, string file, string warning);

    [LoggerMessage(EventId = 5007, Level = LogLevel.Information,
        Message = "Cachelet on: {Consistency}, up to {Bytes} bytes in {Directory}; memory limit {Limit} bytes ({Source})")]
    public static partial void CacheletOn(ILogger logger, object consistency, long bytes, string directory, long limit, string source);

    [LoggerMessage(EventId = 5008, Level = LogLevel.Warning, Message = "Not every {Runtime} worker is up yet; invocations wait for one")]
    public static partial void WorkersNotAllUp(ILogger logger, string runtime);

    [LoggerMessage(EventId = 5009, Level = LogLevel.Warning,
        Message = "{Count} HTTP invocation(s) still running after {Timeout}; stopping the workers under them")]
    public static partial void DrainTimedOut(ILogger logger, long count, TimeSpan timeout);

    [LoggerMessage(EventId = 5010, Level = LogLevel.Warning,
        Message = "Cannot join the app's other instances yet ({Message}); serving as a cache of its own and retrying in the background")]
    public static partial void JoinDeferred(ILogger logger, Exception exception, string message);

    [LoggerMessage(EventId = 5011, Level = LogLevel.Debug, Message = "Joining the app's instances failed again: {Message}")]
    public static partial void JoinRetryFailed(ILogger logger, Exception exception, string message);

    [LoggerMessage(EventId = 5012, Level = LogLevel.Information, Message = "Membership: {Count} instance(s){Joined}{Left}")]
    public static partial void MembershipChanged(ILogger logger, int count, string joined, string left);

    [LoggerMessage(EventId = 5013, Level = LogLevel.Information, Message = "Instance {Id} serves peers at {Address}; {Count} instance(s) in view")]
    public static partial void InstanceServing(ILogger logger, string id, Uri address, int count);

    [LoggerMessage(EventId = 5014, Level = LogLevel.Warning,
        Message = "Function {Functions} answers GET {Path} (host.json routePrefix is \"{Prefix}\"), so the Prometheus scrape endpoint is not served there; " +
                  "give the functions a routePrefix, or read the metrics over OTLP (OTEL_EXPORTER_OTLP_ENDPOINT)")]
    public static partial void MetricsShadowed(ILogger logger, string functions, string path, string prefix);

    [LoggerMessage(EventId = 5015, Level = LogLevel.Information, Message = "Exporting {Signals} over OTLP to {Endpoint}")]
    public static partial void OtlpExporting(ILogger logger, string signals, string endpoint);

    [LoggerMessage(EventId = 5020, Level = LogLevel.Information, Message = "Specialising the {Runtime} workers to the app {App}")]
    public static partial void WorkersSpecialising(ILogger logger, string runtime, string app);

    [LoggerMessage(EventId = 5021, Level = LogLevel.Information, Message = "Workers run as the host's user ({User}): {Reason}")]
    public static partial void WorkersRunAsHostUser(ILogger logger, string user, string reason);

    [LoggerMessage(EventId = 5022, Level = LogLevel.Information,
        Message = "Workers run as {User} (uid {Uid}, gid {Gid}), which owns the app's shared-memory segments")]
    public static partial void WorkersRunAs(ILogger logger, string user, int uid, int gid);

    /// <summary>A warning when the host could have isolated the workers (it runs as root), information otherwise.</summary>
    [LoggerMessage(EventId = 5023, Message = "{Reason}; workers run as the host user without isolation")]
    public static partial void IsolationUnavailable(ILogger logger, LogLevel level, string reason);

    [LoggerMessage(EventId = 5024, Level = LogLevel.Error, Message = "Worker {Index} failed: {Reason}")]
    public static partial void WorkerFailed(ILogger logger, Exception exception, int index, string reason);

    [LoggerMessage(EventId = 5025, Level = LogLevel.Warning, Message = "Restarting worker {Index} in {Delay} ms")]
    public static partial void WorkerRestarting(ILogger logger, int index, int delay);

    [LoggerMessage(EventId = 5026, Level = LogLevel.Information, Message = "Worker {WorkerId} (pid {Pid}) is up on standby")]
    public static partial void WorkerOnStandby(ILogger logger, string workerId, int pid);

    [LoggerMessage(EventId = 5027, Level = LogLevel.Information, Message = "Worker {WorkerId} (pid {Pid}) is ready")]
    public static partial void WorkerReady(ILogger logger, string workerId, int pid);

    [LoggerMessage(EventId = 5028, Level = LogLevel.Warning, Message = "Worker {WorkerId} declined shared memory; blobs reach it inline")]
    public static partial void SharedMemoryDeclined(ILogger logger, string workerId);

    [LoggerMessage(EventId = 5029, Level = LogLevel.Error, Message = "Function {Function} could not be loaded: {Error}")]
    public static partial void FunctionLoadFailed(ILogger logger, string function, string error);

    [LoggerMessage(EventId = 5030, Level = LogLevel.Warning, Message = "Recycling worker {Index}: {Reason}")]
    public static partial void WorkerRecycling(ILogger logger, int index, string reason);

    [LoggerMessage(EventId = 5031, Level = LogLevel.Warning, Message = "Worker {Index} did not stop within {Grace}; killing it")]
    public static partial void WorkerStopTimedOut(ILogger logger, int index, TimeSpan grace);

    /// <summary>Per message: gated.</summary>
    [LoggerMessage(EventId = 5032, Level = LogLevel.Warning, Message = "Worker {WorkerId} sent an unexpected {Kind} message; ignored")]
    public static partial void UnexpectedWorkerMessage(ILogger logger, string workerId, object kind);

    // A worker's own lines, at the level the worker (RpcLog) or its stream (stdout, stderr) gives them, on the
    // function logger's category; the callers escape the text first.

    /// <summary>An RpcLog line of one invocation.</summary>
    [LoggerMessage(EventId = 5040, Message = "[{Function} {InvocationId}] {Message}{Detail}")]
    public static partial void WorkerInvocationLine(ILogger logger, LogLevel level, string function, string invocationId, string message, string detail);

    /// <summary>An RpcLog line outside any invocation.</summary>
    [LoggerMessage(EventId = 5041, Message = "[worker] {Message}{Detail}")]
    public static partial void WorkerLine(ILogger logger, LogLevel level, string message, string detail);

    /// <summary>A line of the worker process's stdout (Information) or stderr (Warning).</summary>
    [LoggerMessage(EventId = 5042, Message = "[{Worker}] {Line}")]
    public static partial void WorkerOutputLine(ILogger logger, LogLevel level, string worker, string line);

    /// <summary>Per request: gated.</summary>
    [LoggerMessage(EventId = 5050, Level = LogLevel.Warning,
        Message = "function {Function} answered with status {Status}, which is not a final HTTP status; 500 sent instead")]
    public static partial void StatusNotFinal(ILogger logger, string function, int status);

    /// <summary>Per request: gated.</summary>
    [LoggerMessage(EventId = 5051, Level = LogLevel.Warning,
        Message = "function {Function} set a response header that HTTP cannot carry ({Name}: {Value}); it was dropped")]
    public static partial void HeaderDropped(ILogger logger, string function, string name, string value);

    /// <summary>Per request: gated.</summary>
    [LoggerMessage(EventId = 5052, Level = LogLevel.Debug,
        Message = "function {Function} returned a body with status {Status}, which has none; it was not sent")]
    public static partial void BodyNotSent(ILogger logger, string function, int status);

    [LoggerMessage(EventId = 5053, Level = LogLevel.Error, Message = "Executed {Function} ({InvocationId}) failed: {Message}\n{Stack}")]
    public static partial void InvocationFailed(ILogger logger, string function, string invocationId, string message, string? stack);

    [LoggerMessage(EventId = 5054, Level = LogLevel.Error, Message = "Executed {Function} ({InvocationId}) failed with {Status}: {Message}\n{Stack}")]
    public static partial void InvocationFailedWithStack(ILogger logger, string function, string invocationId, int status, string message, string? stack);

    [LoggerMessage(EventId = 5055, Level = LogLevel.Error, Message = "Executed {Function} ({InvocationId}) failed with {Status}: {Message}")]
    public static partial void InvocationFailedWithStatus(ILogger logger, string function, string invocationId, int status, string message);

    /// <summary>Per request, and a client chooses to send them: gated.</summary>
    [LoggerMessage(EventId = 5056, Level = LogLevel.Warning, Message = "Request to {Function} ({InvocationId}) rejected with {Status}: {Message}")]
    public static partial void RequestRejected(ILogger logger, string function, string invocationId, int status, string message);

    /// <summary>Per invocation: gated.</summary>
    [LoggerMessage(EventId = 5060, Level = LogLevel.Warning, Message = "Function {Function} set output \"{Name}\", which function.json does not declare; ignored")]
    public static partial void UndeclaredOutput(ILogger logger, string function, string name);

    /// <summary>Per invocation: gated. Information, not a warning: a conflict is the condition doing its job.</summary>
    [LoggerMessage(EventId = 5061, Level = LogLevel.Information,
        Message = "Function {Function} ({InvocationId}): conditional blob output \"{Binding}\" not written, {Blob} is no longer {Condition}; the invocation fails with a conflict")]
    public static partial void WriteConflict(ILogger logger, string function, string invocationId, string binding, string blob, string condition);

    [LoggerMessage(EventId = 5099, Level = LogLevel.Information, Message = "{Count} more lines like the next ({Kind}) were suppressed in the last second")]
    public static partial void Suppressed(ILogger logger, long count, string kind);
}
