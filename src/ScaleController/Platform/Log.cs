namespace FaaST.ScaleController.Platform;

/// <summary>The platform's log lines (event ids 8200-8249).</summary>
internal static partial class Log
{
    [LoggerMessage(EventId = 8200, Level = LogLevel.Information, Message = "Platform listening on {Address} (control: {Control}); storage {Storage}")]
    public static partial void Listening(ILogger logger, Uri address, Uri control, string storage);

    [LoggerMessage(EventId = 8201, Level = LogLevel.Information, Message = "App {App}: scaling out from {Current} to {Target} instance(s): {Reason}")]
    public static partial void ScalingOut(ILogger logger, string app, int current, int target, string reason);

    [LoggerMessage(EventId = 8202, Level = LogLevel.Information, Message = "App {App}: scaling in from {Current} to {Target} instance(s): {Reason}")]
    public static partial void ScalingIn(ILogger logger, string app, int current, int target, string reason);

    [LoggerMessage(EventId = 8203, Level = LogLevel.Information, Message = "App {App}: rolling from v{Old} to v{New} on {Count} instance(s)")]
    public static partial void Rolling(ILogger logger, string app, int old, int @new, int count);

    [LoggerMessage(EventId = 8204, Level = LogLevel.Information, Message = "App {App}: instance {Id} (v{Version}) ready at {Address} after {Milliseconds:0} ms")]
    public static partial void InstanceReady(ILogger logger, string app, string id, int version, Uri address, double milliseconds);

    [LoggerMessage(EventId = 8205, Level = LogLevel.Error, Message = "App {App}: an instance failed to start: {Reason}")]
    public static partial void InstanceStartFailed(ILogger logger, string app, string reason);

    [LoggerMessage(EventId = 8206, Level = LogLevel.Warning, Message = "App {App}: instance {Id} still had invocations in flight after the drain deadline ({Seconds} s); stopping it")]
    public static partial void DrainDeadline(ILogger logger, string app, string id, double seconds);

    [LoggerMessage(EventId = 8207, Level = LogLevel.Information, Message = "App {App}: instance {Id} drained and stopped")]
    public static partial void InstanceStopped(ILogger logger, string app, string id);

    [LoggerMessage(EventId = 8208, Level = LogLevel.Information, Message = "App {App}: cold start (the app was unloaded)")]
    public static partial void ColdStart(ILogger logger, string app);

    [LoggerMessage(EventId = 8209, Level = LogLevel.Warning, Message = "App {App}: instance {Id} {Reason}; replacing it")]
    public static partial void InstanceDied(ILogger logger, string app, string id, string reason);

    [LoggerMessage(EventId = 8210, Level = LogLevel.Warning, Message = "App {App}: instance {Id} is unreachable: {Reason}")]
    public static partial void InstanceUnreachable(ILogger logger, string app, string id, string reason);

    [LoggerMessage(EventId = 8211, Level = LogLevel.Information, Message = "App {App}: deployed v{Version} ({Bytes} bytes, sha256 {Sha256})")]
    public static partial void Deployed(ILogger logger, string app, int version, long bytes, string sha256);

    [LoggerMessage(EventId = 8212, Level = LogLevel.Warning, Message = "Deploy of {App} refused: {Reason}")]
    public static partial void DeployRefused(ILogger logger, string app, string reason);

    [LoggerMessage(EventId = 8213, Level = LogLevel.Information, Message = "Loaded app {App} v{Version} from storage (deployed {Deployed:u})")]
    public static partial void Recovered(ILogger logger, string app, int version, DateTimeOffset deployed);

    [LoggerMessage(EventId = 8214, Level = LogLevel.Error, Message = "App {App} v{Version} from storage cannot be loaded: {Reason}")]
    public static partial void RecoveryFailed(ILogger logger, string app, int version, string reason);

    [LoggerMessage(EventId = 8215, Level = LogLevel.Information, Message = "App {App}: unloading ({Reason})")]
    public static partial void Unloading(ILogger logger, string app, string reason);

    [LoggerMessage(EventId = 8216, Level = LogLevel.Warning, Message = "App {App}: the instance record of {Id} could not be written or removed: {Reason}")]
    public static partial void RegistryFailed(ILogger logger, string app, string id, string reason);

    [LoggerMessage(EventId = 8217, Level = LogLevel.Information, Message = "App {App}: took over instance {Id} (v{Version}, pid {Pid}) left running by a previous platform process")]
    public static partial void Adopted(ILogger logger, string app, string id, int version, int pid);

    [LoggerMessage(EventId = 8218, Level = LogLevel.Information, Message = "App {App}: instance {Id} of a previous platform process is gone or not of the current version; forgotten")]
    public static partial void NotAdopted(ILogger logger, string app, string id);

    [LoggerMessage(EventId = 8244, Level = LogLevel.Information, Message = "App {App}: its own Azurite (an account of its own) at {Blob} and {Queue}, data in {Data}")]
    public static partial void AppStorageStarted(ILogger logger, string app, Uri blob, Uri queue, string data);

    [LoggerMessage(EventId = 8245, Level = LogLevel.Warning, Message = "App {App}: cannot write {File}, so `./faast blob` cannot find the app's Azurite: {Reason}")]
    public static partial void AppStoragePublishFailed(ILogger logger, string app, string file, string reason);

    [LoggerMessage(EventId = 8246, Level = LogLevel.Error, Message = "App {App} v{Version} is unavailable: its own Azurite (data in {Data}) cannot start: {Reason}; its requests get 503 until its next deploy, which starts it again")]
    public static partial void AppStorageFailed(ILogger logger, string app, int version, string data, string reason);

    [LoggerMessage(EventId = 8219, Level = LogLevel.Warning, Message = "App {App}: refused the instance record {Blob} ({Problem}); deleted, its process left alone")]
    public static partial void RecordRefused(ILogger logger, string app, string blob, string problem);

    // 8250-8259: the instances' lifecycle (issue 19: redeploys that keep the running version, the platform's budget).
    [LoggerMessage(EventId = 8250, Level = LogLevel.Error, Message = "App {App}: v{New} did not start, so v{Kept} stays current and keeps serving: {Reason}")]
    public static partial void RollbackKept(ILogger logger, string app, int @new, int kept, string reason);

    [LoggerMessage(EventId = 8251, Level = LogLevel.Information, Message = "App {App}: instance {Id} of v{Version} stopped before it took requests (its version did not become current)")]
    public static partial void InstanceDiscarded(ILogger logger, string app, string id, int version);

    [LoggerMessage(EventId = 8252, Level = LogLevel.Warning, Message = "App {App}: asked for {Asked} instance(s), gets {Granted}: {Reason}")]
    public static partial void BudgetCapped(ILogger logger, string app, int asked, int granted, string reason);

    // 8300-8349: the platform's lifecycle and its own telemetry (issue 20).
    [LoggerMessage(EventId = 8300, Level = LogLevel.Error, Message = "App lifecycle handler {Handler} failed on {Kind} of app {App} (instance {Instance}); scaling goes on")]
    public static partial void AppLifecycleHandlerFailed(ILogger logger, Exception exception, string handler, AppLifecycleKind kind, string app, string instance);

    [LoggerMessage(EventId = 8301, Level = LogLevel.Warning, Message = "App lifecycle handler {Handler} did not finish {Kind} of app {App} (instance {Instance}) within {Seconds} s; its token is cancelled and scaling goes on")]
    public static partial void AppLifecycleHandlerTimedOut(ILogger logger, string handler, AppLifecycleKind kind, string app, string instance, double seconds);
}
