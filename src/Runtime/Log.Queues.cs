namespace FaaST.Runtime;

/// <summary>
/// The runtime's log messages, source-generated. This part: queue triggers and queue outputs, event ids 5400-5499.
/// Queue names, message ids and errors may come from a request or a message: callers escape them (LogText).
/// </summary>
internal static partial class Log
{
    [LoggerMessage(EventId = 5400, Level = LogLevel.Information,
        Message = "Queue trigger {Function} listens on queue {Queue} (batchSize {BatchSize}, newBatchThreshold {Threshold}, maxDequeueCount {MaxDequeueCount}, maxPollingInterval {MaxPollingInterval}, messageEncoding {Encoding})")]
    public static partial void QueueListening(ILogger logger, string function, string queue, int batchSize, int threshold, int maxDequeueCount,
        TimeSpan maxPollingInterval, string encoding);

    [LoggerMessage(EventId = 5401, Level = LogLevel.Information,
        Message = "Executed {Function} ({InvocationId}) for queue message {MessageId} on {Queue} (dequeue count {DequeueCount})")]
    public static partial void QueueExecuted(ILogger logger, string function, string invocationId, string messageId, string queue, long dequeueCount);

    [LoggerMessage(EventId = 5402, Level = LogLevel.Error,
        Message = "Executed {Function} ({InvocationId}) for queue message {MessageId} on {Queue} failed (dequeue count {DequeueCount} of maxDequeueCount {MaxDequeueCount}; it is retried after visibilityTimeout {Retry}): {Error}")]
    public static partial void QueueInvocationFailed(ILogger logger, Exception? exception, string function, string invocationId, string messageId,
        string queue, long dequeueCount, int maxDequeueCount, TimeSpan retry, string error);

    [LoggerMessage(EventId = 5403, Level = LogLevel.Error,
        Message = "Queue message {MessageId} on {Queue} failed {DequeueCount} times (maxDequeueCount {MaxDequeueCount}) in {Function}; moved to queue {PoisonQueue}. Last error: {Error}")]
    public static partial void QueueMessagePoisoned(ILogger logger, Exception? exception, string messageId, string queue, long dequeueCount,
        int maxDequeueCount, string function, string poisonQueue, string error);

    [LoggerMessage(EventId = 5404, Level = LogLevel.Warning,
        Message = "Polling queue {Queue} for {Function} failed: {Message}; will keep trying (backing off up to maxPollingInterval)")]
    public static partial void QueuePollFailed(ILogger logger, Exception exception, string queue, string function, string message);

    [LoggerMessage(EventId = 5405, Level = LogLevel.Warning,
        Message = "Queue message {MessageId} on {Queue}: {Operation} failed ({Message}); another instance may run it again after its visibility timeout")]
    public static partial void QueueMessageLeaseLost(ILogger logger, Exception exception, string messageId, string queue, string operation, string message);

    [LoggerMessage(EventId = 5406, Level = LogLevel.Information,
        Message = "Queue trigger {Function}: stopped taking messages from {Queue}; waiting for {InFlight} invocation(s) in flight")]
    public static partial void QueueDraining(ILogger logger, string function, string queue, int inFlight);

    [LoggerMessage(EventId = 5407, Level = LogLevel.Information, Message = "Azurite's queue service is listening at {Endpoint}")]
    public static partial void AzuriteQueuesListening(ILogger logger, Uri endpoint);
}
