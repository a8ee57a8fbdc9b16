namespace FaaST.ScaleController.Control;

/// <summary>The controller's log messages, source-generated, event ids 8100-8149.</summary>
internal static partial class Log
{
    [LoggerMessage(EventId = 8100, Level = LogLevel.Information, Message = "App {App}: scale {Kind} from {Current} to {Target} instance(s): {Reason}")]
    public static partial void Decided(ILogger logger, string app, ScaleDecisionKind kind, int current, int target, string reason);

    [LoggerMessage(EventId = 8101, Level = LogLevel.Warning, Message = "App {App}: instance {Instance} gave no vote ({Why}); counted as 0 ({Suppressed} more held back since the last line)")]
    public static partial void NoVote(ILogger logger, string app, string instance, string why, long suppressed);

    [LoggerMessage(EventId = 8102, Level = LogLevel.Error, Message = "App {App}: acting on the decision {Kind} to {Target} failed; the next round decides again")]
    public static partial void ActFailed(ILogger logger, Exception exception, string app, ScaleDecisionKind kind, int target);

    [LoggerMessage(EventId = 8103, Level = LogLevel.Error, Message = "App {App}: a scale round failed; the next round tries again")]
    public static partial void RoundFailed(ILogger logger, Exception exception, string app);

    [LoggerMessage(EventId = 8104, Level = LogLevel.Information, Message = "App {App}: unrequested scale-out to {Target} from instance {Instance} ({Policy}): granted {Granted}, {Reason}")]
    public static partial void Unrequested(ILogger logger, string app, int target, string instance, string policy, int granted, string reason);

    [LoggerMessage(EventId = 8105, Level = LogLevel.Warning, Message = "Unrequested scale-out refused: {Reason}")]
    public static partial void UnrequestedRefused(ILogger logger, string reason);

    [LoggerMessage(EventId = 8106, Level = LogLevel.Information, Message = "App {App}: scale loop started, every {Interval}")]
    public static partial void Started(ILogger logger, string app, TimeSpan interval);

    [LoggerMessage(EventId = 8107, Level = LogLevel.Information, Message = "App {App}: scale loop stopped")]
    public static partial void Stopped(ILogger logger, string app);
}
