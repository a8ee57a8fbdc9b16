using System.Text.Json;
using FaaST.Hosting;
using FaaST.ScaleController.Platform;

namespace FaaST.ScaleController.Telemetry;

/// <summary>
/// Every instance as a Prometheus scrape target, so that a scrape sees each instance's own /metrics (through the
/// frontend, /metrics reaches one instance of N). Written as a file_sd file, STATE/prometheus/instances.json (Prometheus'
/// <c>file_sd_configs</c> re-reads it when it changes), and served as the same JSON at GET /admin/platform/targets
/// (Prometheus' <c>http_sd_configs</c>, with the admin key). One group per instance: its address, and labels app,
/// version and faast_instance (docs/scaling.md, "The platform's telemetry").
/// </summary>
/// <remarks>
/// A component of the platform's lifecycle that joins the apps' lifecycle: an instance is listed when its
/// InstanceStarted is handed out (it is routed to by then) and dropped at its InstanceStopped (its process has stopped).
/// Each write lists the instances as they are then, under a lock, to a temporary file renamed over the old one: a
/// reader sees a whole file, and the last write is the current state whatever the order of apps' events.
/// </remarks>
internal sealed class PrometheusTargets(string stateDirectory, Func<IEnumerable<AppHost>> apps, IAppLifecycle events, ILogger logger)
    : ILifecycleParticipant
{
    private readonly Lock _write = new();
    private IDisposable? _subscription;

    /// <summary>STATE/prometheus/instances.json.</summary>
    public static string PathIn(string stateDirectory) => System.IO.Path.Combine(stateDirectory, "prometheus", "instances.json");

    public string Path { get; } = PathIn(stateDirectory);

    public void Participate(IHostLifecycle lifecycle) =>
        lifecycle.Subscribe("prometheus targets", PlatformLifecycleStage.Telemetry, new LifecycleObserver(_ =>
        {
            _subscription = events.Subscribe("prometheus targets", (e, _) =>
            {
                if (e.Kind is AppLifecycleKind.InstanceStarted or AppLifecycleKind.InstanceStopped)
                    Write();
                return Task.CompletedTask;
            });
            Write();
            return Task.CompletedTask;
        }, _ =>
        {
            _subscription?.Dispose();
            // No instance outlives the platform's stop: a file left behind would name addresses nothing listens on.
            try
            {
                File.Delete(Path);
            }
            catch (Exception e) when (e is IOException or UnauthorizedAccessException)
            {
                Log.TargetsNotWritten(logger, Path, e.Message);
            }
            return Task.CompletedTask;
        }));

    /// <summary>The targets as Prometheus' file_sd and http_sd read them.</summary>
    public byte[] Json()
    {
        using var buffer = new MemoryStream();
        using (var json = new Utf8JsonWriter(buffer, new JsonWriterOptions { Indented = true }))
        {
            json.WriteStartArray();
            foreach (var app in apps().OrderBy(a => a.App, StringComparer.Ordinal))
            {
                foreach (var (handle, _) in app.Instances.OrderBy(i => i.Handle.Id, StringComparer.Ordinal))
                {
                    json.WriteStartObject();
                    json.WriteStartArray("targets");
                    json.WriteStringValue(handle.BaseAddress.Authority);
                    json.WriteEndArray();
                    json.WriteStartObject("labels");
                    json.WriteString("app", app.App);
                    json.WriteString("version", $"v{handle.Version}");
                    json.WriteString("faast_instance", handle.Id);
                    json.WriteString("__scheme__", handle.BaseAddress.Scheme);
                    json.WriteEndObject();
                    json.WriteEndObject();
                }
            }
            json.WriteEndArray();
        }
        return buffer.ToArray();
    }

    private void Write()
    {
        lock (_write)
        {
            var temporary = Path + ".tmp";
            try
            {
                Directory.CreateDirectory(System.IO.Path.GetDirectoryName(Path)!);
                File.WriteAllBytes(temporary, Json());
                File.Move(temporary, Path, overwrite: true);
            }
            catch (Exception e) when (e is IOException or UnauthorizedAccessException)
            {
                // Not fatal: the platform serves without it, and the next instance start or stop writes it again.
                Log.TargetsNotWritten(logger, Path, e.Message);
            }
        }
    }
}
