using System.Security.Cryptography;
using FaaST.Cachelet.Policy;
using FaaST.Runtime.App;
using FaaST.Runtime.Bindings;
using FaaST.ScaleController.Deploy;
using FaaST.ScaleController.Frontend;
using FaaST.ScaleController.Providers;

namespace FaaST.ScaleController.Platform;

/// <summary>What every app on the platform shares: the options, the provider, the clock, and how an instance is set up.</summary>
internal sealed class PlatformContext(PlatformOptions options, IInstanceProvider provider, TimeProvider time, ILoggerFactory loggers)
{
    public PlatformOptions Options { get; } = options;

    public IInstanceProvider Provider { get; } = provider;

    public TimeProvider Time { get; } = time;

    public ILoggerFactory Loggers { get; } = loggers;

    /// <summary>The platform-wide instance and worker budget every app's instances take their room from.</summary>
    public PlatformBudget Budget { get; } = new(options.MaxInstances, options.MaxWorkers);

    /// <summary>The instances' records in storage, for a restarted platform to take them over.</summary>
    public InstanceRegistry? Registry { get; set; }

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

    /// <summary>An app's load and unload, and its instances' starts and stops, as they happen (hooks: prewarm records at unload).</summary>
    public event Action<AppLifecycleEvent>? Lifecycle;

    public void Raise(AppLifecycleEvent e) => Lifecycle?.Invoke(e);

    /// <summary>How an instance of <paramref name="deployment"/> is started: its storage, its peer secret, the controller's address.</summary>
    public InstanceSpec SpecFor(Deployment deployment, string directory)
    {
        var app = FunctionApp.Load(directory);
        var environment = new Dictionary<string, string>
        {
            [PeerSecretSetting] = PeerSecretTextOf(deployment.App, directory),
        };
        // An app on development storage gets the platform's Azurite (as `./faast start --instances N` did);
        // an app with a storage account of its own keeps it.
        if (Options.DevelopmentStorage && StorageAccounts.NeedsDevelopmentStorage(app.Settings))
            environment["AzureWebJobsStorage"] = Options.StorageConnectionString;
        if (ControlAddress is { } control)
            environment["FAAST_SCALE_CONTROLLER"] = control.ToString();
        // Instances listen on loopback behind the frontend; when the frontend is reachable beyond loopback the
        // instances must check function keys as a host listening there would.
        if (!System.Net.IPAddress.IsLoopback(System.Net.IPAddress.Parse(Options.ListenAddress)))
            environment["FAAST_ENFORCE_KEYS"] = "1";
        return new InstanceSpec(deployment.App, deployment.Version, directory, environment, Options.InstanceArguments);
    }

    private const string PeerSecretSetting = "FAAST_PEER_SECRET";

    /// <summary>
    /// The app's peer secret, which its instances share and the controller signs vote queries with: the app's
    /// own FAAST_PEER_SECRET, else a random one kept (0600) in the platform's state directory, so that a
    /// restarted platform can still talk to the instances it left running.
    /// </summary>
    /// <remarks>The instance takes the setting's UTF-8 bytes as the key (src/Runtime PeerSecret), so both sides use those.</remarks>
    public byte[] PeerSecretOf(string app, string directory) => System.Text.Encoding.UTF8.GetBytes(PeerSecretTextOf(app, directory));

    private string PeerSecretTextOf(string app, string directory)
    {
        var settings = FunctionApp.Load(directory).Settings;
        if (settings[PeerSecretSetting] is { Length: > 0 } own)
            return own;
        var file = Path.Combine(Options.StateDirectory, "apps", app, "peer-secret");
        lock (this)
        {
            if (File.Exists(file))
                return File.ReadAllText(file).Trim();
            System.IO.Directory.CreateDirectory(Path.GetDirectoryName(file)!);
            var secret = Convert.ToBase64String(RandomNumberGenerator.GetBytes(32));
            var create = new FileStreamOptions { Mode = FileMode.CreateNew, Access = FileAccess.Write };
            if (!OperatingSystem.IsWindows())
                create.UnixCreateMode = UnixFileMode.UserRead | UnixFileMode.UserWrite;
            using (var stream = new FileStream(file, create))
            using (var writer = new StreamWriter(stream))
                writer.Write(secret);
            return secret;
        }
    }
}

/// <summary>What happened to an app on the platform.</summary>
public enum AppLifecycleKind
{
    /// <summary>The app's first instance of a version is ready (a deploy, a cold start, a platform restart).</summary>
    Loaded,
    /// <summary>The keep-alive ran out: every instance is about to drain.</summary>
    Unloading,
    /// <summary>The last instance has stopped.</summary>
    Unloaded,
    InstanceStarted,
    InstanceStopped,
}

/// <summary>One lifecycle event of an app: its kind, the app, the version, the instance (for instance events) and why.</summary>
public sealed record AppLifecycleEvent(AppLifecycleKind Kind, string App, int Version, string? Instance, string Reason, DateTimeOffset At);

