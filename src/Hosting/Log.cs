using Microsoft.Extensions.Logging;

namespace FaaST.Hosting;

/// <summary>
/// The lifecycle's log messages, source-generated (no boxing, no parsing of the template per call), with event
/// ids 6000-6099; a component's failure is logged with its exception and stack.
/// </summary>
internal static partial class Log
{
    [LoggerMessage(EventId = 6000, Level = LogLevel.Error, Message = "{Component} (stage {Stage}) failed to start; stopping what started")]
    public static partial void StartFailed(ILogger logger, Exception exception, string component, int stage);

    [LoggerMessage(EventId = 6001, Level = LogLevel.Error, Message = "{Component} (stage {Stage}) failed to stop cleanly")]
    public static partial void StopFailed(ILogger logger, Exception exception, string component, int stage);

    [LoggerMessage(EventId = 6002, Level = LogLevel.Error, Message = "A lifecycle observer failed on {State}")]
    public static partial void ObserverFailed(ILogger logger, Exception exception, LifecycleState state);
}
