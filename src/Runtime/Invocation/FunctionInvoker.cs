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
    private readonly LogGate _conflictLog = LogGate.PerSecond();
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
        // The versions the inputs read, kept only when an output is conditional on one (WriteOutputsConditionallyAsync).
        var versions = plan.ConditionalOutputs.Length > 0 ? new string?[plan.InputBlobs.Length] : null;
        if (plan.InputBlobs.Length > 0)
            await ReadInputsAsync(plan, invocation, request, versions, ct);
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

        if (versions is not null)
            return await WriteOutputsConditionallyAsync(plan, function, invocation, response, versions, ct);
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

    private async Task ReadInputsAsync(FunctionPlan plan, InvocationContext invocation, InvocationRequest request, string?[]? versions,
        CancellationToken ct)
    {
        var reads = new ValueTask<BlobData?>[plan.InputBlobs.Length];
        // A span per read only when someone traces: the wrapper is one more state machine per read.
        var traced = HostMetrics.Activities.HasListeners();
        for (var i = 0; i < reads.Length; i++)
        {
            // A null path (FaaST): binds nothing, as a missing blob does, without asking the cache or storage.
            if (!TryResolve(plan.Function, plan.InputBlobs[i], invocation, out var address))
                continue;
            if (versions is not null)
                versions[i] = Reading; // not null: this input reads a version (a null path leaves none)
            reads[i] = traced
                ? TracedReadAsync(plan.InputBlobs[i], address, invocation, ct)
                : _blobs.ReadAsync(address, invocation, ct);
        }
        for (var i = 0; i < reads.Length; i++)
        {
            var blob = await reads[i];
            if (versions is not null && versions[i] is not null)
                versions[i] = blob is null ? FoundNone : blob.Etag;
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

    /// <summary>What a conditional output's input read when it found no blob (compared by reference; never an ETag).</summary>
    private static readonly string FoundNone = new("(no blob)".AsSpan());

    /// <summary>An input whose read is under way (see ReadInputsAsync).</summary>
    private static readonly string Reading = new("(reading)".AsSpan());

    /// <summary>
    /// The outputs of a function with conditional blob outputs ("ifMatch"): every blob output's path is resolved first
    /// (a null one the function set fails the invocation before anything is written); then the conditional outputs,
    /// one after another in declaration order, each If-Match the version its input read (If-None-Match: * when that
    /// input found none); on a conflict nothing more is written; then the others side by side, as without conditions.
    /// </summary>
    private async Task<TypedData?> WriteOutputsConditionallyAsync(FunctionPlan plan, FunctionDefinition function, InvocationContext invocation,
        InvocationResponse response, string?[] versions, CancellationToken ct)
    {
        var bindings = plan.OutputBindings;
        var values = new TypedData?[bindings.Length];
        foreach (var output in response.OutputData)
        {
            var i = Array.FindIndex(bindings, b => b.Name.Equals(output.Name, StringComparison.OrdinalIgnoreCase));
            if (i < 0)
            {
                if (Log.Pass(_logger, _undeclaredOutputLog, LogLevel.Warning, "undeclared output"))
                    Log.UndeclaredOutput(_logger, function.Name, LogText.Escape(output.Name));
                continue;
            }
            if (output.Data is { DataCase: not TypedData.DataOneofCase.None } data)
                values[i] = data;
        }
        if (plan.Return is { } ret && response.ReturnValue is { DataCase: not TypedData.DataOneofCase.None } returned)
            values[Array.IndexOf(bindings, ret)] = returned;

        var addresses = new BlobAddress[bindings.Length];
        var written = new bool[bindings.Length];
        try
        {
            for (var i = 0; i < bindings.Length; i++)
            {
                if (bindings[i].Type == BindingMetadata.Blob && values[i] is { } value)
                    addresses[i] = ResolveOutput(function, bindings[i], value, invocation);
            }
            for (var c = 0; c < plan.ConditionalOutputs.Length; c++)
            {
                var binding = plan.ConditionalOutputs[c];
                var i = Array.IndexOf(bindings, binding);
                if (values[i] is not { } value)
                    continue;
                var input = plan.InputBlobs[plan.ConditionInputs[c]];
                var read = versions[plan.ConditionInputs[c]] ?? throw new BindingResolutionException(
                    $"function {function.Name}: blob output \"{binding.Name}\" is conditional on input \"{input.Name}\" (ifMatch), whose path " +
                    $"\"{input.Path!.Pattern}\" was null, so it read no version; nothing was written (give both paths a value, or neither)");
                var condition = ReferenceEquals(read, FoundNone) ? BlobWriteCondition.Absent : BlobWriteCondition.Matching(read);
                written[i] = true;
                try
                {
                    await WriteOutputAsync(function, binding, value, invocation, ct, addresses[i], condition);
                }
                catch (BlobConditionFailedException e)
                {
                    var blob = addresses[i].Path;
                    if (Log.Pass(_logger, _conflictLog, LogLevel.Information, "write conflict"))
                        Log.WriteConflict(_logger, function.Name, invocation.InvocationId, binding.Name, LogText.Escape(blob), condition.ToString());
                    throw new BlobWriteConflictException(binding.Name, blob,
                        $"function {function.Name}: blob output \"{binding.Name}\" was not written: {blob} " +
                        (condition.IfNoneExists
                            ? $"did not exist when input \"{input.Name}\" read it, and another writer has created it since"
                            : $"is no longer the version {read} that input \"{input.Name}\" read: another writer changed it") +
                        $"; nothing more of this invocation was written ({e.Message})", e);
                }
            }
        }
        catch
        {
            // The invocation fails here: outputs never written leave no shared-memory file behind.
            DiscardUnwritten(bindings, values, written);
            throw;
        }

        TypedData? http = null;
        List<Task>? writes = null;
        for (var i = 0; i < bindings.Length; i++)
        {
            if (values[i] is not { } value || bindings[i].IfMatch is not null)
                continue;
            var binding = bindings[i];
            if (binding.Type == BindingMetadata.Http)
                http = value;
            else if (binding.Type == BindingMetadata.Blob)
                (writes ??= []).Add(WriteOutputAsync(function, binding, value, invocation, ct, addresses[i], default));
            else if (binding.Type == BindingMetadata.Queue)
                (writes ??= []).Add(WriteQueueAsync(function, binding, value, invocation, ct));
            else if (binding.Type == BindingMetadata.Table)
                (writes ??= []).Add(TablesFor(function, binding).WriteAsync(function, binding, value, invocation, ct));
        }
        if (writes is not null)
            await Task.WhenAll(writes);
        return http;
    }

    private async Task WriteOutputAsync(FunctionDefinition function, BindingMetadata binding, TypedData value,
        InvocationContext invocation, CancellationToken ct)
    {
        var address = ResolveOutput(function, binding, value, invocation);
        await WriteOutputAsync(function, binding, value, invocation, ct, address, default);
    }

    /// <summary>
    /// The blob an output the function set is written to. A null path (FaaST: a JSON null in it) names none: the output
    /// should have been left unset, and the invocation fails naming it (its shared-memory file, if any, is deleted).
    /// </summary>
    private BlobAddress ResolveOutput(FunctionDefinition function, BindingMetadata binding, TypedData value, InvocationContext invocation)
    {
        if (TryResolve(function, binding, invocation, out var address))
            return address;
        if (ToOutput(function, binding, value, check: false) is { } output)
            _blobs.Discard(output);
        throw new FunctionFailedException(
            $"function {function.Name}: blob output \"{binding.Name}\" was set, but its path \"{binding.Path!.Pattern}\" holds a null value " +
            "(a JSON null in the trigger's data), so it names no blob and was not written; leave an output unset when its path is null", null);
    }

    /// <summary>Deletes the shared-memory files of blob outputs that were set but not written.</summary>
    private void DiscardUnwritten(BindingMetadata[] bindings, TypedData?[] values, bool[] written)
    {
        for (var i = 0; i < bindings.Length; i++)
        {
            if (written[i] || bindings[i].Type != BindingMetadata.Blob || values[i] is not { DataCase: TypedData.DataOneofCase.Blob } value)
                continue;
            if (value.Blob.ContentCase == BlobData.ContentOneofCase.SharedMemory)
                _blobs.Discard(new BlobOutput(ReadOnlyMemory<byte>.Empty, value.Blob.SharedMemory.Segment, value.Blob.SharedMemory.Length));
        }
    }

    private static BlobOutput? ToOutput(FunctionDefinition function, BindingMetadata binding, TypedData value, bool check) => value.DataCase switch
    {
        TypedData.DataOneofCase.Bytes => new BlobOutput(value.Bytes.Memory),
        TypedData.DataOneofCase.String => new BlobOutput(Encoding.UTF8.GetBytes(value.String)),
        TypedData.DataOneofCase.Json => new BlobOutput(Encoding.UTF8.GetBytes(value.Json)),
        TypedData.DataOneofCase.Blob when value.Blob.ContentCase == BlobData.ContentOneofCase.Bytes => new BlobOutput(value.Blob.Bytes.Memory),
        TypedData.DataOneofCase.Blob when value.Blob.ContentCase == BlobData.ContentOneofCase.SharedMemory =>
            new BlobOutput(ReadOnlyMemory<byte>.Empty, value.Blob.SharedMemory.Segment, value.Blob.SharedMemory.Length),
        _ when !check => null,
        _ => throw new FunctionFailedException(
            $"function {function.Name}: output binding \"{binding.Name}\" got a {value.DataCase} value; a blob takes bytes or a string", null),
    };

    private async Task WriteOutputAsync(FunctionDefinition function, BindingMetadata binding, TypedData value,
        InvocationContext invocation, CancellationToken ct, BlobAddress address, BlobWriteCondition condition)
    {
        // Its own span, current only inside this method: the writes of one invocation run side by side.
        using var span = HostMetrics.Activities.StartActivity("write");
        if (span is { IsAllDataRequested: true })
        {
            span.SetTag("faast.binding", binding.Name);
            span.SetTag("faast.blob", address.Path);
        }
        var output = ToOutput(function, binding, value, check: true)!.Value;
        var properties = await _blobs.WriteAsync(address, output, invocation, ct, condition);
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

    /// <summary>
    /// Resolves a blob binding's path for this invocation; false when the path is null (FaaST: an {expression} names a
    /// JSON null in the trigger's data, and every other one has a value or is null too). A missing value throws.
    /// </summary>
    public static bool TryResolve(FunctionDefinition function, BindingMetadata binding, InvocationContext invocation, out BlobAddress address)
    {
        if (binding.Path!.TryResolve(invocation.Lookup, out var path, out var missing, out var why))
        {
            address = Checked(function, binding, path);
            return true;
        }
        if (!invocation.IsJsonNull(missing!))
            throw Missing(function, binding, missing!, why);
        // Null only if nothing else is missing: a path with a missing value is an error whatever else is null.
        foreach (var expression in binding.Path.Expressions)
        {
            if (!expression.IsBuiltIn && invocation.Lookup(expression, out var other) is null && !invocation.IsJsonNull(expression))
                throw Missing(function, binding, expression, other);
        }
        address = default;
        return false;
    }

    /// <summary>Resolves a blob binding's path for this invocation (a null one is a missing value here).</summary>
    public static BlobAddress Resolve(FunctionDefinition function, BindingMetadata binding, InvocationContext invocation) =>
        binding.Path!.TryResolve(invocation.Lookup, out var path, out var missing, out var why)
            ? Checked(function, binding, path)
            : throw Missing(function, binding, missing!, why);

    private static BindingResolutionException Missing(FunctionDefinition function, BindingMetadata binding, BindingExpression missing, string? why) =>
        new($"function {function.Name}: binding \"{binding.Name}\" path \"{binding.Path!.Pattern}\" needs a value for {{{missing}}}" +
            (why is null ? ", which the trigger did not supply (route, query, JSON body or blob name)" : ": " + why));

    /// <summary>The address a resolved path names, checked against storage's naming rules.</summary>
    private static BlobAddress Checked(FunctionDefinition function, BindingMetadata binding, string path)
    {
        var slash = path.IndexOf('/');
        if (slash == path.Length - 1)
            throw new BindingResolutionException(
                $"function {function.Name}: binding \"{binding.Name}\" path \"{binding.Path!.Pattern}\" resolved to \"{path}\", which names no blob");
        var address = BlobAddress.Parse(binding.Connection, path);
        try
        {
            BlobNames.ValidateContainer(address.Container);
            BlobNames.ValidateBlob(address.Name);
        }
        catch (ArgumentException e)
        {
            throw new BindingResolutionException(
                $"function {function.Name}: binding \"{binding.Name}\" path \"{binding.Path!.Pattern}\" resolved to \"{path}\": {e.Message.Split(" (Parameter", 2)[0]}");
        }
        return address;
    }
}
