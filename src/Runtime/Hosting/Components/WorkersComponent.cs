using FaaST.Hosting;
using FaaST.Runtime.Bindings;
using FaaST.Runtime.Invocation;
using FaaST.Runtime.Telemetry;
using FaaST.Runtime.Workers;
using Microsoft.Extensions.Options;

namespace FaaST.Runtime.Hosting.Components;

/// <summary>
/// The language workers, in two stages: at <see cref="ServiceLifecycleStage.Invocation"/> the worker pool
/// and the function invoker are built (the endpoints need them; no process yet), at
/// <see cref="ServiceLifecycleStage.Workers"/> the processes start, once Kestrel listens on the port they
/// dial. Workers stop after the host stopped taking work (draining) and before Kestrel, so their
/// streams end and Kestrel has nothing long-lived left.
/// </summary>
internal sealed class WorkersComponent : ILifecycleParticipant
{
    private readonly FunctionApp _app;
    private readonly WorkerHostOptions _options;
    private readonly StorageComponent _storage;
    private readonly CacheComponent _cache;
    private readonly ServingComponent _serving;
    private readonly IWorkerScheduler _scheduler;
    private readonly ILoggerFactory _loggers;
    private readonly ILogger _logger;
    private WorkerPool? _pool;
    private WorkerSpecialization? _specialization;
    private WorkerChannelService? _channel;
    private FunctionInvoker? _invoker;
    private int _stopped;

    /// <param name="scheduler">Picks each invocation's worker: the registry's (<see cref="FewestInFlightScheduler"/> unless a component registered another).</param>
    public WorkersComponent(FunctionApp app, IOptions<WorkerHostOptions> options, StorageComponent storage, CacheComponent cache,
        ServingComponent serving, IWorkerScheduler scheduler, ILoggerFactory loggers)
    {
        _app = app;
        _options = options.Value;
        _scheduler = scheduler;
        _storage = storage;
        _cache = cache;
        _serving = serving;
        _loggers = loggers;
        _logger = loggers.CreateLogger("FaaST.Host");
        // The channel's gRPC service is registered before the web host is built; the pool attaches later.
        serving.ConfigureServices(builder => _channel = builder.Services.AddWorkerChannel(WorkerOptions.DefaultMaxMessageSize));
        serving.MapEndpoints(web => web.MapWorkerChannel());
    }

    /// <summary>The pool, once the invocation stage started.</summary>
    public WorkerPool? Pool => _pool;

    /// <summary>Runs functions on the workers, once the invocation stage started.</summary>
    public FunctionInvoker Invoker => _invoker ?? throw new InvalidOperationException("the invocation stage has not started");

    public IReadOnlyList<int> WorkerProcessIds => _pool?.WorkerProcessIds ?? [];

    public int ReadyWorkers => _pool?.ReadyWorkers ?? 0;

    public void Participate(IHostLifecycle lifecycle)
    {
        lifecycle.Subscribe("WorkerPool", ServiceLifecycleStage.Invocation, new LifecycleObserver(Build, _ => StopPoolAsync()));
        lifecycle.Subscribe("WorkerProcesses", ServiceLifecycleStage.Workers, new LifecycleObserver(StartProcessesAsync, _ => StopPoolAsync()));
    }

    /// <summary>
    /// The pool's processes are the runtime's (they could start before the app is known, on standby);
    /// the app reaches them as a specialisation: its environment, directory, capabilities and functions.
    /// </summary>
    private Task Build(CancellationToken ct)
    {
        var workerOptions = OptionsFor(_app, _options);
        var bindings = _cache.Bindings;
        _specialization = new WorkerSpecialization
        {
            App = _app,
            Capabilities = _cache.WorkerCapabilities,
            // Every setting on development storage (AzureWebJobsStorage and named connections), resolved to the app's Azurite.
            ExtraEnvironment = _storage.DevelopmentSettings,
            Identity = _options.Identity,
            SharedMemoryReader = bindings as ISharedMemoryReader,
        };
        var metrics = _serving.Services.GetRequiredService<HostMetrics>();
        var pool = _pool = new WorkerPool(workerOptions, _loggers, _scheduler) { Metrics = metrics };
        var channel = _channel ?? throw new InvalidOperationException("the web host was not built (it registers the worker channel)");
        channel.Attach(pool, WorkerOptions.DefaultMaxMessageSize);
        _cache.AttachWorkers(() => pool.WorkerProcessIds, pool.ReleaseSegment);
        _invoker = new FunctionInvoker(_app, pool, bindings, metrics, _loggers.CreateLogger("FaaST.Invoker"));
        return Task.CompletedTask;
    }

    /// <summary>The pool's options for <paramref name="app"/> (also the indexing worker's, <see cref="WorkerIndexer"/>).</summary>
    public static WorkerOptions OptionsFor(FunctionApp app, WorkerHostOptions options)
    {
        var workerOptions = new WorkerOptions
        {
            Runtime = app.WorkerRuntime,
            ProcessCount = options.ProcessCount,
            WorkersDirectory = options.WorkersDirectory,
            Identity = options.Identity,
        };
        return options.RestartDelay is { } restart ? workerOptions with { RestartDelay = restart } : workerOptions;
    }

    private async Task StartProcessesAsync(CancellationToken ct)
    {
        if (_pool is not { } pool || _specialization is not { } specialization)
            throw new InvalidOperationException("the invocation stage has not started (it builds the pool)");
        pool.GrpcPort = _serving.WorkerChannelPort;
        // The app is known: specialised before they start, the workers start with the app's environment.
        var specialised = pool.SpecializeAsync(specialization, ct);
        await pool.StartAsync(ct);
        if (!await specialised)
            Log.WorkersNotAllUp(_logger, _app.WorkerRuntime);
    }

    /// <summary>
    /// Each worker gets WorkerTerminate and a grace period; at the workers stage, or at the invocation
    /// stage if the processes never started (a later stage failed to start).
    /// </summary>
    private async Task StopPoolAsync()
    {
        if (_pool is not null && Interlocked.Exchange(ref _stopped, 1) == 0)
            await _pool.DisposeAsync();
    }
}
