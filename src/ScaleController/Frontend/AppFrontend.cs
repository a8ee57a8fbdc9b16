using System.Buffers;
using System.Collections.Frozen;
using System.Globalization;
using System.Net;
using System.Net.Http.Headers;
using Microsoft.AspNetCore.Http.Features;
using Microsoft.Extensions.Primitives;
using Microsoft.Net.Http.Headers;

namespace FaaST.ScaleController.Frontend;

/// <summary>
/// One app's frontend (Faa$T §4, Fig. 5): forwards each invocation to the app's ready instance with the fewest
/// outstanding requests, streaming both bodies; queues invocations while no instance is ready and asks the
/// platform for one (<see cref="ColdStart"/>); keeps the load figures the scale controller reads
/// (<see cref="TakeStats"/>). The request path takes no lock: the instance set is an immutable snapshot
/// swapped on change, outstanding counts and statistics are <see cref="Interlocked"/> counters. Changes to
/// the instance set (rare: a scaling decision, a deploy) take a lock of this app only.
/// </summary>
/// <remarks>
/// The forwarder is hand-written rather than YARP's <c>IHttpForwarder</c> by measurement (issue 20; bench micro,
/// FrontendBenchmarks: a no-op GET forwarded to a loopback Kestrel instance, 2 vCPUs shared with four builds):
/// this one 90 and 101 µs (two runs' medians) and 4.03 KB allocated per request (the instance's side included; 4.33
/// KB before the instance URI was kept per slot), YARP 2.3.0 with a transformer doing the same header rules 95 and
/// 196 µs and 4.72 KB. The times are within each other's noise on that machine; the allocations are exact, and
/// YARP's are 17 % more.
/// YARP would also need a layer of ours for what it does not do: retrying on another instance only when nothing
/// of the request was sent (<see cref="ForwardingTransport.IsConnectFailure"/>, <see cref="ForwardedBody.Started"/>),
/// the retries of idempotent requests, the queue. So it brings no win to pay a dependency for.
/// </remarks>
public sealed class AppFrontend : IAsyncDisposable
{
    private const int Ready = 0, Draining = 1, Removed = 2;

    private readonly string _app;
    private readonly FrontendOptions _options;
    private readonly ILogger _logger;
    private readonly TimeProvider _time;
    private readonly HttpMessageInvoker _invoker;
    private readonly string _retryAfter;
    private readonly string _noInstanceLine;
    private readonly RateGate _warnings;
    private readonly Lock _mutate = new();
    private readonly CancellationTokenSource _shutdown = new();

    private Snapshot _snapshot = Snapshot.Empty;
    private TaskCompletionSource _readySignal = NewSignal();
    private LatencyHistogram _stats = new();
    private long _statsSince;
    private long _lastRequestTicks;
    private int _active;
    private long _idleSince;
    private int _next;
    private int _queued;
    private int _inFlight;
    private int _coldStarting;
    private Task _coldStart = Task.CompletedTask;
    private int _disposed;
    private ClientAddress? _lastClient;

    /// <param name="app">The app's name (in logs and in the one-line bodies of the frontend's own answers).</param>
    /// <param name="options">Queueing and forwarding settings; validated here.</param>
    /// <param name="logger">Where the frontend logs (events 8000-8049).</param>
    /// <param name="time">The clock (queue timeouts, latencies, <see cref="LastRequest"/>); the system's by default.</param>
    public AppFrontend(string app, FrontendOptions options, ILogger logger, TimeProvider? time = null)
    {
        ArgumentException.ThrowIfNullOrWhiteSpace(app);
        ArgumentNullException.ThrowIfNull(options);
        ArgumentNullException.ThrowIfNull(logger);
        _app = app;
        _options = options.Validate();
        _logger = logger;
        _time = time ?? TimeProvider.System;
        _warnings = new RateGate(_time, TimeSpan.FromSeconds(1));
        _invoker = ForwardingTransport.For(options.ConnectTimeout);
        _retryAfter = ((long)Math.Ceiling(options.RetryAfter.TotalSeconds)).ToString(CultureInfo.InvariantCulture);
        _noInstanceLine = $"app \"{app}\" has no ready instance after {options.QueueTimeout.TotalSeconds.ToString("0.###", CultureInfo.InvariantCulture)} s\n";
        _statsSince = _time.GetTimestamp();
        _lastRequestTicks = _time.GetUtcNow().UtcTicks;
    }

    /// <summary>
    /// Called when an invocation arrives while no instance is ready, so the platform starts one (a cold start);
    /// never more than one call at a time. It should add the instance (<see cref="AddInstance"/>) once ready;
    /// queued invocations go to it at once. The token is cancelled when the frontend is disposed.
    /// </summary>
    public Func<CancellationToken, Task>? ColdStart { get; set; }

    /// <summary>
    /// Raised (on the request's thread) when an instance refused the connection or did not accept it within the
    /// connect timeout: the frontend has taken it out of rotation and sent the invocation elsewhere; the platform
    /// replaces it. Raised once per instance.
    /// </summary>
    public event Action<string, Exception>? InstanceFailed;

    /// <summary>
    /// Called (on the request's thread, so it must be quick) when a request arrives while none was active, with how long
    /// the app was idle: since the last request finished. Not for the first request the frontend sees.
    /// </summary>
    public Action<TimeSpan>? IdleEnded { get; set; }

    /// <summary>The app this frontend serves.</summary>
    public string App => _app;

    /// <summary>When the latest invocation arrived (the frontend's creation time before the first): the keep-alive's clock.</summary>
    public DateTimeOffset LastRequest => new(Volatile.Read(ref _lastRequestTicks), TimeSpan.Zero);

    /// <summary>The instances now, ready and draining, with their outstanding requests.</summary>
    public IReadOnlyList<InstanceView> Instances =>
        [.. Volatile.Read(ref _snapshot).All.Select(s => new InstanceView(s.Endpoint.Id, s.Endpoint.BaseAddress, s.Endpoint.Version,
            Volatile.Read(ref s.State) == Ready ? InstanceRouting.Ready : InstanceRouting.Draining, Volatile.Read(ref s.Outstanding)))];

    /// <summary>Invocations waiting for a ready instance now.</summary>
    internal int Queued => Volatile.Read(ref _queued);

    /// <summary>Makes <paramref name="endpoint"/> receive invocations; queued ones go to it at once.</summary>
    /// <exception cref="ArgumentException">An instance with the same id is already known.</exception>
    public void AddInstance(InstanceEndpoint endpoint)
    {
        ArgumentNullException.ThrowIfNull(endpoint);
        ArgumentException.ThrowIfNullOrWhiteSpace(endpoint.Id);
        if (!endpoint.BaseAddress.IsAbsoluteUri || (endpoint.BaseAddress.Scheme != Uri.UriSchemeHttp && endpoint.BaseAddress.Scheme != Uri.UriSchemeHttps))
            throw new ArgumentException($"instance {endpoint.Id} of app \"{_app}\": base address {endpoint.BaseAddress} is not an absolute http(s) URI", nameof(endpoint));
        ObjectDisposedException.ThrowIf(Volatile.Read(ref _disposed) != 0, this);
        lock (_mutate)
        {
            var current = _snapshot;
            if (current.Find(endpoint.Id) is not null)
                throw new ArgumentException($"instance {endpoint.Id} is already in app \"{_app}\"'s frontend", nameof(endpoint));
            var slot = new Slot(endpoint);
            Volatile.Write(ref _snapshot, new Snapshot([.. current.All, slot], [.. current.Ready, slot]));
        }
        Log.InstanceAdded(_logger, _app, endpoint.Id, endpoint.Version, endpoint.BaseAddress);
        // After the snapshot: a waiter reads the signal before the snapshot, so it either sees the instance
        // or holds the signal completed here.
        Interlocked.Exchange(ref _readySignal, NewSignal()).TrySetResult();
    }

    /// <summary>
    /// Sends no new invocation to instance <paramref name="id"/> and completes when its outstanding ones have
    /// finished (Pocket §4: drain instead of migrating). An id the frontend does not know completes at once:
    /// nothing of it is in flight here.
    /// </summary>
    public async Task DrainInstanceAsync(string id, CancellationToken ct)
    {
        Slot? slot;
        lock (_mutate)
        {
            var current = _snapshot;
            slot = current.Find(id);
            if (slot is null)
                return;
            // A full fence between this write and the read of Outstanding below; TryAcquire increments before it
            // reads State, so either it sees Draining and backs off, or this sees its count.
            if (Interlocked.CompareExchange(ref slot.State, Draining, Ready) == Ready)
                Volatile.Write(ref _snapshot, new Snapshot(current.All, [.. current.Ready.Where(s => s != slot)]));
        }
        var outstanding = Volatile.Read(ref slot.Outstanding);
        Log.InstanceDraining(_logger, _app, id, outstanding);
        if (outstanding == 0)
            slot.Drained.TrySetResult();
        await slot.Drained.Task.WaitAsync(ct).ConfigureAwait(false);
        Log.InstanceDrained(_logger, _app, id);
    }

    /// <summary>Forgets instance <paramref name="id"/> (drain it first to finish its work); an unknown id is ignored.</summary>
    public void RemoveInstance(string id)
    {
        if (Remove(id, null))
            Log.InstanceRemoved(_logger, _app, id);
    }

    private bool Remove(string id, Slot? only)
    {
        lock (_mutate)
        {
            var current = _snapshot;
            var slot = current.Find(id);
            if (slot is null || (only is not null && slot != only))
                return false;
            Interlocked.Exchange(ref slot.State, Removed);
            Volatile.Write(ref _snapshot, new Snapshot([.. current.All.Where(s => s != slot)], [.. current.Ready.Where(s => s != slot)]));
            if (Volatile.Read(ref slot.Outstanding) == 0)
                slot.Drained.TrySetResult();
            return true;
        }
    }

    /// <summary>
    /// The load since the previous call (since creation for the first): the controller's compute input. Swaps in
    /// a fresh histogram, so it is meant for one caller (the controller's interval).
    /// </summary>
    public FrontendStats TakeStats()
    {
        LatencyHistogram interval;
        TimeSpan elapsed;
        lock (_mutate)
        {
            interval = Interlocked.Exchange(ref _stats, new LatencyHistogram());
            var now = _time.GetTimestamp();
            elapsed = _time.GetElapsedTime(_statsSince, now);
            _statsSince = now;
        }
        var completed = interval.Completed;
        return new FrontendStats(
            elapsed,
            elapsed > TimeSpan.Zero ? completed / elapsed.TotalSeconds : 0,
            Volatile.Read(ref _inFlight),
            Volatile.Read(ref _queued),
            interval.PercentileMs(0.50),
            interval.PercentileMs(0.99),
            completed,
            interval.Failed);
    }

    /// <summary>
    /// Forwards the request in <paramref name="context"/> to an instance as <paramref name="pathAndQuery"/>
    /// (URI-escaped, from <see cref="AppRouter"/>) and copies the instance's answer back, both bodies streamed.
    /// Waits in the queue while no instance is ready. Answers 503 (with Retry-After) when the queue is full or
    /// the wait times out, 502 when an instance failed and the request cannot safely be sent again.
    /// </summary>
    public async Task ForwardAsync(HttpContext context, string pathAndQuery)
    {
        ArgumentNullException.ThrowIfNull(context);
        ArgumentNullException.ThrowIfNull(pathAndQuery);
        var started = _time.GetTimestamp();
        Volatile.Write(ref _lastRequestTicks, _time.GetUtcNow().UtcTicks);
        var aborted = context.RequestAborted;
        var request = context.Request;

        // The instance enforces its own body limit; the frontend only streams.
        var sizeLimit = context.Features.Get<IHttpMaxRequestBodySizeFeature>();
        if (sizeLimit is { IsReadOnly: false })
            sizeLimit.MaxRequestBodySize = null;
        var hasBody = request.ContentLength > 0
            || (request.ContentLength is null && context.Features.Get<IHttpRequestBodyDetectionFeature>()?.CanHaveBody == true);
        var replayable = !hasBody && IsIdempotent(request.Method);

        var retries = 0;
        long queuedSince = 0;
        if (Interlocked.Increment(ref _active) == 1)
        {
            // The first request after an idle period: the policy that times reloads learns the idle time (Faa$T §3.3,
            // ATC'20 §4.2). Counted from the end of the previous activity; the first request of a new frontend has none.
            var idleSince = Volatile.Read(ref _idleSince);
            if (idleSince != 0)
                IdleEnded?.Invoke(_time.GetElapsedTime(idleSince, started));
        }
        try
        {
            while (true)
            {
                var slot = TryAcquire();
                if (slot is null)
                {
                    if (queuedSince == 0)
                        queuedSince = _time.GetTimestamp();
                    slot = await WaitForInstanceAsync(context, queuedSince, pathAndQuery).ConfigureAwait(false);
                    if (slot is null)
                        return;
                    Telemetry.FrontendMetrics.Dequeued(_app, _time.GetElapsedTime(queuedSince));
                }

                Interlocked.Increment(ref _inFlight);
                ForwardedBody? body = null;
                try
                {
                    using var message = CreateMessage(context, slot, pathAndQuery, hasBody, out body);
                    using var response = await _invoker.SendAsync(message, aborted).ConfigureAwait(false);
                    await CopyResponseAsync(context, response, aborted).ConfigureAwait(false);
                    Volatile.Read(ref _stats).RecordCompleted((long)_time.GetElapsedTime(started).TotalMicroseconds);
                    Telemetry.FrontendMetrics.Forwarded(_app, _time.GetElapsedTime(started));
                    return;
                }
                catch (Exception) when (aborted.IsCancellationRequested)
                {
                    // The client went away: nothing to answer, and not the instance's fault.
                    Volatile.Read(ref _stats).RecordFailed();
                    return;
                }
                catch (Exception e) when (ForwardingTransport.IsConnectFailure(e) && body?.Started != true && !context.Response.HasStarted)
                {
                    // Nothing reached the instance: take it out of rotation and send the request elsewhere.
                    InstanceRefused(slot, e);
                }
                catch (Exception e) when (replayable && retries < _options.MaxRetries && !context.Response.HasStarted)
                {
                    // An idempotent request without a body, no byte of the answer sent yet: safe to send again.
                    retries++;
                    context.Response.Clear();
                    Log.Retrying(_logger, e, _app, request.Method, pathAndQuery, slot.Endpoint.Id, retries);
                }
                catch (Exception e)
                {
                    Volatile.Read(ref _stats).RecordFailed();
                    if (context.Response.HasStarted)
                    {
                        if (_warnings.TryPass(out var held))
                        {
                            WarnHeldBack(held);
                            Log.ResponseBroken(_logger, e, _app, request.Method, pathAndQuery, slot.Endpoint.Id);
                        }
                        context.Abort();
                        return;
                    }
                    var reason = ForwardingTransport.Reason(e);
                    if (_warnings.TryPass(out var suppressed))
                    {
                        WarnHeldBack(suppressed);
                        Log.ForwardFailed(_logger, e, _app, request.Method, pathAndQuery, slot.Endpoint.Id, reason, StatusCodes.Status502BadGateway);
                    }
                    context.Response.Clear();
                    await AnswerAsync(context, StatusCodes.Status502BadGateway,
                        $"app \"{_app}\": instance {slot.Endpoint.Id} failed while handling {request.Method} {pathAndQuery} ({reason}); not retried: {(replayable ? "retries exhausted" : "the request is not idempotent or has a body")}\n",
                        retryAfter: false).ConfigureAwait(false);
                    return;
                }
                finally
                {
                    Interlocked.Decrement(ref _inFlight);
                    Release(slot);
                }
            }
        }
        finally
        {
            Volatile.Write(ref _idleSince, _time.GetTimestamp());
            Interlocked.Decrement(ref _active);
        }
    }

    private Slot? TryAcquire()
    {
        while (true)
        {
            var ready = Volatile.Read(ref _snapshot).Ready;
            if (ready.Length == 0)
                return null;
            var best = ready[0];
            if (ready.Length > 1)
            {
                // Least outstanding; ties go round robin by starting the scan at a rotating index.
                var start = (int)((uint)Interlocked.Increment(ref _next) % (uint)ready.Length);
                best = ready[start];
                var fewest = Volatile.Read(ref best.Outstanding);
                for (var i = 1; i < ready.Length && fewest > 0; i++)
                {
                    var candidate = ready[(start + i) % ready.Length];
                    var outstanding = Volatile.Read(ref candidate.Outstanding);
                    if (outstanding < fewest)
                    {
                        best = candidate;
                        fewest = outstanding;
                    }
                }
            }
            Interlocked.Increment(ref best.Outstanding);
            if (Volatile.Read(ref best.State) == Ready)
                return best;
            Release(best); // drained or removed since the snapshot was read
        }
    }

    private static void Release(Slot slot)
    {
        if (Interlocked.Decrement(ref slot.Outstanding) == 0 && Volatile.Read(ref slot.State) != Ready)
            slot.Drained.TrySetResult();
    }

    private async Task<Slot?> WaitForInstanceAsync(HttpContext context, long queuedSince, string pathAndQuery)
    {
        if (Interlocked.Increment(ref _queued) > _options.MaxQueueLength)
        {
            Interlocked.Decrement(ref _queued);
            Volatile.Read(ref _stats).RecordFailed();
            await UnavailableAsync(context, pathAndQuery,
                $"app \"{_app}\" has no ready instance and {_options.MaxQueueLength} invocations already waiting for one (the queue is full)\n").ConfigureAwait(false);
            return null;
        }
        try
        {
            RequestColdStart();
            while (true)
            {
                // The signal before the snapshot (see AddInstance).
                var signal = Volatile.Read(ref _readySignal);
                if (Volatile.Read(ref _disposed) != 0)
                {
                    Volatile.Read(ref _stats).RecordFailed();
                    await UnavailableAsync(context, pathAndQuery, $"app \"{_app}\"'s frontend is shutting down\n").ConfigureAwait(false);
                    return null;
                }
                var slot = TryAcquire();
                if (slot is not null)
                    return slot;
                var remaining = _options.QueueTimeout - _time.GetElapsedTime(queuedSince);
                if (remaining <= TimeSpan.Zero)
                {
                    Volatile.Read(ref _stats).RecordFailed();
                    await UnavailableAsync(context, pathAndQuery, _noInstanceLine).ConfigureAwait(false);
                    return null;
                }
                try
                {
                    await signal.Task.WaitAsync(remaining, _time, context.RequestAborted).ConfigureAwait(false);
                }
                catch (TimeoutException)
                {
                    // Loop: the remaining time is now zero or less.
                }
            }
        }
        catch (OperationCanceledException) when (context.RequestAborted.IsCancellationRequested)
        {
            Volatile.Read(ref _stats).RecordFailed();
            return null;
        }
        finally
        {
            Interlocked.Decrement(ref _queued);
        }
    }

    private void RequestColdStart()
    {
        var start = ColdStart;
        if (start is null || Interlocked.CompareExchange(ref _coldStarting, 1, 0) != 0)
            return;
        Log.ColdStartRequested(_logger, _app);
        _coldStart = Task.Run(async () =>
        {
            Exception? failure = null;
            try
            {
                await start(_shutdown.Token).ConfigureAwait(false);
            }
            catch (OperationCanceledException) when (_shutdown.IsCancellationRequested)
            {
                // Disposed while starting: nothing waits for it any more.
            }
            catch (Exception e)
            {
                failure = e;
            }
            // Open for the next invocation before reporting, so whoever reads the report can rely on it.
            Volatile.Write(ref _coldStarting, 0);
            if (failure is not null)
                Log.ColdStartFailed(_logger, failure, _app);
        });
    }

    private void InstanceRefused(Slot slot, Exception e)
    {
        if (!Remove(slot.Endpoint.Id, slot))
            return; // another request got there first
        Log.InstanceConnectFailed(_logger, e, _app, slot.Endpoint.Id, slot.Endpoint.BaseAddress);
        try
        {
            InstanceFailed?.Invoke(slot.Endpoint.Id, e);
        }
        catch (Exception handlerError)
        {
            // The platform's handler must not fail the invocation, which goes on to another instance.
            Log.InstanceFailedHandlerThrew(_logger, handlerError, _app, slot.Endpoint.Id);
        }
    }

    private void WarnHeldBack(long count)
    {
        if (count > 0)
            Log.WarningsSuppressed(_logger, _app, count);
    }

    private Task UnavailableAsync(HttpContext context, string pathAndQuery, string line)
    {
        if (_warnings.TryPass(out var held))
        {
            WarnHeldBack(held);
            Log.Unavailable(_logger, _app, context.Request.Method, pathAndQuery, line.TrimEnd('\n'));
        }
        return AnswerAsync(context, StatusCodes.Status503ServiceUnavailable, line, retryAfter: true);
    }

    private Task AnswerAsync(HttpContext context, int status, string line, bool retryAfter)
    {
        var response = context.Response;
        response.StatusCode = status;
        if (retryAfter)
            response.Headers.RetryAfter = _retryAfter;
        response.ContentType = "text/plain; charset=utf-8";
        return response.WriteAsync(line, context.RequestAborted);
    }

    private HttpRequestMessage CreateMessage(HttpContext context, Slot slot, string pathAndQuery, bool hasBody, out ForwardedBody? body)
    {
        var request = context.Request;
        var message = new HttpRequestMessage(HttpMethod.Parse(request.Method), slot.TargetOf(pathAndQuery))
        {
            Version = HttpVersion.Version11,
            VersionPolicy = HttpVersionPolicy.RequestVersionOrLower,
        };
        body = hasBody ? new ForwardedBody(request.Body, request.ContentLength, _options.CopyBufferSize) : null;
        message.Content = body;

        var connection = request.Headers.Connection;
        foreach (var header in request.Headers)
        {
            var name = header.Key;
            if (NotCopied.Contains(name) || (connection.Count > 0 && IsNamedIn(connection, name)))
                continue;
            var value = header.Value;
            if (name.StartsWith("Content-", StringComparison.OrdinalIgnoreCase))
            {
                if (body is not null)
                    AddTo(body.Headers, name, value);
            }
            else
            {
                AddTo(message.Headers, name, value);
            }
        }

        // The instance sees the client's Host (its URLs look as they would without the frontend) and where
        // the request came from.
        var host = request.Host.Value;
        if (!string.IsNullOrEmpty(host))
            message.Headers.Host = host;
        var client = ClientText(context.Connection.RemoteIpAddress);
        var forwardedFor = request.Headers[ForwardedFor];
        if (client is not null)
            message.Headers.TryAddWithoutValidation(ForwardedFor, StringValues.IsNullOrEmpty(forwardedFor) ? client : $"{forwardedFor}, {client}");
        else if (!StringValues.IsNullOrEmpty(forwardedFor))
            AddTo(message.Headers, ForwardedFor, forwardedFor);
        message.Headers.TryAddWithoutValidation(ForwardedProto, request.Scheme);
        if (!string.IsNullOrEmpty(host))
            message.Headers.TryAddWithoutValidation(ForwardedHost, host);
        return message;
    }

    private async Task CopyResponseAsync(HttpContext context, HttpResponseMessage response, CancellationToken aborted)
    {
        var target = context.Response;
        target.StatusCode = (int)response.StatusCode;
        var connection = response.Headers.NonValidated.TryGetValues(HeaderNames.Connection, out var named) ? named.ToString() : null;
        foreach (var header in response.Headers.NonValidated)
            if (!IsHopByHop(header.Key) && (connection is null || !IsNamedIn(connection, header.Key)))
                target.Headers[header.Key] = ToStringValues(header.Value);
        foreach (var header in response.Content.Headers.NonValidated)
            target.Headers[header.Key] = ToStringValues(header.Value);

        var source = await response.Content.ReadAsStreamAsync(aborted).ConfigureAwait(false);
        await using (source.ConfigureAwait(false))
        {
            var size = _options.CopyBufferSize;
            var buffer = ArrayPool<byte>.Shared.Rent(size);
            try
            {
                var output = target.Body;
                int read;
                while ((read = await source.ReadAsync(buffer.AsMemory(0, size), aborted).ConfigureAwait(false)) > 0)
                    await output.WriteAsync(buffer.AsMemory(0, read), aborted).ConfigureAwait(false);
            }
            finally
            {
                ArrayPool<byte>.Shared.Return(buffer);
            }
        }
    }

    private static StringValues ToStringValues(HeaderStringValues values)
    {
        if (values.Count == 1)
            return values.ToString();
        var array = new string[values.Count];
        var i = 0;
        foreach (var value in values)
            array[i++] = value;
        return array;
    }

    private static void AddTo(HttpHeaders headers, string name, StringValues value)
    {
        if (value.Count == 1)
            headers.TryAddWithoutValidation(name, value.ToString());
        else
            headers.TryAddWithoutValidation(name, (IEnumerable<string?>)value);
    }

    private const string ForwardedFor = "X-Forwarded-For";
    private const string ForwardedProto = "X-Forwarded-Proto";
    private const string ForwardedHost = "X-Forwarded-Host";

    /// <summary>RFC 9110 §7.6.1: headers about one connection, never forwarded.</summary>
    private static readonly string[] HopByHopNames =
    [
        HeaderNames.Connection, HeaderNames.KeepAlive, HeaderNames.TransferEncoding, HeaderNames.TE, HeaderNames.Trailer,
        HeaderNames.Upgrade, HeaderNames.ProxyAuthenticate, HeaderNames.ProxyAuthorization, "Proxy-Connection",
    ];

    private static readonly FrozenSet<string> HopByHop = HopByHopNames.ToFrozenSet(StringComparer.OrdinalIgnoreCase);

    /// <summary>
    /// Request headers not copied as they came: the hop-by-hop ones, and those the frontend writes itself (Host and
    /// X-Forwarded-*, below; Content-Length from the body; Expect, which Kestrel has answered already). One lookup
    /// per header instead of fifteen comparisons.
    /// </summary>
    private static readonly FrozenSet<string> NotCopied = HopByHopNames
        .Concat([HeaderNames.Host, HeaderNames.Expect, HeaderNames.ContentLength, ForwardedFor, ForwardedProto, ForwardedHost])
        .ToFrozenSet(StringComparer.OrdinalIgnoreCase);

    private static bool IsHopByHop(string name) => HopByHop.Contains(name);

    /// <summary>
    /// The client's address as X-Forwarded-For text. Kestrel hands each request of a connection the same address,
    /// and behind one client (or one load balancer) every connection the same one: the text of the latest is kept,
    /// so the common request formats no address (one allocation less per request). Racing writers store equal
    /// pairs, so a reader sees either one.
    /// </summary>
    private string? ClientText(IPAddress? address)
    {
        if (address is null)
            return null;
        var last = Volatile.Read(ref _lastClient);
        if (last is not null && last.Address.Equals(address))
            return last.Text;
        var text = address.ToString();
        Volatile.Write(ref _lastClient, new ClientAddress(address, text));
        return text;
    }

    private sealed record ClientAddress(IPAddress Address, string Text);

    /// <summary>Whether the Connection header's value lists <paramref name="name"/> (such a header is hop-by-hop too).</summary>
    private static bool IsNamedIn(StringValues connection, string name)
    {
        foreach (var value in connection)
        {
            if (string.IsNullOrEmpty(value))
                continue;
            foreach (var token in value.AsSpan().Split(','))
                if (value.AsSpan()[token].Trim().Equals(name, StringComparison.OrdinalIgnoreCase))
                    return true;
        }
        return false;
    }

    /// <summary>RFC 9110 §9.2.2: methods whose repetition has the same effect as one request.</summary>
    private static bool IsIdempotent(string method) =>
        HttpMethods.IsGet(method) || HttpMethods.IsHead(method) || HttpMethods.IsOptions(method)
        || HttpMethods.IsDelete(method) || HttpMethods.IsPut(method) || HttpMethods.IsTrace(method);

    private static TaskCompletionSource NewSignal() => new(TaskCreationOptions.RunContinuationsAsynchronously);

    /// <summary>Answers every queued invocation 503, cancels a cold start in progress and waits for it.</summary>
    public async ValueTask DisposeAsync()
    {
        if (Interlocked.Exchange(ref _disposed, 1) != 0)
            return;
        await _shutdown.CancelAsync().ConfigureAwait(false);
        Interlocked.Exchange(ref _readySignal, NewSignal()).TrySetResult();
        try
        {
            await _coldStart.ConfigureAwait(false);
        }
        catch (OperationCanceledException)
        {
            // Cancelled by the shutdown above.
        }
        _shutdown.Dispose();
    }

    /// <summary>An instance and its outstanding requests; the fields are touched with Interlocked/Volatile only.</summary>
    private sealed class Slot(InstanceEndpoint endpoint)
    {
        public readonly InstanceEndpoint Endpoint = endpoint;
        public readonly string Base = endpoint.BaseAddress.GetLeftPart(UriPartial.Authority) + endpoint.BaseAddress.AbsolutePath.TrimEnd('/');
        public readonly TaskCompletionSource Drained = NewSignal();
        public int Outstanding;
        public int State;
        private Target? _last;

        /// <summary>
        /// The instance's URI for <paramref name="pathAndQuery"/>. An app's hot function is called with the same path
        /// again and again: the latest one's URI is kept and shared (a Uri is immutable), which spares each such request
        /// the concatenation and the parse (FrontendBenchmarks: see AppFrontend's class comment).
        /// </summary>
        public Uri TargetOf(string pathAndQuery)
        {
            var last = Volatile.Read(ref _last);
            if (last is not null && string.Equals(last.PathAndQuery, pathAndQuery, StringComparison.Ordinal))
                return last.Uri;
            var uri = new Uri(Base + pathAndQuery, UriKind.Absolute);
            Volatile.Write(ref _last, new Target(pathAndQuery, uri));
            return uri;
        }

        private sealed record Target(string PathAndQuery, Uri Uri);
    }

    /// <summary>The instance set, immutable: every instance, and the ready ones the request path picks from.</summary>
    private sealed class Snapshot(Slot[] all, Slot[] ready)
    {
        public static readonly Snapshot Empty = new([], []);
        public readonly Slot[] All = all;
        public readonly Slot[] Ready = ready;

        public Slot? Find(string id)
        {
            foreach (var slot in All)
                if (slot.Endpoint.Id == id)
                    return slot;
            return null;
        }
    }
}
