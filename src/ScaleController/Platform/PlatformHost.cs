using System.Collections.Immutable;
using System.Net;
using FaaST.Hosting;
using FaaST.ScaleController.Deploy;
using FaaST.ScaleController.Frontend;
using FaaST.ScaleController.Keda;
using FaaST.ScaleController.Providers;
using FaaST.ScaleController.Telemetry;
using FaaST.Storage;
using Microsoft.AspNetCore.Server.Kestrel.Core;

namespace FaaST.ScaleController.Platform;

/// <summary>
/// The platform process (Faa$T Fig. 5): the frontend on the apps' HTTP port, deploy, the scale controller and
/// the instance provider, plus the control port (ScaleControl for instances' unrequested votes, KEDA's
/// external scaler). Its state is in storage (faast-deployments): a restarted platform loads every deployed
/// app again. Its parts start and stop as components of an ordered lifecycle (<see cref="PlatformLifecycleStage"/>,
/// wired in PlatformHost.Lifecycle.cs); its HTTP surface is PlatformHost.Http.cs, deploying PlatformHost.Deploy.cs.
/// </summary>
internal sealed partial class PlatformHost : IAsyncDisposable, IScaleDecisions
{
    private readonly WebApplication _web;
    private readonly PlatformContext _context;
    private readonly BlobStore _store;
    private readonly DeploymentStore _deployments;
    private readonly DeployService _deploy;
    private readonly AppRouter _router;
    private readonly ILogger _logger;
    private readonly AdminGuard _guard;
    private readonly RateGate _deployLimits;
    private readonly SemaphoreSlim _deploying = new(1, 1);
    private readonly HostLifecycle _lifecycle;
    private readonly TelemetryExport _export;
    private readonly PrometheusTargets _targets;
    private readonly Prewarm.LoadScheduleStore _loadSchedules;
    private readonly bool _tracing;
    private readonly DeployedApps _apps;
    // Deployed apps this platform cannot serve: their own Azurite did not start when the platform loaded them again.
    // Each stays here, its requests answered 503 with the reason, until a deploy of it loads it.
    private ImmutableDictionary<string, UnavailableApp> _unavailable = ImmutableDictionary<string, UnavailableApp>.Empty.WithComparers(StringComparer.OrdinalIgnoreCase);
    private int _disposed;

    /// <summary>Takes the platform's parts from its registry (<see cref="PlatformServices.AddPlatform"/>); a part that
    /// cannot be made (keys in the state directory) throws here, before anything started.</summary>
    private PlatformHost(WebApplication web)
    {
        var services = web.Services;
        _web = web;
        _logger = services.GetRequiredService<ILoggerFactory>().CreateLogger("FaaST.Platform");
        _context = services.GetRequiredService<PlatformContext>();
        _export = services.GetRequiredService<TelemetryExport>();
        _tracing = _export.Traces || _context.Options.Tracing is not null;
        _apps = services.GetRequiredService<DeployedApps>();
        _guard = services.GetRequiredService<AdminGuard>();
        _deployLimits = services.GetRequiredKeyedService<RateGate>(PlatformServices.DeployLimits);
        _store = services.GetRequiredService<BlobStore>();
        _deployments = services.GetRequiredService<DeploymentStore>();
        _deploy = services.GetRequiredService<DeployService>();
        _router = services.GetRequiredService<AppRouter>();
        _targets = services.GetRequiredService<PrometheusTargets>();
        _loadSchedules = services.GetRequiredService<Prewarm.LoadScheduleStore>();
        _lifecycle = services.GetRequiredService<HostLifecycle>();
        _context.Provider.Exited += (handle, reason) =>
        {
            if (_apps.TryGetValue(handle.App, out var app))
                app.OnInstanceExited(handle, reason);
        };
        Participate(_lifecycle);
    }

    public Uri Address { get; private set; } = null!;

    public Uri ControlAddress { get; private set; } = null!;

    public PlatformOptions Options => _context.Options;

    /// <summary>The platform's keys (the admin key, apps' deploy keys and peer secrets).</summary>
    internal PlatformKeys Keys => _context.Keys;

    /// <summary>The peer secret a deployed app's instances and its scale calls use (tests sign with it).</summary>
    internal byte[] PeerSecretOf(string app) => _context.PeerSecretOf(app, _apps[app].Directory);

    /// <summary>Where deploys unpack and check uploads: STATE/work (0700), emptied at every start.</summary>
    internal static string WorkDirectoryOf(PlatformOptions options) => Path.Combine(options.StateDirectory, "work");

    /// <summary>The deployed apps by name.</summary>
    public IReadOnlyDictionary<string, AppHost> Apps => _apps.Current;

    public event Action<string>? Changed;

    /// <summary>Apps' load and unload and their instances' starts and stops (the hook later components join, e.g. prewarm at unload).</summary>
    public IAppLifecycle AppLifecycle => _context.AppEvents;

    /// <summary>The platform's own lifecycle: its state, and its stages (<see cref="PlatformLifecycleStage"/>).</summary>
    public IHostLifecycle Lifecycle => _lifecycle;

    /// <summary>
    /// Starts the platform's lifecycle: binds the frontend and the control port, loads every app deployed in storage, and
    /// serves. A start that fails stops what started (ports released, credential withdrawn) and throws the failure unchanged.
    /// </summary>
    /// <param name="services">Registers more components: each <see cref="ILifecycleParticipant"/> registered joins the
    /// platform's lifecycle (<see cref="PlatformLifecycleStage"/>), and may have <see cref="IAppLifecycle"/> injected.</param>
    /// <exception cref="ArgumentException">An option is unusable (a control port beyond loopback without TLS, a TLS file
    /// that cannot be read, a non-positive AppLifecycleTimeout); the message names it.</exception>
    public static async Task<PlatformHost> StartAsync(PlatformOptions options, IInstanceProvider? provider = null,
        TimeProvider? time = null, Action<ILoggingBuilder>? logging = null, CancellationToken ct = default,
        Action<IServiceCollection>? services = null)
    {
        var tls = ControlTls.Load(options);
        if (options.AppLifecycleTimeout <= TimeSpan.Zero)
            throw new ArgumentException($"PlatformOptions.AppLifecycleTimeout is {options.AppLifecycleTimeout}; it must be positive (default 5 s)", nameof(options));
        var builder = WebApplication.CreateSlimBuilder();
        builder.Logging.ClearProviders();
        builder.Logging.AddFaaSTConsole();
        builder.Logging.AddFilter("Grpc", LogLevel.Warning);
        logging?.Invoke(builder.Logging);
        builder.WebHost.ConfigureKestrel(k =>
        {
            k.Limits.MaxRequestBodySize = null; // bodies stream through to the instance, which applies its own limit
            k.AddServerHeader = false;
            // HTTP/1.1: cleartext HTTP/2 would need a port of its own (prior knowledge), and clients of functions speak 1.1.
            k.Listen(IPAddress.Parse(options.ListenAddress), options.Port, l => l.Protocols = HttpProtocols.Http1);
            k.Listen(IPAddress.Parse(options.ControlListenAddress), options.ControlPort, l =>
            {
                l.Protocols = HttpProtocols.Http2;
                tls?.Configure(l);
            });
        });
        builder.Services.AddGrpc();
        builder.Services.AddSingleton((options.Keda ?? Keda.KedaScalerOptions.Default) with
        {
            RequireClientCertificate = (options.Keda?.RequireClientCertificate ?? false) || tls?.ClientCa is not null,
        });
        var export = builder.AddPlatformTelemetry(options);
        builder.Services.AddPlatform(options, export, provider, time);
        // KEDA's view is the host itself: it relays the apps' changes only from its KEDA stage on (PlatformHost.Lifecycle.cs).
        // The scaler is resolved at KEDA's first call, over the control port, which is bound after the host exists.
        PlatformHost? platform = null;
        builder.Services.AddSingleton<IScaleDecisions>(_ => platform ?? throw new InvalidOperationException("KEDA's scaler was resolved before the platform was built"));
        builder.Services.AddSingleton<ExternalScalerService>();
        services?.Invoke(builder.Services);
        var web = builder.Build();
        try
        {
            platform = new PlatformHost(web);
        }
        catch
        {
            await web.DisposeAsync();
            throw;
        }
        platform.Map();
        try
        {
            foreach (var participant in web.Services.GetServices<ILifecycleParticipant>())
                participant.Participate(platform._lifecycle);
            await platform._lifecycle.StartAsync(ct);
        }
        catch
        {
            // A stage failed (its storage, a taken port) or the start was cancelled: the lifecycle has stopped what had
            // started (no port bound, no key published for a platform that is not there); this releases the rest.
            await platform.DisposeAsync();
            throw;
        }
        return platform;
    }

    // --- IScaleDecisions (KEDA's view; the instances' unrequested votes find their loop in DeployedApps) ---

    public bool TryGetApp(string app, out AppScaleState state)
    {
        if (_apps.TryGetValue(app, out var host))
        {
            var last = host.Loop.Snapshot().Decisions.LastOrDefault();
            state = new AppScaleState(host.Desired, last?.Reason ?? "deployed");
            return true;
        }
        state = default;
        return false;
    }
}

/// <summary>A deployed app that is not served: why (the message of what failed, naming its storage).</summary>
internal sealed record UnavailableApp(string App, int Version, string Reason);
