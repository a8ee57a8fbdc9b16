using System.Collections.Concurrent;
using FaaST.Protos.Worker;
using FaaST.Runtime.Bindings;
using Grpc.Core;
using RpcException = Grpc.Core.RpcException;
using Microsoft.AspNetCore.Server.Kestrel.Core.Features;

namespace FaaST.Runtime.Workers;

/// <summary>An invocation ran past the app's functionTimeout.</summary>
public sealed class FunctionTimeoutException(string message) : Exception(message);

/// <summary>
/// The instance's language workers: starts them, specialises them to the app, spreads invocations
/// over them (<see cref="IWorkerScheduler"/>; fewest in flight by default), and restarts any that
/// die or hang, with backoff.
/// </summary>
/// <remarks>
/// Starting the processes and loading an app are separate steps, as in Azure Functions' placeholder
/// mode: <see cref="StartAsync"/> brings the processes up to the init handshake; <see
/// cref="SpecializeAsync"/> sends each the app's environment (FunctionEnvironmentReloadRequest) and
/// its functions. Either may come first: a pool specialised before it starts starts every worker
/// with the app's environment at exec (so settings read at process start, such as PYTHONPATH or
/// NODE_OPTIONS, apply), which is what a host with a known app does; a standby pool's workers get
/// the app's settings only through the reload. A worker that restarts after specialisation starts
/// as the app's.
/// </remarks>
internal sealed partial class WorkerPool : IAsyncDisposable
{
    private readonly WorkerOptions _options;
    private readonly IWorkerScheduler _scheduler;
    private readonly ILogger _logger;
    private readonly ILogger _functionLogger;
    private readonly WorkerSlot[] _slots;
    private readonly ConcurrentDictionary<string, TaskCompletionSource<WorkerChannel>> _awaiting = new(StringComparer.Ordinal);
    private readonly ConcurrentDictionary<string, string> _loadErrors = new(StringComparer.Ordinal);
    private readonly CancellationTokenSource _stopping = new();
    private readonly TaskCompletionSource<WorkerSpecialization> _specialized = new(TaskCreationOptions.RunContinuationsAsynchronously);
    private TaskCompletionSource _readyChanged = new(TaskCreationOptions.RunContinuationsAsynchronously);
    private int _started;

    public WorkerPool(WorkerOptions options, ILoggerFactory loggers, IWorkerScheduler? scheduler = null)
    {
        _options = options;
        _scheduler = scheduler ?? new FewestInFlightScheduler();
        _logger = loggers.CreateLogger("FaaST.Workers");
        _functionLogger = loggers.CreateLogger("FaaST.Function");
        _slots = Enumerable.Range(0, Math.Max(1, options.ProcessCount)).Select(i => new WorkerSlot(this, i)).ToArray();
    }

    public WorkerOptions Options => _options;

    /// <summary>The loopback port of the host's worker gRPC endpoint (set before <see cref="StartAsync"/>).</summary>
    public int GrpcPort { get; set; }

    /// <summary>The app the workers run; null while the pool is on standby.</summary>
    public WorkerSpecialization? Specialization => _specialized.Task.IsCompletedSuccessfully ? _specialized.Task.Result : null;

    /// <summary>Functions the worker refused to load, with the worker's reason.</summary>
    public IReadOnlyDictionary<string, string> LoadErrors => _loadErrors;

    /// <summary>Workers that run the app's invocations (specialised and connected).</summary>
    public int ReadyWorkers => _slots.Count(s => s.IsReady);

    /// <summary>Workers through the init handshake, specialised or on standby.</summary>
    public int StartedWorkers => _slots.Count(s => s.Initialised is { IsClosed: false });

    /// <summary>Process ids of the running workers (for tests and diagnostics).</summary>
    public IReadOnlyList<int> WorkerProcessIds => _slots.Select(s => s.ProcessId).Where(p => p > 0).ToArray();

    /// <summary>
    /// Each ready worker that reports its event loop, with its latest totals (see <see cref="EventLoopTotals"/>);
    /// the worker is the key, so that a restarted one (new totals from zero) is told apart from its predecessor.
    /// Stalled: it has invocations in flight and sent no report for three intervals, which a worker whose
    /// timer and invocations both cannot run does (one invocation holding the loop). Empty for workers that
    /// do not report (Python).
    /// </summary>
    public IReadOnlyList<EventLoopReport> EventLoops()
    {
        var loops = new List<EventLoopReport>(_slots.Length);
        var stalledAfter = 3 * (long)_options.LoadReportInterval.TotalMilliseconds;
        var now = Environment.TickCount64;
        foreach (var slot in _slots)
            if (slot.Ready is { IsClosed: false, ReportsEventLoop: true, EventLoop: { } totals } channel)
                loops.Add(new EventLoopReport(channel, totals, channel.InFlight > 0 && now - channel.EventLoopReportedAt > stalledAfter));
        return loops;
    }

    /// <summary>
    /// Starts the worker processes. Completes when every worker has connected and answered its init
    /// (and, if the pool is specialised already, loaded the app), or with false when <see
    /// cref="WorkerOptions.StartupTimeout"/> passed first; the workers keep starting meanwhile.
    /// </summary>
    public Task<bool> StartAsync(CancellationToken ct = default)
    {
        if (Interlocked.Exchange(ref _started, 1) != 0)
            throw new InvalidOperationException("the worker pool is started already");
        foreach (var slot in _slots)
            slot.Start(_stopping.Token);
        return WaitAsync(() => _slots.All(s => s.Initialised is { IsClosed: false } && (Specialization is null || s.IsReady)),
            _options.StartupTimeout, ct);
    }

    /// <summary>
    /// Loads <paramref name="specialization"/>'s app into every worker: the running ones now, the ones
    /// that start (or restart) later as they come up. Completes when every worker serves the app, or
    /// with false when <see cref="WorkerOptions.StartupTimeout"/> passed first.
    /// </summary>
    /// <exception cref="InvalidOperationException">The pool is specialised already (a worker runs one
    /// app for its life), or the app's workers must run as another user than the pool's.</exception>
    public Task<bool> SpecializeAsync(WorkerSpecialization specialization, CancellationToken ct = default)
    {
        if (specialization.App.WorkerRuntime != _options.Runtime)
            throw new InvalidOperationException(
                $"the app {specialization.App.Name} needs {specialization.App.WorkerRuntime} workers; this pool runs {_options.Runtime} workers");
        // A running process cannot change its user: the app must want the user the pool started as.
        if (specialization.Identity != _options.Identity)
            throw new InvalidOperationException(
                $"the app {specialization.App.Name}'s workers must run as {Describe(specialization.Identity)}, but this pool's run as " +
                $"{Describe(_options.Identity)}, and a worker cannot change its user after it starts: start the standby pool as the app's user, or with isolation off");
        if (!_specialized.TrySetResult(specialization))
            throw new InvalidOperationException($"the worker pool already runs the app {Specialization!.App.Name}; a worker is specialised once");
        Log.WorkersSpecialising(_logger, _options.Runtime, specialization.App.Name);
        return WaitAsync(() => _slots.All(s => s.IsReady), _options.StartupTimeout, ct);

        static string Describe(WorkerIdentity? identity) => identity is null ? "the host's user" : $"{identity.UserName} (uid {identity.UserId})";
    }

    /// <summary>Sends <paramref name="request"/> to the first ready worker and waits for its answer (a metadata request
    /// of <see cref="WorkerIndexer"/>).</summary>
    /// <exception cref="WorkerUnavailableException">No worker is ready, or it did not answer in time.</exception>
    public Task<StreamingMessage> RequestAsync(StreamingMessage request, TimeSpan timeout, CancellationToken ct)
    {
        var channel = _slots.Select(s => s.Ready).FirstOrDefault(c => c is { IsClosed: false })
            ?? throw new WorkerUnavailableException(_slots.Select(s => s.LastError).FirstOrDefault(e => e is not null) ?? "no worker is ready");
        return channel.RequestAsync(request, timeout, ct);
    }

    /// <summary>Waits until every worker is up (or <paramref name="timeout"/> passes).</summary>
    public Task<bool> WaitAllReadyAsync(TimeSpan timeout) => WaitAsync(() => _slots.All(s => s.IsReady), timeout, CancellationToken.None);

    private async Task<bool> WaitAsync(Func<bool> done, TimeSpan timeout, CancellationToken ct)
    {
        var deadline = DateTime.UtcNow + timeout;
        while (true)
        {
            var changed = Volatile.Read(ref _readyChanged).Task;
            if (done())
                return true;
            var left = deadline - DateTime.UtcNow;
            if (left <= TimeSpan.Zero)
                return false;
            await Task.WhenAny(changed, Task.Delay(left, ct));
            ct.ThrowIfCancellationRequested();
        }
    }

    /// <summary>Called by the gRPC service for each worker that dials in; returns when its stream ends.</summary>
    public async Task AcceptAsync(IAsyncStreamReader<StreamingMessage> requests, IServerStreamWriter<StreamingMessage> responses,
        ServerCallContext context)
    {
        var ct = context.CancellationToken;
        // A worker stream lives as long as its worker, which may read slowly while busy: no minimum
        // response data rate (Grpc.AspNetCore lifts the request side's limits itself).
        if (context.GetHttpContext().Features.Get<IHttpMinResponseDataRateFeature>() is { } minResponseRate)
            minResponseRate.MinDataRate = null;
        var first = await WorkerChannel.ReadAsync(requests, ct).AsTask().WaitAsync(TimeSpan.FromSeconds(10), ct);
        if (first?.StartStream is not { } start)
            throw new RpcException(new Status(StatusCode.InvalidArgument, "the first message on the worker stream must be StartStream"));
        if (!_awaiting.TryRemove(start.WorkerId, out var waiter))
            throw new RpcException(new Status(StatusCode.PermissionDenied, $"worker id \"{start.WorkerId}\" was not started by this host"));
        var channel = new WorkerChannel(start.WorkerId, requests, responses, _logger, OnWorkerLog);
        waiter.TrySetResult(channel);
        await channel.RunAsync(ct);
    }

    /// <summary>Runs one invocation on the least busy worker.</summary>
    /// <param name="remaining">What is left of the invocation's functionTimeout (input reads took
    /// the rest); the whole functionTimeout when not given.</param>
    public async Task<InvocationResponse> InvokeAsync(FunctionDefinition function, InvocationRequest request, CancellationToken ct,
        TimeSpan? remaining = null)
    {
        var pick = PickAsync(function, ct);
        var (slot, channel) = pick.IsCompleted || Metrics is null ? await pick : await Metrics.WhileQueuedAsync(pick);
        var app = _specialized.Task.Result; // a ready worker is specialised
        var timeout = app.App.Host.FunctionTimeout;
        if (!channel.SharedMemoryStreaming && app.SharedMemoryReader is { } streamed)
        {
            var started = System.Diagnostics.Stopwatch.GetTimestamp();
            try
            {
                // Within functionTimeout, as the input read this replaces was.
                await WaitForStreamedInputsAsync(request, streamed, ct).AsTask().WaitAsync(remaining ?? timeout, ct);
            }
            catch (TimeoutException)
            {
                throw new FunctionTimeoutException(
                    $"invocation {request.InvocationId} of {function.Name} ran past functionTimeout ({timeout}) waiting for its streamed blob inputs");
            }
            if ((remaining ?? timeout) != Timeout.InfiniteTimeSpan)
            {
                remaining = (remaining ?? timeout) - System.Diagnostics.Stopwatch.GetElapsedTime(started);
                if (remaining <= TimeSpan.Zero)
                    throw new FunctionTimeoutException($"invocation {request.InvocationId} of {function.Name} ran past functionTimeout ({timeout}) waiting for its streamed blob inputs");
            }
        }
        if (!channel.SharedMemory && app.SharedMemoryReader is { } reader)
            InlineSharedMemory(request, reader);
        var call = channel.InvokeAsync(request, function.Name);
        try
        {
            return await call.WaitAsync(remaining ?? timeout, ct);
        }
        catch (TimeoutException)
        {
            channel.Abandon(request.InvocationId);
            var reason = $"invocation {request.InvocationId} of {function.Name} ran past functionTimeout ({timeout})";
            slot.Recycle(reason);
            throw new FunctionTimeoutException(reason + "; its worker was restarted");
        }
        catch (OperationCanceledException) when (ct.IsCancellationRequested)
        {
            channel.Abandon(request.InvocationId);
            throw;
        }
    }

    /// <summary>
    /// Tells the workers that keep mappings that the cache deleted <paramref name="segment"/>. Only
    /// queues a message (it runs under the arena's lock); the channel's writer sends it.
    /// </summary>
    public void ReleaseSegment(string segment)
    {
        StreamingMessage? message = null;
        foreach (var slot in _slots)
        {
            if (slot.Ready is { IsClosed: false, SharedMemoryRelease: true } channel)
                channel.Send(message ??= new StreamingMessage { SharedMemoryReleased = new SharedMemoryReleased { Segments = { segment } } });
        }
    }

    /// <summary>Counts invocations waiting for a worker and worker restarts.</summary>
    public Telemetry.HostMetrics? Metrics { get; init; }

    /// <summary>
    /// A worker that did not accept "shared_memory_streaming" (the Node worker, an older Python one) gets today's
    /// inputs: complete. The host waits here for every input still downloading and clears its progress record.
    /// </summary>
    private static async ValueTask WaitForStreamedInputsAsync(InvocationRequest request, ISharedMemoryReader reader, CancellationToken ct)
    {
        foreach (var input in request.InputData)
        {
            if (input.Data?.Blob is { ContentCase: BlobData.ContentOneofCase.SharedMemory } blob && blob.SharedMemory.Progress.Length > 0)
            {
                await reader.WaitFilledAsync(blob.SharedMemory, ct);
                blob.SharedMemory.Progress = "";
            }
        }
    }

    private static void InlineSharedMemory(InvocationRequest request, ISharedMemoryReader reader)
    {
        foreach (var input in request.InputData)
        {
            if (input.Data?.Blob is { ContentCase: BlobData.ContentOneofCase.SharedMemory } blob)
                blob.Bytes = reader.Read(blob.SharedMemory);
        }
    }

    private async ValueTask<(WorkerSlot, WorkerChannel)> PickAsync(FunctionDefinition function, CancellationToken ct)
    {
        var deadline = DateTime.UtcNow + _options.StartupTimeout;
        while (true)
        {
            var changed = Volatile.Read(ref _readyChanged).Task;
            // The scheduler saw a ready worker; it may have closed since, so check again and re-pick if so.
            if (_scheduler.Pick(_slots, function) is var index and >= 0 && index < _slots.Length
                && _slots[index] is { Ready: { IsClosed: false } channel } slot)
                return (slot, channel);
            var left = deadline - DateTime.UtcNow;
            if (left <= TimeSpan.Zero)
                throw new WorkerUnavailableException(
                    $"no {_options.Runtime} worker is available: {_slots.Select(s => s.LastError).FirstOrDefault(e => e is not null) ?? (Specialization is null ? "the workers are not specialised to an app yet" : "workers are starting")}");
            await Task.WhenAny(changed, Task.Delay(left, ct));
            ct.ThrowIfCancellationRequested();
        }
    }

    /// <summary>
    /// What a worker sees of the host's environment (issue 19, defect 3): only what an interpreter and its
    /// libraries need to run and nothing that could be a secret. Everything else of the host's environment (the
    /// operator's shell, the platform's storage key, FAAST_PEER_SECRET) stays in the host: a worker runs tenants'
    /// code, and whatever it holds, that code holds. See docs/cache.md, "Isolation between apps".
    /// </summary>
    /// <remarks>
    /// PATH, LANG, LANGUAGE, LC_* and TZ: finding executables, the locale and the time zone; TMPDIR: where temporary
    /// files go. PYTHONPATH, PYTHONHOME, VIRTUAL_ENV: the interpreter the host was set up with (Debian's python3 with
    /// python3-grpcio, or a virtual environment). NODE_PATH, NODE_OPTIONS: the Node runtime's module path and flags.
    /// GLIBC_TUNABLES: the operator's malloc settings, which replace the Python workers' default. FAAST_WORKER_CONNECT_TIMEOUT
    /// and FAAST_WORKER_IDLE_TRIM_S: the Python worker's own tuning (workers/python/faast_worker/channel.py).
    /// HOME, USER, LOGNAME: replaced by the app user's (<see cref="WorkerIdentity.SetEnvironment"/>) when isolated.
    /// </remarks>
    internal static readonly IReadOnlySet<string> HostVariables = new HashSet<string>(StringComparer.Ordinal)
    {
        "PATH", "LANG", "LANGUAGE", "TZ", "TMPDIR", "HOME", "USER", "LOGNAME",
        "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "NODE_PATH", "NODE_OPTIONS", "GLIBC_TUNABLES",
        "FAAST_WORKER_CONNECT_TIMEOUT", "FAAST_WORKER_IDLE_TRIM_S",
    };

    /// <summary>
    /// The host's own settings, which never reach a worker even when they are app settings (or come from the
    /// environment as one): the peer secret signs the app's cache and vote traffic, and the rest steer the host,
    /// not the app's code. The app's development storage reaches the workers resolved (AzureWebJobsStorage and
    /// the named connections), never as FAAST_DEVELOPMENT_STORAGE.
    /// </summary>
    internal static readonly IReadOnlySet<string> HostOnlySettings = new HashSet<string>(StringComparer.OrdinalIgnoreCase)
    {
        "FAAST_PEER_SECRET", "FAAST_DEVELOPMENT_STORAGE", "FAAST_SCALE_CONTROLLER", "FAAST_ENFORCE_KEYS",
        "FAAST_EXIT_WITH_STDIN", "FAAST_HOME",
        // The flash tier's address and the app's token (issue 22): the host's, so the app's code cannot reach the tier
        // around the cache with the app's credential.
        "FAAST_FLASH_ADDRESS", "FAAST_FLASH_TOKEN",
    };

    /// <summary>Whether the host's variable <paramref name="name"/> is one a worker may see (<see cref="HostVariables"/>, LC_*).</summary>
    internal static bool IsWorkerVariable(string name) =>
        HostVariables.Contains(name) || name.StartsWith("LC_", StringComparison.Ordinal);

    /// <summary>
    /// A worker's environment: the allow-listed part of the host's (<see cref="HostVariables"/>); for an app, its
    /// settings (as loaded: local.settings.json, overridden by the environment, development storage resolved) and
    /// the host's extra variables on top, less <see cref="HostOnlySettings"/>; then the worker's own (unbuffered
    /// Python output, malloc tunables, the worker user's HOME/USER/LOGNAME). A process started for the app gets it
    /// at exec, and every worker gets it again with FunctionEnvironmentReloadRequest, which replaces the worker's
    /// whole environment, so a standby worker ends up with the same.
    /// </summary>
    internal Dictionary<string, string?> EnvironmentFor(WorkerSpecialization? app)
    {
        var environment = new Dictionary<string, string?>(StringComparer.Ordinal);
        foreach (System.Collections.DictionaryEntry e in Environment.GetEnvironmentVariables())
            if (e.Key is string name && IsWorkerVariable(name))
                environment[name] = e.Value as string;
        if (app is not null)
        {
            foreach (var (name, value) in app.App.Settings.Values)
                environment[name] = value;
            foreach (var (name, value) in app.ExtraEnvironment)
                environment[name] = value;
        }
        foreach (var name in environment.Keys.Where(HostOnlySettings.Contains).ToList())
            environment.Remove(name);
        environment["PYTHONUNBUFFERED"] = "1";
        if (_options.Runtime == "python" && _options.PythonMallocTunables is { Length: > 0 } tunables
            && !environment.ContainsKey("GLIBC_TUNABLES"))
            environment["GLIBC_TUNABLES"] = tunables;
        _options.Identity?.SetEnvironment(environment);
        return environment;
    }

    private void SignalReadyChanged()
    {
        var old = Interlocked.Exchange(ref _readyChanged, new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously));
        old.TrySetResult();
    }

    private void OnWorkerLog(RpcLog log, string? functionName)
    {
        var level = log.Level switch
        {
            RpcLog.Types.Level.Trace => LogLevel.Trace,
            RpcLog.Types.Level.Debug => LogLevel.Debug,
            RpcLog.Types.Level.Information => LogLevel.Information,
            RpcLog.Types.Level.Warning => LogLevel.Warning,
            RpcLog.Types.Level.Error => LogLevel.Error,
            _ => LogLevel.Critical,
        };
        if (!_functionLogger.IsEnabled(level))
            return;
        // A function's log lines often carry request data (paths, headers): control characters are
        // escaped so that a client's CR or LF cannot forge log lines; a stack trace keeps its lines.
        var detail = log.Exception is { } e ? $"\n{LogText.Escape(e.Message)}\n{LogText.EscapeKeepingLines(e.StackTrace)}" : "";
        if (log.InvocationId.Length > 0)
            Log.WorkerInvocationLine(_functionLogger, level, functionName ?? log.Category, log.InvocationId, LogText.Escape(log.Message), detail);
        else
            Log.WorkerLine(_functionLogger, level, LogText.Escape(log.Message), detail);
    }

    public async ValueTask DisposeAsync()
    {
        // No more restarts; then each worker gets WorkerTerminate and a grace period before it is killed.
        await _stopping.CancelAsync();
        await Task.WhenAll(_slots.Select(s => s.StopAsync(_options.ShutdownGrace)));
        _stopping.Dispose();
    }
}
