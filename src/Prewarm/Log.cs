using Microsoft.Extensions.Logging;

namespace FaaST.Prewarm;

/// <summary>The Load Daemon's log messages (event ids 8700-8709; the host's prewarm component uses 8710-8719).</summary>
internal static partial class Log
{
    [LoggerMessage(EventId = 8700, Level = LogLevel.Warning,
        Message = "Prewarm: skipping unload record {Container}/{Blob}: {Reason}; it does not block loading")]
    public static partial void RecordSkipped(ILogger logger, string container, string blob, string reason);

    [LoggerMessage(EventId = 8701, Level = LogLevel.Warning,
        Message = "Prewarm: skipping unload record {Container}/{Blob}: storage failed ({Reason}); it does not block loading")]
    public static partial void RecordUnreadable(ILogger logger, Exception exception, string container, string blob, string reason);

    [LoggerMessage(EventId = 8702, Level = LogLevel.Information,
        Message = "Prewarm: wrote unload record {Container}/{Blob} ({Objects} objects)")]
    public static partial void RecordWritten(ILogger logger, string container, string blob, int objects);

    [LoggerMessage(EventId = 8703, Level = LogLevel.Debug,
        Message = "Prewarm: trimmed {Deleted} unload records of app {App} (older than {MaxAge} or beyond the newest {MaxRecords})")]
    public static partial void Trimmed(ILogger logger, int deleted, string app, TimeSpan maxAge, int maxRecords);
}
