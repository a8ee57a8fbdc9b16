using System.Diagnostics.Metrics;
using FaaST.Peers;
using FaaST.Cachelet.Telemetry;
using FaaST.Runtime.Workers;
using Microsoft.AspNetCore.Routing.Patterns;
using Microsoft.AspNetCore.Routing.Template;
using OpenTelemetry.Metrics;
using OpenTelemetry.Resources;
using OpenTelemetry.Trace;

namespace FaaST.Runtime.Telemetry;

/// <summary>
/// The host's OpenTelemetry (OpenTelemetry.Extensions.Hosting): metrics of the host, the cachelet,
/// ASP.NET Core and HttpClient, always collected for the Prometheus endpoint <c>/metrics</c> and
/// exported over OTLP when the OTEL_* variables ask for it; traces (an invocation's HTTP request,
/// binding reads, worker call, output writes) when an exporter is configured, and not at all otherwise.
/// </summary>
internal static class TelemetrySetup
{
    public const string MetricsPath = "/metrics";

    /// <summary>Registers telemetry on the host's services; throws <see cref="AppConfigException"/> for bad OTEL_* values.</summary>
    /// <param name="tracing">More tracing set-up (tests add an in-memory exporter); tracing runs when this is given or OTLP exports traces.</param>
    public static void AddFaaSTTelemetry(this WebApplicationBuilder builder, FunctionApp app, Action<TracerProviderBuilder>? tracing)
    {
        var config = builder.Configuration;
        // App settings are the functions' environment (as in Azure Functions): OTEL_* in
        // local.settings.json configure the SDK too; the environment already overrides them there.
        var otelSettings = app.Settings.Values.Where(s => s.Key.StartsWith("OTEL_", StringComparison.OrdinalIgnoreCase)).ToList();
        if (otelSettings.Count > 0)
            config.AddInMemoryCollection(otelSettings.Select(s => new KeyValuePair<string, string?>(s.Key, s.Value)));
        var export = TelemetryExport.From(config, name => app.Settings[name] is null ? $"environment variable {name}" : app.Settings.SourceOf(name));
        var services = builder.Services;
        services.AddSingleton(export);
        services.AddMetrics();
        services.AddSingleton(sp => new HostMetrics(sp.GetRequiredService<IMeterFactory>(), app));
        var otel = services.AddOpenTelemetry();
        // OTEL_SERVICE_NAME wins when set (the SDK reads it); otherwise the app's name.
        if (string.IsNullOrEmpty(config["OTEL_SERVICE_NAME"]))
            otel.ConfigureResource(r => r.AddService(app.Name));
        otel.WithMetrics(metrics =>
        {
            metrics.AddMeter(HostMetrics.Name, CacheletMetrics.Name)
                .AddAspNetCoreInstrumentation()
                .AddHttpClientInstrumentation()
                .AddPrometheusExporter();
            if (export.Metrics)
                metrics.AddOtlpExporter();
        });
        services.ConfigureOpenTelemetryMeterProvider((sp, metrics) =>
        {
            var own = sp.GetRequiredService<IMeterFactory>();
            metrics.AddView(instrument => BelongsToThisHost(instrument.Meter, own, app.Name) ? null : MetricStreamConfiguration.Drop);
        });
        if (!export.Traces && tracing is null)
            return; // no listener at all: ASP.NET Core and the host start no activities
        otel.WithTracing(traces =>
        {
            traces.AddSource(HostMetrics.Name, CacheletMetrics.Name)
                .AddAspNetCoreInstrumentation(o => o.Filter = context => !IsPlumbing(context.Request.Path))
                .AddHttpClientInstrumentation(o => o.FilterHttpRequestMessage = request => request.RequestUri?.AbsolutePath != PeerEndpoints.LookupStreamPath);
            if (export.Traces)
                traces.AddOtlpExporter();
            tracing?.Invoke(traces);
        });
    }

    /// <summary>
    /// Meters are process-wide, and a test process runs several hosts: this host's provider keeps
    /// the meters of its own <see cref="IMeterFactory"/> (the host's and ASP.NET Core's), its app's
    /// cachelet and the process-wide ones (HttpClient, runtime), and drops other hosts'.
    /// </summary>
    internal static bool BelongsToThisHost(Meter meter, IMeterFactory own, string app)
    {
        if (meter.Name == CacheletMetrics.Name)
            return meter.Tags?.Any(t => t.Key == "app" && Equals(t.Value, app)) == true;
        return meter.Scope is null || ReferenceEquals(meter.Scope, own);
    }

    /// <summary>Requests that are not work: the long-lived worker and peer-lookup streams (a span would last as
    /// long as the stream), and scrapes. The lookup stream's client side is left out likewise.</summary>
    private static bool IsPlumbing(PathString path) =>
        path == WorkerChannelService.EventStreamPath || path == PeerEndpoints.LookupStreamPath || path == MetricsPath;

    /// <summary>
    /// Serves the Prometheus scrape at <see cref="MetricsPath"/> on the HTTP port only. An app's function
    /// route wins over it: the endpoint is ordered after every other route, so that a function at
    /// "metrics" (routePrefix "" in host.json) keeps its path; a start-up warning names the function.
    /// </summary>
    public static void MapFaaSTMetrics(this WebApplication web, FunctionApp app, Func<int> httpPort)
    {
        var logger = web.Services.GetRequiredService<ILoggerFactory>().CreateLogger("FaaST.Telemetry");
        var scrape = web.MapPrometheusScrapingEndpoint(MetricsPath, meterProvider: null, configureBranchedPipeline: branch =>
            branch.Use(next => context =>
            {
                // Not on the workers' loopback gRPC port nor the peer port: those listeners serve other callers.
                if (context.Connection.LocalPort == httpPort())
                    return next(context);
                context.Response.StatusCode = StatusCodes.Status404NotFound;
                return Task.CompletedTask;
            }), optionsName: null);
        scrape.DisableHttpMetrics();
        scrape.Add(endpoint => ((RouteEndpointBuilder)endpoint).Order = int.MaxValue);
        // Only a routePrefix of "" or "metrics" lets a function route reach /metrics (host.json refuses
        // prefixes that are not plain path segments). The check builds every endpoint (~140 ms of
        // start-up on this machine), so it runs only then.
        var prefix = app.Host.RoutePrefix;
        if (prefix.Length == 0 || prefix.Equals(MetricsPath[1..], StringComparison.OrdinalIgnoreCase))
        {
            var shadowing = FunctionsAnswering(web, MetricsPath, HttpMethods.Get);
            if (shadowing.Count > 0)
                Log.MetricsShadowed(logger, string.Join(", ", shadowing), MetricsPath, prefix);
        }
        var export = web.Services.GetRequiredService<TelemetryExport>();
        if (export.Traces || export.Metrics)
            Log.OtlpExporting(logger, export.Traces && export.Metrics ? "traces and metrics" : export.Traces ? "traces" : "metrics",
                export.Endpoint ?? "the OTLP default endpoint");
    }

    /// <summary>Display names of the mapped routes (the HTTP functions) that match <paramref name="method"/> <paramref name="path"/>, constraints included.</summary>
    internal static List<string> FunctionsAnswering(IEndpointRouteBuilder routes, string path, string method)
    {
        var policies = routes.ServiceProvider.GetRequiredService<ParameterPolicyFactory>();
        var found = new List<string>();
        foreach (var endpoint in routes.DataSources.SelectMany(d => d.Endpoints).OfType<RouteEndpoint>())
        {
            if (endpoint.Order == int.MaxValue || endpoint.DisplayName is null)
                continue; // the scrape endpoint itself
            if (endpoint.Metadata.GetMetadata<IHttpMethodMetadata>()?.HttpMethods is { } methods &&
                !methods.Contains(method, StringComparer.OrdinalIgnoreCase))
                continue;
            var pattern = endpoint.RoutePattern;
            var values = new RouteValueDictionary();
            var matcher = new TemplateMatcher(new RouteTemplate(pattern), new RouteValueDictionary(pattern.Defaults));
            if (matcher.TryMatch(path, values) && ConstraintsAccept(pattern, values, policies))
                found.Add(endpoint.DisplayName);
        }
        return found;
    }

    private static bool ConstraintsAccept(RoutePattern pattern, RouteValueDictionary values, ParameterPolicyFactory policies)
    {
        foreach (var (name, references) in pattern.ParameterPolicies)
        {
            var parameter = pattern.GetParameter(name);
            if (parameter is null)
                continue;
            foreach (var reference in references)
            {
                if (policies.Create(parameter, reference) is IRouteConstraint constraint &&
                    !constraint.Match(null, null, name, values, RouteDirection.IncomingRequest))
                    return false;
            }
        }
        return true;
    }
}
