using System.Globalization;
using System.Text;
using FaaST.Protos.Worker;
using FaaST.Runtime.Invocation;
using FaaST.Runtime.Workers;
using FaaST.Storage;
using Google.Protobuf;
using Microsoft.AspNetCore.Http.Features;
using Microsoft.Extensions.Primitives;

namespace FaaST.Runtime.Http;

/// <summary>Maps each httpTrigger function onto an ASP.NET Core route and turns requests into invocations.</summary>
internal static class HttpTriggerEndpoints
{
    /// <summary>Azure Functions' default request body limit (FUNCTIONS_REQUEST_BODY_SIZE_LIMIT overrides it).</summary>
    public const long DefaultMaxBodySize = 100L * 1024 * 1024;

    public static void Map(IEndpointRouteBuilder routes, FunctionApp app, FunctionInvoker invoker, ILogger logger, HttpKeyCheck keys)
    {
        var maxBody = app.Settings.RequestBodySizeLimit ?? DefaultMaxBodySize;
        var limited = new HashSet<string>(StringComparer.OrdinalIgnoreCase);
        foreach (var function in app.Functions)
        {
            // Its route is another function's (Azure keeps the first and puts this one in error).
            if (function.ConflictsWith is not null)
                continue;
            // A function whose function.json could not be read answers on its default route with the reason.
            var trigger = function.Trigger ?? (function.Error is not null
                ? new BindingMetadata { Name = "req", Type = BindingMetadata.HttpTrigger, Direction = BindingDirection.In, Route = LiteralRoute(function.Name) }
                : null);
            if (trigger is not { Type: BindingMetadata.HttpTrigger })
                continue;
            var template = "/" + (string.IsNullOrEmpty(app.Host.RoutePrefix) ? trigger.Route! : $"{app.Host.RoutePrefix}/{trigger.Route}");
            var handler = new Handler(function, trigger.AuthLevel, invoker, maxBody, logger, keys);
            var endpoint = trigger.Methods is { } methods
                ? routes.MapMethods(template, methods, handler.HandleAsync)
                : routes.Map(template, handler.HandleAsync);
            endpoint.WithDisplayName(function.Name);
            if (trigger.Methods is not null)
                limited.Add(template);
        }
        // Azure Functions answers a method a function does not allow with 404, as for an unknown route
        // (its routes carry the methods as a constraint); ASP.NET Core would answer 405. Behind each route
        // with methods, an endpoint of any method that loses to every function endpoint (a higher order)
        // answers 404: it is chosen only when no function takes the request. Each gets its own order so
        // that two such routes matching one path are never ambiguous.
        var order = 1;
        foreach (var template in limited)
            routes.Map(template, NotAllowed).WithOrder(order++).WithDisplayName("404: method not allowed by " + template);
    }

    private static Task NotAllowed(HttpContext context)
    {
        context.Response.StatusCode = StatusCodes.Status404NotFound;
        return Task.CompletedTask;
    }

    /// <summary>401 with the reason as JSON, logged by method and path (the query may hold a key: never logged).</summary>
    internal static Task WriteUnauthorizedAsync(HttpContext context, string reason, string? function, ILogger logger)
    {
        Log.Unauthorized(logger, context.Request.Method, LogText.Escape(context.Request.Path.Value), reason);
        context.Response.StatusCode = StatusCodes.Status401Unauthorized;
        return context.Response.WriteAsJsonAsync(new UnauthorizedBody(reason, function), ErrorJson.Default.UnauthorizedBody, cancellationToken: CancellationToken.None);
    }

    /// <summary>A folder name as a route of literal text (braces doubled), so that it always parses.</summary>
    private static string LiteralRoute(string name) => name.Replace("{", "{{", StringComparison.Ordinal).Replace("}", "}}", StringComparison.Ordinal);

    private sealed class Handler(FunctionDefinition function, AuthLevel authLevel, FunctionInvoker invoker, long maxBody, ILogger logger, HttpKeyCheck keys)
    {
        // Warnings a request can cause, one a second per function (a client or a function repeats them).
        private readonly LogGate _responseLog = LogGate.PerSecond();
        private readonly LogGate _rejectedLog = LogGate.PerSecond();

        public async Task HandleAsync(HttpContext context)
        {
            // Keys first, then disabled (Azure's order: without a key, a disabled function is a 401 too).
            if (keys.Refusal(context.Request, authLevel, function.Name) is { } refusal)
            {
                await WriteUnauthorizedAsync(context, refusal, function.Name, logger);
                return;
            }
            if (function.Disabled)
            {
                context.Response.StatusCode = StatusCodes.Status404NotFound;
                return;
            }
            await using var invocation = new InvocationContext(function.Name);
            RequestBodyBuffer? large = null;
            var answered = false;
            try
            {
                if (function.Error is { } error)
                    throw new FunctionUnavailableException($"function {function.Name} cannot run: {error}");
                ReadOnlyMemory<byte> body;
                (body, large) = await ReadBodyAsync(context.Request, maxBody, context.RequestAborted);
                var request = ToHttpData(context, body, invocation);
                TypedData? result;
                try
                {
                    result = await invoker.InvokeAsync(function, invocation, new TypedData { Http = request }, context.RequestAborted);
                }
                catch (Exception e) when (e is FunctionFailedException or BlobWriteConflictException)
                {
                    answered = true;
                    throw;
                }
                answered = true;
                await WriteResponseAsync(context, result, logger, _responseLog);
            }
            catch (Exception e) when (!context.Response.HasStarted)
            {
                await WriteErrorAsync(context, invocation, e);
            }
            finally
            {
                // The worker answered, so it has the whole request: the body can go at once.
                // Otherwise the request may still be queued for a worker; the finalizer frees it.
                if (answered)
                    large?.Release();
            }
        }

        /// <summary>Bodies from this size on go to native memory that is freed when the invocation ends.</summary>
        private const int NativeBodyThreshold = 1024 * 1024;

        private static async Task<(ReadOnlyMemory<byte> Body, RequestBodyBuffer? Native)> ReadBodyAsync(HttpRequest request, long maxBody, CancellationToken ct)
        {
            if (request.ContentLength is { } length)
            {
                if (length > maxBody)
                    throw new BadHttpRequestException($"the request body of {length} bytes exceeds the limit of {maxBody} bytes", StatusCodes.Status413PayloadTooLarge);
                if (length == 0)
                    return (ReadOnlyMemory<byte>.Empty, null);
                if (length < NativeBodyThreshold)
                {
                    var exact = new byte[length];
                    await request.Body.ReadExactlyAsync(exact, ct);
                    return (exact, null);
                }
                var buffer = new RequestBodyBuffer((int)length);
                try
                {
                    await request.Body.ReadExactlyAsync(buffer.Memory, ct);
                    buffer.Length = (int)length;
                    return (buffer.Written, buffer);
                }
                catch
                {
                    buffer.Release(); // never handed out
                    throw;
                }
            }
            if (request.HttpContext.Features.Get<IHttpRequestBodyDetectionFeature>() is { CanHaveBody: false })
                return (ReadOnlyMemory<byte>.Empty, null);
            return await ReadChunkedAsync(request.Body, maxBody, ct);
        }

        /// <summary>A body of unknown length (chunked): read into native memory that doubles as it fills, up to the limit.</summary>
        private static async Task<(ReadOnlyMemory<byte>, RequestBodyBuffer?)> ReadChunkedAsync(Stream body, long maxBody, CancellationToken ct)
        {
            var buffer = new RequestBodyBuffer(64 * 1024);
            try
            {
                while (true)
                {
                    if (buffer.Length == buffer.Capacity)
                    {
                        if (buffer.Capacity >= maxBody)
                        {
                            // Full at the limit: one more byte is too many.
                            if (await body.ReadAsync(new byte[1], ct) == 0)
                                break;
                            throw new BadHttpRequestException($"the request body exceeds the limit of {maxBody} bytes", StatusCodes.Status413PayloadTooLarge);
                        }
                        buffer.Grow((int)Math.Min(maxBody, (long)buffer.Capacity * 2));
                    }
                    var n = await body.ReadAsync(buffer.Free, ct);
                    if (n == 0)
                        break;
                    buffer.Length += n;
                }
                if (buffer.Length == 0)
                {
                    buffer.Release();
                    return (ReadOnlyMemory<byte>.Empty, null);
                }
                return (buffer.Written, buffer);
            }
            catch
            {
                buffer.Release(); // never handed out
                throw;
            }
        }

        private HttpData ToHttpData(HttpContext context, ReadOnlyMemory<byte> body, InvocationContext invocation)
        {
            var request = context.Request;
            var http = new HttpData
            {
                Method = request.Method,
                Url = $"{request.Scheme}://{request.Host}{request.PathBase}{request.Path}{request.QueryString}",
                Body = new TypedData { Bytes = UnsafeByteOperations.UnsafeWrap(body) },
            };
            foreach (var (name, values) in request.Headers)
                http.Headers[name.ToLowerInvariant()] = values.ToString();
            foreach (var (name, values) in request.Query)
            {
                var value = values.ToString();
                http.Query[name] = value;
                invocation.BindingData[name] = value;
            }
            foreach (var (name, value) in request.RouteValues)
            {
                if (value is null)
                    continue;
                var text = Convert.ToString(value, CultureInfo.InvariantCulture) ?? "";
                http.Params[name] = text;
                invocation.BindingData[name] = text;
            }
            // Binding expressions may name properties of a JSON body, also nested ones, as in Azure
            // Functions; it is parsed only if an expression is not found in the route or query.
            if (body.Length > 0 && request.ContentType?.Contains("json", StringComparison.OrdinalIgnoreCase) == true)
                invocation.SetJsonPayload(body, "the JSON body");
            return http;
        }

        private static async Task WriteResponseAsync(HttpContext context, TypedData? result, ILogger logger, LogGate gate)
        {
            var response = context.Response;
            if (result is null || result.DataCase == TypedData.DataOneofCase.None)
            {
                // Nothing for the response (no http output, e.g. a blob $return, or none set): Azure
                // Functions answers 200 with an empty body (its invocation middleware's default result).
                response.StatusCode = StatusCodes.Status200OK;
                response.ContentLength = 0;
                return;
            }
            ReadOnlyMemory<byte> body;
            string? contentType = null;
            if (result.DataCase == TypedData.DataOneofCase.Http)
            {
                var http = result.Http;
                var status = http.StatusCode == 0 ? StatusCodes.Status200OK : http.StatusCode;
                if (status is < 200 or > 599)
                {
                    // Kestrel refuses it once the response has started, and the client would get no answer at all.
                    if (Log.Pass(logger, gate, LogLevel.Warning, "status not final"))
                        Log.StatusNotFinal(logger, LogText.Escape(context.GetEndpoint()?.DisplayName), status);
                    status = StatusCodes.Status500InternalServerError;
                }
                response.StatusCode = status;
                foreach (var (name, value) in http.Headers)
                {
                    if (IsHopByHop(name))
                        continue;
                    if (!IsToken(name) || !IsFieldValue(value))
                    {
                        // A CR/LF or a non-ASCII character would make Kestrel throw mid-response (found by the
                        // fuzzer: the client got no response); a header it cannot send is dropped and logged.
                        if (Log.Pass(logger, gate, LogLevel.Warning, "header dropped"))
                            Log.HeaderDropped(logger, LogText.Escape(context.GetEndpoint()?.DisplayName), LogText.Escape(name), LogText.Escape(value));
                        continue;
                    }
                    response.Headers[name] = value;
                }
                // Several Set-Cookie headers (the map holds one value a name; cookies cannot be comma-joined).
                foreach (var cookie in http.SetCookies)
                {
                    if (!IsFieldValue(cookie))
                    {
                        Log.SetCookieDropped(logger, LogText.Escape(context.GetEndpoint()?.DisplayName), LogText.Escape(cookie));
                        continue;
                    }
                    response.Headers.Append("Set-Cookie", cookie);
                }
                (body, contentType) = http.Body is { } b ? BodyOf(b) : (ReadOnlyMemory<byte>.Empty, null);
            }
            else
            {
                (body, contentType) = BodyOf(result);
            }
            if (response.StatusCode is StatusCodes.Status204NoContent or StatusCodes.Status304NotModified)
            {
                // No body may follow (RFC 9110 §6.4.1); writing one throws inside Kestrel and the client gets
                // nothing (found by the fuzzer). What the function returned is dropped.
                if (body.Length > 0 && Log.Pass(logger, gate, LogLevel.Debug, "body not sent"))
                    Log.BodyNotSent(logger, LogText.Escape(context.GetEndpoint()?.DisplayName), response.StatusCode);
                return;
            }
            if (contentType is not null && !response.Headers.ContainsKey("Content-Type"))
                response.ContentType = contentType;
            response.ContentLength = body.Length;
            if (body.Length > 0)
                await response.Body.WriteAsync(body, context.RequestAborted);
        }

        /// <summary>Headers about the connection, which the server manages (RFC 9110 §7.6.1); a function cannot set them.</summary>
        private static bool IsHopByHop(string name) =>
            name.Equals("content-length", StringComparison.OrdinalIgnoreCase) ||
            name.Equals("transfer-encoding", StringComparison.OrdinalIgnoreCase) ||
            name.Equals("connection", StringComparison.OrdinalIgnoreCase) ||
            name.Equals("keep-alive", StringComparison.OrdinalIgnoreCase) ||
            name.Equals("upgrade", StringComparison.OrdinalIgnoreCase) ||
            name.Equals("proxy-connection", StringComparison.OrdinalIgnoreCase) ||
            name.Equals("te", StringComparison.OrdinalIgnoreCase) ||
            name.Equals("trailer", StringComparison.OrdinalIgnoreCase);

        private static readonly System.Buffers.SearchValues<char> TokenChars =
            System.Buffers.SearchValues.Create("!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz");

        /// <summary>A header name: an RFC 9110 token.</summary>
        private static bool IsToken(string name) => name.Length > 0 && !name.AsSpan().ContainsAnyExcept(TokenChars);

        /// <summary>A header value Kestrel sends as it is: visible ASCII, space and tab.</summary>
        private static bool IsFieldValue(string value)
        {
            foreach (var c in value)
                if (c is not ('\t' or >= ' ' and <= '~'))
                    return false;
            return true;
        }

        private static (ReadOnlyMemory<byte>, string?) BodyOf(TypedData data) => data.DataCase switch
        {
            TypedData.DataOneofCase.Bytes => (data.Bytes.Memory, "application/octet-stream"),
            TypedData.DataOneofCase.String => (Encoding.UTF8.GetBytes(data.String), "text/plain; charset=utf-8"),
            TypedData.DataOneofCase.Json => (Encoding.UTF8.GetBytes(data.Json), "application/json; charset=utf-8"),
            _ => (ReadOnlyMemory<byte>.Empty, null),
        };

        private async Task WriteErrorAsync(HttpContext context, InvocationContext invocation, Exception e)
        {
            var (status, message) = e switch
            {
                BadHttpRequestException b => (b.StatusCode, b.Message),
                BindingResolutionException => (StatusCodes.Status400BadRequest, e.Message),
                BlobWriteConflictException => (StatusCodes.Status409Conflict, e.Message),
                FunctionFailedException => (StatusCodes.Status500InternalServerError, e.Message),
                FunctionUnavailableException => (StatusCodes.Status500InternalServerError, e.Message),
                FunctionTimeoutException => (StatusCodes.Status504GatewayTimeout, e.Message),
                WorkerUnavailableException => (StatusCodes.Status503ServiceUnavailable, e.Message),
                StorageUnavailableException => (StatusCodes.Status503ServiceUnavailable, e.Message),
                BlobStorageException => (StatusCodes.Status502BadGateway, e.Message),
                AppConfigException => (StatusCodes.Status500InternalServerError, e.Message),
                OperationCanceledException when context.RequestAborted.IsCancellationRequested => (499, "the client went away"),
                _ => (StatusCodes.Status500InternalServerError, $"{e.GetType().Name}: {e.Message}"),
            };
            if (status == 499)
                return;
            // The messages carry request data (resolved blob names, paths, the function's own text):
            // control characters are escaped so that a CR or LF from a client cannot forge log lines.
            // An unexpected exception is logged by type, message and stack, not as the exception
            // object, whose ToString() would print its message raw.
            var logged = LogText.Escape(message);
            if (e is FunctionFailedException f)
                Log.InvocationFailed(logger, function.Name, invocation.InvocationId, logged, f.WorkerStackTrace);
            else if (status >= 500 && e is not (FunctionTimeoutException or WorkerUnavailableException or StorageUnavailableException or FunctionUnavailableException))
                Log.InvocationFailedWithStack(logger, function.Name, invocation.InvocationId, status, logged, e.StackTrace);
            else if (status >= 500)
                Log.InvocationFailedWithStatus(logger, function.Name, invocation.InvocationId, status, logged);
            else if (Log.Pass(logger, _rejectedLog, LogLevel.Warning, "request rejected"))
                Log.RequestRejected(logger, function.Name, invocation.InvocationId, status, logged);
            context.Response.StatusCode = status;
            context.Response.Headers["x-faast-invocation-id"] = invocation.InvocationId;
            if (e is BlobWriteConflictException conflict)
            {
                // A body a client can act on without parsing the message: which output, which blob.
                await context.Response.WriteAsJsonAsync(new ConflictBody("conflict", conflict.Binding, conflict.Blob, message, invocation.InvocationId, function.Name),
                    ErrorJson.Default.ConflictBody, cancellationToken: CancellationToken.None);
                return;
            }
            await context.Response.WriteAsJsonAsync(new ErrorBody(message, invocation.InvocationId, function.Name), ErrorJson.Default.ErrorBody, cancellationToken: CancellationToken.None);
        }
    }
}

internal sealed record ErrorBody(string Error, string InvocationId, string Function);

/// <summary>A 409's body: a conditional blob output found its blob changed ("error" is always "conflict").</summary>
internal sealed record ConflictBody(string Error, string Binding, string Blob, string Message, string InvocationId, string Function);

/// <summary>A 401's body: why (never the key sent), and the function, or null for the admin API.</summary>
internal sealed record UnauthorizedBody(string Error, string? Function);

[System.Text.Json.Serialization.JsonSerializable(typeof(ErrorBody))]
[System.Text.Json.Serialization.JsonSerializable(typeof(ConflictBody))]
[System.Text.Json.Serialization.JsonSerializable(typeof(UnauthorizedBody))]
[System.Text.Json.Serialization.JsonSourceGenerationOptions(PropertyNamingPolicy = System.Text.Json.Serialization.JsonKnownNamingPolicy.CamelCase)]
internal sealed partial class ErrorJson : System.Text.Json.Serialization.JsonSerializerContext;
