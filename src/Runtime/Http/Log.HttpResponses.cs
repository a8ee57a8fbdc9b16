namespace FaaST.Runtime;

/// <summary>
/// The runtime's log messages, source-generated. This part: what the workers' HTTP responses carry
/// (language-worker surface), event ids 5600-5699. Header values come from function code: callers escape them (LogText).
/// </summary>
internal static partial class Log
{
    [LoggerMessage(EventId = 5600, Level = LogLevel.Warning,
        Message = "function {Function} set a Set-Cookie value that HTTP cannot carry ({Value}); it was dropped")]
    public static partial void SetCookieDropped(ILogger logger, string? function, string value);
}
