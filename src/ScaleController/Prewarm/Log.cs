namespace FaaST.ScaleController.Prewarm;

/// <summary>The platform's reload scheduling's log lines (event ids 8350-8369).</summary>
internal static partial class Log
{
    [LoggerMessage(EventId = 8350, Level = LogLevel.Warning, Message = "App {App}: could not save its idle-time histogram to {Container}/{Blob}; kept in memory and saved again at the next interval")]
    public static partial void IdleTimesNotSaved(ILogger logger, Exception e, string app, string container, string blob);

    [LoggerMessage(EventId = 8351, Level = LogLevel.Warning, Message = "App {App}: its idle-time histogram {Blob} cannot be read ({Reason}); it starts empty and the fixed keep-alive applies until it has learnt again")]
    public static partial void IdleTimesUnreadable(ILogger logger, string app, string blob, string reason);

    [LoggerMessage(EventId = 8352, Level = LogLevel.Information, Message = "App {App}: {Count} idle times learnt before, from {Blob}")]
    public static partial void IdleTimesLoaded(ILogger logger, string app, long count, string blob);

    [LoggerMessage(EventId = 8353, Level = LogLevel.Information, Message = "App {App}: unloaded; reloading at {At:o}, {Lead} before the predicted invocation ({Reason})")]
    public static partial void ReloadScheduled(ILogger logger, string app, DateTimeOffset at, TimeSpan lead, string reason);

    [LoggerMessage(EventId = 8354, Level = LogLevel.Information, Message = "App {App}: reloading ahead of the predicted invocation")]
    public static partial void Reloading(ILogger logger, string app);

    [LoggerMessage(EventId = 8355, Level = LogLevel.Warning, Message = "App {App}: the reload ahead of the predicted invocation failed; the next invocation loads the app")]
    public static partial void ReloadFailed(ILogger logger, Exception e, string app);
}
