using System.Diagnostics;
using System.Diagnostics.Metrics;
using FaaST.ScaleController.Platform;
using OpenTelemetry.Metrics;
using OpenTelemetry.Resources;
using OpenTelemetry.Trace;

namespace FaaST.ScaleController.Telemetry;

/// <summary>
/// The platform joins OpenTelemetry as the host does (src/Runtime TelemetrySetup): its instruments
/// (<see cref="PlatformMetrics"/>, <see cref="FrontendMetrics"/>) always collected for the Prometheus scrape at
/// <see cref="MetricsPath"/>, and exported over OTLP when the standard OTEL_* variables ask for it (the same rules as an
/// instance's: OTEL_EXPORTER_OTLP_ENDPOINT turns both signals on, OTEL_TRACES_EXPORTER / OTEL_METRICS_EXPORTER choose).
/// Traces only when an exporter is configured: then each forwarded invocation is a server span ("frontend APP") whose
/// context the instance receives, so a trace runs frontend → instance → worker.
/// </summary>
internal static class PlatformTelemetry
{
    /// <summary>
    /// The platform's own scrape: under /admin/platform, with the admin key, like the status it mirrors. Not /metrics:
    /// that path is an app's (`./faast start APP` routes every path to its app, whose instance answers /metrics).
    /// </summary>
    public const string MetricsPath = "/admin/platform/metrics";

    /// <summary>The instances as Prometheus targets (http_sd), with the admin key.</summary>
    public const string TargetsPath = "/admin/platform/targets";

    /// <summary>The service name when OTEL_SERVICE_NAME is not set.</summary>
    public const string ServiceName = "faast-platform";

    /// <summary>Registers the platform's telemetry; throws <see cref="AppConfigException"/> naming a bad OTEL_* value.</summary>
    public static TelemetryExport AddPlatformTelemetry(this WebApplicationBuilder builder, PlatformOptions options)
    {
        var config = builder.Configuration;
        var given = options.Telemetry ?? new Dictionary<string, string>();
        if (given.Count > 0)
            config.AddInMemoryCollection(given.Select(s => new KeyValuePair<string, string?>(s.Key, s.Value)));
        var export = TelemetryExport.From(config, name => given.ContainsKey(name) ? $"PlatformOptions.Telemetry[{name}]" : $"environment variable {name}");
        var services = builder.Services;
        services.AddMetrics();
        var otel = services.AddOpenTelemetry();
        if (string.IsNullOrEmpty(config["OTEL_SERVICE_NAME"]))
            otel.ConfigureResource(r => r.AddService(ServiceName));
        otel.WithMetrics(metrics =>
        {
            metrics.AddMeter(PlatformMetrics.Name, FrontendMetrics.Name).AddPrometheusExporter();
            if (export.Metrics)
                metrics.AddOtlpExporter();
        });
        services.ConfigureOpenTelemetryMeterProvider((sp, metrics) =>
        {
            // Meters are process-wide: keep this platform's own "FaaST.Platform", not another platform's in the same process.
            var own = sp.GetRequiredService<IMeterFactory>();
            metrics.AddView(i => i.Meter.Name == PlatformMetrics.Name && !ReferenceEquals(i.Meter.Scope, own) ? MetricStreamConfiguration.Drop : null);
        });
        if (!export.Traces && options.Tracing is null)
            return export; // no listener: Kestrel starts no activity, and forwarding pays nothing for tracing
        otel.WithTracing(traces =>
        {
            // Invocations only: not the admin API, nor the control port's gRPC (HTTP/2 only there; instances' votes).
            traces.AddAspNetCoreInstrumentation(o => o.Filter = context =>
                !HttpProtocol.IsHttp2(context.Request.Protocol) && !context.Request.Path.StartsWithSegments("/admin/platform"));
            if (export.Traces)
                traces.AddOtlpExporter();
            options.Tracing?.Invoke(traces);
        });
        return export;
    }

    /// <summary>
    /// Makes the forwarded request carry the frontend's span as its parent (W3C traceparent/tracestate). The frontend
    /// copies the client's headers, and .NET's handler does not replace a traceparent already there, so without this
    /// the instance's span would hang under the client's and skip the frontend's. Only when a span is being recorded.
    /// </summary>
    public static void Propagate(HttpContext context, string app)
    {
        if (Activity.Current is not { Recorded: true, IdFormat: ActivityIdFormat.W3C } span)
            return;
        span.DisplayName = $"frontend {app}";
        span.SetTag("faast.app", app);
        context.Request.Headers.TraceParent = span.Id;
        if (string.IsNullOrEmpty(span.TraceStateString))
            context.Request.Headers.Remove("tracestate");
        else
            context.Request.Headers.TraceState = span.TraceStateString;
    }
}
