using Microsoft.Extensions.Configuration;

namespace FaaST.AppModel;

/// <summary>
/// What goes out over OTLP, from the standard variables (in the environment or the app's settings):
/// OTEL_EXPORTER_OTLP_ENDPOINT turns export on
/// for traces and metrics; OTEL_TRACES_EXPORTER / OTEL_METRICS_EXPORTER ("otlp", "none"; metrics
/// also "prometheus", which /metrics always is) choose per signal. The SDK reads the rest
/// (protocol, headers, timeout, export interval, service name, sampler).
/// </summary>
public sealed record TelemetryExport(bool Traces, bool Metrics, string? Endpoint)
{
    /// <param name="sourceOf">Names where a variable was set, for errors (the environment, or local.settings.json).</param>
    public static TelemetryExport From(IConfiguration config, Func<string, string> sourceOf)
    {
        const string Endpoint = "OTEL_EXPORTER_OTLP_ENDPOINT";
        var endpoint = config[Endpoint] is { Length: > 0 } e ? e.Trim() : null;
        if (endpoint is not null && !(Uri.TryCreate(endpoint, UriKind.Absolute, out var uri) && (uri.Scheme == Uri.UriSchemeHttp || uri.Scheme == Uri.UriSchemeHttps)))
            throw new AppConfigException($"{sourceOf(Endpoint)} is \"{LogText.Escape(endpoint)}\", which is not an absolute http:// or https:// address (e.g. http://127.0.0.1:4317)");
        return new TelemetryExport(
            Otlp(config, sourceOf, "OTEL_TRACES_EXPORTER", endpoint is not null, ["otlp", "none"]),
            Otlp(config, sourceOf, "OTEL_METRICS_EXPORTER", endpoint is not null, ["otlp", "prometheus", "none"]),
            endpoint);
    }

    private static bool Otlp(IConfiguration config, Func<string, string> sourceOf, string variable, bool endpointSet, string[] known)
    {
        var value = config[variable];
        if (string.IsNullOrWhiteSpace(value))
            return endpointSet;
        var names = value.Split(',', StringSplitOptions.TrimEntries | StringSplitOptions.RemoveEmptyEntries);
        foreach (var name in names)
        {
            if (!known.Contains(name, StringComparer.OrdinalIgnoreCase))
                throw new AppConfigException($"{sourceOf(variable)} is \"{LogText.Escape(value)}\": \"{LogText.Escape(name)}\" is not an exporter FaaST has (it takes {string.Join(", ", known)})");
        }
        if (names.Length > 1 && names.Contains("none", StringComparer.OrdinalIgnoreCase))
            throw new AppConfigException($"{sourceOf(variable)} is \"{LogText.Escape(value)}\": \"none\" cannot be combined with another exporter");
        return names.Contains("otlp", StringComparer.OrdinalIgnoreCase);
    }
}
