using System.Diagnostics;
using System.Text;
using FaaST.Protos.Worker;
using FaaST.Runtime.Bindings;
using FaaST.Runtime.Telemetry;
using FaaST.Runtime.Workers;
using FaaST.Storage;

namespace FaaST.Runtime.Invocation;

/// <summary>Something that wants to hear about blobs the runtime wrote (blob triggers).</summary>
public interface IBlobWriteObserver
{
    void OnBlobWritten(BlobAddress blob, BlobProperties properties, BlobOutput content);
}

/// <summary>
/// The binding pipeline around one invocation: resolve and read the input blobs, run the function
/// on a worker, then write its output blobs. Triggers (HTTP, blob) call it.
/// </summary>
internal sealed class FunctionInvoker
{
    private readonly WorkerPool _workers;
    private readonly IBlobBindingProvider _blobs;
    private readonly ILogger _logger;
    private readonly LogGate _undeclaredOutputLog = LogGate.PerSecond();
    private readonly Dictionary<string, FunctionPlan> _plans;

    public FunctionInvoker(FunctionApp app, WorkerPool workers, IBlobBindingProvider blobs, HostMetrics metrics, ILogger logger)
    {
        _workers = workers;
        _blobs = blobs;
        _logger = logger;
        _plans = app.Runnable.ToDictionary(f => f.Name, f => new FunctionPlan(f) { Metrics = metrics.For(f) }, StringComparer.OrdinalIgnoreCase);
        _timeout = app.Host.FunctionTimeout;
    }

    private readonly TimeSpan _timeout;

    /// <summary>Told after each output blob is written, e.g. to fire blob triggers at once.</summary>
    public IBlobWriteObserver? WriteObserver { get; set; }

    /// <summary>Writes queue output bindings (set before the host takes work); a queue output without it fails the invocation.</summary>
    public QueueOutput? QueueOutput { get; set; }

    /// <summary>Reads and writes table bindings (set before the host takes work); a table binding without it fails the invocation.</summary>
    public TableBindings? Tables { get; set; }

    /// <summary>
    /// Runs <paramref name="function"/> with <paramref name="triggerValue"/> bound to its trigger.
    /// Returns the value of the HTTP output binding, if the function has one.
    /// </summary>
    public async Task<TypedData?> InvokeAsync(FunctionDefinition function, InvocationContext invocation,
        TypedData triggerValue, CancellationToken ct)
    {
        if (!_plans.TryGetValue(function.Name, out var plan))
            throw new FunctionUnavailableException($"function {function.Name} is not loaded");
        // Counted and traced from here: a function its worker could not load is an invocation that
        // failed (unavailable), which the scale controller must see.
        var metrics = plan.Metrics;
        var started = metrics.Started();
        using var span = StartInvocationSpan(metrics, invocation);
        var outcome = InvocationOutcome.Success;
        CancellationTokenSource? deadline = null;
        try
        {
            if (_workers.LoadErrors.TryGetValue(function.Name, out var loadError))
                throw new FunctionUnavailableException($"function {function.Name} could not be loaded: {loadError}");
            if (_timeout == Timeout.InfiniteTimeSpan)
                return await InvokeCoreAsync(plan, function, invocation, triggerValue, ct, ct, null);

            // functionTimeout covers the whole invocation: input reads, the worker, output writes. A
            // storage that stalls must not hold a request (and its pins and buffers) past it. One
            // linked token source per invocation is the price; without a timeout there is none.
            deadline = CancellationTokenSource.CreateLinkedTokenSource(ct);
            deadline.CancelAfter(_timeout);
            try
            {
                return await InvokeCoreAsync(plan, function, invocation, triggerValue, deadline.Token, ct, started);
            }
            catch (OperationCanceledException) when (deadline.IsCancellationRequested && !ct.IsCancellationRequested)
            {
                throw new FunctionTimeoutException(
                    $"invocation {invocation.InvocationId} of {function.Name} ran past functionTimeout ({_timeout}) while reading or writing its blobs");
            }
        }
        catch (Exception e)
        {
            outcome = HostMetrics.Classify(e, ct.IsCancellationRequested);
            span?.SetStatus(ActivityStatusCode.Error, e.Message);
            throw;
        }
        finally
        {
            deadline?.Dispose();
            metrics.Finished(started, outcome);
            span?.SetTag("faast.outcome", HostMetrics.OutcomeName(outcome));
        }
    }

    /// <summary>The invocation's span (a child of the HTTP request's span for HTTP triggers); null when nobody traces.</summary>
    private static Activity? StartInvocationSpan(HostMetrics.FunctionMetrics metrics, InvocationContext invocation)
    {
        var span = HostMetrics.Activities.StartActivity(metrics.SpanName);
        if (span is { IsAllDataRequested: true })
        {
            span.SetTag("faast.function", metrics.Function);
            span.SetTag("faas.invocation_id", invocation.InvocationId);
            span.SetTag("faas.trigger", metrics.Trigger);
        }
        return span;
    }

    private async Task<TypedData?> InvokeCoreAsync(FunctionPlan plan, FunctionDefinition function, InvocationContext invocation,
        TypedData triggerValue, CancellationToken ct, CancellationToken requestCt, long? started)
    {

        var request = new InvocationRequest { InvocationId = invocation.InvocationId, FunctionId = function.Id };
        request.InputData.Add(new ParameterBinding { Name = plan.Trigger.Name, Data = triggerValue });
        foreach (var (name, value) in invocation.BindingData)
            request.TriggerMetadata[name] = new TypedData { String = value };
        foreach (var (name, value) in invocation.TriggerMetadata)
            request.TriggerMetadata[name] = value;
        if (plan.InputBlobs.Length > 0)
            await ReadInputsAsync(plan, invocation, request, ct);
        foreach (var table in plan.InputTables)
            request.InputData.Add(new ParameterBinding { Name = table.Name, Data = await TablesFor(function, table).ReadAsync(function, table, invocation, ct) });

        TimeSpan? remaining = null;
        if (started is { } t0)
        {
            remaining = _timeout - System.Diagnostics.Stopwatch.GetElapsedTime(t0);
            if (remaining <= TimeSpan.Zero)
                throw new OperationCanceledException(ct);
        }
        // The worker call waits for the rest of the timeout itself and, past it, replaces the hung
        // worker; given the deadline's token instead it would only see a cancellation.
        InvocationResponse response;
        using (HostMetrics.Activities.StartActivity("worker"))
            response = await _workers.InvokeAsync(function, request, requestCt, remaining);
        if (response.Result?.Status != StatusResult.Types.Status.Success)
        {
            var e = response.Result?.Exception;
            var message = e?.Message is { Length: > 0 } m ? m : response.Result?.Result ?? "the function failed";
            throw new FunctionFailedException(message, e?.StackTrace);
        }

        TypedData? http = null;
        List<Task>? writes = null;
        foreach (var output in response.OutputData)
        {
            if (!plan.Outputs.TryGetValue(output.Name, out var binding))
            {
                if (Log.Pass(_logger, _undeclaredOutputLog, LogLevel.Warning, "undeclared output"))
                    Log.UndeclaredOutput(_logger, function.Name, LogText.Escape(output.Name));
                continue;
            }
            if (binding.Type == BindingMetadata.Http)
                http = output.Data;
            else if (binding.Type == BindingMetadata.Blob && output.Data is { DataCase: not TypedData.DataOneofCase.None } data)
                (writes ??= []).Add(WriteOutputAsync(function, binding, data, invocation, ct));
            else if (binding.Type == BindingMetadata.Queue && output.Data is { DataCase: not TypedData.DataOneofCase.None } message)
                (writes ??= []).Add(WriteQueueAsync(function, binding, message, invocation, ct));
            else if (binding.Type == BindingMetadata.Table && output.Data is { DataCase: not TypedData.DataOneofCase.None } entities)
                (writes ??= []).Add(TablesFor(function, binding).WriteAsync(function, binding, entities, invocation, ct));
        }
        if (plan.Return is { } ret && response.ReturnValue is { DataCase: not TypedData.DataOneofCase.None } returned)
        {
            if (ret.Type == BindingMetadata.Http)
                http = returned;
            else if (ret.Type == BindingMetadata.Blob)
                (writes ??= []).Add(WriteOutputAsync(function, ret, returned, invocation, ct));
            else if (ret.Type == BindingMetadata.Queue)
                (writes ??= []).Add(WriteQueueAsync(function, ret, returned, invocation, ct));
            else if (ret.Type == BindingMetadata.Table)
                (writes ??= []).Add(TablesFor(function, ret).WriteAsync(function, ret, returned, invocation, ct));
        }
        if (writes is not null)
            await Task.WhenAll(writes);
        return http;
    }

    private async Task ReadInputsAsync(FunctionPlan plan, InvocationContext invocation, InvocationRequest request, CancellationToken ct)
    {
        var reads = new ValueTask<BlobData?>[plan.InputBlobs.Length];
        // A span per read only when someone traces: the wrapper is one more state machine per read.
        var traced = HostMetrics.Activities.HasListeners();
        for (var i = 0; i < reads.Length; i++)
        {
            var address = Resolve(plan.Function, plan.InputBlobs[i], invocation);
            reads[i] = traced
                ? TracedReadAsync(plan.InputBlobs[i], address, invocation, ct)
                : _blobs.ReadAsync(address, invocation, ct);
        }
        for (var i = 0; i < reads.Length; i++)
        {
            var blob = await reads[i];
            request.InputData.Add(new ParameterBinding
            {
                Name = plan.InputBlobs[i].Name,
                Data = blob is null ? new TypedData() : new TypedData { Blob = blob },
            });
        }
    }

    /// <summary>One input read under a "read" span (the cachelet's spans and storage calls nest under it).</summary>
    private async ValueTask<BlobData?> TracedReadAsync(BindingMetadata binding, BlobAddress address, InvocationContext invocation, CancellationToken ct)
    {
        using var span = HostMetrics.Activities.StartActivity("read");
        if (span is { IsAllDataRequested: true })
        {
            span.SetTag("faast.binding", binding.Name);
            span.SetTag("faast.blob", address.Path);
        }
        return await _blobs.ReadAsync(address, invocation, ct);
    }

    private async Task WriteOutputAsync(FunctionDefinition function, BindingMetadata binding, TypedData value,
        InvocationContext invocation, CancellationToken ct)
    {
        // Its own span, current only inside this method: the writes of one invocation run side by side.
        using var span = HostMetrics.Activities.StartActivity("write");
        var address = Resolve(function, binding, invocation);
        if (span is { IsAllDataRequested: true })
        {
            span.SetTag("faast.binding", binding.Name);
            span.SetTag("faast.blob", address.Path);
        }
        var output = value.DataCase switch
        {
            TypedData.DataOneofCase.Bytes => new BlobOutput(value.Bytes.Memory),
            TypedData.DataOneofCase.String => new BlobOutput(Encoding.UTF8.GetBytes(value.String)),
            TypedData.DataOneofCase.Json => new BlobOutput(Encoding.UTF8.GetBytes(value.Json)),
            TypedData.DataOneofCase.Blob when value.Blob.ContentCase == BlobData.ContentOneofCase.Bytes => new BlobOutput(value.Blob.Bytes.Memory),
            TypedData.DataOneofCase.Blob when value.Blob.ContentCase == BlobData.ContentOneofCase.SharedMemory =>
                new BlobOutput(ReadOnlyMemory<byte>.Empty, value.Blob.SharedMemory.Segment, value.Blob.SharedMemory.Length),
            _ => throw new FunctionFailedException(
                $"function {function.Name}: output binding \"{binding.Name}\" got a {value.DataCase} value; a blob takes bytes or a string", null),
        };
        var properties = await _blobs.WriteAsync(address, output, invocation, ct);
        WriteObserver?.OnBlobWritten(address, properties, output);
    }

    private async Task WriteQueueAsync(FunctionDefinition function, BindingMetadata binding, TypedData value, InvocationContext invocation,
        CancellationToken ct)
    {
        if (QueueOutput is not { } queues)
            throw new FunctionUnavailableException($"function {function.Name}: queue output \"{binding.Name}\": queue outputs are not set up in this host");
        await queues.WriteAsync(function, binding, value, invocation, ct);
    }

    private TableBindings TablesFor(FunctionDefinition function, BindingMetadata binding) => Tables
        ?? throw new FunctionUnavailableException($"function {function.Name}: table binding \"{binding.Name}\": table bindings are not set up in this host");

    /// <summary>Resolves a blob binding's path for this invocation.</summary>
    public static BlobAddress Resolve(FunctionDefinition function, BindingMetadata binding, InvocationContext invocation)
    {
        if (!binding.Path!.TryResolve(invocation.Lookup, out var path, out var missing, out var why))
            throw new BindingResolutionException(
                $"function {function.Name}: binding \"{binding.Name}\" path \"{binding.Path.Pattern}\" needs a value for {{{missing}}}" +
                (why is null ? ", which the trigger did not supply (route, query, JSON body or blob name)" : ": " + why));
        var slash = path.IndexOf('/');
        if (slash == path.Length - 1)
            throw new BindingResolutionException(
                $"function {function.Name}: binding \"{binding.Name}\" path \"{binding.Path.Pattern}\" resolved to \"{path}\", which names no blob");
        var address = BlobAddress.Parse(binding.Connection, path);
        try
        {
            BlobNames.ValidateContainer(address.Container);
            BlobNames.ValidateBlob(address.Name);
        }
        catch (ArgumentException e)
        {
            throw new BindingResolutionException(
                $"function {function.Name}: binding \"{binding.Name}\" path \"{binding.Path.Pattern}\" resolved to \"{path}\": {e.Message.Split(" (Parameter", 2)[0]}");
        }
        return address;
    }
}
