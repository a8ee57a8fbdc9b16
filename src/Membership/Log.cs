using Microsoft.Extensions.Logging;

namespace FaaST.Membership;

/// <summary>
/// Membership's log messages, source-generated (no boxing, no parsing of the template per call), with event ids
/// 4000-4099 (the project gives each component a range of its own). Failures carry their exception, so that a
/// logger prints the stack; the message itself says what failed and what happens next.
/// </summary>
internal static partial class Log
{
    [LoggerMessage(EventId = 4000, Level = LogLevel.Information, Message = "Instance {Member} of app {App} joined as {State}; view has {Count} members")]
    public static partial void Joined(ILogger logger, string member, string app, MemberState state, int count);

    [LoggerMessage(EventId = 4001, Level = LogLevel.Information, Message = "Instance {Member} of app {App} left")]
    public static partial void Left(ILogger logger, string member, string app);

    [LoggerMessage(EventId = 4002, Level = LogLevel.Warning,
        Message = "Instance {Member} could not delete its membership blob; peers drop it after {Missed} missed heartbeats")]
    public static partial void LeaveNotWritten(ILogger logger, Exception exception, string member, int missed);

    [LoggerMessage(EventId = 4003, Level = LogLevel.Information, Message = "Membership {What} of {Member} works again after {Failures} failures")]
    public static partial void WorksAgain(ILogger logger, string what, string member, int failures);

    [LoggerMessage(EventId = 4004, Level = LogLevel.Warning,
        Message = "Membership {What} of {Member} (app {App}) failed ({Failures} in a row), keeping the view of {Count} members")]
    public static partial void RoundFailed(ILogger logger, Exception exception, string what, string member, string app, int failures, int count);

    [LoggerMessage(EventId = 4005, Level = LogLevel.Warning,
        Message = "Membership blob of {Member} (app {App}) was deleted or replaced, probably by a peer that took it for dead; registering again")]
    public static partial void RegisteringAgain(ILogger logger, string member, string app);

    [LoggerMessage(EventId = 4006, Level = LogLevel.Information, Message = "Instance {Peer} of app {App} missed {Missed} heartbeats; {Member} removed it")]
    public static partial void RemovedDead(ILogger logger, string peer, string app, int missed, string member);

    [LoggerMessage(EventId = 4007, Level = LogLevel.Warning, Message = "Could not read membership blob {Blob} of app {App}; the next listing tries again")]
    public static partial void RecordUnreadable(ILogger logger, Exception exception, string blob, string app);

    [LoggerMessage(EventId = 4008, Level = LogLevel.Warning, Message = "Membership blob {Blob} of app {App} does not hold a valid instance record; ignored")]
    public static partial void RecordInvalid(ILogger logger, string blob, string app);

    [LoggerMessage(EventId = 4009, Level = LogLevel.Information,
        Message = "View of {Member} (app {App}): {Count} members, {Owners} on the ring; joined [{Joined}], left [{Left}], changed state [{Changed}]")]
    public static partial void ViewChanged(ILogger logger, string member, string app, int count, int owners, string joined, string left, string changed);

    [LoggerMessage(EventId = 4010, Level = LogLevel.Error, Message = "A handler of the membership Changed event of {Member} threw")]
    public static partial void HandlerFailed(ILogger logger, Exception exception, string member);

    [LoggerMessage(EventId = 4011, Level = LogLevel.Information, Message = "Instance {Member} of app {App} is now {State}")]
    public static partial void StateSet(ILogger logger, string member, string app, MemberState state);

    [LoggerMessage(EventId = 4012, Level = LogLevel.Warning,
        Message = "The load report of {Member} (app {App}) failed; the heartbeat carries the previous one")]
    public static partial void LoadReportFailed(ILogger logger, Exception exception, string member, string app);

    [LoggerMessage(EventId = 4013, Level = LogLevel.Information, Message = "Observing app {App}: {Count} members in view")]
    public static partial void ObserverStarted(ILogger logger, string app, int count);
}
