using System.Collections.Concurrent;
using System.Threading.Channels;
using FaaST.Protos.Worker;
using FaaST.Rpc;

namespace FaaST.Runtime.Workers;

/// <summary>The worker died or its stream closed while a call was waiting on it.</summary>
public sealed class WorkerUnavailableException(string message) : Exception(message);

/// <summary>
/// One connected worker's EventStream. Many invocations are in flight at once; writes go
/// through a single writer loop that batches whatever is queued into one flush.
/// </summary>
internal sealed class WorkerChannel
{
    private readonly GrpcServerStream<StreamingMessage, StreamingMessage> _stream;
    private readonly Channel<StreamingMessage> _outbox =
        Channel.CreateUnbounded<StreamingMessage>(new UnboundedChannelOptions { SingleReader = true });
    private readonly ConcurrentDictionary<string, Pending> _invocations = new(StringComparer.Ordinal);
    private readonly ConcurrentDictionary<string, TaskCompletionSource<StreamingMessage>> _requests = new(StringComparer.Ordinal);
    private readonly ILogger _logger;
    private readonly Action<RpcLog, string?> _onLog;
    private int _inFlight;
    private readonly TaskCompletionSource _closed = new(TaskCreationOptions.RunContinuationsAsynchronously);
    private volatile string? _closedReason;

    private sealed record Pending(TaskCompletionSource<InvocationResponse> Completion, string FunctionName);

    public WorkerChannel(string workerId, GrpcServerStream<StreamingMessage, StreamingMessage> stream,
        ILogger logger, Action<RpcLog, string?> onLog)
    {
        WorkerId = workerId;
        _stream = stream;
        _logger = logger;
        _onLog = onLog;
    }

    public string WorkerId { get; }

    /// <summary>The worker accepted shared memory at init: blob data may reach it as segment references.</summary>
    public bool SharedMemory { get; set; }

    /// <summary>The worker keeps mappings between invocations and must hear which files the host deleted.</summary>
    public bool SharedMemoryRelease { get; set; }

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
            while (await _stream.ReadAsync(ct) is { } message)
                Dispatch(message);
            Close("the worker closed its stream");
        }
        catch (Exception e) when (e is IOException or OperationCanceledException or GrpcException or
                                  Microsoft.AspNetCore.Connections.ConnectionAbortedException)
        {
            Close($"the worker's stream broke: {e.Message}");
            // A malformed message: the stream is still up, so the worker hears why it ends (the
            // call's status) instead of OK.
            if (e is GrpcException)
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

    private async Task WriteLoopAsync(CancellationToken ct)
    {
        var reader = _outbox.Reader;
        while (await reader.WaitToReadAsync(ct))
        {
            while (reader.TryRead(out var message))
            {
                _stream.Write(message);
                // Write copies the message into the stream. Until it returns, the message must stay
                // reachable: a large request body lives in native memory that a finalizer frees once
                // nothing references it (HttpTriggerEndpoints, RequestBodyBuffer).
                GC.KeepAlive(message);
            }
            await _stream.FlushAsync(ct);
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
            case StreamingMessage.ContentOneofCase.WorkerInitResponse:
            case StreamingMessage.ContentOneofCase.FunctionLoadResponse:
                if (_requests.TryRemove(message.RequestId, out var waiter))
                    waiter.TrySetResult(message);
                break;
            default:
                _logger.LogWarning("Worker {WorkerId} sent an unexpected {Kind} message; ignored", WorkerId, message.ContentCase);
                break;
        }
    }

    /// <summary>Sends a request (init, function load) and waits for the reply with the same request id.</summary>
    public async Task<StreamingMessage> RequestAsync(StreamingMessage request, TimeSpan timeout, CancellationToken ct)
    {
        request.RequestId = Guid.NewGuid().ToString("N");
        var waiter = new TaskCompletionSource<StreamingMessage>(TaskCreationOptions.RunContinuationsAsynchronously);
        _requests[request.RequestId] = waiter;
        // Closed already (the worker's first message after StartStream was malformed, say): Close has
        // failed the waiters it saw, not this one, so fail it here rather than wait out the timeout.
        if (_closedReason is { } reason)
        {
            _requests.TryRemove(request.RequestId, out _);
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
            _requests.TryRemove(request.RequestId, out _);
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
        foreach (var (id, waiter) in _requests)
            if (_requests.TryRemove(id, out _))
                waiter.TrySetException(new WorkerUnavailableException($"worker {WorkerId}: {reason}"));
    }
}
