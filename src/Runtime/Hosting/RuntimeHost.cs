using System.Globalization;
using System.Net;
using FaaST.Protos.Worker;
using FaaST.Cachelet;
using FaaST.Cachelet.Daemon;
using FaaST.Cachelet.Peers;
using FaaST.Peers;
using FaaST.Membership;
using FaaST.Cachelet.Policy;
using FaaST.Rpc;
using FaaST.Runtime.App;
using FaaST.Runtime.Bindings;
using FaaST.Runtime.Http;
using FaaST.Runtime.Invocation;
using FaaST.Runtime.Triggers;
using FaaST.Runtime.Workers;
using FaaST.Storage;
using Microsoft.AspNetCore.Server.Kestrel.Core;
using OpenTelemetry.Metrics;
using OpenTelemetry.Trace;

namespace FaaST.Runtime.Hosting;

/// <summary>
/// One application instance: Kestrel serving the app's HTTP functions and the workers' gRPC
/// channel, the language workers, blob triggers, and (when the app has no storage configured)
/// the Azurite it started.
/// </summary>
public sealed class RuntimeHost : IAsyncDisposable
{
    private WebApplication? _web;
    private AzuriteProcess? _azurite;
    private StorageAccounts? _accounts;
    private WorkerPool? _workers;
    private BlobTriggerListener? _triggers;
    private ILogger _logger = Microsoft.Extensions.Logging.Abstractions.NullLogger.Instance;

    private BlobCache? _cache;
    private MembershipService? _membership;
    private readonly CancellationTokenSource _stopping = new();
    private PeerClient? _peerClient;
    private MemoryDaemon? _memoryDaemon;
    private IDisposable? _meterProvider;
    private IDisposable? _tracerProvider;

    private RuntimeHost(FunctionApp app, CachePolicy policy)
    {
        App = app;
        Policy = policy;
    }

    public FunctionApp App { get; }

    /// <summary>The app's cache policy (faast.json, or the defaults).</summary>
    public CachePolicy Policy { get; }

    /// <summary>The memory cgroup limit the policy was fitted to, if the host runs under one.</summary>
    public CgroupMemoryLimit? MemoryCgroup { get; private init; }

    private string? _policyWarning;

    /// <summary>The cachelet, when the policy enables it.</summary>
    public BlobCache? Cache => _cache;

    /// <summary>Where the app's HTTP functions are served, e.g. http://127.0.0.1:7071.</summary>
    public Uri BaseAddress { get; private set; } = null!;

    /// <summary>The storage connection string the app's default account resolves to.</summary>
    public string? StorageConnectionString => _accounts?.ConnectionString("AzureWebJobsStorage");

    /// <summary>Process ids of the running language workers.</summary>
    public IReadOnlyList<int> WorkerProcessIds => _workers?.WorkerProcessIds ?? [];

    public int ReadyWorkers => _workers?.ReadyWorkers ?? 0;

    /// <summary>The app's user, which the workers run as and which owns the segments; null: the host's user.</summary>
    public WorkerIdentity? WorkerIdentity { get; private set; }

    /// <summary>Why the workers run as the host's user (when <see cref="WorkerIdentity"/> is null).</summary>
    public string? IsolationReason { get; private set; }

    /// <summary>The app's instances in this one's current view (just itself without peers).</summary>
    public IReadOnlyList<Member> Members => _membership?.Members ?? [];

    /// <summary>This instance's membership id and peer endpoint, when it has peers.</summary>
    public Member? Self => _membership?.Self;

    /// <summary>Blob-triggered invocations finished since start (tests wait on it).</summary>
    public long BlobTriggerCompletions => _triggers?.Completed ?? 0;

    /// <summary>Loads the app and starts everything; throws <see cref="AppConfigException"/> for a bad app.</summary>
    public static async Task<RuntimeHost> StartAsync(RuntimeHostOptions options, CancellationToken ct = default)
    {
        var app = FunctionApp.Load(options.AppDirectory, options.Environment);
        CachePolicy policy;
        var cgroup = CgroupMemoryLimit.Find();
        string? limitWarning;
        try
        {
            policy = CachePolicyFile.Load(app.Directory);
            if (options.CacheEnabled is { } enabled)
                policy = policy with { Enabled = enabled };
            policy = policy.WithCgroupLimit(cgroup, Path.Combine(app.Directory, CachePolicyFile.FileName), out limitWarning);
        }
        catch (PolicyFileException e)
        {
            throw new AppConfigException(e.Message);
        }
        var host = new RuntimeHost(app, policy) { MemoryCgroup = cgroup, _policyWarning = limitWarning };
        try
        {
            await host.StartCoreAsync(options, ct);
            return host;
        }
        catch
        {
            await host.DisposeAsync();
            throw;
        }
    }

    private async Task StartCoreAsync(RuntimeHostOptions options, CancellationToken ct)
    {
        var home = RuntimeHostOptions.FindHome(options.HomeDirectory);
        var builder = WebApplication.CreateSlimBuilder(new WebApplicationOptions { ContentRootPath = App.Directory });
        builder.Logging.ClearProviders();
        builder.Logging.SetMinimumLevel(options.MinimumLogLevel);
        builder.Logging.AddFilter("Microsoft", LogLevel.Warning);
        builder.Logging.AddSimpleConsole(c =>
        {
            c.SingleLine = true;
            c.TimestampFormat = "HH:mm:ss.fff ";
        });
        if (options.LoggerProvider is { } extra)
            builder.Logging.AddProvider(extra);

        var httpPort = options.HttpPort ?? App.Settings.LocalHttpPort ?? 7071;
        ListenOptions? httpListen = null, grpcListen = null, peerListen = null;
        var peers = Policy.Enabled && options.Peers;
        var peerAddress = options.PeerListenAddress ?? options.ListenAddress;
        var bulk = new PeerBulkListener(); // large peer Gets, on the peer port next to HTTP/2
        builder.WebHost.ConfigureKestrel(k =>
        {
            k.AddServerHeader = false;
            k.Limits.MaxRequestBodySize = null; // the HTTP trigger enforces FUNCTIONS_REQUEST_BODY_SIZE_LIMIT itself
            k.Limits.Http2.MaxStreamsPerConnection = 1000;
            k.Limits.Http2.InitialConnectionWindowSize = 16 * 1024 * 1024;
            k.Limits.Http2.InitialStreamWindowSize = 16 * 1024 * 1024;
            k.Limits.Http2.MaxFrameSize = 1024 * 1024;
            k.Listen(IPAddress.Parse(options.ListenAddress), httpPort, l =>
            {
                l.Protocols = HttpProtocols.Http1;
                httpListen = l;
            });
            k.Listen(IPAddress.Loopback, 0, l =>
            {
                l.Protocols = HttpProtocols.Http2;
                grpcListen = l;
            });
            if (peers)
                k.Listen(IPAddress.Parse(peerAddress), options.PeerPort, l =>
                {
                    l.Protocols = HttpProtocols.Http2;
                    bulk.Attach(l);
                    peerListen = l;
                });
        });
        // Azure's route constraints include regex, which the slim builder leaves out.
        builder.Services.Configure<RouteOptions>(r => r.SetParameterPolicy<Microsoft.AspNetCore.Routing.Constraints.RegexInlineRouteConstraint>("regex"));
        if (peers)
            builder.Services.AddPeerServices();
        var web = builder.Build();
        _web = web;
        var loggers = web.Services.GetRequiredService<ILoggerFactory>();
        _logger = loggers.CreateLogger("FaaST.Host");
        foreach (var f in App.Functions.Where(f => f.Error is not null))
            _logger.LogError("Function {Function} is disabled: {Error}", f.Name, f.Error);
        foreach (var warning in App.Warnings)
            _logger.LogWarning("{Warning}", warning);

        ChooseWorkerIdentity(options, home);
        string? devStorage = null;
        var startsAzurite = StorageAccounts.NeedsDevelopmentStorage(App.Settings);
        if (peers)
            PeerSecret.CheckExposure(App, startsAzurite || UsesPublicKey(App.Settings["AzureWebJobsStorage"]), options.ListenAddress, peerAddress);
        if (startsAzurite)
        {
            _logger.LogInformation("No storage connection configured: starting Azurite (blob service, loopback)");
            // An account of the app's own, so its workers hold no key that opens another app's Azurite;
            // kept beside persisted data, since that data is filed under the account's name.
            var account = options.AzuriteDataDirectory is null ? AzuriteAccount.Generate()
                : AzuriteAccount.LoadOrCreate(Path.Combine(App.Directory, ".faast", "azurite-account"));
            _azurite = await AzuriteProcess.StartAsync(home, ct: ct, dataDirectory: options.AzuriteDataDirectory, account: account);
            devStorage = _azurite.ConnectionString;
            _logger.LogInformation("Azurite is listening at {Endpoint}", _azurite.BlobEndpoint);
        }
        StartTelemetryExport();
        _accounts = new StorageAccounts(App.Settings, devStorage, options.StorageOptions);
        IBlobBindingProvider blobs = new StorageBlobBindingProvider(_accounts);
        var capabilities = new Dictionary<string, string>();
        if (Policy.Enabled)
        {
            _cache = new BlobCache(App.Name, Policy, loggers.CreateLogger("FaaST.Cachelet"), owner: WorkerIdentity?.Owner);
            var caching = new CachingBlobBindingProvider(_accounts, _cache);
            blobs = caching;
            capabilities[WorkerCapabilities.SharedMemory] = "1";
            capabilities[WorkerCapabilities.SharedMemoryDirectory] = _cache.Directory;
            capabilities[WorkerCapabilities.SharedMemoryMinBytes] = Policy.InlineThreshold.ToString(CultureInfo.InvariantCulture);
            capabilities[WorkerCapabilities.SharedMemoryRelease] = "1";
            if (_policyWarning is not null)
                _logger.LogWarning("{File}: {Warning}", Path.Combine(App.Directory, CachePolicyFile.FileName), _policyWarning);
            _logger.LogInformation("Cachelet on: {Consistency}, up to {Bytes} bytes in {Directory}; memory limit {Limit} bytes ({Source})",
                Policy.Consistency, Policy.MaxCachedBytes, _cache.Directory, Policy.MemoryLimit,
                Policy.MemoryLimitSource == MemoryLimitSource.Cgroup ? MemoryCgroup!.File : Policy.MemoryLimitSource.ToString());
        }

        var processCount = options.WorkerProcessCount ??
            App.Settings.WorkerProcessCount ?? 1;
        var workerOptions = new WorkerOptions
        {
            Runtime = App.WorkerRuntime,
            ProcessCount = processCount,
            WorkersDirectory = Path.Combine(home, "workers"),
            Capabilities = capabilities,
            ExtraEnvironment = devStorage is null ? new Dictionary<string, string>() : new Dictionary<string, string> { ["AzureWebJobsStorage"] = devStorage },
            Identity = WorkerIdentity,
        };
        if (options.WorkerRestartDelay is { } restart)
            workerOptions = workerOptions with { RestartDelay = restart };
        _workers = new WorkerPool(App, workerOptions, loggers) { SharedMemoryReader = blobs as ISharedMemoryReader };
        if (_cache is not null)
        {
            var workerPool = _workers;
            _cache.SegmentDeleted += workerPool.ReleaseSegment;
            _memoryDaemon = new MemoryDaemon(() => workerPool.WorkerProcessIds.Append(Environment.ProcessId),
                Policy.MemoryLimit, Policy.Headroom, () => _cache.ReservedBytes, _cache.Evict);
            _memoryDaemon.Start(Policy.MemoryDaemonInterval);
        }
        var invoker = new FunctionInvoker(App, _workers, blobs, loggers.CreateLogger("FaaST.Invoker"));
        _triggers = new BlobTriggerListener(App, invoker, _accounts, blobs, loggers.CreateLogger("FaaST.BlobTrigger"));
        invoker.WriteObserver = _triggers;

        var workers = _workers;
        var grpcPort = 0;
        web.MapGrpcDuplex<StreamingMessage, StreamingMessage>(WorkerPool.EventStreamPath, StreamingMessage.Parser, stream =>
        {
            // Only the loopback worker endpoint accepts worker streams.
            if (stream.Context.Connection.LocalPort != grpcPort)
                throw new GrpcException(GrpcStatus.NotFound, "not a worker endpoint");
            return workers.AcceptAsync(stream);
        }, workerOptions.MaxMessageSize);
        var peerPort = 0;
        if (peers && _cache is not null)
        {
            var peerOptions = new PeerOptions
            {
                Credentials = new PeerAuth(PeerSecret.Resolve(App, _accounts.ConnectionString("AzureWebJobsStorage")), App.Name),
                Timeout = options.PeerTimeout ?? Policy.PeerTimeout,
                FetchTimeout = Policy.PeerFetchTimeout,
            };
            _peerClient = new PeerClient(peerOptions);
            var accounts = _accounts;
            web.MapPeerEndpoints(_cache, new PeerServerOptions
            {
                Credentials = peerOptions.Credentials,
                StoreFor = account => accounts.ForEndpoint(account),
                Accepts = context => context.Connection.LocalPort == peerPort,
            }, loggers.CreateLogger("FaaST.Peers"), bulk);
        }
        HttpTriggerEndpoints.Map(web, App, invoker, loggers.CreateLogger("FaaST.Http"));
        AdminEndpoints.Map(web, this);

        await web.StartAsync(ct);
        grpcPort = grpcListen!.IPEndPoint!.Port;
        BaseAddress = new Uri($"http://{options.ListenAddress}:{httpListen!.IPEndPoint!.Port}");
        _workers.GrpcPort = grpcPort;
        if (peerListen is not null && _cache is not null && _peerClient is not null)
        {
            peerPort = peerListen.IPEndPoint!.Port;
            // Never 0.0.0.0: other instances must be able to dial what this one advertises.
            await JoinPeersAsync(options, PeerSecret.PeerUri(PeerSecret.Advertised(IPAddress.Parse(peerAddress)), peerPort), loggers, ct);
        }
        _workers.Start();
        if (!await _workers.WaitAllReadyAsync(workerOptions.StartupTimeout))
            _logger.LogWarning("Not every {Runtime} worker is up yet; invocations wait for one", App.WorkerRuntime);
        _triggers.Start();
        LogFunctions();
    }

    /// <summary>Registers in the app's membership and connects the cachelet to the other instances.</summary>
    /// <remarks>
    /// Storage that is down at start does not stop the host: it serves as a cache of its own and
    /// keeps trying to join in the background.
    /// </remarks>
    private async Task JoinPeersAsync(RuntimeHostOptions options, Uri peerAddress, ILoggerFactory loggers, CancellationToken ct)
    {
        var id = options.InstanceId ?? $"{Environment.MachineName}-{Environment.ProcessId}-{Guid.NewGuid().ToString("N")[..6]}".ToLowerInvariant();
        var self = new Member(id, peerAddress, DateTimeOffset.UtcNow);
        try
        {
            await TryJoinAsync(options, self, loggers, ct);
        }
        catch (Exception e) when (e is StorageUnavailableException or BlobStorageException)
        {
            _logger.LogWarning("Cannot join the app's other instances yet ({Message}); serving as a cache of its own and retrying in the background", e.Message);
            _ = Task.Run(async () =>
            {
                for (var delay = TimeSpan.FromSeconds(1); !_stopping.IsCancellationRequested; delay = TimeSpan.FromSeconds(Math.Min(30, delay.TotalSeconds * 2)))
                {
                    try
                    {
                        await Task.Delay(delay, _stopping.Token);
                        await TryJoinAsync(options, self, loggers, _stopping.Token);
                        return;
                    }
                    catch (Exception retry) when (retry is StorageUnavailableException or BlobStorageException)
                    {
                        _logger.LogDebug("Joining the app's instances failed again: {Message}", retry.Message);
                    }
                    catch (OperationCanceledException)
                    {
                        return;
                    }
                }
            });
        }
    }

    private async Task TryJoinAsync(RuntimeHostOptions options, Member self, ILoggerFactory loggers, CancellationToken ct)
    {
        var id = self.Id;
        var peerAddress = self.PeerAddress;
        var store = _accounts!.Get("AzureWebJobsStorage");
        var membership = new MembershipService(store, App.Name, self, options.Membership, loggers.CreateLogger("FaaST.Membership"));
        var cache = _cache!;
        membership.Changed += change =>
        {
            cache.OnOwnershipChanged();
            _logger.LogInformation("Membership: {Count} instance(s){Joined}{Left}", change.Ring.Members.Count,
                change.Joined.Count > 0 ? "; joined " + string.Join(", ", change.Joined.Select(m => m.Id)) : "",
                change.Left.Count > 0 ? "; left " + string.Join(", ", change.Left.Select(m => m.Id)) : "");
        };
        try
        {
            await membership.StartAsync(ct);
        }
        catch
        {
            await membership.DisposeAsync();
            throw;
        }
        _membership = membership;
        cache.ConnectPeers(new RingOwnerDirectory(membership), _peerClient!);
        _logger.LogInformation("Instance {Id} serves peers at {Address}; {Count} instance(s) in view", id, peerAddress, membership.Members.Count);
    }

    private static bool UsesPublicKey(string? connectionString)
    {
        try
        {
            return connectionString is { Length: > 0 } && FaaST.Storage.StorageConnectionString.Parse(connectionString).UsesPublicDevelopmentKey;
        }
        catch (ArgumentException)
        {
            return false; // a malformed string is reported where the storage is first used
        }
    }

    /// <summary>Picks the user the workers run as; it must be able to read the app and the worker's code.</summary>
    private void ChooseWorkerIdentity(RuntimeHostOptions options, string home)
    {
        var mustRead = new List<string> { App.Directory, Path.Combine(home, "workers", App.WorkerRuntime) };
        if (App.WorkerRuntime == "node" && Directory.Exists(Path.Combine(home, "node_modules")))
            mustRead.Add(Path.Combine(home, "node_modules"));
        mustRead.AddRange(App.Runnable.Select(f => f.ScriptFile).Where(File.Exists));
        var user = options.WorkerUser ?? Workers.WorkerIdentity.UserNameFor(App.Name);
        WorkerIdentity = Workers.WorkerIdentity.Choose(options.Isolation, user, mustRead, _logger, out var reason);
        IsolationReason = WorkerIdentity is null ? reason : null;
    }

    /// <summary>
    /// Exports the cachelet's metrics and spans with OTLP when OTEL_EXPORTER_OTLP_ENDPOINT is set
    /// (the standard OTEL_* variables configure protocol, interval and headers).
    /// </summary>
    private void StartTelemetryExport()
    {
        if (string.IsNullOrEmpty(Environment.GetEnvironmentVariable("OTEL_EXPORTER_OTLP_ENDPOINT")))
            return;
        _meterProvider = OpenTelemetry.Sdk.CreateMeterProviderBuilder()
            .AddMeter(FaaST.Cachelet.Telemetry.CacheletMetrics.Name)
            .AddOtlpExporter()
            .Build();
        // The request's own activity is not exported (no ASP.NET instrumentation here), so a
        // parent-based sampler would drop every cachelet span under it: sample them all.
        _tracerProvider = OpenTelemetry.Sdk.CreateTracerProviderBuilder()
            .AddSource(FaaST.Cachelet.Telemetry.CacheletMetrics.Name)
            .SetSampler(new AlwaysOnSampler())
            .AddOtlpExporter()
            .Build();
        _logger.LogInformation("Exporting cachelet metrics and spans over OTLP to {Endpoint}", Environment.GetEnvironmentVariable("OTEL_EXPORTER_OTLP_ENDPOINT"));
    }

    private void LogFunctions()
    {
        var lines = new List<string>();
        foreach (var f in App.Functions)
        {
            var state = f.Error is not null ? " (error)" : f.Disabled ? " (disabled)" : "";
            var t = f.Trigger;
            var detail = t?.Type switch
            {
                BindingMetadata.HttpTrigger => $"[{string.Join(",", t.Methods ?? ["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"])}] {BaseAddress}{(App.Host.RoutePrefix.Length > 0 ? App.Host.RoutePrefix + "/" : "")}{t.Route}",
                BindingMetadata.BlobTrigger => $"blobTrigger: {t.Path}",
                _ => "",
            };
            lines.Add($"  {f.Name}{state}: {detail}");
        }
        _logger.LogInformation("Functions:\n{Functions}", string.Join("\n", lines));
        _logger.LogInformation("Host started: {Workers} {Runtime} worker(s), listening on {Address}", ReadyWorkers, App.WorkerRuntime, BaseAddress);
    }

    internal IEnumerable<object> FunctionStatus() => App.Functions.Select(f => new FunctionStatusInfo(
        f.Name,
        f.Trigger?.Type,
        f.Disabled,
        f.Error ?? (_workers?.LoadErrors.TryGetValue(f.Name, out var e) == true ? e : null)));

    /// <summary>
    /// Stops in dependency order: no new blob-triggered work; workers finish what they run and
    /// exit (their streams close, so Kestrel has nothing long-lived left); then Kestrel; then Azurite.
    /// </summary>
    public async ValueTask DisposeAsync()
    {
        await _stopping.CancelAsync();
        // Leave the view first, so that peers stop sending this instance work.
        if (_membership is not null)
            await _membership.DisposeAsync();
        if (_triggers is not null)
            await _triggers.DisposeAsync();
        if (_memoryDaemon is not null)
            await _memoryDaemon.DisposeAsync();
        if (_workers is not null)
            await _workers.DisposeAsync();
        if (_web is not null)
        {
            try
            {
                await _web.StopAsync(TimeSpan.FromSeconds(5));
            }
            catch (OperationCanceledException)
            {
                // shutting down anyway
            }
            await _web.DisposeAsync();
        }
        // Flush write-behind uploads while storage is still up, then drop the segments.
        if (_cache is not null)
            await _cache.DisposeAsync();
        _peerClient?.Dispose();
        _meterProvider?.Dispose();
        _tracerProvider?.Dispose();
        _accounts?.Dispose();
        if (_azurite is not null)
            await _azurite.DisposeAsync();
    }
}

internal sealed record FunctionStatusInfo(string Name, string? Trigger, bool Disabled, string? Error);
