using System.Collections.Concurrent;
using System.Diagnostics;
using FaaST.Protos.Worker;
using FaaST.Rpc;
using FaaST.Runtime.App;
using FaaST.Runtime.Bindings;

namespace FaaST.Runtime.Workers;

/// <summary>An invocation ran past the app's functionTimeout.</summary>
public sealed class FunctionTimeoutException(string message) : Exception(message);

/// <summary>
/// The instance's language workers: starts them, hands each its functions, spreads invocations
/// over them (fewest in flight first), and restarts any that die or hang, with backoff.
/// </summary>
internal sealed partial class WorkerPool : IAsyncDisposable
{
    public const string EventStreamPath = "/faast.worker.v1.WorkerChannel/EventStream";

    private readonly FunctionApp _app;
    private readonly WorkerOptions _options;
    private readonly ILogger _logger;
    private readonly ILogger _functionLogger;
    private readonly WorkerSlot[] _slots;
    private readonly ConcurrentDictionary<string, TaskCompletionSource<WorkerChannel>> _awaiting = new(StringComparer.Ordinal);
    private readonly ConcurrentDictionary<string, string> _loadErrors = new(StringComparer.Ordinal);
    private readonly CancellationTokenSource _stopping = new();
    private TaskCompletionSource _readyChanged = new(TaskCreationOptions.RunContinuationsAsynchronously);
    private int _roundRobin;

    public WorkerPool(FunctionApp app, WorkerOptions options, ILoggerFactory loggers)
    {
        _app = app;
        _options = options;
        _logger = loggers.CreateLogger("FaaST.Workers");
        _functionLogger = loggers.CreateLogger("FaaST.Function");
        _slots = Enumerable.Range(0, Math.Max(1, options.ProcessCount)).Select(i => new WorkerSlot(this, i)).ToArray();
    }

    /// <summary>The loopback port of the host's worker gRPC endpoint (set before <see cref="Start"/>).</summary>
    public int GrpcPort { get; set; }

    /// <summary>Functions the worker refused to load, with the worker's reason.</summary>
    public IReadOnlyDictionary<string, string> LoadErrors => _loadErrors;

    public int ReadyWorkers => _slots.Count(s => s.Ready is not null);

    /// <summary>Process ids of the running workers (for tests and diagnostics).</summary>
    public IReadOnlyList<int> WorkerProcessIds => _slots.Select(s => s.ProcessId).Where(p => p > 0).ToArray();

    public void Start()
    {
        foreach (var slot in _slots)
            slot.Start(_stopping.Token);
    }

    /// <summary>Waits until every worker is up (or <paramref name="timeout"/> passes).</summary>
    public async Task<bool> WaitAllReadyAsync(TimeSpan timeout)
    {
        var deadline = DateTime.UtcNow + timeout;
        while (ReadyWorkers < _slots.Length)
        {
            var left = deadline - DateTime.UtcNow;
            if (left <= TimeSpan.Zero)
                return false;
            await Task.WhenAny(Volatile.Read(ref _readyChanged).Task, Task.Delay(left));
        }
        return true;
    }

    /// <summary>Called by the gRPC endpoint for each worker that dials in; returns when its stream ends.</summary>
    public async Task AcceptAsync(GrpcServerStream<StreamingMessage, StreamingMessage> stream)
    {
        var ct = stream.Context.RequestAborted;
        var first = await stream.ReadAsync(ct).AsTask().WaitAsync(TimeSpan.FromSeconds(10), ct);
        if (first?.StartStream is not { } start)
            throw new GrpcException(GrpcStatus.InvalidArgument, "the first message on the worker stream must be StartStream");
        if (!_awaiting.TryRemove(start.WorkerId, out var waiter))
            throw new GrpcException(GrpcStatus.PermissionDenied, $"worker id \"{start.WorkerId}\" was not started by this host");
        var channel = new WorkerChannel(start.WorkerId, stream, _logger, OnWorkerLog);
        waiter.TrySetResult(channel);
        await channel.RunAsync(ct);
    }

    /// <summary>Runs one invocation on the least busy worker.</summary>
    /// <param name="remaining">What is left of the invocation's functionTimeout (input reads took
    /// the rest); the whole functionTimeout when not given.</param>
    public async Task<InvocationResponse> InvokeAsync(FunctionDefinition function, InvocationRequest request, CancellationToken ct,
        TimeSpan? remaining = null)
    {
        var pick = PickAsync(ct);
        var (slot, channel) = pick.IsCompleted || Metrics is null ? await pick : await Metrics.WhileQueuedAsync(pick);
        if (!channel.SharedMemory && SharedMemoryReader is { } reader)
            InlineSharedMemory(request, reader);
        var call = channel.InvokeAsync(request, function.Name);
        var timeout = _app.Host.FunctionTimeout;
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

    /// <summary>Reads shared-memory references for workers that take blobs inline (set when the cachelet is on).</summary>
    public ISharedMemoryReader? SharedMemoryReader { get; set; }

    /// <summary>Counts invocations waiting for a worker and worker restarts.</summary>
    public Telemetry.HostMetrics? Metrics { get; init; }

    private static void InlineSharedMemory(InvocationRequest request, ISharedMemoryReader reader)
    {
        foreach (var input in request.InputData)
        {
            if (input.Data?.Blob is { ContentCase: BlobData.ContentOneofCase.SharedMemory } blob)
                blob.Bytes = reader.Read(blob.SharedMemory);
        }
    }

    private async ValueTask<(WorkerSlot, WorkerChannel)> PickAsync(CancellationToken ct)
    {
        var deadline = DateTime.UtcNow + _options.StartupTimeout;
        while (true)
        {
            var changed = Volatile.Read(ref _readyChanged).Task;
            WorkerSlot? bestSlot = null;
            WorkerChannel? best = null;
            var start = (int)((uint)Interlocked.Increment(ref _roundRobin) % (uint)_slots.Length);
            for (var i = 0; i < _slots.Length; i++)
            {
                var slot = _slots[(start + i) % _slots.Length];
                if (slot.Ready is { IsClosed: false } channel && (best is null || channel.InFlight < best.InFlight))
                    (bestSlot, best) = (slot, channel);
            }
            if (best is not null)
                return (bestSlot!, best);
            var left = deadline - DateTime.UtcNow;
            if (left <= TimeSpan.Zero)
                throw new WorkerUnavailableException(
                    $"no {_app.WorkerRuntime} worker is available: {_slots.Select(s => s.LastError).FirstOrDefault(e => e is not null) ?? "workers are starting"}");
            await Task.WhenAny(changed, Task.Delay(left, ct));
            ct.ThrowIfCancellationRequested();
        }
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
        var detail = log.Exception is { } e ? $"\n{Http.LogText.Escape(e.Message)}\n{Http.LogText.EscapeKeepingLines(e.StackTrace)}" : "";
        if (log.InvocationId.Length > 0)
            _functionLogger.Log(level, "[{Function} {InvocationId}] {Message}{Detail}", functionName ?? log.Category, log.InvocationId, Http.LogText.Escape(log.Message), detail);
        else
            _functionLogger.Log(level, "[worker] {Message}{Detail}", Http.LogText.Escape(log.Message), detail);
    }

    public async ValueTask DisposeAsync()
    {
        // No more restarts; then each worker gets WorkerTerminate and a grace period before it is killed.
        await _stopping.CancelAsync();
        await Task.WhenAll(_slots.Select(s => s.StopAsync(_options.ShutdownGrace)));
        _stopping.Dispose();
    }
}
