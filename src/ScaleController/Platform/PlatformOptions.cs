using FaaST.ScaleController.Deploy;

namespace FaaST.ScaleController.Platform;

/// <summary>The platform process's settings, with their defaults in one place.</summary>
public sealed record PlatformOptions
{
    /// <summary>Where the frontend listens. Default 127.0.0.1.</summary>
    public string ListenAddress { get; init; } = "127.0.0.1";

    /// <summary>The frontend's HTTP port. Default 7071 (0: a free one).</summary>
    public int Port { get; init; } = 7071;

    /// <summary>The control port (HTTP/2: ScaleControl for instances' unrequested votes, KEDA's external scaler). Default 0: a free one.</summary>
    public int ControlPort { get; init; }

    /// <summary>
    /// Where the control port listens. Default 127.0.0.1, whatever <see cref="ListenAddress"/> is: the KEDA scaler
    /// answers without a credential and names apps, so it stays on loopback unless the operator says otherwise.
    /// An address beyond loopback is refused at start unless <see cref="ControlTlsCertificateFile"/> is set
    /// (and with <see cref="ControlClientCaFile"/>, KEDA must present a client certificate).
    /// </summary>
    public string ControlListenAddress { get; init; } = "127.0.0.1";

    /// <summary>The control port's TLS certificate (PEM); with <see cref="ControlTlsKeyFile"/>. Default none: cleartext HTTP/2, loopback only.</summary>
    public string? ControlTlsCertificateFile { get; init; }

    /// <summary>The private key (PEM) of <see cref="ControlTlsCertificateFile"/>.</summary>
    public string? ControlTlsKeyFile { get; init; }

    /// <summary>
    /// A CA (PEM) whose client certificates the control port accepts; KEDA's external scaler then answers only a
    /// client that presents one (KEDA's trigger metadata caCert/tlsClientCert/tlsClientKey). Instances' ScaleControl
    /// calls need none (they are signed with the app's peer secret). Default none.
    /// </summary>
    public string? ControlClientCaFile { get; init; }

    /// <summary>The operator's master key file (base64 of at least 32 bytes; e.g. a mounted Kubernetes secret). Default
    /// none: STATE/keys/master, made at first start (<see cref="PlatformKeys.LoadOrCreate"/>).</summary>
    public string? MasterKeyFile { get; init; }

    /// <summary>
    /// Host names the admin endpoints (/admin/platform...) answer besides the loopback names (127.0.0.1, localhost,
    /// [::1]) and the listen addresses, with any port: e.g. the DNS name operators reach a platform beyond loopback by.
    /// Any other Host header is refused (403): a web page that rebinds its own name to this machine must not reach
    /// them. Default none.
    /// </summary>
    public IReadOnlyList<string> AllowedAdminHosts { get; init; } = [];

    /// <summary>Deploy's limits (package size, entries, concurrent deploys). Default <see cref="DeployOptions.Default"/>;
    /// its work directory is always STATE/work.</summary>
    public DeployOptions? Deploy { get; init; }

    /// <summary>Bounds on KEDA's open StreamIsActive calls. Default <see cref="Keda.KedaScalerOptions"/>'s.</summary>
    public Keda.KedaScalerOptions? Keda { get; init; }

    /// <summary>Where extracted packages and per-app secrets live on this machine.</summary>
    public required string StateDirectory { get; init; }

    /// <summary>The platform's own storage (faast-deployments: packages, app.json, instance records); never handed to an app.</summary>
    public required string StorageConnectionString { get; init; }

    /// <summary>True when <see cref="StorageConnectionString"/> is an Azurite the platform started (its instances end with it).</summary>
    public bool DevelopmentStorage { get; init; }

    /// <summary>
    /// Each app on development storage gets an Azurite of its own (see <see cref="AppStorage"/>): false (default) keeps its
    /// data in STATE/storage/APP/azurite (account in STATE/storage/APP/azurite-account); true keeps it in memory (--azurite-in-memory).
    /// </summary>
    public bool AppStorageInMemory { get; init; }

    /// <summary>Where an app's Azurite lives, when not <see cref="AppStorage.DefaultLocation"/> (`./faast start APP`: APP/.faast).</summary>
    public Func<string, AppStorageLocation>? AppStorage { get; init; }

    /// <summary>More runtime arguments for every instance (--workers N, --no-cache, --isolation MODE, --no-peers, ...).</summary>
    public IReadOnlyList<string> InstanceArguments { get; init; } = [];

    /// <summary>The one app of `./faast start APP`: every path on the port goes to it. Null: route by path or host.</summary>
    public string? SingleApp { get; init; }

    /// <summary>Instances to start when an app is loaded; default the policy's minInstances (at least 1).</summary>
    public int? InitialInstances { get; init; }

    /// <summary>How long a draining instance may finish its invocations. Default 30 s.</summary>
    public TimeSpan DrainDeadline { get; init; } = TimeSpan.FromSeconds(30);

    /// <summary>
    /// Instances of all apps together the platform runs at most (starting, ready and draining ones count). A scale-out
    /// beyond it is capped and logged with the reason; a deploy that cannot get even one instance is refused (503).
    /// A redeploy needs room for its new instances beside the old ones while they roll. Default 32.
    /// </summary>
    public int MaxInstances { get; init; } = 32;

    /// <summary>
    /// Language worker processes of all instances together at most: each instance counts its workers (the platform's
    /// --workers N, else the app's FUNCTIONS_WORKER_PROCESS_COUNT, else 1). Capped as <see cref="MaxInstances"/> is. Default 128.
    /// </summary>
    public int MaxWorkers { get; init; } = 128;

    /// <summary>
    /// How long the platform waits for one app lifecycle handler (<see cref="IAppLifecycle"/>) on one event before it
    /// cancels the handler's token, logs it (event 8301) and goes on. Default 5 s: an Unloading handler that records an
    /// app's working set reads a snapshot from each instance (milliseconds); a stuck one delays an unload by this much at
    /// most, never stops it. Must be positive.
    /// </summary>
    public TimeSpan AppLifecycleTimeout { get; init; } = TimeSpan.FromSeconds(5);

    /// <summary>
    /// OTEL_* settings of the platform's own telemetry (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_TRACES_EXPORTER, ...), over the
    /// process's environment, which `./faast platform` reads them from. Default none: the environment alone.
    /// </summary>
    public IReadOnlyDictionary<string, string>? Telemetry { get; init; }

    /// <summary>More tracing set-up (tests add an in-memory exporter); the frontend traces when this is given or OTLP exports traces.</summary>
    public Action<OpenTelemetry.Trace.TracerProviderBuilder>? Tracing { get; init; }

    /// <summary>
    /// The size of the flash server's device file (STATE/flash/device) when an app enables the flash tier without an
    /// address (issue 22). Default 1 GiB: the size docs/flash.md measured the file device at, a whole number of the
    /// server's 64 MiB segments, and small next to the disk of the machines FaaST runs on; an operator with an NVMe
    /// device runs `./faast flash` on it and names it in the apps' flash.address instead.
    /// </summary>
    public long FlashCapacity { get; init; } = 1L << 30;

    /// <summary>
    /// The device profile the platform's flash server schedules with (`./faast flash fit --device … --out FILE`: the
    /// disk's token rate, its rate by p95 bound for admission, and its write costs C*(WR, r)). Default: STATE/flash/
    /// device-profile.json when that file exists, else none, and the server prices I/O with the i3.xlarge shape scaled
    /// to 50K tokens/s. The platform does not sweep the disk itself (a fit loads it fully for ~20 s), but the default
    /// shape prices a 4 KiB write at 7–10 reads, where this VM's disk measured 1.0–1.65 (docs/flash.md): demotions are
    /// then over-charged to the app's SLO several times, so an operator fits once and leaves the file there.
    /// </summary>
    public string? FlashDeviceProfile { get; init; }

    /// <summary>FaaST.FlashBackend.dll; default the checkout's build (src/FlashBackend/bin/Release/net10.0).</summary>
    public string? FlashServerDll { get; init; }

    /// <summary>Receives instance output lines (label, line); default: the console.</summary>
    public Action<string, string>? InstanceOutput { get; init; }
}
