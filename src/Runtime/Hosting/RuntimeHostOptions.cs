namespace FaaST.Runtime.Hosting;

/// <summary>
/// What to run and where, as the command line says it; the defaults are what `./faast start` uses.
/// <see cref="HostOptions.Resolve"/> turns it, the app's settings and faast.json into one checked
/// record per concern.
/// </summary>
public sealed record RuntimeHostOptions
{
    public required string AppDirectory { get; init; }

    /// <summary>HTTP port for the functions (0 picks a free one).</summary>
    public int? HttpPort { get; init; }

    /// <summary>The address HTTP listens on; loopback unless asked otherwise.</summary>
    public string ListenAddress { get; init; } = "127.0.0.1";

    /// <summary>The FaaST checkout (holds workers/ and node_modules/); found from the binary when null.</summary>
    public string? HomeDirectory { get; init; }

    /// <summary>Where a runtime-started Azurite keeps its data; null keeps it in memory.</summary>
    public string? AzuriteDataDirectory { get; init; }

    /// <summary>Worker processes; null reads FUNCTIONS_WORKER_PROCESS_COUNT (default 1).</summary>
    public int? WorkerProcessCount { get; init; }

    /// <summary>Environment used for app settings overrides (tests pass their own).</summary>
    public System.Collections.IDictionary? Environment { get; init; }

    /// <summary>Extra log sink (tests capture logs with it).</summary>
    public ILoggerProvider? LoggerProvider { get; init; }

    public LogLevel MinimumLogLevel { get; init; } = LogLevel.Information;

    public Storage.BlobStoreOptions? StorageOptions { get; init; }

    public TimeSpan? WorkerRestartDelay { get; init; }

    /// <summary>Overrides faast.json's cache.enabled (the --no-cache switch; tests).</summary>
    public bool? CacheEnabled { get; init; }

    /// <summary>Whether workers run as a per-app Unix user (--isolation; see README).</summary>
    public IsolationMode Isolation { get; init; } = IsolationMode.Auto;

    /// <summary>The user isolated workers run as; null: "faast-" + the app's name (tests share one).</summary>
    public string? WorkerUser { get; init; }

    /// <summary>Join the app's other instances as a cooperative cache (when the cache is on). Default true.</summary>
    public bool Peers { get; init; } = true;

    /// <summary>Port of the peer endpoint (gRPC, HTTP/2); 0 (default) picks a free one.</summary>
    public int PeerPort { get; init; }

    /// <summary>Address the peer endpoint listens on and is advertised as; default <see cref="ListenAddress"/>.</summary>
    public string? PeerListenAddress { get; init; }

    /// <summary>This instance's membership id; default host name, process id and a random suffix.</summary>
    public string? InstanceId { get; init; }

    /// <summary>Membership heartbeats (default 1 s, an instance is gone after 3 missed ones).</summary>
    public FaaST.Membership.MembershipOptions? Membership { get; init; }

    /// <summary>How long a stopping host waits for HTTP invocations in flight; null: 5 s (see <see cref="ServingOptions"/>).</summary>
    public TimeSpan? DrainTimeout { get; init; }

    /// <summary>
    /// Asks whoever runs the host to stop it (the process: its stop token), once a drain the scale
    /// controller sent has begun (InstanceScaling.Drain). Null: the host stops its own lifecycle, and the
    /// caller sees the host stopped (tests that run the host in their own process).
    /// </summary>
    public Action? StopRequested { get; init; }

    /// <summary>
    /// --ready-file PATH: once the lifecycle reached Started the host writes its id and addresses there (see
    /// <see cref="ReadyFile"/>); how the platform learns that an instance is ready. Null: no file.
    /// </summary>
    public string? ReadyFile { get; init; }

    /// <summary>
    /// Components that join the host's lifecycle (stages and states; see <see cref="FaaST.Hosting.IHostLifecycle"/>) as
    /// instances that need nothing from the host; registered as <see cref="FaaST.Hosting.ILifecycleParticipant"/>s
    /// before <see cref="ConfigureServices"/> runs. A component that needs the cache, membership or storage registers
    /// through <see cref="ConfigureServices"/> instead.
    /// </summary>
    public IReadOnlyList<FaaST.Hosting.ILifecycleParticipant> Participants { get; init; } = [];

    /// <summary>
    /// Adds components to the host's registry, after its own (see CONTRIBUTING, "Adding a lifecycle component"):
    /// <c>AddLifecycleComponent&lt;T&gt;()</c> for a participant that gets what it needs injected (<see cref="IHostCache"/>,
    /// <see cref="IHostMembership"/>, <see cref="FaaST.Hosting.IHostLifecycle"/>, and inside the runtime its components),
    /// an <see cref="FaaST.Cachelet.Sources.IBlobSource"/> (a read tier, asked after the key's owner and before storage),
    /// an <see cref="FaaST.Cachelet.Sources.IEvictionSink"/>, or a <see cref="Workers.IWorkerScheduler"/> that replaces the
    /// default. Each is one registration.
    /// </summary>
    public Action<IServiceCollection>? ConfigureServices { get; init; }

    /// <summary>More tracing set-up, e.g. an in-memory exporter (tests); tracing runs when this is set or OTLP exports traces.</summary>
    public Action<OpenTelemetry.Trace.TracerProviderBuilder>? Tracing { get; init; }

    /// <summary>Finds the FaaST checkout: $FAAST_HOME, else the nearest parent of the binary with workers/ and package.json.</summary>
    public static string FindHome(string? explicitHome = null) => FaaSTHome.Find(explicitHome);
}
