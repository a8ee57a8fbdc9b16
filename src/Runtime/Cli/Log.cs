namespace FaaST.Runtime.Cli;

/// <summary>The command line's log messages (event ids 5500-5599 of the Runtime's block), source-generated.</summary>
internal static partial class Log
{
    [LoggerMessage(EventId = 5500, Level = LogLevel.Warning,
        Message = "Cannot write {Path}, so `./faast blob` cannot find this host's Azurite")]
    public static partial void DevelopmentStorageFileFailed(ILogger logger, Exception exception, string path);
}
