using FaaST.Hosting;
using FaaST.Runtime.Telemetry;
using Microsoft.Extensions.Options;

namespace FaaST.Runtime.Hosting.Components;

/// <summary>
/// Telemetry (stage <see cref="ServiceLifecycleStage.Telemetry"/>): OpenTelemetry registered in the web
/// host's services (metrics always, for /metrics; OTLP export and tracing as the OTEL_* settings say),
/// and the Prometheus scrape endpoint, mapped after every other route so an app's function keeps its
/// path. The providers live in the web host's services and are flushed when it is disposed.
/// </summary>
internal sealed class TelemetryComponent : ILifecycleParticipant
{
    private readonly FunctionApp _app;
    private readonly ServingComponent _serving;

    public TelemetryComponent(FunctionApp app, IOptions<TelemetryHostOptions> options, ServingComponent serving)
    {
        _app = app;
        _serving = serving;
        serving.ConfigureServices(builder => builder.AddFaaSTTelemetry(app, options.Value.Tracing));
    }

    /// <summary>Maps /metrics; called after every other component mapped its endpoints.</summary>
    public void MapMetrics() => _serving.MapEndpoints(web => web.MapFaaSTMetrics(_app, () => _serving.HttpPort));

    public void Participate(IHostLifecycle lifecycle)
    {
        // Nothing to start or stop of its own: the providers start and stop with the web host's services.
    }
}
