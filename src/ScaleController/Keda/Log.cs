namespace FaaST.ScaleController.Keda;

/// <summary>The KEDA external scaler's log messages, source-generated, event ids 8150-8199.</summary>
internal static partial class Log
{
    [LoggerMessage(EventId = 8150, Level = LogLevel.Information,
        Message = "KEDA opened StreamIsActive for app {App} (ScaledObject {Namespace}/{Name}); active: {Active}")]
    public static partial void StreamOpened(ILogger logger, string app, string @namespace, string name, bool active);

    [LoggerMessage(EventId = 8151, Level = LogLevel.Information,
        Message = "App {App} is now {Activity} for KEDA (ScaledObject {Namespace}/{Name}): {Desired} instances wanted, {Reason}")]
    public static partial void ActivityPushed(ILogger logger, string app, string activity, string @namespace, string name, int desired, string reason);

    [LoggerMessage(EventId = 8152, Level = LogLevel.Debug, Message = "KEDA closed StreamIsActive for app {App} (ScaledObject {Namespace}/{Name})")]
    public static partial void StreamClosed(ILogger logger, string app, string @namespace, string name);

    [LoggerMessage(EventId = 8153, Level = LogLevel.Warning,
        Message = "Refused KEDA {Method} from ScaledObject {Namespace}/{Name}: {Code}: {Detail} ({Suppressed} more refusals held back since the last one logged)")]
    public static partial void Refused(ILogger logger, string method, string @namespace, string name, string code, string detail, long suppressed);

    [LoggerMessage(EventId = 8154, Level = LogLevel.Debug,
        Message = "KEDA GetMetrics for app {App}: {Desired} instances wanted, {Reason}")]
    public static partial void MetricsAnswered(ILogger logger, string app, int desired, string reason);
}
