namespace FaaST.Runtime.Prewarm;

/// <summary>The host's prewarm component's log messages (event ids 8710-8719; the Load Daemon's library uses 8700-8709).</summary>
internal static partial class Log
{
    [LoggerMessage(EventId = 8710, Level = LogLevel.Information,
        Message = "Prewarm: {Selected} objects ({Bytes} bytes) selected from {Records} unload records over {Window}; loading those this instance owns")]
    public static partial void Selected(ILogger logger, int selected, long bytes, int records, TimeSpan window);

    [LoggerMessage(EventId = 8711, Level = LogLevel.Information,
        Message = "Prewarm: done, {Objects} objects ({Bytes} bytes) loaded, {Skipped} skipped, {Pauses} pauses for invocations")]
    public static partial void Done(ILogger logger, long objects, long bytes, long skipped, long pauses);

    [LoggerMessage(EventId = 8712, Level = LogLevel.Warning,
        Message = "Prewarm: the unload history could not be read ({Reason}); starting without prewarm")]
    public static partial void HistoryFailed(ILogger logger, Exception exception, string reason);

    [LoggerMessage(EventId = 8713, Level = LogLevel.Warning,
        Message = "Prewarm: the unload record could not be written ({Reason}); the next load pre-warms from older records")]
    public static partial void RecordFailed(ILogger logger, Exception exception, string reason);

    [LoggerMessage(EventId = 8714, Level = LogLevel.Debug,
        Message = "Prewarm: skipping {Container}/{Blob}: {Reason}")]
    public static partial void ObjectSkipped(ILogger logger, string container, string blob, string reason);

    [LoggerMessage(EventId = 8715, Level = LogLevel.Information,
        Message = "Prewarm: recorded {Objects} cached objects at unload ({Hits} pre-warmed ones read, {Wasted} pre-warmed bytes never read)")]
    public static partial void Recorded(ILogger logger, int objects, long hits, long wasted);
}
