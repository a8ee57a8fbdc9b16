namespace FaaST.Runtime;

/// <summary>
/// The runtime's log messages, source-generated (no boxing, no template parsing per call). This part: blob
/// triggers and their shared receipts, event ids 5100-5199. Blob names and error texts reach these escaped
/// (they may come from a request).
/// </summary>
internal static partial class Log
{
    [LoggerMessage(EventId = 5100, Level = LogLevel.Information,
        Message = "Executing {Function} ({InvocationId}) for blob {Container}/{Blob} (attempt {Attempt} of {Max})")]
    public static partial void BlobTriggerExecuting(ILogger logger, string function, string invocationId, string container, string blob, int attempt, int max);

    [LoggerMessage(EventId = 5101, Level = LogLevel.Information,
        Message = "Executed {Function} ({InvocationId}) for blob {Container}/{Blob}")]
    public static partial void BlobTriggerExecuted(ILogger logger, string function, string invocationId, string container, string blob);

    [LoggerMessage(EventId = 5102, Level = LogLevel.Error,
        Message = "Executed {Function} ({InvocationId}) for blob {Container}/{Blob} failed (attempt {Attempt} of {Max}); it will be retried: {Error}")]
    public static partial void BlobTriggerFailed(ILogger logger, string function, string invocationId, string container, string blob, int attempt, int max, string error);

    [LoggerMessage(EventId = 5103, Level = LogLevel.Error,
        Message = "Poison blob: {Function} gave up on blob {Container}/{Blob} (ETag {ETag}) after {Attempts} attempts; receipt {Receipt} is marked failed-poison and the function will not run again for this version of the blob (FaaST has no webjobs-blobtrigger-poison queue). Last error: {Error}")]
    public static partial void BlobTriggerPoison(ILogger logger, string function, string container, string blob, string etag, int attempts, string receipt, string error);

    [LoggerMessage(EventId = 5104, Level = LogLevel.Warning,
        Message = "Lost the lease on receipt {Receipt} while {Function} ran for blob {Container}/{Blob}; another instance may run it again (at-least-once)")]
    public static partial void BlobReceiptLeaseLost(ILogger logger, Exception? exception, string receipt, string function, string container, string blob);

    [LoggerMessage(EventId = 5105, Level = LogLevel.Warning,
        Message = "Could not renew the lease on receipt {Receipt} (will keep trying until it expires): {Message}")]
    public static partial void BlobReceiptRenewFailed(ILogger logger, Exception exception, string receipt, string message);

    [LoggerMessage(EventId = 5106, Level = LogLevel.Warning,
        Message = "Could not take the receipt for {Function} on blob {Container}/{Blob}: {Message}; the next scan tries again")]
    public static partial void BlobReceiptClaimFailed(ILogger logger, Exception exception, string function, string container, string blob, string message);

    [LoggerMessage(EventId = 5107, Level = LogLevel.Warning,
        Message = "Could not mark receipt {Receipt} complete: {Message}; when its lease expires another instance may run {Function} for it again")]
    public static partial void BlobReceiptCompleteFailed(ILogger logger, Exception exception, string receipt, string function, string message);

    [LoggerMessage(EventId = 5108, Level = LogLevel.Warning,
        Message = "Receipt {Receipt} holds unreadable content ({Message}); it is treated as pending with no attempts made")]
    public static partial void BlobReceiptUnreadable(ILogger logger, string receipt, string message);

    [LoggerMessage(EventId = 5109, Level = LogLevel.Information,
        Message = "Blob {Container}/{Blob} was deleted before {Function} ran; skipped")]
    public static partial void BlobTriggerBlobDeleted(ILogger logger, string container, string blob, string function);

    [LoggerMessage(EventId = 5110, Level = LogLevel.Warning,
        Message = "Blob trigger scan of container {Container} failed: {Message}; will keep trying")]
    public static partial void BlobTriggerScanFailed(ILogger logger, Exception exception, string container, string message);

    [LoggerMessage(EventId = 5111, Level = LogLevel.Warning,
        Message = "Could not read the blob receipts of {Function}: {Message}; blobs are checked one by one instead")]
    public static partial void BlobReceiptsLoadFailed(ILogger logger, Exception exception, string function, string message);

    [LoggerMessage(EventId = 5112, Level = LogLevel.Warning,
        Message = "Could not record the outcome of {Function} for blob {Container}/{Blob} in receipt {Receipt}: {Message}; when its lease expires another instance may try it again")]
    public static partial void BlobReceiptFailFailed(ILogger logger, Exception exception, string function, string container, string blob, string receipt, string message);

    [LoggerMessage(EventId = 5113, Level = LogLevel.Error,
        Message = "{Function} cannot run for blob {Container}/{Blob}: its receipt cannot be stored ({Message}); the blob is skipped")]
    public static partial void BlobReceiptImpossible(ILogger logger, Exception exception, string function, string container, string blob, string message);

    [LoggerMessage(EventId = 5114, Level = LogLevel.Information,
        Message = "Blob trigger on container {Container} is watching: its first scan listed {Count} blobs; it scans again every {Interval}, and a blob this instance writes fires at once")]
    public static partial void BlobTriggerFirstScan(ILogger logger, string container, int count, TimeSpan interval);
}
