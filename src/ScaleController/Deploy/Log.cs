namespace FaaST.ScaleController.Deploy;

/// <summary>Deploy's log messages, source-generated, with event ids 8050-8099 (the platform's deploy range).</summary>
internal static partial class Log
{
    [LoggerMessage(EventId = 8050, Level = LogLevel.Information, Message = "Deployed {App} v{Version} ({Size} bytes, sha256 {Sha256}) from {Source}")]
    public static partial void Published(ILogger logger, string app, int version, long size, string sha256, string source);

    [LoggerMessage(EventId = 8051, Level = LogLevel.Information,
        Message = "Deploy of {App} lost the race for v{Version} to another deployer (try {Attempt}); trying the next version")]
    public static partial void PublishRaceLost(ILogger logger, string app, int version, int attempt);

    [LoggerMessage(EventId = 8052, Level = LogLevel.Warning, Message = "Deploy of {App} refused: {Problems}")]
    public static partial void Refused(ILogger logger, string app, string problems);

    [LoggerMessage(EventId = 8053, Level = LogLevel.Information, Message = "Extracted {App} v{Version} to {Directory}")]
    public static partial void Extracted(ILogger logger, string app, int version, string directory);

    [LoggerMessage(EventId = 8054, Level = LogLevel.Warning,
        Message = "Could not delete the unpublished package {Blob} after a lost race; it stays unreferenced (no app.json names it)")]
    public static partial void OrphanNotDeleted(ILogger logger, Exception exception, string blob);

    [LoggerMessage(EventId = 8055, Level = LogLevel.Warning, Message = "Could not delete the temporary deploy folder {Directory}")]
    public static partial void TempNotDeleted(ILogger logger, Exception exception, string directory);

    [LoggerMessage(EventId = 8056, Level = LogLevel.Warning, Message = "Ignoring {Blob}: {Problem}")]
    public static partial void BadAppRecord(ILogger logger, string blob, string problem);

    [LoggerMessage(EventId = 8057, Level = LogLevel.Warning, Message = "Refused {Blob}: {Problem}")]
    public static partial void RecordRefused(ILogger logger, string blob, string problem);

    [LoggerMessage(EventId = 8058, Level = LogLevel.Warning,
        Message = "App {App}: its user {User} is unavailable ({Reason}); its extraction is readable by the platform's user only")]
    public static partial void AppUserUnavailable(ILogger logger, string app, string user, string reason);

    [LoggerMessage(EventId = 8059, Level = LogLevel.Information, Message = "Removed the extraction of {App} v{Version} ({Directory}): neither running nor the previous version")]
    public static partial void Pruned(ILogger logger, string app, int version, string directory);
}
