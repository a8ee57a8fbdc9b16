using FaaST.Hosting;
using FaaST.Runtime.Http;
using Microsoft.Extensions.Options;

namespace FaaST.Runtime.Hosting.Components;

/// <summary>
/// The app's HTTP functions. Their routes are mapped with the other endpoints, behind a gate that opens
/// at <see cref="ServiceLifecycleStage.Active"/>, when everything they need runs: a request that
/// arrives earlier waits for it (as it waited for a worker before). Once the host drains, the gate
/// is closed: a new function request gets 503 with Retry-After (the admin endpoints always answer),
/// and the stop waits, up to the drain timeout, for the requests in flight.
/// </summary>
internal sealed class HttpFunctionsComponent : ILifecycleParticipant
{
    private const int Starting = 0, Open = 1, Closed = 2;

    private readonly FunctionApp _app;
    private readonly ServingOptions _options;
    private readonly WorkersComponent _workers;
    private readonly ILogger _logger;
    private readonly TaskCompletionSource _opened = new(TaskCreationOptions.RunContinuationsAsynchronously);
    private readonly TaskCompletionSource _drained = new(TaskCreationOptions.RunContinuationsAsynchronously);
    private int _gate;
    private long _inFlight;

    private readonly HttpKeyCheck _keys;

    public HttpFunctionsComponent(FunctionApp app, IOptions<ServingOptions> options, ServingComponent serving, WorkersComponent workers, HttpKeyCheck keys,
        ILoggerFactory loggers)
    {
        _app = app;
        _keys = keys;
        _options = options.Value;
        _workers = workers;
        _logger = loggers.CreateLogger("FaaST.Http");
        serving.MapEndpoints(Map);
    }

    /// <summary>HTTP invocations admitted (or waiting for the gate) and not yet answered.</summary>
    private long InFlight => Interlocked.Read(ref _inFlight);

    public void Participate(IHostLifecycle lifecycle)
    {
        lifecycle.Subscribe(nameof(HttpFunctionsComponent), ServiceLifecycleStage.Active, new LifecycleObserver(OpenGate, DrainAsync));
        // Also when a start fails before this stage: requests held at the gate are refused, not left waiting.
        lifecycle.OnState((state, _) =>
        {
            if (state == LifecycleState.Draining)
                Close();
            return Task.CompletedTask;
        });
    }

    private void Map(WebApplication web)
    {
        // A group with no prefix: the routes are the functions' own; its convention wraps each
        // function's request delegate in the gate (admin endpoints are mapped outside it).
        var functions = web.MapGroup("");
        HttpTriggerEndpoints.Map(functions, _app, _workers.Invoker, _logger, _keys);
        ((IEndpointConventionBuilder)functions).Add(endpoint =>
        {
            var inner = endpoint.RequestDelegate!;
            endpoint.RequestDelegate = context => GatedAsync(inner, context);
        });
    }

    private Task OpenGate(CancellationToken ct)
    {
        if (Interlocked.CompareExchange(ref _gate, Open, Starting) == Starting)
            _opened.TrySetResult();
        return Task.CompletedTask;
    }

    /// <summary>Refuses new function requests from now on (503, Retry-After); also before the host drains, for a drain the scale controller asked for.</summary>
    internal void Close()
    {
        Interlocked.Exchange(ref _gate, Closed);
        _opened.TrySetResult(); // releases the requests held at start; they see the gate closed
    }

    private async Task GatedAsync(RequestDelegate inner, HttpContext context)
    {
        // Counted before the gate is read: a drain that closed the gate and then saw nothing in
        // flight cannot miss a request that got through (both sides use full fences).
        Interlocked.Increment(ref _inFlight);
        try
        {
            var gate = Volatile.Read(ref _gate);
            if (gate == Starting)
            {
                await _opened.Task.WaitAsync(context.RequestAborted);
                gate = Volatile.Read(ref _gate);
            }
            if (gate == Closed)
            {
                context.Response.StatusCode = StatusCodes.Status503ServiceUnavailable;
                context.Response.Headers.RetryAfter = "1";
                return;
            }
            await inner(context);
        }
        finally
        {
            if (Interlocked.Decrement(ref _inFlight) == 0 && Volatile.Read(ref _gate) == Closed)
                _drained.TrySetResult();
        }
    }

    private async Task DrainAsync(CancellationToken ct)
    {
        Close();
        if (Interlocked.Read(ref _inFlight) == 0)
            return;
        try
        {
            await _drained.Task.WaitAsync(_options.DrainTimeout, ct);
        }
        catch (TimeoutException)
        {
            Log.DrainTimedOut(_logger, InFlight, _options.DrainTimeout);
        }
    }
}
