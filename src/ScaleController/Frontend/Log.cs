namespace FaaST.ScaleController.Frontend;

/// <summary>The frontend's log messages, source-generated, with event ids 8000-8049.</summary>
internal static partial class Log
{
    [LoggerMessage(EventId = 8000, Level = LogLevel.Information,
        Message = "Frontend {App}: instance {Instance} ({Version}) at {Address} is ready")]
    public static partial void InstanceAdded(ILogger logger, string app, string instance, string version, Uri address);

    [LoggerMessage(EventId = 8001, Level = LogLevel.Information,
        Message = "Frontend {App}: draining instance {Instance} ({Outstanding} outstanding); it gets no new invocations")]
    public static partial void InstanceDraining(ILogger logger, string app, string instance, int outstanding);

    [LoggerMessage(EventId = 8002, Level = LogLevel.Information,
        Message = "Frontend {App}: instance {Instance} is drained (nothing outstanding)")]
    public static partial void InstanceDrained(ILogger logger, string app, string instance);

    [LoggerMessage(EventId = 8003, Level = LogLevel.Information,
        Message = "Frontend {App}: instance {Instance} removed")]
    public static partial void InstanceRemoved(ILogger logger, string app, string instance);

    [LoggerMessage(EventId = 8004, Level = LogLevel.Warning,
        Message = "Frontend {App}: instance {Instance} at {Address} refused the connection; it is out of rotation and the invocation goes to another")]
    public static partial void InstanceConnectFailed(ILogger logger, Exception exception, string app, string instance, Uri address);

    [LoggerMessage(EventId = 8005, Level = LogLevel.Debug,
        Message = "Frontend {App}: {Method} {Path} failed on instance {Instance} before any response byte; sending it again (retry {Retry})")]
    public static partial void Retrying(ILogger logger, Exception exception, string app, string method, string path, string instance, int retry);

    [LoggerMessage(EventId = 8006, Level = LogLevel.Warning,
        Message = "Frontend {App}: {Method} {Path} failed on instance {Instance}: {Reason} (status {Status})")]
    public static partial void ForwardFailed(ILogger logger, Exception exception, string app, string method, string path, string instance, string reason, int status);

    [LoggerMessage(EventId = 8007, Level = LogLevel.Warning,
        Message = "Frontend {App}: {Method} {Path} answered 503: {Reason}")]
    public static partial void Unavailable(ILogger logger, string app, string method, string path, string reason);

    [LoggerMessage(EventId = 8008, Level = LogLevel.Warning,
        Message = "Frontend {App}: {Count} more warnings were held back since the previous one (one a second)")]
    public static partial void WarningsSuppressed(ILogger logger, string app, long count);

    [LoggerMessage(EventId = 8009, Level = LogLevel.Information,
        Message = "Frontend {App}: an invocation arrived with no ready instance; asking the platform for one (cold start)")]
    public static partial void ColdStartRequested(ILogger logger, string app);

    [LoggerMessage(EventId = 8010, Level = LogLevel.Error,
        Message = "Frontend {App}: the cold start failed; queued invocations wait for an instance until their queue timeout")]
    public static partial void ColdStartFailed(ILogger logger, Exception exception, string app);

    [LoggerMessage(EventId = 8011, Level = LogLevel.Warning,
        Message = "Frontend {App}: {Method} {Path} broke on instance {Instance} after the response started; the client connection is aborted")]
    public static partial void ResponseBroken(ILogger logger, Exception exception, string app, string method, string path, string instance);

    [LoggerMessage(EventId = 8012, Level = LogLevel.Error,
        Message = "Frontend {App}: a handler of InstanceFailed threw for instance {Instance}; the invocation goes on to another instance")]
    public static partial void InstanceFailedHandlerThrew(ILogger logger, Exception exception, string app, string instance);
}
