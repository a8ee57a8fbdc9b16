using System.Diagnostics;
using Azure.Core;
using Azure.Core.Pipeline;
using Microsoft.Extensions.Logging;

namespace FaaST.Storage;

/// <summary>
/// Logs each storage try that fails in a way the SDK retries (Debug), and the last one (Warning), with the method,
/// the container/blob path, the try and the reason. It sits in the pipeline per retry, after the SDK's retry
/// policy, so it sees every try; it asks the message's own classifier whether the failure is retriable, and
/// does nothing on a try that succeeds (no allocation on the hot path).
/// </summary>
internal sealed class RetryLoggingPolicy(ILogger logger, int maxRetries) : HttpPipelinePolicy
{
    public override async ValueTask ProcessAsync(HttpMessage message, ReadOnlyMemory<HttpPipelinePolicy> pipeline)
    {
        DownloadResumes.Observe(message);
        try
        {
            await ProcessNextAsync(message, pipeline).ConfigureAwait(false);
        }
        catch (Exception e) when (Failed(message, e))
        {
            throw;
        }
        Failed(message, null);
    }

    public override void Process(HttpMessage message, ReadOnlyMemory<HttpPipelinePolicy> pipeline)
    {
        DownloadResumes.Observe(message);
        try
        {
            ProcessNext(message, pipeline);
        }
        catch (Exception e) when (Failed(message, e))
        {
            throw;
        }
        Failed(message, null);
    }

    /// <summary>Logs a retriable failure of this try; always false (used as an exception filter that never catches).</summary>
    private bool Failed(HttpMessage message, Exception? exception)
    {
        if (exception is null ? !message.HasResponse || !message.ResponseClassifier.IsRetriableResponse(message)
                              : message.CancellationToken.IsCancellationRequested || !message.ResponseClassifier.IsRetriableException(exception))
            return false;
        var level = message.ProcessingContext.RetryNumber < maxRetries ? LogLevel.Debug : LogLevel.Warning;
        if (!logger.IsEnabled(level))
            return false;
        var reason = exception is null ? $"status {message.Response.Status} {message.Response.ReasonPhrase}" : exception.Message;
        var attempt = message.ProcessingContext.RetryNumber + 1;
        if (level == LogLevel.Debug)
        {
            Log.Retrying(logger, exception, message.Request.Method.Method, message.Request.Uri.Path, attempt, maxRetries + 1, reason);
        }
        else if (PassGiveUp(out var suppressed))
        {
            if (suppressed > 0)
                Log.GiveUpsSuppressed(logger, suppressed);
            Log.GivingUp(logger, exception, message.Request.Method.Method, message.Request.Uri.Path, attempt, reason);
        }
        return false;
    }

    /// <summary>
    /// One give-up line (with its stack) a second: while storage is down every request gives up, and the
    /// faults benchmark's 30 s outage logged 1,515 of them. The requests themselves still fail one by one
    /// with a 503 naming the blob. Lock-free: only the caller that moves the next-allowed time logs.
    /// </summary>
    private bool PassGiveUp(out long suppressed)
    {
        var now = Stopwatch.GetTimestamp();
        var next = Volatile.Read(ref _nextGiveUp);
        if (now < next || Interlocked.CompareExchange(ref _nextGiveUp, now + Stopwatch.Frequency, next) != next)
        {
            Interlocked.Increment(ref _suppressedGiveUps);
            suppressed = 0;
            return false;
        }
        suppressed = Interlocked.Exchange(ref _suppressedGiveUps, 0);
        return true;
    }

    private long _nextGiveUp;
    private long _suppressedGiveUps;
}
