using Microsoft.Extensions.Logging;

namespace FaaST.Storage;

/// <summary>
/// Storage's log messages, source-generated (no boxing, no parsing of the template per call), with event ids
/// 1000-1099. The request path names the container and blob (never the query, which may hold a SAS).
/// </summary>
internal static partial class Log
{
    [LoggerMessage(EventId = 1000, Level = LogLevel.Debug,
        Message = "Storage {Method} {Path}: try {Attempt} of {Tries} failed ({Reason}); retrying")]
    public static partial void Retrying(ILogger logger, Exception? exception, string method, string path, int attempt, int tries, string reason);

    [LoggerMessage(EventId = 1001, Level = LogLevel.Warning,
        Message = "Storage {Method} {Path}: giving up after {Tries} tries; the last failed ({Reason})")]
    public static partial void GivingUp(ILogger logger, Exception? exception, string method, string path, int tries, string reason);

    [LoggerMessage(EventId = 1004, Level = LogLevel.Warning,
        Message = "Storage: {Count} more requests gave up since the last such line (one give-up line a second)")]
    public static partial void GiveUpsSuppressed(ILogger logger, long count);

    [LoggerMessage(EventId = 1002, Level = LogLevel.Debug,
        Message = "Storage GET {Path}: the body broke; resuming from byte {Offset} with If-Match {ETag} (resume {Resume})")]
    public static partial void DownloadResuming(ILogger logger, string path, string offset, string etag, int resume);

    [LoggerMessage(EventId = 1003, Level = LogLevel.Warning,
        Message = "Storage GET {Path}: the body broke after {Bytes} bytes and could not be resumed ({Resumes} resume(s) tried); giving up ({Reason})")]
    public static partial void DownloadGivingUp(ILogger logger, Exception exception, string path, long bytes, int resumes, string reason);
}
