using System.Collections.Immutable;
using System.Net;
using FaaST.AppModel.Policy;
using FaaST.Hosting;
using FaaST.ScaleController.Control;
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
/// wired in PlatformHost.Lifecycle.cs).
/// </summary>
internal sealed partial class PlatformHost : IAsyncDisposable, IScaleDecisions, IScaleLoopRegistry
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
    private readonly bool _tracing;
    private ImmutableDictionary<string, AppHost> _apps = ImmutableDictionary<string, AppHost>.Empty.WithComparers(StringComparer.OrdinalIgnoreCase);
    // Deployed apps this platform cannot serve: their own Azurite did not start when the platform loaded them again.
    // Each stays here, its requests answered 503 with the reason, until a deploy of it loads it.
    private ImmutableDictionary<string, UnavailableApp> _unavailable = ImmutableDictionary<string, UnavailableApp>.Empty.WithComparers(StringComparer.OrdinalIgnoreCase);
    private int _disposed;

    private PlatformHost(WebApplication web, PlatformOptions options, IInstanceProvider provider, TimeProvider time, TelemetryExport export)
    {
        _export = export;
        _tracing = export.Traces || options.Tracing is not null;
        _web = web;
        var loggers = web.Services.GetRequiredService<ILoggerFactory>();
        _logger = loggers.CreateLogger("FaaST.Platform");
        _context = new PlatformContext(options, provider, time, loggers);
        _context.Keys = PlatformKeys.LoadOrCreate(options.StateDirectory, options.MasterKeyFile);
        _guard = new AdminGuard(_context.Keys, options, time, _logger);
        _deployLimits = new RateGate(time, TimeSpan.FromSeconds(1));
        _store = new BlobStore(options.StorageConnectionString);
        _context.Registry = new InstanceRegistry(_store, _context.Keys, _logger);
        _deployments = new DeploymentStore(_store, _context.Keys, time: time, logger: loggers.CreateLogger("FaaST.Deploy"));
        _deploy = new DeployService(_deployments, (options.Deploy ?? DeployOptions.Default) with { WorkDirectory = WorkDirectoryOf(options) },
            logger: loggers.CreateLogger("FaaST.Deploy"));
        _router = options.SingleApp is { } single ? AppRouter.SingleApp(single) : AppRouter.MultiApp();
        provider.Exited += (handle, reason) =>
        {
            if (_apps.TryGetValue(handle.App, out var app))
                app.OnInstanceExited(handle, reason);
        };
        _context.Metrics = new PlatformMetrics(web.Services.GetRequiredService<System.Diagnostics.Metrics.IMeterFactory>(), () => _apps.Values);
        _targets = new PrometheusTargets(options.StateDirectory, () => _apps.Values, _context.AppEvents, _logger);
        _lifecycle = new HostLifecycle(new QuietStartFailures(loggers.CreateLogger("FaaST.Platform.Lifecycle")), PlatformLifecycleStage.Serving);
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
    public IReadOnlyDictionary<string, AppHost> Apps => _apps;

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
        PlatformHost? platform = null;
        builder.Services.AddSingleton<IScaleDecisions>(_ => platform!);
        builder.Services.AddSingleton<IScaleLoopRegistry>(_ => platform!);
        builder.Services.AddSingleton<ExternalScalerService>();
        builder.Services.AddSingleton<IAppLifecycle>(_ => platform!.AppLifecycle);
        var export = builder.AddPlatformTelemetry(options);
        services?.Invoke(builder.Services);
        var web = builder.Build();
        provider ??= new LocalProcessProvider(new LocalProcessOptions
        {
            TiedToPlatform = options.DevelopmentStorage,
            RunDirectory = Path.Combine(options.StateDirectory, "run"),
            Output = options.InstanceOutput ?? ((label, line) => Console.WriteLine($"[{label}] {LogText.EscapeOutput(line)}")),
        });
        try
        {
            platform = new PlatformHost(web, options, provider, time ?? TimeProvider.System, export);
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

    private void Map()
    {
        // gRPC needs HTTP/2, which only the control port speaks in cleartext: these answer there (the frontend's
        // port is HTTP/1.1 for them).
        _web.MapGrpcService<ScaleControlService>();
        _web.MapKedaExternalScaler();
        // The admin API: every endpoint checks its caller first (AdminGuard: Host, Origin, the Bearer key).
        _web.MapGet("/admin/platform", StatusEndpointAsync);
        _web.MapPut("/admin/platform/apps/{name}", DeployEndpointAsync);
        _web.MapPost("/admin/platform/apps/{name}", DeployEndpointAsync);
        _web.MapGet("/admin/platform/apps/{name}/deploy-key", DeployKeyEndpointAsync);
        // The platform's own metrics and its instances as scrape targets: the same caller check as the status they mirror.
        _web.MapPrometheusScrapingEndpoint(PlatformTelemetry.MetricsPath, meterProvider: null, configureBranchedPipeline: branch =>
            branch.Use(next => async context =>
            {
                if (!await RefusedAsync(context, deployApp: null))
                    await next(context);
            }), optionsName: null).DisableHttpMetrics();
        _web.MapGet(PlatformTelemetry.TargetsPath, TargetsEndpointAsync);
        // Everything else is an invocation (or an instance's admin API) for one of the apps.
        _web.Use(async (context, next) =>
        {
            if (context.GetEndpoint() is not null)
            {
                await next(context);
                return;
            }
            await ForwardAsync(context);
        });
    }

    private async Task ForwardAsync(HttpContext context)
    {
        if (context.Connection.LocalPort == ControlAddress.Port)
        {
            context.Response.StatusCode = StatusCodes.Status404NotFound;
            return;
        }
        if (!_router.TryRoute(context.Request, out var name, out var pathAndQuery, out var reason))
        {
            // Names no app, instance or port: which apps a platform serves is for its operator (./faast status).
            await WriteErrorAsync(context, StatusCodes.Status404NotFound,
                $"{reason}; an app is served under /APP/... or at APP.localhost (./faast status lists the apps; ./faast deploy APPDIR adds one)");
            return;
        }
        if (!_apps.TryGetValue(name, out var app))
        {
            if (_unavailable.TryGetValue(name, out var unavailable))
            {
                // No Retry-After: it does not come back by waiting, only by a deploy once its storage is usable.
                await WriteErrorAsync(context, StatusCodes.Status503ServiceUnavailable,
                    $"the app \"{name}\" is unavailable: {unavailable.Reason}; it is tried again at the app's next deploy");
                return;
            }
            // `./faast start APP` routes every path to its app before the app's first instance is up.
            await WriteErrorAsync(context, StatusCodes.Status503ServiceUnavailable, $"the app \"{name}\" is not loaded yet");
            return;
        }
        if (_tracing)
            PlatformTelemetry.Propagate(context, name);
        await app.Frontend.ForwardAsync(context, pathAndQuery);
    }

    private static Task WriteErrorAsync(HttpContext context, int status, string error, string? file = null, string? key = null)
    {
        context.Response.StatusCode = status;
        return context.Response.WriteAsJsonAsync(new PlatformError(error, file, key), PlatformJsonContext.Default.PlatformError);
    }

    /// <summary>Refuses the request (401/403, answered and logged) unless <see cref="AdminGuard"/> lets it through.</summary>
    private async Task<bool> RefusedAsync(HttpContext context, string? deployApp)
    {
        if (_guard.Check(context, deployApp) is not { } refusal)
            return false;
        if (refusal.Status == StatusCodes.Status401Unauthorized)
            context.Response.Headers.WWWAuthenticate = AdminGuard.Challenge;
        await WriteErrorAsync(context, refusal.Status, refusal.Error);
        return true;
    }

    private async Task StatusEndpointAsync(HttpContext context)
    {
        if (await RefusedAsync(context, deployApp: null))
            return;
        await context.Response.WriteAsJsonAsync(Status(context), PlatformJsonContext.Default.PlatformStatus);
    }

    /// <summary>GET /admin/platform/targets (admin key): every instance as a Prometheus target (http_sd; the file_sd file's content).</summary>
    private async Task TargetsEndpointAsync(HttpContext context)
    {
        if (await RefusedAsync(context, deployApp: null))
            return;
        context.Response.ContentType = "application/json";
        await context.Response.Body.WriteAsync(_targets.Json(), context.RequestAborted);
    }

    /// <summary>GET /admin/platform/apps/{name}/deploy-key (admin key only): the key an app's owner deploys that app with.</summary>
    private async Task DeployKeyEndpointAsync(HttpContext context, string name)
    {
        if (await RefusedAsync(context, deployApp: null))
            return;
        try
        {
            AppNames.Validate(name);
        }
        catch (ArgumentException e)
        {
            await WriteErrorAsync(context, StatusCodes.Status400BadRequest, e.Message);
            return;
        }
        context.Response.Headers.CacheControl = "no-store";
        await context.Response.WriteAsJsonAsync(new DeployKeyResult(name, _context.Keys.DeployKeyOf(name)), PlatformJsonContext.Default.DeployKeyResult);
    }

    private async Task DeployEndpointAsync(HttpContext context, string name)
    {
        if (await RefusedAsync(context, name))
            return;
        var limit = _deploy.Options.MaxPackageBytes;
        if (context.Request.ContentLength > limit)
        {
            // Refused from the header alone: not one byte of the body is read.
            await DeployLimitedAsync(context, name, StatusCodes.Status413PayloadTooLarge, new PackageTooLargeException(name, limit).Message);
            return;
        }
        // Kestrel stops reading there too (a chunked body has no Content-Length), and does not drain the rest.
        if (context.Features.Get<Microsoft.AspNetCore.Http.Features.IHttpMaxRequestBodySizeFeature>() is { IsReadOnly: false } bodySize)
            bodySize.MaxRequestBodySize = limit;
        try
        {
            var deployment = await DeployPackageAsync(name, context.Request.Body, context.RequestAborted);
            context.Response.StatusCode = deployment.Version == 1 ? StatusCodes.Status201Created : StatusCodes.Status200OK;
            await context.Response.WriteAsJsonAsync(new DeployResult(deployment.App, deployment.Version, deployment.Sha256, deployment.Size, "running"),
                PlatformJsonContext.Default.DeployResult);
        }
        catch (PackageTooLargeException e)
        {
            await DeployLimitedAsync(context, name, StatusCodes.Status413PayloadTooLarge, e.Message);
        }
        catch (Microsoft.AspNetCore.Http.BadHttpRequestException e) when (e.StatusCode == StatusCodes.Status413PayloadTooLarge)
        {
            await DeployLimitedAsync(context, name, StatusCodes.Status413PayloadTooLarge, new PackageTooLargeException(name, limit).Message);
        }
        catch (DeployInProgressException e)
        {
            await DeployLimitedAsync(context, name, StatusCodes.Status409Conflict, e.Message);
        }
        catch (DeployCapacityException e)
        {
            context.Response.Headers.RetryAfter = ((int)Math.Ceiling(e.RetryAfter.TotalSeconds)).ToString(System.Globalization.CultureInfo.InvariantCulture);
            await DeployLimitedAsync(context, name, StatusCodes.Status503ServiceUnavailable, e.Message);
        }
        catch (DeployValidationException e)
        {
            Log.DeployRefused(_logger, name, e.Message);
            await WriteErrorAsync(context, StatusCodes.Status400BadRequest, e.Message, e.File, e.Key);
        }
        catch (Exception e) when (e is DeployRefusedException or ArgumentException)
        {
            Log.DeployRefused(_logger, name, e.Message);
            await WriteErrorAsync(context, StatusCodes.Status400BadRequest, e.Message);
        }
        catch (DeployConflictException e)
        {
            Log.DeployRefused(_logger, name, e.Message);
            await WriteErrorAsync(context, StatusCodes.Status409Conflict, e.Message);
        }
        catch (PlatformBudgetException e)
        {
            Log.DeployRefused(_logger, name, e.Message);
            context.Response.Headers.RetryAfter = "60";
            await WriteErrorAsync(context, StatusCodes.Status503ServiceUnavailable, e.Message);
        }
        catch (InstanceStartException e)
        {
            // The package was fine, but no instance of it started: the deployer's to fix, nothing changed (defect 7).
            Log.DeployRefused(_logger, name, e.Message);
            await WriteErrorAsync(context, StatusCodes.Status422UnprocessableEntity, e.Message);
        }
        catch (AppStorageException e)
        {
            // The package was fine, but the app's own Azurite did not start: the platform's side (its state folder, its
            // Azurite), not the deployer's package; nothing of this version was kept, and an app left unavailable stays so.
            Log.DeployRefused(_logger, name, e.Message);
            ImmutableInterlocked.Update(ref _unavailable, u => u.TryGetValue(name, out var was) ? u.SetItem(name, was with { Reason = e.Message }) : u);
            await WriteErrorAsync(context, StatusCodes.Status503ServiceUnavailable, e.Message);
        }
        catch (Exception e) when (e is OperationCanceledException or IOException && context.RequestAborted.IsCancellationRequested)
        {
            // The deployer went away mid-upload: nothing was published, nobody to answer (the admission is released).
        }
    }

    /// <summary>A deploy refused by a limit (size, one per app, the platform's capacity): answered, logged at most once a second.</summary>
    private Task DeployLimitedAsync(HttpContext context, string app, int status, string error)
    {
        if (_deployLimits.TryPass(out var heldBack))
            Log.DeployLimited(_logger, app, status, heldBack == 0 ? error : $"{error} ({heldBack} more held back since the last line)");
        return WriteErrorAsync(context, status, error);
    }

    /// <summary>
    /// Validates and stores a zipped app, then loads it (first deploy) or rolls its instances to it; it becomes current
    /// only once an instance of it is ready (defect 7). All of it inside the deploy's admission (one deploy of an app at
    /// a time, a bounded number on the platform).
    /// </summary>
    public async Task<Deployment> DeployPackageAsync(string app, Stream zip, CancellationToken ct)
    {
        try
        {
            var staged = await _deploy.StageAsync(app, zip, ct,
                (s, token) => LoadOrRollAsync(s.Deployment, initialInstances: null, token, staged: s));
            _context.Metrics?.Deploy(app, "deployed");
            return staged.Deployment;
        }
        catch (Exception e)
        {
            _context.Metrics?.Deploy(app, DeployOutcome(e));
            throw;
        }
    }

    /// <summary>
    /// `./faast start APPDIR`: publishes the folder as the app's next version and loads it. Functions the runtime
    /// would disable are not a refusal here, as before the platform (they are logged and answer with their
    /// reason); `./faast deploy` refuses them.
    /// </summary>
    public async Task<Deployment> DeployDirectoryAsync(string directory, int? initialInstances, CancellationToken ct)
    {
        // The runtime's own checks of app-level files (host.json, local.settings.json, faast.json) refuse as before.
        var app = FunctionApp.Load(directory);
        CachePolicyFile.Load(directory);
        using var zip = new MemoryStream();
        Packager.Zip(directory, zip);
        zip.Position = 0;
        try
        {
            var staged = await _deployments.StageAsync(app.Name, zip, DeployService.SettingsOf(directory), $"./faast start {directory}", ct);
            await LoadOrRollAsync(staged.Deployment, initialInstances, ct, staged: staged);
            _context.Metrics?.Deploy(app.Name, "deployed");
            return staged.Deployment;
        }
        catch (Exception e)
        {
            _context.Metrics?.Deploy(app.Name, DeployOutcome(e));
            throw;
        }
    }

    /// <summary>The outcome tag of a deploy that threw: failed on the platform's side (no instance, storage), cancelled, or refused.</summary>
    private static string DeployOutcome(Exception e) => e switch
    {
        InstanceStartException or AppStorageException or PlatformBudgetException or StorageUnavailableException or BlobStorageException
            or DeploymentStoreException or IOException => "failed",
        OperationCanceledException => "cancelled",
        _ => "refused",
    };

    /// <summary>
    /// Loads <paramref name="deployment"/> (first instances) or rolls the running app to it. A <paramref name="staged"/>
    /// deployment (a deploy) is made current only once one of its instances is ready; when none starts, its instances
    /// are stopped, its package is deleted, and the running version (if any) was never touched.
    /// </summary>
    private async Task LoadOrRollAsync(Deployment deployment, int? initialInstances, CancellationToken ct, bool adopt = false,
        StagedDeployment? staged = null)
    {
        await _deploying.WaitAsync(ct);
        try
        {
            Func<CancellationToken, Task>? makeCurrent = staged is null ? null : async token =>
            {
                await _deployments.MakeCurrentAsync(staged, token);
                Log.Deployed(_logger, deployment.App, deployment.Version, deployment.Size, deployment.Sha256);
            };
            try
            {
                var directory = await _deployments.ExtractAsync(deployment, Options.StateDirectory, ct);
                await _context.AppStorage.StartAsync(deployment.App, directory, ct);
                var policy = CachePolicyFile.Load(directory).Scale;
                if (_apps.TryGetValue(deployment.App, out var running))
                {
                    await running.RedeployAsync(deployment, directory, policy, makeCurrent ?? (_ => Task.CompletedTask), ct);
                }
                else
                {
                    var app = new AppHost(_context, deployment, directory, policy, _context.Loggers.CreateLogger("FaaST.Platform"));
                    ImmutableInterlocked.Update(ref _apps, a => a.SetItem(deployment.App, app));
                    _router.AddApp(deployment.App);
                    try
                    {
                        if (adopt)
                            await app.AdoptAsync(await _context.Registry!.ListAsync(deployment.App, ct), ct);
                        // Instances taken over count: a restarted platform keeps as many as were running.
                        await app.StartAsync(Math.Max(app.CurrentInstances,
                            Math.Clamp(initialInstances ?? Options.InitialInstances ?? policy.MinInstances, 1, policy.MaxInstances)), makeCurrent, ct);
                    }
                    catch when (staged is not null)
                    {
                        // A first deploy that did not start leaves no app behind (nothing of it is current).
                        ImmutableInterlocked.Update(ref _apps, a => a.Remove(deployment.App));
                        if (Options.SingleApp is null && !_unavailable.ContainsKey(deployment.App)) // still answered 503, with why
                            _router.RemoveApp(deployment.App);
                        await app.DisposeAsync();
                        throw;
                    }
                }
            }
            catch (Exception e) when (staged is not null && e is not DeployConflictException)
            {
                await _deployments.DiscardAsync(staged);
                throw;
            }
            // Served (and any older instances drained): only this version and the previous one stay extracted.
            ImmutableInterlocked.TryRemove(ref _unavailable, deployment.App, out _);
            _deployments.Prune(deployment.App, Options.StateDirectory, deployment.Version);
            Changed?.Invoke(deployment.App);
        }
        finally
        {
            _deploying.Release();
        }
    }

    /// <summary>A restarted platform: every app in faast-deployments is loaded again at its current version.</summary>
    private async Task LoadDeployedAppsAsync(CancellationToken ct)
    {
        foreach (var deployment in await _deployments.ListAppsAsync(ct))
        {
            if (Options.SingleApp is { } single && !deployment.App.Equals(single, StringComparison.OrdinalIgnoreCase))
                continue;
            if (Options.SingleApp is not null)
                continue; // `./faast start` deploys the folder it was given right after; no need to start the old version first
            try
            {
                await LoadOrRollAsync(deployment, initialInstances: null, ct, adopt: true);
                Log.Recovered(_logger, deployment.App, deployment.Version, deployment.Deployed);
            }
            catch (AppStorageException e)
            {
                // One app's storage must not stop the platform (an Azurite that exited here used to end the process), nor
                // look like an app never deployed (an unusable data folder used to give 404): it is routed, and answered
                // 503 with why, until its next deploy starts its Azurite again.
                Log.AppStorageFailed(_logger, deployment.App, deployment.Version, e.DataDirectory ?? "memory", e.Reason);
                ImmutableInterlocked.Update(ref _unavailable, u => u.SetItem(deployment.App, new UnavailableApp(deployment.App, deployment.Version, e.Message)));
                _router.AddApp(deployment.App);
            }
            catch (Exception e) when (e is DeployRefusedException or PolicyFileException or AppConfigException or InstanceStartException or PlatformBudgetException or IOException or InvalidDataException or DeploymentStoreException)
            {
                Log.RecoveryFailed(_logger, deployment.App, deployment.Version, e.Message);
            }
        }
    }

    private PlatformStatus Status(HttpContext context) => new(
        Address,
        ControlAddress,
        Options.SingleApp is { } single ? $"single app: every path goes to {single}" : "path /APP/... (prefix stripped) or host APP.localhost",
        _apps.Values.OrderBy(a => a.App, StringComparer.Ordinal).Select(a =>
        {
            var loop = a.Loop.Snapshot();
            var outstanding = a.Frontend.Instances.ToDictionary(i => i.Id, i => i.Outstanding);
            var stats = a.LastStats;
            return new AppStatus(
                a.App, a.Deployment.Version, a.Deployment.Sha256, a.Deployment.Deployed, a.Unloaded, a.Desired, a.LoadSeconds,
                a.Instances.Select(i => new InstanceStatusView(i.Handle.Id, $"v{i.Handle.Version}", i.State.ToString().ToLowerInvariant(),
                    i.Handle.BaseAddress, i.Handle.PeerAddress, i.Handle.ProcessId, outstanding.GetValueOrDefault(i.Handle.Id), i.Handle.Started)).ToArray(),
                new FrontendView(stats.InFlight, stats.Queued, stats.Completed, stats.Failed,
                    a.Frontend.LastRequest.UtcTicks == 0 ? null : a.Frontend.LastRequest),
                loop.LastVotes.SelectMany(v => v.Answered
                    ? v.Votes.Select(p => new VoteView(v.InstanceId, p.Policy, p.Delta, p.Reason, v.At))
                    : [new VoteView(v.InstanceId, "none", 0, v.Error ?? "no answer", v.At)]).ToArray(),
                loop.Decisions.Select(d => new DecisionView(d.At, d.Kind.ToString().ToLowerInvariant(), d.Target - d.Delta, d.Target, d.Reason)).ToArray(),
                new ScaleView(a.Policy.MinInstances, a.Policy.MaxInstances, a.Policy.Band.Low, a.Policy.Band.High,
                    a.Policy.Interval.ToString("c"), a.Policy.KeepAlive.ToString("c")));
        }).ToArray(),
        _unavailable.IsEmpty ? null : _unavailable.Values.OrderBy(u => u.App, StringComparer.Ordinal)
            .Select(u => new UnavailableAppView(u.App, u.Version, u.Reason)).ToArray());

    // --- IScaleDecisions (KEDA's view) and IScaleLoopRegistry (unrequested votes) ---

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

    public ScaleLoop? Find(string app) => _apps.TryGetValue(app, out var host) ? host.Loop : null;

    /// <summary>The app's own verifier; for an app not served here, one under the secret such an app would have, so that
    /// an unsigned call is refused the same way whether the app exists or not.</summary>
    public Peers.PeerAuth? RequestCredentialsOf(string app) =>
        _apps.TryGetValue(app, out var host) ? host.Loop.RequestCredentials
            : new Peers.PeerAuth(System.Text.Encoding.UTF8.GetBytes(_context.Keys.PeerSecretOf(app)), app);
}

/// <summary>A deployed app that is not served: why (the message of what failed, naming its storage).</summary>
internal sealed record UnavailableApp(string App, int Version, string Reason);
