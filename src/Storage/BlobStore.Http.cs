using System.Globalization;
using System.Net;
using System.Runtime.ExceptionServices;
using System.Xml;

namespace FaaST.Storage;

// Transport: building and signing requests, the retry loop, and error mapping.
public sealed partial class BlobStore
{
    /// <summary>Status codes worth another try: timeouts, throttling and server-side faults.</summary>
    internal static bool IsTransientStatus(HttpStatusCode status) => (int)status is 408 or 429 or 500 or 502 or 503 or 504;

    private static bool IsTransientException(Exception ex) =>
        ex is HttpRequestException or IOException or OperationCanceledException or TimeoutException
            or System.Net.Sockets.SocketException;

    /// <summary>Runs one operation with per-try timeout and retries with exponential backoff and jitter.</summary>
    private async Task<T> ExecuteAsync<T>(Operation<T> op, CancellationToken ct)
    {
        ct.ThrowIfCancellationRequested();
        var maxAttempts = _options.MaxRetries + 1;
        for (var attempt = 1; ; attempt++)
        {
            Exception failure;
            TimeSpan? retryAfter = null;
            using (var attemptCts = CancellationTokenSource.CreateLinkedTokenSource(ct))
            {
                attemptCts.CancelAfter(_options.TryTimeout);
                op.AttemptCts = attemptCts;
                HttpResponseMessage? response = null;
                try
                {
                    using var request = op.CreateRequest(attempt);
                    response = await _http.SendAsync(request, HttpCompletionOption.ResponseHeadersRead, attemptCts.Token)
                        .ConfigureAwait(false);
                    if (!IsTransientStatus(response.StatusCode))
                    {
                        return await op.ReadResponseAsync(response, ct).ConfigureAwait(false);
                    }

                    retryAfter = response.Headers.RetryAfter?.Delta;
                    failure = await CreateErrorAsync(op, response, condition: false, attemptCts.Token).ConfigureAwait(false);
                }
                catch (Exception) when (op.Fatal is not null)
                {
                    // The caller's source or destination stream failed: not a storage fault, never retried.
                    ExceptionDispatchInfo.Throw(op.Fatal);
                    throw;
                }
                catch (Exception) when (ct.IsCancellationRequested)
                {
                    ct.ThrowIfCancellationRequested();
                    throw;
                }
                catch (Exception ex) when (IsTransientException(ex))
                {
                    failure = ex is OperationCanceledException
                        ? new TimeoutException(string.Create(CultureInfo.InvariantCulture,
                            $"The try did not complete within the per-try timeout of {_options.TryTimeout.TotalSeconds:0.###} s."), ex)
                        : ex;
                }
                finally
                {
                    op.AttemptCts = null;
                    response?.Dispose();
                }
            }

            var blocker = op.RetryBlocker;
            if (blocker is not null)
            {
                throw new StorageUnavailableException(
                    $"Blob storage at {Endpoint}: {op.Describe()} failed and cannot be retried because {blocker}. " +
                    $"Pass a seekable stream or a ReadOnlyMemory<byte> to make the upload retryable. Error: {failure.Message}",
                    failure);
            }

            if (attempt >= maxAttempts)
            {
                throw new StorageUnavailableException(string.Create(CultureInfo.InvariantCulture,
                    $"Blob storage at {Endpoint} is unavailable: {op.Describe()} failed after {attempt} attempt(s). Last error: {failure.Message}"),
                    failure);
            }

            await Task.Delay(BackoffDelay(attempt, retryAfter), ct).ConfigureAwait(false);
        }
    }

    /// <summary>base·2^(attempt-1), capped, times a jitter factor in [0.5, 1.5); at least the server's Retry-After (capped).</summary>
    internal TimeSpan BackoffDelay(int attempt, TimeSpan? retryAfter)
    {
        var maxMs = _options.RetryMaxDelay.TotalMilliseconds;
        var ms = Math.Min(_options.RetryBaseDelay.TotalMilliseconds * Math.Pow(2, Math.Min(attempt - 1, 30)), maxMs);
        ms = Math.Min(ms * (0.5 + Random.Shared.NextDouble()), maxMs);
        if (retryAfter is { } ra && ra > TimeSpan.Zero)
        {
            ms = Math.Max(ms, Math.Min(ra.TotalMilliseconds, maxMs));
        }

        return TimeSpan.FromMilliseconds(ms);
    }

    /// <summary>Builds the URL, headers and (for SharedKey) the Authorization of one request.</summary>
    internal HttpRequestMessage CreateRequest(HttpMethod method, in RequestParts p, HttpContent? content)
    {
        var date = HttpDate.Now();
        Uri uri;
        var url = new CharBuffer(stackalloc char[256]);
        try
        {
            url.Append(_origin);
            url.Append(_endpointPath);
            url.Append('/');
            url.Append(p.Container);
            if (p.EncodedBlob is not null)
            {
                url.Append('/');
                url.Append(p.EncodedBlob);
            }

            var separator = '?';
            AppendQuery(ref url, ref separator, "restype=", p.Restype);
            AppendQuery(ref url, ref separator, "comp=", p.Comp);
            AppendQuery(ref url, ref separator, "blockid=", p.BlockId);
            AppendQuery(ref url, ref separator, "prefix=", p.Prefix);
            AppendQuery(ref url, ref separator, "marker=", p.Marker);
            if (p.MaxResults > 0)
            {
                url.Append(separator);
                separator = '&';
                url.Append("maxresults=");
                url.Append(p.MaxResults);
            }

            if (_sas is not null)
            {
                url.Append(separator);
                url.Append(_sas);
            }

            uri = new Uri(url.Written.ToString(), UriKind.Absolute);
        }
        finally
        {
            url.Dispose();
        }

        var request = new HttpRequestMessage(method, uri) { Content = content, Version = HttpVersion.Version11 };
        var headers = request.Headers;
        headers.TryAddWithoutValidation("x-ms-version", ServiceVersion);
        headers.TryAddWithoutValidation("x-ms-date", date);
        AddHeader(headers, "x-ms-range", p.Range);
        AddHeader(headers, "x-ms-blob-type", p.BlobType);
        AddHeader(headers, "x-ms-blob-content-type", p.BlobContentType);
        AddHeader(headers, "x-ms-delete-snapshots", p.DeleteSnapshots);
        AddHeader(headers, "If-Match", p.IfMatch);
        AddHeader(headers, "If-None-Match", p.IfNoneMatch);

        if (_key is not null)
        {
            var sts = new CharBuffer(stackalloc char[512]);
            try
            {
                SharedKeySigner.WriteStringToSign(ref sts, p, _resourcePrefix, date, ServiceVersion);
                headers.TryAddWithoutValidation("Authorization",
                    SharedKeySigner.CreateAuthorization(sts.Written, _key, _authorizationPrefix!));
            }
            finally
            {
                sts.Dispose();
            }
        }

        return request;
    }

    private static void AddHeader(System.Net.Http.Headers.HttpRequestHeaders headers, string name, string? value)
    {
        if (value is not null)
        {
            headers.TryAddWithoutValidation(name, value);
        }
    }

    private static void AppendQuery(ref CharBuffer url, ref char separator, string nameEquals, string? value)
    {
        if (string.IsNullOrEmpty(value))
        {
            return;
        }

        url.Append(separator);
        separator = '&';
        url.Append(nameEquals);
        url.AppendEscaped(value);
    }

    /// <summary>Reads x-ms-error-code (and the XML error body, if any) into an exception naming the operation and target.</summary>
    private static async Task<BlobStorageException> CreateErrorAsync(OperationBase op, HttpResponseMessage response,
        bool condition, CancellationToken ct, string? note = null)
    {
        var status = (int)response.StatusCode;
        var code = GetHeader(response, "x-ms-error-code");
        string? serviceMessage = null;
        if (response.RequestMessage?.Method != HttpMethod.Head)
        {
            try
            {
                (var bodyCode, serviceMessage) = await ReadErrorBodyAsync(op, response, ct).ConfigureAwait(false);
                code ??= bodyCode;
            }
            catch (Exception ex) when (ex is IOException or HttpRequestException or XmlException or OperationCanceledException)
            {
                // The status and header are enough; an unreadable body must not hide them.
            }
        }

        var message = string.Create(CultureInfo.InvariantCulture,
            $"{op.Describe()} failed: HTTP {status} {code ?? response.ReasonPhrase}");
        if (!string.IsNullOrWhiteSpace(serviceMessage))
        {
            message += ": " + serviceMessage;
        }

        if (note is not null)
        {
            message += " (" + note + ")";
        }

        return condition
            ? new BlobConditionFailedException(status, code, message)
            : new BlobStorageException(status, code, message);
    }

    private static async Task<(string? Code, string? Message)> ReadErrorBodyAsync(OperationBase op, HttpResponseMessage response,
        CancellationToken ct)
    {
        if (response.Content.Headers.ContentLength is 0 or > 64 * 1024)
        {
            return (null, null);
        }

        var stream = await response.Content.ReadAsStreamAsync(ct).ConfigureAwait(false);
        await using (stream.ConfigureAwait(false))
        {
            using var reader = XmlReader.Create(new TimedReadStream(stream, op), XmlSettings);
            string? code = null, message = null, current = null;
            while (await reader.ReadAsync().ConfigureAwait(false))
            {
                switch (reader.NodeType)
                {
                    case XmlNodeType.Element:
                        current = reader.Depth == 1 ? reader.LocalName : null;
                        break;
                    case XmlNodeType.Text or XmlNodeType.CDATA:
                        if (current == "Code")
                        {
                            code = reader.Value;
                        }
                        else if (current == "Message")
                        {
                            message = reader.Value;
                        }

                        break;
                    case XmlNodeType.EndElement:
                        current = null;
                        break;
                }
            }

            // Azure appends "\nRequestId:...\nTime:..." to the message; the first line is the useful part.
            if (message is not null)
            {
                var nl = message.IndexOfAny(['\r', '\n']);
                message = (nl >= 0 ? message[..nl] : message).Trim();
            }

            return (code, message);
        }
    }

    internal static string? GetHeader(HttpResponseMessage response, string name)
    {
        if (response.Headers.NonValidated.TryGetValues(name, out var values))
        {
            return values.ToString();
        }

        return response.Content.Headers.NonValidated.TryGetValues(name, out values) ? values.ToString() : null;
    }

    /// <summary>ETag, length, Last-Modified and Content-Type of a HEAD/GET/PUT response.</summary>
    private static BlobProperties ReadProperties(HttpResponseMessage response, long? knownLength = null, string? knownContentType = null)
    {
        var etag = GetHeader(response, "ETag") ?? string.Empty;
        var length = knownLength ?? TotalLength(response) ?? response.Content.Headers.ContentLength ?? 0;
        var lastModified = ParseHttpDate(GetHeader(response, "Last-Modified"));
        var contentType = knownContentType ?? GetHeader(response, "Content-Type");
        return new BlobProperties(etag, length, lastModified, contentType);
    }

    /// <summary>The blob's full length from "Content-Range: bytes 0-99/1234".</summary>
    private static long? TotalLength(HttpResponseMessage response)
    {
        var range = GetHeader(response, "Content-Range");
        if (range is null)
        {
            return null;
        }

        var slash = range.LastIndexOf('/');
        return slash >= 0 && long.TryParse(range.AsSpan(slash + 1), NumberStyles.None, CultureInfo.InvariantCulture, out var total)
            ? total
            : null;
    }

    internal static DateTimeOffset ParseHttpDate(string? value) =>
        value is not null && DateTimeOffset.TryParseExact(value, "r", CultureInfo.InvariantCulture,
            DateTimeStyles.AssumeUniversal, out var parsed)
            ? parsed
            : default;

    private static readonly XmlReaderSettings XmlSettings = new()
    {
        Async = true,
        DtdProcessing = DtdProcessing.Prohibit,
        XmlResolver = null,
        IgnoreComments = true,
        IgnoreProcessingInstructions = true,
        CloseInput = false,
    };

    /// <summary>The RFC 1123 date for x-ms-date, formatted once per second.</summary>
    private static class HttpDate
    {
        private static Cached s_cached = new(0, string.Empty);

        public static string Now()
        {
            var now = DateTime.UtcNow;
            var second = now.Ticks / TimeSpan.TicksPerSecond;
            var cached = Volatile.Read(ref s_cached);
            if (cached.Second == second)
            {
                return cached.Text;
            }

            var text = now.ToString("R", CultureInfo.InvariantCulture);
            Volatile.Write(ref s_cached, new Cached(second, text));
            return text;
        }

        private sealed record Cached(long Second, string Text);
    }
}
