using System.Globalization;
using System.Threading.Channels;
using FaaST.Protos.Keda;
using Grpc.Core;

namespace FaaST.ScaleController.Keda;

/// <summary>
/// KEDA's external scaler (protos/externalscaler.proto) over the scale controller's decisions, so that on
/// Kubernetes KEDA scales a Deployment of instances to exactly the count the controller decided from the
/// instances' votes (Faa$T §4; docs/scaling.md, "Kubernetes and KEDA").
/// </summary>
/// <remarks>
/// <para>The ScaledObject names the app in its trigger metadata, key <see cref="AppKey"/>; there is no fallback to
/// the ScaledObject's name, so one app cannot be scaled by a ScaledObject that merely happens to share its name.</para>
/// <para>The numbers: GetMetricSpec gives one metric, <c>faast-{app}-instances</c>, with target 1; GetMetrics gives
/// the controller's desired instance count as its value. KEDA builds an HPA whose external metric has an
/// <c>AverageValue</c> target (KEDA's default metricType), for which the HPA computes
/// <c>desiredReplicas = ceil(metricValue / targetAverageValue)</c> = ceil(desired / 1) = desired — the controller's
/// count whatever the current replica count is (a <c>Value</c> target would instead multiply by the current count,
/// <c>ceil(current · value / target)</c>, and must not be used). The HPA skips a change while
/// <c>|value / (target · current) − 1|</c> is within its tolerance (10 % by default), so at 10 or more replicas a
/// ±1 decision waits for the next one: deploy/kubernetes/README.md says how to narrow the tolerance. IsActive is
/// desired &gt; 0 (the app is not unloaded): KEDA scales from zero to one and back on it; the HPA above one.</para>
/// <para>Registered as a singleton (<see cref="KedaScalerEndpoints"/>): its refusal log gate outlives a call.</para>
/// </remarks>
internal sealed class ExternalScalerService(IScaleDecisions decisions, ILogger<ExternalScalerService> logger, KedaScalerOptions? options = null)
    : ExternalScaler.ExternalScalerBase
{
    /// <summary>The trigger metadata key that names the FaaST app.</summary>
    public const string AppKey = "app";

    /// <summary>The HPA's target per replica: one instance's worth of the metric (see the remarks).</summary>
    public const long TargetPerInstance = 1;

    /// <summary>Longest app name: a DNS label (it becomes part of a Kubernetes metric name and of <c>{app}.host</c>).</summary>
    internal const int MaxAppNameLength = 63;

    private static readonly IsActiveResponse ActiveResponse = new() { Result = true };
    private static readonly IsActiveResponse InactiveResponse = new() { Result = false };

    private readonly IScaleDecisions _decisions = decisions;
    private readonly ILogger _logger = logger;
    private readonly KedaScalerOptions _options = options ?? KedaScalerOptions.Default;

    // Open StreamIsActive calls, per app (case as KEDA sent it: the app names are case-sensitive here) and in all.
    private readonly System.Collections.Concurrent.ConcurrentDictionary<string, int> _streamsPerApp = new(StringComparer.Ordinal);
    private int _streams;

    /// <summary>Open StreamIsActive calls now (tests).</summary>
    internal int OpenStreams => Volatile.Read(ref _streams);

    // A gate on the refusal warning: a misconfigured ScaledObject is refused on every poll, and a client that
    // retries fast must not flood the log. One line a second passes, with the count of those held back.
    private readonly RateGate _refusals = new(TimeProvider.System, TimeSpan.FromSeconds(1));

    /// <summary>The metric this scaler defines for <paramref name="app"/>: lower case, as Kubernetes metric names are.</summary>
    internal static string MetricNameOf(string app)
        => string.Create(CultureInfo.InvariantCulture, $"faast-{app.ToLowerInvariant().Replace('_', '-').Replace('.', '-')}-instances");

    /// <summary>Why <paramref name="value"/> cannot name an app, or null if it can: 1-63 ASCII letters, digits,
    /// '-', '_' or '.', starting with a letter or digit.</summary>
    internal static string? AppNameProblem(string value)
    {
        if (value.Length > MaxAppNameLength)
            return $"\"{Printable(value)}\" is {value.Length} characters long; an app name has at most {MaxAppNameLength}";
        if (!char.IsAsciiLetterOrDigit(value[0]))
            return $"\"{Printable(value)}\" does not start with a letter or digit";
        foreach (var c in value)
        {
            if (!char.IsAsciiLetterOrDigit(c) && c is not ('-' or '_' or '.'))
                return $"\"{Printable(value)}\" holds {(c is >= ' ' and <= '~' ? $"'{c}' " : "")}U+{(int)c:X4}; an app name has only ASCII letters, digits, '-', '_' and '.'";
        }
        return null;
    }

    /// <summary>
    /// <paramref name="value"/> as it may appear in an error detail and a log line: what a client sent is echoed,
    /// but not its control characters (a forged line break in the log) nor more than 80 characters of it.
    /// </summary>
    internal static string Printable(string value)
    {
        const int Max = 80;
        var clean = true;
        foreach (var c in value)
            clean &= c is >= ' ' and <= '~';
        if (clean && value.Length <= Max)
            return value;
        return string.Create(Math.Min(value.Length, Max + 1), value, static (span, v) =>
        {
            for (var i = 0; i < span.Length; i++)
                span[i] = i == Max ? '…' : v[i] is >= ' ' and <= '~' ? v[i] : '?';
        });
    }

    public override Task<IsActiveResponse> IsActive(ScaledObjectRef request, ServerCallContext context)
    {
        RequireClient(context, request, nameof(IsActive));
        var (_, state) = Decide(request, nameof(IsActive));
        return Task.FromResult(state.Active ? ActiveResponse : InactiveResponse);
    }

    public override Task<GetMetricSpecResponse> GetMetricSpec(ScaledObjectRef request, ServerCallContext context)
    {
        RequireClient(context, request, nameof(GetMetricSpec));
        var (app, _) = Decide(request, nameof(GetMetricSpec));
        var response = new GetMetricSpecResponse();
        response.MetricSpecs.Add(new MetricSpec
        {
            MetricName = MetricNameOf(app),
            TargetSize = TargetPerInstance,
            TargetSizeFloat = TargetPerInstance,
        });
        return Task.FromResult(response);
    }

    public override Task<GetMetricsResponse> GetMetrics(GetMetricsRequest request, ServerCallContext context)
    {
        RequireClient(context, request.ScaledObjectRef, nameof(GetMetrics));
        if (request.ScaledObjectRef is null)
            throw Refuse(nameof(GetMetrics), null, StatusCode.InvalidArgument, "GetMetricsRequest has no scaledObjectRef (field 1)");
        var (app, state) = Decide(request.ScaledObjectRef, nameof(GetMetrics));
        var metric = MetricNameOf(app);
        if (!string.Equals(request.MetricName, metric, StringComparison.Ordinal))
        {
            throw Refuse(nameof(GetMetrics), request.ScaledObjectRef, StatusCode.InvalidArgument,
                $"GetMetricsRequest.metricName \"{Printable(request.MetricName)}\" is not a metric of app \"{app}\"; GetMetricSpec names \"{metric}\"");
        }

        Log.MetricsAnswered(_logger, app, state.DesiredInstances, state.Reason);
        var response = new GetMetricsResponse();
        response.MetricValues.Add(new MetricValue
        {
            MetricName = metric,
            MetricValue_ = state.DesiredInstances,
            MetricValueFloat = state.DesiredInstances,
        });
        return Task.FromResult(response);
    }

    public override async Task StreamIsActive(ScaledObjectRef request, IServerStreamWriter<IsActiveResponse> responseStream, ServerCallContext context)
    {
        RequireClient(context, request, nameof(StreamIsActive));
        var app = AppOf(request, nameof(StreamIsActive));
        var (ns, name) = (Printable(request.Namespace), Printable(request.Name)); // for the log lines
        TakeStream(app, request);
        try
        {
            await StreamAsync(app, ns, name, request, responseStream, context);
        }
        finally
        {
            ReleaseStream(app);
        }
    }

    /// <summary>Counts a stream in, or refuses it (RESOURCE_EXHAUSTED) past the app's or the platform's bound.</summary>
    private void TakeStream(string app, ScaledObjectRef request)
    {
        if (Interlocked.Increment(ref _streams) > _options.MaxStreams)
        {
            Interlocked.Decrement(ref _streams);
            throw Refuse(nameof(StreamIsActive), request, StatusCode.ResourceExhausted,
                $"the platform already has {_options.MaxStreams} StreamIsActive calls open (KedaScalerOptions.MaxStreams); close one first");
        }
        var perApp = _streamsPerApp.AddOrUpdate(app, 1, (_, n) => n + 1);
        if (perApp > _options.MaxStreamsPerApp)
        {
            ReleaseStream(app);
            throw Refuse(nameof(StreamIsActive), request, StatusCode.ResourceExhausted,
                $"app \"{app}\" already has {_options.MaxStreamsPerApp} StreamIsActive calls open (KedaScalerOptions.MaxStreamsPerApp); close one first");
        }
    }

    private void ReleaseStream(string app)
    {
        Interlocked.Decrement(ref _streams);
        // Removes the app's entry at zero, so names a client made up do not stay in the table.
        while (_streamsPerApp.TryGetValue(app, out var n))
        {
            if (n <= 1 ? _streamsPerApp.TryRemove(new KeyValuePair<string, int>(app, n)) : _streamsPerApp.TryUpdate(app, n - 1, n))
                break;
        }
    }

    /// <summary>With a client CA configured: only a client that presented a certificate the control port validated.</summary>
    private void RequireClient(ServerCallContext context, ScaledObjectRef? request, string method)
    {
        if (!_options.RequireClientCertificate)
            return;
        if (context.GetHttpContext().Connection.ClientCertificate is null)
        {
            throw Refuse(method, request, StatusCode.Unauthenticated,
                "the platform's KEDA scaler needs a client certificate signed by its client CA (--control-client-ca): set the trigger's tlsClientCert and tlsClientKey");
        }
    }

    private async Task StreamAsync(string app, string ns, string name, ScaledObjectRef request, IServerStreamWriter<IsActiveResponse> responseStream,
        ServerCallContext context)
    {
        // Subscribe before the first read, so that a change between the two is not lost; the handler only sets a
        // flag (a channel of capacity one), the stream's own loop reads the decision and writes.
        var wake = Channel.CreateBounded<bool>(new BoundedChannelOptions(1)
        {
            FullMode = BoundedChannelFullMode.DropWrite,
            SingleReader = true,
        });
        void OnChanged(string changed)
        {
            if (string.Equals(changed, app, StringComparison.Ordinal))
                wake.Writer.TryWrite(true);
        }

        _decisions.Changed += OnChanged;
        try
        {
            var state = Lookup(app, request, nameof(StreamIsActive));
            var active = state.Active;
            Log.StreamOpened(_logger, app, ns, name, active);
            await responseStream.WriteAsync(active ? ActiveResponse : InactiveResponse, context.CancellationToken);

            while (await wake.Reader.WaitToReadAsync(context.CancellationToken))
            {
                wake.Reader.TryRead(out _);
                state = Lookup(app, request, nameof(StreamIsActive)); // an app removed meanwhile ends the stream: NotFound
                if (state.Active == active)
                    continue; // the count changed, not the activity: that reaches KEDA through GetMetrics
                active = state.Active;
                Log.ActivityPushed(_logger, app, active ? "active" : "inactive", ns, name, state.DesiredInstances, state.Reason);
                await responseStream.WriteAsync(active ? ActiveResponse : InactiveResponse, context.CancellationToken);
            }
        }
        catch (OperationCanceledException) when (context.CancellationToken.IsCancellationRequested)
        {
            // KEDA closed the stream (or the platform stops): the call is over, nothing to answer.
        }
        finally
        {
            _decisions.Changed -= OnChanged;
            Log.StreamClosed(_logger, app, ns, name);
        }
    }

    private (string App, AppScaleState State) Decide(ScaledObjectRef request, string method)
    {
        var app = AppOf(request, method);
        return (app, Lookup(app, request, method));
    }

    private AppScaleState Lookup(string app, ScaledObjectRef request, string method)
    {
        if (_decisions.TryGetApp(app, out var state))
            return state;
        throw Refuse(method, request, StatusCode.NotFound,
            $"app \"{app}\" (scalerMetadata key \"{AppKey}\") is not deployed on this FaaST platform");
    }

    private string AppOf(ScaledObjectRef request, string method)
    {
        if (!request.ScalerMetadata.TryGetValue(AppKey, out var app))
        {
            throw Refuse(method, request, StatusCode.InvalidArgument,
                $"scalerMetadata has no key \"{AppKey}\"; the ScaledObject's trigger metadata must name the FaaST app to scale");
        }
        if (app.Length == 0)
            throw Refuse(method, request, StatusCode.InvalidArgument, $"scalerMetadata key \"{AppKey}\" is empty; it must name the FaaST app to scale");
        if (AppNameProblem(app) is { } problem)
            throw Refuse(method, request, StatusCode.InvalidArgument, $"scalerMetadata key \"{AppKey}\": {problem}");
        return app;
    }

    private RpcException Refuse(string method, ScaledObjectRef? request, StatusCode code, string detail)
    {
        if (_refusals.TryPass(out var heldBack))
            Log.Refused(_logger, method, Printable(request?.Namespace ?? ""), Printable(request?.Name ?? ""), code.ToString(), detail, heldBack);
        return new RpcException(new Status(code, detail));
    }
}
