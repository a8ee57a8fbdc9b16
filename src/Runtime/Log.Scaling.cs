namespace FaaST.Runtime;

/// <summary>
/// The runtime's log messages, source-generated. This part: the instance side of scaling (votes, drain), event ids 5750-5799 (5600-5699 are the HTTP responses', Http/Log.HttpResponses.cs).
/// Reasons come from the controller's request: callers escape them (LogText).
/// </summary>
internal static partial class Log
{
    [LoggerMessage(EventId = 5750, Level = LogLevel.Debug, Message = "Voted {Compute} / {CacheSize} / {Bandwidth} (compute: {ComputeReason}; cache-size: {CacheReason}; bandwidth: {BandwidthReason})")]
    public static partial void Voted(ILogger logger, int compute, int cacheSize, int bandwidth, string computeReason, string cacheReason, string bandwidthReason);

    [LoggerMessage(EventId = 5751, Level = LogLevel.Information,
        Message = "Draining at the scale controller's request ({Reason}): {InFlight} invocations in flight, up to {Deadline} for them; then leaving membership and exiting")]
    public static partial void DrainRequested(ILogger logger, string reason, long inFlight, TimeSpan deadline);

    [LoggerMessage(EventId = 5752, Level = LogLevel.Warning,
        Message = "Could not mark this instance Draining in membership ({Message}); it still stops taking invocations and leaves")]
    public static partial void DrainStateNotWritten(ILogger logger, Exception exception, string message);

    [LoggerMessage(EventId = 5753, Level = LogLevel.Warning, Message = "The drain's deadline ({Deadline}) passed with {InFlight} invocations still in flight; stopping anyway")]
    public static partial void DrainDeadlinePassed(ILogger logger, TimeSpan deadline, long inFlight);

    [LoggerMessage(EventId = 5754, Level = LogLevel.Information, Message = "The invocations in flight at the drain finished; stopping")]
    public static partial void DrainedInFlight(ILogger logger);

    [LoggerMessage(EventId = 5755, Level = LogLevel.Error, Message = "Stopping the host after a drain failed")]
    public static partial void DrainStopFailed(ILogger logger, Exception exception);
}
