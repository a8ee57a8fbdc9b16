using FaaST.Runtime.Workers;
using FaaST.Cachelet;
using FaaST.Cachelet.Daemon;
using FaaST.Policy;
using FaaST.Hosting;
using FaaST.Hosting.Status;
using FaaST.Membership;
using FaaST.Runtime.Hosting.Components;

namespace FaaST.Runtime.Hosting;

/// <summary>
/// One application instance: the composition root. It resolves the options, registers one component per
/// area (telemetry, storage, peer transport, cache, workers, Kestrel, membership, triggers, HTTP
/// functions, scale votes) in its registry (<see cref="RuntimeComponents"/>), lets every
/// <see cref="ILifecycleParticipant"/> there join the ordered lifecycle (<see cref="ServiceLifecycleStage"/>),
/// and starts it. Components of later issues join through <see cref="RuntimeHostOptions.ConfigureServices"/>.
/// </summary>
public sealed class RuntimeHost : IAsyncDisposable
{
    private readonly HostOptions _options;
    private readonly ServiceProvider _services;
    private readonly ILoggerFactory _loggers;
    private readonly ILogger _logger;
    private readonly HostLifecycle _lifecycle;
    private readonly ServingComponent _serving;
    private readonly StorageComponent _storage;
    private readonly CacheComponent _cache;
    private readonly WorkersComponent _workers;
    private readonly IHostMembership _membership;
    private readonly TriggersComponent _triggers;
    private readonly QueueTriggersComponent _queueTriggers;
    private int _disposed;

    private RuntimeHost(FunctionApp app, HostOptions options, ServiceProvider services, ILoggerFactory loggers, string? readyFile = null, string? instanceId = null)
    {
        App = app;
        _options = options;
        _services = services;
        _loggers = loggers;
        _logger = loggers.CreateLogger("FaaST.Host");
        _lifecycle = services.GetRequiredService<HostLifecycle>();

        // Resolving the participants makes every component, in registration order: each maps its endpoints
        // when it is made (worker channel, peers, functions, scale votes), then the admin endpoints, then /metrics.
        var participants = services.GetServices<ILifecycleParticipant>().ToArray();
        _serving = services.GetRequiredService<ServingComponent>();
        _storage = services.GetRequiredService<StorageComponent>();
        _cache = services.GetRequiredService<CacheComponent>();
        _workers = services.GetRequiredService<WorkersComponent>();
        _membership = services.GetRequiredService<IHostMembership>();
        _triggers = services.GetRequiredService<TriggersComponent>();
        _queueTriggers = services.GetRequiredService<QueueTriggersComponent>();
        var keys = services.GetRequiredService<Http.HttpKeyCheck>();
        _serving.MapEndpoints(web => AdminEndpoints.Map(web, this, keys, loggers.CreateLogger("FaaST.Http")));
        services.GetRequiredService<TelemetryComponent>().MapMetrics();
        _serving.Build(loggers);

        foreach (var participant in participants)
            participant.Participate(_lifecycle);
        _lifecycle.OnState((state, _) =>
        {
            if (state == LifecycleState.Started)
            {
                LogFunctions();
                // The same moment as event 5003 ("Host started"), through a channel the functions cannot write to.
                if (readyFile is not null)
                    WriteReadyFile(readyFile, instanceId);
            }
            return Task.CompletedTask;
        });
    }

    public FunctionApp App { get; }

    /// <summary>The host's lifecycle: its state, and where later components subscribe (before start, through the options).</summary>
    public IHostLifecycle Lifecycle => _lifecycle;

    /// <summary>The app's cache policy (faast.json, or the defaults).</summary>
    public CachePolicy Policy => _options.Cache.Policy;

    /// <summary>The memory cgroup the policy was fitted to, if the host runs under one.</summary>
    public CgroupMemoryLimit? MemoryCgroup => _options.Cache.Cgroup;

    /// <summary>The cachelet, when the policy enables it.</summary>
    public BlobCache? Cache => _cache.Cache;

    /// <summary>Where the app's HTTP functions are served, e.g. http://127.0.0.1:7071.</summary>
    public Uri BaseAddress => _serving.BaseAddress ?? throw new InvalidOperationException("the host has not started serving");

    /// <summary>The storage connection string the app's default account resolves to.</summary>
    public string? StorageConnectionString => _storage.ConnectionString;

    /// <summary>Process ids of the running language workers.</summary>
    public IReadOnlyList<int> WorkerProcessIds => _workers.WorkerProcessIds;

    public int ReadyWorkers => _workers.ReadyWorkers;

    /// <summary>The workers' event loops as the compute vote reads them (empty for workers that do not report).</summary>
    internal IReadOnlyList<Workers.EventLoopReport> WorkerEventLoops => _workers.Pool?.EventLoops() ?? [];

    /// <summary>The app's user, which the workers run as and which owns the segments; null: the host's user.</summary>
    public WorkerIdentity? WorkerIdentity => _options.Workers.Identity;

    /// <summary>Why the workers run as the host's user (when <see cref="WorkerIdentity"/> is null).</summary>
    public string? IsolationReason => _options.Workers.IsolationReason;

    /// <summary>The app's instances in this one's current view (just itself without peers).</summary>
    public IReadOnlyList<Member> Members => _membership.Members;

    /// <summary>This instance's membership id and peer endpoint, when it has peers.</summary>
    public Member? Self => _membership.Self;

    /// <summary>T_Load as the scale controller last sent it with a vote query (for the bandwidth planner); null without peers.</summary>
    public FaaST.Scaling.IInstanceLoadTime? InstanceLoadTime => _services.GetService<FaaST.Scaling.IInstanceLoadTime>();

    /// <summary>Blob-triggered invocations finished since start (tests wait on it).</summary>
    public long BlobTriggerCompletions => _triggers.Completed;

    /// <summary>Queue messages finished by queue triggers since start (run, retried later or poisoned; tests wait on it).</summary>
    public long QueueTriggerCompletions => _queueTriggers.Completed;

    /// <summary>Loads the app and starts everything; throws <see cref="AppConfigException"/> for a bad app.</summary>
    public static async Task<RuntimeHost> StartAsync(RuntimeHostOptions options, CancellationToken ct = default)
    {
        var app = FunctionApp.Load(options.AppDirectory, options.Environment);
        var web = ServingComponent.CreateBuilder(app.Directory);
        var loggers = CreateLoggers(options, web.Configuration);
        ServiceProvider? services = null;
        RuntimeHost host;
        try
        {
            var logger = loggers.CreateLogger("FaaST.Host");
            var resolved = HostOptions.Resolve(options, app, logger);
            if (app.IndexedFrom is not null)
            {
                // Python v2 / Node v4: the functions are what a worker of the app declares (WorkerIndexer), as the
                // app's user; then the options again, for what they derive from the functions (scripts to read).
                app = await WorkerIndexer.IndexAsync(app, WorkersComponent.OptionsFor(app, resolved.Workers), loggers, WorkerIndexer.DefaultTimeout, ct);
                if (app.IndexError is { } indexError)
                    Log.AppWarning(logger, indexError);
                resolved = HostOptions.Resolve(options, app, logger);
            }
            foreach (var f in app.Functions.Where(f => f.Error is not null))
                Log.FunctionDisabled(logger, f.Name, f.Error);
            foreach (var warning in app.Warnings)
                Log.AppWarning(logger, warning);
            services = RuntimeComponents.Build(app, resolved, options, web, loggers);
            host = new RuntimeHost(app, resolved, services, loggers, options.ReadyFile, options.InstanceId);
        }
        catch
        {
            if (services is not null)
                await services.DisposeAsync();
            loggers.Dispose();
            throw;
        }
        try
        {
            await host._lifecycle.StartAsync(ct);
            return host;
        }
        catch
        {
            await host.DisposeAsync();
            throw;
        }
    }

    /// <summary>
    /// The host's loggers, made before the web host so that every component logs from its start and
    /// until its stop: one line per message on the console, plus the options' extra sink; levels as
    /// the web host's configuration says (e.g. Logging__LogLevel__Default in the environment).
    /// </summary>
    private static ILoggerFactory CreateLoggers(RuntimeHostOptions options, IConfiguration configuration) => LoggerFactory.Create(builder =>
    {
        builder.AddConfiguration(configuration.GetSection("Logging"));
        builder.SetMinimumLevel(options.MinimumLogLevel);
        builder.AddFaaSTConsole();
        if (options.LoggerProvider is { } extra)
            builder.AddProvider(extra);
    });

    /// <summary>What /admin/host/status answers.</summary>
    internal HostStatus Status()
    {
        var ready = ReadyWorkers;
        var lifecycle = _lifecycle.State;
        return new HostStatus(
            State: ready > 0 ? HostStatus.Running : HostStatus.Initializing,
            Lifecycle: lifecycle,
            WorkerRuntime: App.WorkerRuntime,
            ReadyWorkers: ready,
            HostProcessId: Environment.ProcessId,
            WorkerProcessIds: WorkerProcessIds,
            Isolation: WorkerIdentity is { } user
                ? new IsolationStatus(user.UserName, user.UserId, user.GroupId, null)
                : new IsolationStatus(IsolationStatus.None, null, null, IsolationReason),
            Instance: Self is { } self ? new InstanceStatus(self.Id, self.PeerAddress, lifecycle) : null,
            Members: Members.Select(m => new InstanceStatus(m.Id, m.PeerAddress)).ToArray(),
            Functions: App.Functions.Select(f =>
            {
                var error = ErrorOf(f);
                var reason = error ?? f.DisabledBy;
                return new FunctionStatus(f.Name, f.Trigger?.Type, reason is not null, error, reason);
            }).ToArray(),
            // A Python v2 / Node v4 app whose worker could not index it serves nothing; this says why.
            IndexError: App.IndexError);
    }

    /// <summary>Why <paramref name="f"/> cannot run: its function.json or script, or the worker's load error; null when it can.</summary>
    private string? ErrorOf(FunctionDefinition f) =>
        f.Error ?? (_workers.Pool?.LoadErrors.TryGetValue(f.Name, out var e) == true ? e : null);

    private void LogFunctions()
    {
        var lines = new List<string>();
        foreach (var f in App.Functions)
        {
            var state = (ErrorOf(f) ?? f.DisabledBy) is { } reason ? $" (disabled: {LogText.Escape(reason)})" : "";
            var t = f.Trigger;
            var detail = t?.Type switch
            {
                BindingMetadata.HttpTrigger => $"[{string.Join(",", t.Methods ?? ["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"])}] {BaseAddress}{(App.Host.RoutePrefix.Length > 0 ? App.Host.RoutePrefix + "/" : "")}{t.Route}",
                BindingMetadata.BlobTrigger => $"blobTrigger: {t.Path}",
                BindingMetadata.QueueTrigger => $"queueTrigger: {t.QueueName}",
                _ => "",
            };
            lines.Add(detail.Length > 0 ? $"  {f.Name}{state}: {detail}" : $"  {f.Name}{state}");
        }
        Log.FunctionsListed(_logger, string.Join("\n", lines));
        Log.HostStarted(_logger, ReadyWorkers, App.WorkerRuntime, BaseAddress);
    }

    private void WriteReadyFile(string path, string? instanceId)
    {
        try
        {
            ReadyFile.Write(path, new ReadyFile(Self?.Id ?? instanceId ?? $"{System.Environment.MachineName}-{System.Environment.ProcessId}",
                BaseAddress, Self?.PeerAddress, System.Environment.ProcessId));
        }
        catch (Exception e) when (e is IOException or UnauthorizedAccessException)
        {
            throw new AppConfigException($"--ready-file {path}: cannot write it: {e.Message}");
        }
    }

    /// <summary>
    /// Stops the lifecycle in reverse stage order (drain: HTTP functions, triggers, membership; then
    /// workers, Kestrel, cache, peer transport, storage, telemetry), then releases the registry (the web
    /// host with it) and the loggers. A second call returns at once.
    /// </summary>
    public async ValueTask DisposeAsync()
    {
        if (Interlocked.Exchange(ref _disposed, 1) == 1)
            return;
        await _lifecycle.StopAsync();
        await _services.DisposeAsync();
        _loggers.Dispose();
    }
}
