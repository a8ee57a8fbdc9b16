using System.Collections.Concurrent;
using System.Threading.Channels;
using FaaST.Protos.Worker;
using Google.Protobuf;
using Grpc.Core;
using RpcException = Grpc.Core.RpcException;

namespace FaaST.Runtime.Workers;

/// <summary>A worker's event loop: milliseconds busy and idle since the worker started (protos/worker.proto, WorkerLoad).</summary>
public sealed record EventLoopTotals(double ActiveMs, double IdleMs)
{
    /// <summary>
    /// The totals after a report: totals only grow, so a report that shrinks either or is not a finite
    /// non-negative number (a worker's bug) is dropped and the previous totals stand; the vote's
    /// differences are then never negative.
    /// </summary>
    public static EventLoopTotals? After(EventLoopTotals? previous, WorkerLoad report)
    {
        ArgumentNullException.ThrowIfNull(report);
        var (active, idle) = (report.EventLoopActiveMs, report.EventLoopIdleMs);
        return double.IsFinite(active) && double.IsFinite(idle) && active >= (previous?.ActiveMs ?? 0) && idle >= (previous?.IdleMs ?? 0)
            ? new EventLoopTotals(active, idle)
            : previous;
    }
}

/// <summary>One worker's event loop as the compute vote sees it (<see cref="WorkerPool.EventLoops"/>).</summary>
/// <param name="Worker">Who reported: a restarted worker is another.</param>
/// <param name="Totals">Its latest totals.</param>
/// <param name="Stalled">Invocations in flight and no report for three intervals: its loop is held.</param>
public readonly record struct EventLoopReport(object Worker, EventLoopTotals Totals, bool Stalled);

/// <summary>The worker died or its stream closed while a call was waiting on it.</summary>
public sealed class WorkerUnavailableException(string message) : Exception(message);

/// <summary>
/// One connected worker's EventStream. Many invocations are in flight at once; writes go
/// through a single writer loop that batches whatever is queued into one flush.
/// </summary>
internal sealed class WorkerChannel
{
    // Every message but the last of a batch is written with BufferHint (Grpc.AspNetCore then leaves
    // it in the response pipe); the last one flushes the batch. One instance each, shared by all
    // channels: WriteOptions is immutable.
    private static readonly WriteOptions Buffered = new(WriteFlags.BufferHint);
    private static readonly WriteOptions Flushed = new();

    private readonly IAsyncStreamReader<StreamingMessage> _requests;
    private readonly IServerStreamWriter<StreamingMessage> _responses;
    private readonly Channel<StreamingMessage> _outbox =
        Channel.CreateUnbounded<StreamingMessage>(new UnboundedChannelOptions { SingleReader = true });
    private readonly ConcurrentDictionary<string, Pending> _invocations = new(StringComparer.Ordinal);
    private readonly ConcurrentDictionary<string, TaskCompletionSource<StreamingMessage>> _waiting = new(StringComparer.Ordinal);
    private readonly ILogger _logger;
    private readonly LogGate _unexpectedLog = LogGate.PerSecond();
    private readonly Action<RpcLog, string?> _onLog;
    private int _inFlight;
    private readonly TaskCompletionSource _closed = new(TaskCreationOptions.RunContinuationsAsynchronously);
    private volatile string? _closedReason;

    private sealed record Pending(TaskCompletionSource<InvocationResponse> Completion, string FunctionName);

    public WorkerChannel(string workerId, IAsyncStreamReader<StreamingMessage> requests,
        IServerStreamWriter<StreamingMessage> responses, ILogger logger, Action<RpcLog, string?> onLog)
    {
        WorkerId = workerId;
        _requests = requests;
        _responses = responses;
        _logger = logger;
        _onLog = onLog;
    }

    public string WorkerId { get; }

    /// <summary>The worker accepted shared memory at init: blob data may reach it as segment references.</summary>
    public bool SharedMemory { get; set; }

    /// <summary>The worker keeps mappings between invocations and must hear which files the host deleted.</summary>
    public bool SharedMemoryRelease { get; set; }

    /// <summary>The worker reads blob inputs as they fill (capability "shared_memory_streaming"); otherwise the pool
    /// waits for a streamed input to complete before sending the invocation.</summary>
    public bool SharedMemoryStreaming { get; set; }

    /// <summary>The worker accepted "event_loop_utilization" at init: it sends <see cref="WorkerLoad"/> every interval.</summary>
    public bool ReportsEventLoop { get; set; }

    /// <summary>The worker's latest event-loop totals (null before its first report): the time its loop was
    /// busy and idle since it started, as it last reported them.</summary>
    public EventLoopTotals? EventLoop => Volatile.Read(ref _eventLoop);

    private EventLoopTotals? _eventLoop;
    private long _eventLoopReportedAt;

    /// <summary>When the latest event-loop report arrived (<see cref="Environment.TickCount64"/>; 0: none yet).</summary>
    public long EventLoopReportedAt => Volatile.Read(ref _eventLoopReportedAt);

    /// <summary>Invocations sent and not yet answered.</summary>
    public int InFlight => Volatile.Read(ref _inFlight);

    public bool IsClosed => _closedReason is not null;

    /// <summary>Completes when the channel closes, for whatever reason.</summary>
    public Task Closed => _closed.Task;

    /// <summary>Pumps both directions until the stream ends; then fails everything still waiting.</summary>
    public async Task RunAsync(CancellationToken ct)
    {
        var writer = WriteLoopAsync(ct);
        try
        {
            while (await ReadAsync(_requests, ct) is { } message)
                Dispatch(message);
            Close("the worker closed its stream");
        }
        catch (Exception e) when (e is IOException or OperationCanceledException or RpcException or
                                  Microsoft.AspNetCore.Connections.ConnectionAbortedException)
        {
            Close($"the worker's stream broke: {e.Message}");
            // A malformed or oversized message: the stream is still up, so the worker hears why it
            // ends (the call's status) instead of OK.
            if (e is RpcException)
                throw;
        }
        catch (Exception e)
        {
            Close($"the worker's stream failed: {e.Message}");
            throw;
        }
        finally
        {
            _outbox.Writer.TryComplete();
            try
            {
                await writer;
            }
            catch (Exception e) when (e is IOException or OperationCanceledException or InvalidOperationException)
            {
                // The stream is already gone; nothing more can be sent.
            }
        }
    }

    /// <summary>The worker's next message, or null when it has finished sending.</summary>
    /// <exception cref="RpcException">InvalidArgument: the bytes are no StreamingMessage.</exception>
    internal static async ValueTask<StreamingMessage?> ReadAsync(IAsyncStreamReader<StreamingMessage> requests, CancellationToken ct)
    {
        try
        {
            return await requests.MoveNext(ct) ? requests.Current : null;
        }
        catch (InvalidProtocolBufferException e)
        {
            // Grpc.AspNetCore would report a parse error as Unknown ("Exception was thrown by handler");
            // the worker (and its log) should hear what was wrong.
            throw new RpcException(new Status(StatusCode.InvalidArgument, $"malformed StreamingMessage message: {e.Message}"));
        }
        catch (InvalidDataException e)
        {
            // A frame header that is no gRPC framing (a flag byte other than 0 or 1): likewise.
            throw new RpcException(new Status(StatusCode.InvalidArgument, $"malformed gRPC frame: {e.Message}"));
        }
        catch (IOException e) when (e.GetType() == typeof(IOException) && !ct.IsCancellationRequested)
        {
            // Grpc.AspNetCore's own framing errors (a length past 2 GiB) are plain IOExceptions, which
            // would otherwise read as a broken connection and end the call with OK. A connection that
            // really broke throws a subclass (ConnectionResetException, ...) or cancels the call.
            throw new RpcException(new Status(StatusCode.InvalidArgument, $"malformed gRPC frame: {e.Message}"));
        }
    }

    private async Task WriteLoopAsync(CancellationToken ct)
    {
        var reader = _outbox.Reader;
        while (await reader.WaitToReadAsync(ct))
        {
            while (reader.TryRead(out var message))
            {
                // Flush only with the last message queued, so a burst of invocations leaves in one flush.
                _responses.WriteOptions = reader.TryPeek(out _) ? Buffered : Flushed;
                await _responses.WriteAsync(message, ct);
                // WriteAsync serialises the message into the response pipe. Until it returns, the
                // message must stay reachable: a large request body lives in native memory that a
                // finalizer frees once nothing references it (HttpTriggerEndpoints, RequestBodyBuffer).
                GC.KeepAlive(message);
            }
        }
    }

    private void Dispatch(StreamingMessage message)
    {
        switch (message.ContentCase)
        {
            case StreamingMessage.ContentOneofCase.InvocationResponse:
                var response = message.InvocationResponse;
                if (_invocations.TryRemove(response.InvocationId, out var pending))
                {
                    Interlocked.Decrement(ref _inFlight);
                    pending.Completion.TrySetResult(response);
                }
                break;
            case StreamingMessage.ContentOneofCase.RpcLog:
                var log = message.RpcLog;
                _invocations.TryGetValue(log.InvocationId, out var owner);
                _onLog(log, owner?.FunctionName);
                break;
            case StreamingMessage.ContentOneofCase.WorkerLoad:
                // Only this loop writes it.
                Volatile.Write(ref _eventLoop, EventLoopTotals.After(_eventLoop, message.WorkerLoad));
                Volatile.Write(ref _eventLoopReportedAt, Environment.TickCount64);
                break;
            case StreamingMessage.ContentOneofCase.WorkerInitResponse:
            case StreamingMessage.ContentOneofCase.FunctionEnvironmentReloadResponse:
            case StreamingMessage.ContentOneofCase.FunctionLoadResponse:
            case StreamingMessage.ContentOneofCase.FunctionMetadataResponse:
                if (_waiting.TryRemove(message.RequestId, out var waiter))
                    waiter.TrySetResult(message);
                break;
            default:
                if (Log.Pass(_logger, _unexpectedLog, LogLevel.Warning, "unexpected worker message"))
                    Log.UnexpectedWorkerMessage(_logger, WorkerId, message.ContentCase);
                break;
        }
    }

    /// <summary>Sends a request (init, environment reload, metadata, function load) and waits for the reply with the same request id.</summary>
    public async Task<StreamingMessage> RequestAsync(StreamingMessage request, TimeSpan timeout, CancellationToken ct)
    {
        request.RequestId = Guid.NewGuid().ToString("N");
        var waiter = new TaskCompletionSource<StreamingMessage>(TaskCreationOptions.RunContinuationsAsynchronously);
        _waiting[request.RequestId] = waiter;
        // Closed already (the worker's first message after StartStream was malformed, say): Close has
        // failed the waiters it saw, not this one, so fail it here rather than wait out the timeout.
        if (_closedReason is { } reason)
        {
            _waiting.TryRemove(request.RequestId, out _);
            throw new WorkerUnavailableException($"worker {WorkerId}: {reason}");
        }
        Send(request);
        try
        {
            return await waiter.Task.WaitAsync(timeout, ct);
        }
        catch (TimeoutException)
        {
            throw new WorkerUnavailableException(
                $"worker {WorkerId} did not answer {request.ContentCase} within {timeout.TotalSeconds:0.#} s");
        }
        finally
        {
            _waiting.TryRemove(request.RequestId, out _);
        }
    }

    /// <summary>Starts an invocation; the task completes with the worker's response.</summary>
    public Task<InvocationResponse> InvokeAsync(InvocationRequest request, string functionName)
    {
        var completion = new TaskCompletionSource<InvocationResponse>(TaskCreationOptions.RunContinuationsAsynchronously);
        _invocations[request.InvocationId] = new Pending(completion, functionName);
        Interlocked.Increment(ref _inFlight);
        if (_closedReason is { } reason)
        {
            Fail(request.InvocationId, reason);
            return completion.Task;
        }
        Send(new StreamingMessage { InvocationRequest = request });
        return completion.Task;
    }

    /// <summary>Stops waiting for an invocation (it timed out or its caller left) and tells the worker.</summary>
    public void Abandon(string invocationId)
    {
        if (_invocations.TryRemove(invocationId, out _))
            Interlocked.Decrement(ref _inFlight);
        Send(new StreamingMessage { InvocationCancel = new InvocationCancel { InvocationId = invocationId } });
    }

    public void Send(StreamingMessage message)
    {
        if (!_outbox.Writer.TryWrite(message) && message.ContentCase != StreamingMessage.ContentOneofCase.InvocationCancel)
            Fail(message.InvocationRequest?.InvocationId, _closedReason ?? "the worker channel is closed");
    }

    private void Fail(string? invocationId, string reason)
    {
        if (invocationId is not null && _invocations.TryRemove(invocationId, out var p))
        {
            Interlocked.Decrement(ref _inFlight);
            p.Completion.TrySetException(new WorkerUnavailableException($"worker {WorkerId}: {reason}"));
        }
    }

    /// <summary>Marks the channel closed and fails every call still waiting on it.</summary>
    public void Close(string reason)
    {
        _closedReason ??= reason;
        _outbox.Writer.TryComplete();
        _closed.TrySetResult();
        foreach (var id in _invocations.Keys)
            Fail(id, reason);
        foreach (var (id, waiter) in _waiting)
            if (_waiting.TryRemove(id, out _))
                waiter.TrySetException(new WorkerUnavailableException($"worker {WorkerId}: {reason}"));
    }
}
