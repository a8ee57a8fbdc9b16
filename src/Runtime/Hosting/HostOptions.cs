using System.Net;
using FaaST.Cachelet.Daemon;
using FaaST.Policy;
using FaaST.Membership;
using FaaST.Runtime.Workers;
using FaaST.Scaling;
using FaaST.Storage;

namespace FaaST.Runtime.Hosting;

/// <summary>
/// The host's options, one immutable record per concern, each read by its own component (the registry
/// holds each as <c>IOptions&lt;T&gt;</c>; see <see cref="RuntimeComponents"/>). This is the
/// one place where the command line (<see cref="RuntimeHostOptions"/>), the app's settings and
/// faast.json meet, where the defaults not owned by a file format are written down, and where the
/// combination is checked before anything starts.
/// </summary>
internal sealed record HostOptions(
    string Home,
    ServingOptions Serving,
    StorageHostOptions Storage,
    CacheHostOptions Cache,
    WorkerHostOptions Workers,
    PeerHostOptions Peers,
    TelemetryHostOptions Telemetry,
    ScalingHostOptions Scaling)
{
    /// <summary>
    /// Resolves and checks every concern's options for <paramref name="app"/>; a bad faast.json or an
    /// exposure the app's settings do not allow is an <see cref="AppConfigException"/> naming the file
    /// or setting, a bad <paramref name="options"/> value an <see cref="ArgumentException"/> naming it.
    /// Chooses the workers' user (which checks what that user can read) and logs why it fell back.
    /// </summary>
    public static HostOptions Resolve(RuntimeHostOptions options, FunctionApp app, ILogger logger)
    {
        var home = RuntimeHostOptions.FindHome(options.HomeDirectory);
        var listen = Address(options.ListenAddress, nameof(RuntimeHostOptions.ListenAddress));
        var serving = new ServingOptions
        {
            ListenAddress = listen,
            HttpPort = Port(options.HttpPort ?? app.Settings.LocalHttpPort ?? ServingOptions.DefaultHttpPort, nameof(RuntimeHostOptions.HttpPort)),
            DrainTimeout = Positive(options.DrainTimeout ?? ServingOptions.DefaultDrainTimeout, nameof(RuntimeHostOptions.DrainTimeout)),
            EnforceKeys = Http.HttpKeyCheck.Resolve(app.Settings, listen),
        };

        var cache = CacheHostOptions.Load(app, options.CacheEnabled);
        var given = StorageHostOptions.GivenDevelopmentStorage(options.Environment);
        var usesDevelopment = StorageAccounts.UsesDevelopmentStorage(app.Settings);
        var storage = new StorageHostOptions
        {
            Home = home,
            StartsAzurite = usesDevelopment && given is null,
            DevelopmentConnectionString = usesDevelopment ? given : null,
            AzuriteDataDirectory = options.AzuriteDataDirectory,
            Blob = options.StorageOptions,
        };

        var peerListen = options.PeerListenAddress is null ? listen : Address(options.PeerListenAddress, nameof(RuntimeHostOptions.PeerListenAddress));
        var peers = new PeerHostOptions
        {
            Enabled = cache.Policy.Enabled && options.Peers,
            ListenAddress = peerListen,
            Port = Port(options.PeerPort, nameof(RuntimeHostOptions.PeerPort)),
            InstanceId = options.InstanceId,
            // faast.json's cache section is where an app sets these (with its documented defaults).
            Timeout = cache.Policy.PeerTimeout,
            FetchTimeout = cache.Policy.PeerFetchTimeout,
            Membership = options.Membership,
            Bandwidth = PeerHostOptions.BandwidthOf(cache.Policy.Scale, System.Environment.GetEnvironmentVariable(PeerHostOptions.BandwidthMinObjectSizeVariable)),
        };
        if (peers.Enabled)
            PeerSecret.CheckExposure(app, StorageAccounts.NeedsDevelopmentStorage(app.Settings) || StorageConnectionString.IsPublicDevelopmentKey(app.Settings["AzureWebJobsStorage"]),
                options.ListenAddress, options.PeerListenAddress ?? options.ListenAddress);

        var workers = WorkerHostOptions.Choose(options, app, home, logger);
        var telemetry = new TelemetryHostOptions
        {
            Tracing = options.Tracing,
        };
        var scaling = new ScalingHostOptions
        {
            // faast.json's `scale` section (validated by the policy file) sets the instance's vote rules.
            Votes = new VoteOptions
            {
                BandLow = cache.Policy.Scale.Band.Low,
                BandHigh = cache.Policy.Scale.Band.High,
                RareAccessesPerSecond = cache.Policy.Scale.RareAccessesPerSecond,
                LargeObjectBytes = cache.Policy.Scale.BandwidthMinObjectSize,
                ComputeEnabled = cache.Policy.Scale.Votes.Compute,
                CacheSizeEnabled = cache.Policy.Scale.Votes.CacheSize,
                BandwidthEnabled = cache.Policy.Scale.Votes.Bandwidth,
            }.Validate(Path.Combine(app.Directory, "faast.json")),
            WorkerSlots = ScalingHostOptions.SlotsOf(app, workers.ProcessCount),
            StopRequested = options.StopRequested,
        };
        return new HostOptions(home, serving, storage, cache, workers, peers, telemetry, scaling);
    }

    private static IPAddress Address(string text, string name) =>
        IPAddress.TryParse(text, out var address) ? address
            : throw new ArgumentException($"{nameof(RuntimeHostOptions)}.{name} must be an IP address, not \"{text}\"", name);

    private static int Port(int port, string name) =>
        port is >= 0 and <= 65535 ? port
            : throw new ArgumentException($"{nameof(RuntimeHostOptions)}.{name} must be a port from 0 to 65535, not {port}", name);

    private static TimeSpan Positive(TimeSpan value, string name) =>
        value > TimeSpan.Zero ? value
            : throw new ArgumentException($"{nameof(RuntimeHostOptions)}.{name} must be positive, not {value}", name);
}

/// <summary>Kestrel: where the app's HTTP functions are served, and how the host stops serving them.</summary>
internal sealed record ServingOptions
{
    /// <summary>Local.settings.json's <c>Host.LocalHttpPort</c> when neither it nor --port says otherwise.</summary>
    public const int DefaultHttpPort = HostCommandLine.DefaultHttpPort;

    /// <summary>How long a stopping host waits for HTTP invocations in flight (default 5 s, as long as workers get to exit).</summary>
    public static readonly TimeSpan DefaultDrainTimeout = TimeSpan.FromSeconds(5);

    /// <summary>The address of the HTTP port (--listen; default loopback).</summary>
    public required IPAddress ListenAddress { get; init; }

    /// <summary>The HTTP port; 0 picks a free one.</summary>
    public required int HttpPort { get; init; }

    /// <summary>See <see cref="DefaultDrainTimeout"/>.</summary>
    public required TimeSpan DrainTimeout { get; init; }

    /// <summary>Whether requests must present keys (beyond loopback, or FAAST_ENFORCE_KEYS=true; see <see cref="Http.HttpKeyCheck"/>).</summary>
    public bool EnforceKeys { get; init; }

    /// <summary>How long Kestrel waits for connections still open when it stops (the workers' streams have ended by then).</summary>
    public TimeSpan ShutdownTimeout { get; init; } = TimeSpan.FromSeconds(5);
}

/// <summary>Storage: the Azurite the host starts when the app has no storage, and how blob requests retry.</summary>
internal sealed record StorageHostOptions
{
    /// <summary>The FaaST checkout, whose node_modules holds the Azurite the host starts.</summary>
    public required string Home { get; init; }

    /// <summary>
    /// Some connection of the app is development storage (AzureWebJobsStorage unset or UseDevelopmentStorage=true, or a
    /// named connection set to UseDevelopmentStorage=true) and the platform gave none: the host starts Azurite.
    /// </summary>
    public required bool StartsAzurite { get; init; }

    /// <summary>
    /// The app's own Azurite, which the platform started and gave as <see cref="StorageAccounts.DevelopmentStorageVariable"/>;
    /// every development-storage setting resolves to it. Null: none given (or the app uses none).
    /// </summary>
    public string? DevelopmentConnectionString { get; init; }

    /// <summary>
    /// <see cref="StorageAccounts.DevelopmentStorageVariable"/> from <paramref name="environment"/> (null: the process's);
    /// null when unset or blank.
    /// </summary>
    /// <exception cref="ArgumentException">It is set but is not a usable connection string (naming the variable, never its value, which holds a key).</exception>
    public static string? GivenDevelopmentStorage(System.Collections.IDictionary? environment)
    {
        var value = environment is null
            ? System.Environment.GetEnvironmentVariable(StorageAccounts.DevelopmentStorageVariable)
            : environment[StorageAccounts.DevelopmentStorageVariable] as string;
        if (string.IsNullOrWhiteSpace(value))
            return null;
        if (BlobStore.ConnectionStringProblem(value) is { } problem)
            throw new ArgumentException($"environment variable {StorageAccounts.DevelopmentStorageVariable} is not a usable storage connection string: {problem}");
        if (StorageConnectionString.Parse(value) is { IsDevelopmentStorage: true })
            throw new ArgumentException($"environment variable {StorageAccounts.DevelopmentStorageVariable} must name the app's Azurite (its endpoints and " +
                "account), not UseDevelopmentStorage=true");
        return value;
    }

    /// <summary>Where that Azurite keeps its data (--azurite-data); null: in memory.</summary>
    public string? AzuriteDataDirectory { get; init; }

    /// <summary>Retries and timeouts of blob requests; null: <see cref="BlobStoreOptions"/>' defaults (the README's retry promise).</summary>
    public BlobStoreOptions? Blob { get; init; }
}

/// <summary>The cachelet: faast.json's policy (with its documented defaults), fitted to the memory cgroup.</summary>
internal sealed record CacheHostOptions
{
    public required CachePolicy Policy { get; init; }

    /// <summary>The memory cgroup the policy's limit was fitted to, if the host runs under one.</summary>
    public CgroupMemoryLimit? Cgroup { get; init; }

    /// <summary>A warning about the fit (faast.json asks for more than the cgroup allows), logged at start.</summary>
    public string? Warning { get; init; }

    /// <summary>Loads APP/faast.json; <paramref name="enabled"/> (--no-cache) overrides its cache.enabled.</summary>
    public static CacheHostOptions Load(FunctionApp app, bool? enabled)
    {
        var cgroup = CgroupMemoryLimit.Find();
        try
        {
            var policy = CachePolicyFile.Load(app.Directory);
            if (enabled is { } on)
                policy = policy with { Enabled = on };
            policy = policy.WithCgroupLimit(cgroup, Path.Combine(app.Directory, CachePolicyFile.FileName), out var warning);
            return new CacheHostOptions { Policy = policy, Cgroup = cgroup, Warning = warning };
        }
        catch (PolicyFileException e)
        {
            throw new AppConfigException(e.Message);
        }
    }
}

/// <summary>The language workers: how many, who they run as, how they restart.</summary>
internal sealed record WorkerHostOptions
{
    /// <summary>Where workers/python and workers/node are.</summary>
    public required string WorkersDirectory { get; init; }

    /// <summary>--workers, else FUNCTIONS_WORKER_PROCESS_COUNT, else 1.</summary>
    public required int ProcessCount { get; init; }

    /// <summary>First restart delay of a crashed worker; null: <see cref="WorkerOptions"/>' default (200 ms).</summary>
    public TimeSpan? RestartDelay { get; init; }

    /// <summary>The app's user, which the workers run as and which owns the segments; null: the host's user.</summary>
    public WorkerIdentity? Identity { get; init; }

    /// <summary>Why the workers run as the host's user (when <see cref="Identity"/> is null).</summary>
    public string? IsolationReason { get; init; }

    /// <summary>Picks the workers' user (--isolation): it must be able to read the app and the worker's code.</summary>
    public static WorkerHostOptions Choose(RuntimeHostOptions options, FunctionApp app, string home, ILogger logger)
    {
        var mustRead = new List<string> { app.Directory, Path.Combine(home, "workers", app.WorkerRuntime) };
        if (app.WorkerRuntime == "node" && Directory.Exists(Path.Combine(home, "node_modules")))
            mustRead.Add(Path.Combine(home, "node_modules"));
        mustRead.AddRange(app.Runnable.Select(f => f.ScriptFile).Where(File.Exists));
        if (app.IndexedFrom is { } declared && File.Exists(declared))
            mustRead.Add(declared);
        var user = options.WorkerUser ?? WorkerIdentity.UserNameFor(app.Name);
        var identity = Isolation.Choose(options.Isolation, user, mustRead, logger, out var reason);
        var count = options.WorkerProcessCount ?? app.Settings.WorkerProcessCount ?? 1;
        if (count is < 1 or > 64)
            throw new ArgumentException($"{nameof(RuntimeHostOptions)}.{nameof(RuntimeHostOptions.WorkerProcessCount)} must be from 1 to 64, not {count}");
        return new WorkerHostOptions
        {
            WorkersDirectory = Path.Combine(home, "workers"),
            ProcessCount = count,
            RestartDelay = options.WorkerRestartDelay,
            Identity = identity,
            IsolationReason = identity is null ? reason : null,
        };
    }
}

/// <summary>The cooperative cache: the peer endpoint, membership, and how long a peer may take.</summary>
internal sealed record PeerHostOptions
{
    /// <summary>
    /// Overrides faast.json's <c>scale.bandwidth.minObjectSize</c> in bytes: the benchmarks set it to split objects
    /// smaller than the policy's threshold without editing the app.
    /// </summary>
    public const string BandwidthMinObjectSizeVariable = "FAAST_BANDWIDTH_MIN_OBJECT_SIZE";

    /// <summary>
    /// Bandwidth scaling as the app's <c>scale</c> policy sets it (threshold, at most <c>maxInstances</c>; off when
    /// <c>votes.bandwidth</c> is false), with <see cref="BandwidthMinObjectSizeVariable"/> applied, if set.
    /// </summary>
    /// <exception cref="InvalidOperationException">It is set but not a whole number of bytes >= 1.</exception>
    public static FaaST.Cachelet.Bandwidth.BandwidthScalingOptions BandwidthOf(FaaST.Policy.ScalePolicy scale, string? minObjectSize)
    {
        var policy = new FaaST.Cachelet.Bandwidth.BandwidthScalingOptions
        {
            MinObjectSize = scale.Votes.Bandwidth ? scale.BandwidthMinObjectSize : long.MaxValue,
            MaxInstances = scale.MaxInstances,
        };
        return string.IsNullOrWhiteSpace(minObjectSize) ? policy : BandwidthFromEnvironment(minObjectSize) with { MaxInstances = scale.MaxInstances };
    }

    /// <summary>The default bandwidth options with <see cref="BandwidthMinObjectSizeVariable"/> applied, if set.</summary>
    /// <exception cref="InvalidOperationException">It is set but not a whole number of bytes >= 1.</exception>
    public static FaaST.Cachelet.Bandwidth.BandwidthScalingOptions BandwidthFromEnvironment(string? minObjectSize)
    {
        if (string.IsNullOrWhiteSpace(minObjectSize))
            return new();
        if (!long.TryParse(minObjectSize.Trim(), System.Globalization.NumberStyles.None, System.Globalization.CultureInfo.InvariantCulture, out var bytes) || bytes < 1)
            throw new InvalidOperationException($"{BandwidthMinObjectSizeVariable}: '{minObjectSize}' is not a whole number of bytes >= 1");
        return new() { MinObjectSize = bytes };
    }

    /// <summary>The cache is on and --no-peers was not given.</summary>
    public required bool Enabled { get; init; }

    /// <summary>--peer-listen, default --listen; a wildcard is never advertised (see <see cref="PeerSecret.Advertised"/>).</summary>
    public required IPAddress ListenAddress { get; init; }

    /// <summary>--peer-port; 0 picks a free one.</summary>
    public required int Port { get; init; }

    /// <summary>--instance-id; null: host name, process id and a random suffix.</summary>
    public string? InstanceId { get; init; }

    /// <summary>faast.json's <c>cache.peerTimeout</c>: the longest wait for any one message of a peer call.</summary>
    public required TimeSpan Timeout { get; init; }

    /// <summary>faast.json's <c>cache.peerFetchTimeout</c>: how long a read waits for an owner still fetching from storage.</summary>
    public required TimeSpan FetchTimeout { get; init; }

    /// <summary>Heartbeats and expiry; null: <see cref="MembershipOptions"/>' defaults (1 s, gone after 3 missed).</summary>
    public MembershipOptions? Membership { get; init; }

    /// <summary>
    /// Bandwidth scaling of large misses (Faa$T §4): the threshold (<c>scale.bandwidth.minObjectSize</c>,
    /// default 64 MiB), the most instances per object, the wait for asked-for instances. See docs/scaling.md.
    /// </summary>
    public FaaST.Cachelet.Bandwidth.BandwidthScalingOptions Bandwidth { get; init; } = new();
}

/// <summary>
/// Telemetry. What goes out over OTLP is the OTEL_* settings' (app settings, then the environment),
/// read and checked by <see cref="Telemetry.TelemetrySetup"/>; /metrics is always served.
/// </summary>
internal sealed record TelemetryHostOptions
{
    /// <summary>Extra trace configuration (tests add an exporter); tracing runs only when something exports.</summary>
    public Action<OpenTelemetry.Trace.TracerProviderBuilder>? Tracing { get; init; }
}

/// <summary>The instance side of scaling (Faa$T §4): the vote rules' settings and what a drain ends with.</summary>
internal sealed record ScalingHostOptions
{
    /// <summary>The vote rules' settings (faast.json's <c>scale</c> section).</summary>
    public required VoteOptions Votes { get; init; }

    /// <summary>Invocations the workers run at once: the denominator of the compute vote's utilisation.</summary>
    public required int WorkerSlots { get; init; }

    /// <summary>Asks the process to stop once a drain began (see <see cref="RuntimeHostOptions.StopRequested"/>).</summary>
    public Action? StopRequested { get; init; }

    /// <summary>
    /// The workers' slots: per Python worker, its thread pool (PYTHON_THREADPOOL_THREAD_COUNT, else the
    /// worker's own default, min(32, cores + 4)), which runs the synchronous functions; per Node worker
    /// one, its single JavaScript thread. Node workers report their event loop's busy share, which the
    /// vote uses instead (<see cref="Scaling.EventLoopLoad"/>); slots count for them only until it arrives.
    /// </summary>
    public static int SlotsOf(FunctionApp app, int processes)
    {
        var perWorker = 1;
        if (app.WorkerRuntime == "python")
        {
            perWorker = Math.Min(32, Environment.ProcessorCount + 4);
            if (int.TryParse(app.Settings["PYTHON_THREADPOOL_THREAD_COUNT"], System.Globalization.NumberStyles.None,
                    System.Globalization.CultureInfo.InvariantCulture, out var threads) && threads >= 1)
                perWorker = threads;
        }
        return Math.Max(1, processes) * perWorker;
    }
}
