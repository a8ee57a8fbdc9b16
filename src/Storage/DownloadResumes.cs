using Azure.Core;
using Azure.Core.Pipeline;
using Microsoft.Extensions.Logging;

namespace FaaST.Storage;

/// <summary>
/// Counts and logs the requests by which the SDK resumes one download whose body broke (Range from the first byte
/// not yet received, If-Match on the first response's ETag). The SDK makes them inside the body stream's
/// ReadAsync, out of the store's sight; while <see cref="Scope"/> is open, every message the pipeline creates on
/// this async flow carries this object, and <see cref="RetryLoggingPolicy"/> hands each one to
/// <see cref="Observe"/>. The scope opens after the first response, so each message that carries it is a resume.
/// </summary>
internal sealed class DownloadResumes(ILogger logger, string path)
{
    private const string Property = "FaaST.Storage.DownloadResumes";
    private readonly ILogger _logger = logger;
    private readonly string _path = path;
    private int _count;

    /// <summary>The resumes requested so far.</summary>
    public int Count => Volatile.Read(ref _count);

    /// <summary>Marks the messages created on this async flow until disposed.</summary>
    public IDisposable Scope() => HttpPipeline.CreateHttpMessagePropertiesScope(new Dictionary<string, object?> { [Property] = this });

    /// <summary>Logs a resume on the first try of a marked message (the SDK's retries of the same message are logged as tries).</summary>
    public static void Observe(HttpMessage message)
    {
        if (message.ProcessingContext.RetryNumber != 0 || message.Request.Method != RequestMethod.Get || !message.TryGetProperty(Property, out var value) || value is not DownloadResumes resumes)
            return;
        var resume = Interlocked.Increment(ref resumes._count);
        var request = message.Request.Headers;
        var offset = request.TryGetValue("x-ms-range", out var range) || request.TryGetValue("Range", out range)
            ? range.StartsWith("bytes=", StringComparison.Ordinal) ? range["bytes=".Length..].Split('-')[0] : range
            : "0";
        Log.DownloadResuming(resumes._logger, resumes._path, offset, request.TryGetValue("If-Match", out var etag) ? etag : "(none)", resume);
    }
}
