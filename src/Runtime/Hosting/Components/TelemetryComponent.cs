using FaaST.Hosting;
using OpenTelemetry.Metrics;
using OpenTelemetry.Trace;

namespace FaaST.Runtime.Hosting.Components;

/// <summary>
/// Telemetry export (stage <see cref="ServiceLifecycleStage.Telemetry"/>): the cachelet's metrics and
/// spans over OTLP when OTEL_EXPORTER_OTLP_ENDPOINT is set (the standard OTEL_* variables configure
/// protocol, interval and headers). First up and last down, so every other stage is observed.
/// </summary>
internal sealed class TelemetryComponent(TelemetryHostOptions options, ILogger logger) : ILifecycleParticipant
{
    private IDisposable? _meterProvider;
    private IDisposable? _tracerProvider;

    public void Participate(IHostLifecycle lifecycle) =>
        lifecycle.Subscribe(nameof(TelemetryComponent), ServiceLifecycleStage.Telemetry, new LifecycleObserver(Start, Stop));

    private Task Start(CancellationToken ct)
    {
        if (options.OtlpEndpoint is null)
            return Task.CompletedTask;
        _meterProvider = OpenTelemetry.Sdk.CreateMeterProviderBuilder()
            .AddMeter(FaaST.Cachelet.Telemetry.CacheletMetrics.Name)
            .AddOtlpExporter()
            .Build();
        // The request's own activity is not exported (no ASP.NET instrumentation here), so a
        // parent-based sampler would drop every cachelet span under it: sample them all.
        _tracerProvider = OpenTelemetry.Sdk.CreateTracerProviderBuilder()
            .AddSource(FaaST.Cachelet.Telemetry.CacheletMetrics.Name)
            .SetSampler(new AlwaysOnSampler())
            .AddOtlpExporter()
            .Build();
        logger.LogInformation("Exporting cachelet metrics and spans over OTLP to {Endpoint}", options.OtlpEndpoint);
        return Task.CompletedTask;
    }

    private Task Stop(CancellationToken ct)
    {
        _meterProvider?.Dispose();
        _tracerProvider?.Dispose();
        return Task.CompletedTask;
    }
}
