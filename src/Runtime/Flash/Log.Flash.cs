namespace FaaST.Runtime.Flash;

/// <summary>The host's flash tier client's log messages (event ids 8720-8729).</summary>
internal static partial class Log
{
    [LoggerMessage(EventId = 8720, Level = LogLevel.Information,
        Message = "Flash tier: {Address}, flow {Flow} open (largest value {MaxValueBytes} bytes)")]
    public static partial void FlowOpened(ILogger logger, Uri address, int flow, long maxValueBytes);

    [LoggerMessage(EventId = 8721, Level = LogLevel.Warning,
        Message = "Flash tier {Address}: {What} failed ({Reason}); reads go to storage and nothing is demoted for {RetryAfter} ({Suppressed} more failures since the last line)")]
    public static partial void TierFailed(ILogger logger, Uri address, string what, string reason, TimeSpan retryAfter, long suppressed);

    [LoggerMessage(EventId = 8722, Level = LogLevel.Debug,
        Message = "Flash tier {Address}: closing flow {Flow} failed ({Reason}); the server closes idle flows itself")]
    public static partial void CloseFailed(ILogger logger, Uri address, int flow, string reason);

    [LoggerMessage(EventId = 8723, Level = LogLevel.Debug,
        Message = "Flash tier: demotion of {Container}/{Blob} refused: {Reason}")]
    public static partial void DemotionRefused(ILogger logger, string container, string blob, string reason);

    [LoggerMessage(EventId = 8724, Level = LogLevel.Information,
        Message = "Flash tier on: {Address} ({Class}; timeout {Timeout}, retry after {RetryAfter}, demote {Demote} from {MinDemoteBytes} bytes)")]
    public static partial void TierOn(ILogger logger, Uri address, string @class, TimeSpan timeout, TimeSpan retryAfter, bool demote, long minDemoteBytes);
}
