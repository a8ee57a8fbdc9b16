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
}
