using FaaST.Policy;
using FaaST.ScaleController.Deploy;
using FaaST.ScaleController.Frontend;
using FaaST.ScaleController.Providers;

namespace FaaST.ScaleController.Platform;

/// <summary>What every app on the platform shares: the options, the provider, the clock, and how an instance is set up.</summary>
/// <remarks>One in the platform's registry (<see cref="PlatformServices"/>), which gives it its parts.</remarks>
internal sealed class PlatformContext(PlatformOptions options, IInstanceProvider provider, TimeProvider time, ILoggerFactory loggers,
    PlatformKeys keys, InstanceRegistry registry, Telemetry.PlatformMetrics metrics, Flash.PlatformFlash flash)
{
    /// <summary>The flash tier's server the platform runs for the apps that enable it.</summary>
    public Flash.PlatformFlash Flash { get; } = flash;

    public PlatformOptions Options { get; } = options;

    public IInstanceProvider Provider { get; } = provider;

    public TimeProvider Time { get; } = time;

    public ILoggerFactory Loggers { get; } = loggers;

    /// <summary>The platform's keys (master, admin, and what is derived from them).</summary>
    public PlatformKeys Keys { get; } = keys;

    /// <summary>The Azurite of each app on development storage (its own account, blob and queue services).</summary>
    public AppStorage AppStorage { get; } = new(options, loggers.CreateLogger("FaaST.Platform"));

    /// <summary>The platform-wide instance and worker budget every app's instances take their room from.</summary>
    public PlatformBudget Budget { get; } = new(options.MaxInstances, options.MaxWorkers);

    /// <summary>The platform's own instruments (cold starts, instance starts, deploys; the rest is observed).</summary>
    public Telemetry.PlatformMetrics Metrics { get; } = metrics;

    /// <summary>The instances' records in storage, for a restarted platform to take them over.</summary>
    public InstanceRegistry Registry { get; } = registry;

    /// <summary>The control endpoint instances send unrequested votes to (set once Kestrel has bound it).</summary>
    public Uri? ControlAddress { get; set; }

    public FrontendOptions FrontendOptions(ScalePolicy policy) => new FrontendOptions
    {
        MaxQueueLength = policy.MaxQueueLength,
        QueueTimeout = policy.QueueTimeout,
    }.Validate();

    /// <summary>Raised with an app's name when its desired instance count or activity changed (KEDA's streams listen).</summary>
    public event Action<string>? Changed;

    public void NotifyChanged(string app) => Changed?.Invoke(app);

    /// <summary>An app's load and unload, and its instances' starts and stops, to the handlers that subscribed (hooks: prewarm records at unload).</summary>
    public AppLifecycleHub AppEvents { get; } = new(options.AppLifecycleTimeout, loggers.CreateLogger("FaaST.Platform"));

    /// <summary>
    /// The app in <paramref name="directory"/> with the settings its instances will see: its local.settings.json under the
    /// part of the platform's environment an instance gets (<see cref="LocalProcessProvider.InstanceEnvironment"/>), never
    /// the rest. Read so, a platform started with AzureWebJobsStorage of its own does not take an app on development
    /// storage for one with an account: it would have started no Azurite for it, and the instance, which does not get
    /// that variable, would have kept its data in its version folder, deleted when the version is pruned.
    /// </summary>
    public static FunctionApp LoadApp(string directory)
    {
        var environment = new System.Collections.Hashtable(StringComparer.Ordinal);
        foreach (var (name, value) in LocalProcessProvider.InstanceEnvironment(Environment.GetEnvironmentVariables()))
            environment[name] = value;
        return FunctionApp.Load(directory, environment);
    }

    /// <summary>How an instance of <paramref name="deployment"/> is started: its storage, its peer secret, the controller's address.</summary>
    public InstanceSpec SpecFor(Deployment deployment, string directory)
    {
        var app = LoadApp(directory);
        var environment = new Dictionary<string, string>
        {
            [PeerSecretSetting] = PeerSecretTextOf(deployment.App, directory),
        };
        // An app on development storage gets its own Azurite (never the platform's storage), which every one of its
        // development-storage settings resolves to; its instances end with the platform that owns that Azurite. An app
        // with a storage account of its own keeps it.
        if (StorageAccounts.UsesDevelopmentStorage(app.Settings))
        {
            environment[StorageAccounts.DevelopmentStorageVariable] = AppStorage.ConnectionStringOf(deployment.App)
                ?? throw new InvalidOperationException($"the Azurite of app {deployment.App} has not been started");
            environment[HostCommandLine.ExitWithStdinVariable] = "1";
        }
        if (ControlAddress is { } control)
            environment["FAAST_SCALE_CONTROLLER"] = control.ToString();
        // The flash tier's address and this app's own token, when the app is registered with the platform's server.
        foreach (var (name, value) in Flash.EnvironmentFor(deployment.App))
            environment[name] = value;
        // Instances listen on loopback behind the frontend; when the frontend is reachable beyond loopback the
        // instances must check function keys as a host listening there would.
        if (!System.Net.IPAddress.IsLoopback(System.Net.IPAddress.Parse(Options.ListenAddress)))
            environment["FAAST_ENFORCE_KEYS"] = "true";
        return new InstanceSpec(deployment.App, deployment.Version, directory, environment,
            WithIsolation(Options.InstanceArguments, Environment.IsPrivilegedProcess));
    }

    /// <summary>
    /// The instances' arguments with the --isolation a platform running as <paramref name="root"/> must give them
    /// (issue 19, defect 2): as root, tenants' workers run as their app's own user or not at all, so any mode but an
    /// explicit "--isolation off" from the operator becomes "required" (auto would fall back to root when it cannot
    /// isolate). Not as root, the arguments are left as the operator gave them.
    /// </summary>
    internal static IReadOnlyList<string> WithIsolation(IReadOnlyList<string> arguments, bool root)
    {
        if (!root)
            return arguments;
        var result = new List<string>(arguments.Count + 2);
        var off = false;
        for (var i = 0; i < arguments.Count; i++)
        {
            if (arguments[i] == "--isolation" && i + 1 < arguments.Count)
                off = arguments[++i] == "off";
            else
                result.Add(arguments[i]);
        }
        result.AddRange(["--isolation", off ? "off" : "required"]);
        return result;
    }

    private const string PeerSecretSetting = "FAAST_PEER_SECRET";

    /// <summary>
    /// The app's peer secret, which its instances share and the controller signs vote queries with: the app's own
    /// FAAST_PEER_SECRET (its local.settings.json), else <see cref="PlatformKeys.PeerSecretOf"/>, derived from the
    /// platform's master key, so that no two apps share one and a restarted platform (same master) still talks to the
    /// instances it left running. The platform's own environment never provides it: one FAAST_PEER_SECRET there
    /// (a Kubernetes manifest's) would be every app's, and any tenant could drain or scale another.
    /// </summary>
    /// <remarks>The instance takes the setting's UTF-8 bytes as the key (src/Runtime PeerSecret), so both sides use those.</remarks>
    public byte[] PeerSecretOf(string app, string directory) => System.Text.Encoding.UTF8.GetBytes(PeerSecretTextOf(app, directory));

    private string PeerSecretTextOf(string app, string directory)
    {
        // The app's settings alone, without this process's environment (AppSettings lets the environment win).
        var settings = AppSettings.Load(directory, new System.Collections.Hashtable());
        if (settings[PeerSecretSetting] is { Length: > 0 } own)
            return own;
        // A random secret per app used to be kept here; the derived one replaces it.
        var legacy = Path.Combine(Options.StateDirectory, "apps", app, "peer-secret");
        if (File.Exists(legacy))
            File.Delete(legacy);
        return Keys.PeerSecretOf(app);
    }
}
