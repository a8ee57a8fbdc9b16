namespace FaaST.Runtime;

/// <summary>
/// The runtime's log messages, source-generated; this part holds HTTP status and key messages
/// (event ids 5300-5399). No message ever carries a key's value.
/// </summary>
internal static partial class Log
{
    [LoggerMessage(EventId = 5300, Level = LogLevel.Information,
        Message = "HTTP keys are checked (listening on {Address}); keys from {Source}")]
    public static partial void KeysEnforced(ILogger logger, string address, string source);

    [LoggerMessage(EventId = 5301, Level = LogLevel.Information,
        Message = "HTTP keys are not checked: the host listens on loopback ({Address}), as Core Tools does locally; set {Setting}=true to check them")]
    public static partial void KeysNotEnforced(ILogger logger, string address, string setting);

    [LoggerMessage(EventId = 5302, Level = LogLevel.Information,
        Message = "Created {Blob} with new random keys (unencrypted, as the Azure Functions host keeps them)")]
    public static partial void KeysCreated(ILogger logger, string blob);

    [LoggerMessage(EventId = 5303, Level = LogLevel.Information,
        Message = "{Method} {Path} refused with 401: {Reason}")]
    public static partial void Unauthorized(ILogger logger, string method, string path, string reason);
}
