using System.Diagnostics;
using System.Diagnostics.Metrics;
using FaaST.Runtime.Invocation;
using FaaST.Runtime.Workers;
using FaaST.Storage;

namespace FaaST.Runtime.Telemetry;

/// <summary>How an invocation ended (the <c>outcome</c> tag of <c>faast.invocations</c>).</summary>
internal enum InvocationOutcome
{
    /// <summary>The function ran and its outputs were written.</summary>
    Success,

    /// <summary>The function ran and failed (it threw or answered with a failure).</summary>
    Failure,

    /// <summary>The invocation ran past functionTimeout.</summary>
    Timeout,

    /// <summary>No worker, no storage, or the function could not be loaded: the platform, not the function.</summary>
    Unavailable,

    /// <summary>The caller went away (client disconnect, host stopping).</summary>
    Cancelled,

    /// <summary>Anything else: a binding that did not resolve, storage refusing a request, a host error.</summary>
    Error,
}

/// <summary>
/// The host's own instruments, meter and activity source "FaaST.Host": invocations by function and
/// outcome, their duration, invocations running and waiting for a worker, worker restarts. The scale
/// controller reads them from /metrics (or OTLP).
/// </summary>
/// <remarks>
/// The meter comes from the host's <see cref="IMeterFactory"/>, so it is scoped to this host: the
/// host's MeterProvider keeps it and drops other hosts' in the same process (tests run several).
/// The per-invocation path adds to counters with tag arrays made once per function and outcome, and
/// keeps the running count in a plain field per function: no allocation per invocation.
/// </remarks>
internal sealed class HostMetrics
{
    public const string Name = "FaaST.Host";

    /// <summary>Spans of an invocation: "invoke", and under it "read", "worker" and "write".</summary>
    public static readonly ActivitySource Activities = new(Name, "1.0");

    private static readonly int OutcomeCount = Enum.GetValues<InvocationOutcome>().Length;

    // Seconds; from half a millisecond (a no-op on a warm worker) to functionTimeout's default.
    private static readonly double[] DurationBuckets =
        [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];

    private readonly Counter<long> _invocations;
    private readonly Histogram<double> _duration;
    private readonly Counter<long> _restarts;
    private readonly KeyValuePair<string, object?>[] _runtimeTag;
    private readonly List<FunctionMetrics> _functions = [];
    private long _queued;

    public HostMetrics(IMeterFactory meters, FunctionApp app)
    {
        var meter = meters.Create(new MeterOptions(Name) { Version = "1.0" });
        _runtimeTag = [new("runtime", app.WorkerRuntime)];
        _invocations = meter.CreateCounter<long>("faast.invocations", "{invocation}",
            "Invocations that ended, by function and outcome (success, failure, timeout, unavailable, cancelled, error)");
        _duration = meter.CreateHistogram("faast.invocation.duration", "s",
            "Invocation duration from the trigger to the written outputs, by function",
            advice: new InstrumentAdvice<double> { HistogramBucketBoundaries = DurationBuckets });
        meter.CreateObservableUpDownCounter("faast.invocations.active", ObserveActive, "{invocation}",
            "Invocations running now (reading inputs, waiting for or on a worker, writing outputs), by function");
        meter.CreateObservableUpDownCounter("faast.invocations.queued", () => Volatile.Read(ref _queued), "{invocation}",
            "Invocations waiting for a worker (none is ready)");
        _restarts = meter.CreateCounter<long>("faast.worker.restarts", "{restart}",
            "Worker processes started again after one exited, hung or failed to start, by runtime");
    }

    /// <summary>The instruments of one function, made once when the invoker plans it.</summary>
    public FunctionMetrics For(FunctionDefinition function)
    {
        var metrics = new FunctionMetrics(this, function);
        lock (_functions)
            _functions.Add(metrics);
        return metrics;
    }

    /// <summary>The instance's load over intervals, for its scale votes (fed by every invocation's start and end).</summary>
    public Scaling.InvocationLoad Load { get; } = new();

    /// <summary>Invocations waiting for a worker now.</summary>
    public long Queued => Volatile.Read(ref _queued);

    /// <summary>One of the app's workers is being started again (tagged with the app's worker runtime).</summary>
    public void WorkerRestarted() => _restarts.Add(1, _runtimeTag);

    /// <summary>
    /// Counts an invocation as queued while <paramref name="pick"/> (waiting for a ready worker) is
    /// pending. Only called when the pick did not complete at once, so the common case costs nothing.
    /// </summary>
    public async ValueTask<T> WhileQueuedAsync<T>(ValueTask<T> pick)
    {
        Interlocked.Increment(ref _queued);
        try
        {
            return await pick;
        }
        finally
        {
            Interlocked.Decrement(ref _queued);
        }
    }

    /// <summary>How an exception ends an invocation; <paramref name="callerCancelled"/>: the caller's token fired.</summary>
    public static InvocationOutcome Classify(Exception e, bool callerCancelled) => e switch
    {
        FunctionFailedException => InvocationOutcome.Failure,
        FunctionTimeoutException => InvocationOutcome.Timeout,
        WorkerUnavailableException or StorageUnavailableException or FunctionUnavailableException => InvocationOutcome.Unavailable,
        OperationCanceledException when callerCancelled => InvocationOutcome.Cancelled,
        _ => InvocationOutcome.Error,
    };

    public static string OutcomeName(InvocationOutcome outcome) => outcome switch
    {
        InvocationOutcome.Success => "success",
        InvocationOutcome.Failure => "failure",
        InvocationOutcome.Timeout => "timeout",
        InvocationOutcome.Unavailable => "unavailable",
        InvocationOutcome.Cancelled => "cancelled",
        _ => "error",
    };

    /// <summary>The OpenTelemetry FaaS trigger of a function (faas.trigger).</summary>
    public static string TriggerName(FunctionDefinition function) => function.Trigger?.Type switch
    {
        BindingMetadata.HttpTrigger => "http",
        BindingMetadata.BlobTrigger => "datasource",
        _ => "other",
    };

    private IEnumerable<Measurement<long>> ObserveActive()
    {
        FunctionMetrics[] functions;
        lock (_functions)
            functions = [.. _functions];
        foreach (var f in functions)
            yield return new Measurement<long>(f.Active, f.FunctionTag);
    }

    /// <summary>One function's instruments: its tag arrays per outcome, span name and running count.</summary>
    public sealed class FunctionMetrics
    {
        private readonly HostMetrics _host;
        private readonly KeyValuePair<string, object?>[][] _outcomeTags;
        private long _active;

        internal FunctionMetrics(HostMetrics host, FunctionDefinition function)
        {
            _host = host;
            Function = function.Name;
            Trigger = TriggerName(function);
            SpanName = "invoke " + function.Name;
            FunctionTag = [new("function", function.Name)];
            _outcomeTags = new KeyValuePair<string, object?>[OutcomeCount][];
            foreach (var outcome in Enum.GetValues<InvocationOutcome>())
                _outcomeTags[(int)outcome] = [new("function", function.Name), new("outcome", OutcomeName(outcome))];
        }

        public string Function { get; }

        /// <summary>faas.trigger of the function's spans.</summary>
        public string Trigger { get; }

        /// <summary>"invoke " + the function's name, made once.</summary>
        public string SpanName { get; }

        internal KeyValuePair<string, object?>[] FunctionTag { get; }

        /// <summary>Invocations of this function running now.</summary>
        public long Active => Volatile.Read(ref _active);

        /// <summary>An invocation starts; returns its start timestamp for <see cref="Finished"/>.</summary>
        public long Started()
        {
            Interlocked.Increment(ref _active);
            var now = Stopwatch.GetTimestamp();
            _host.Load.Started(now);
            return now;
        }

        /// <summary>The invocation that <see cref="Started"/> returned <paramref name="started"/> for has ended.</summary>
        public void Finished(long started, InvocationOutcome outcome)
        {
            Interlocked.Decrement(ref _active);
            var now = Stopwatch.GetTimestamp();
            _host.Load.Finished(started, now);
            _host._invocations.Add(1, _outcomeTags[(int)outcome]);
            _host._duration.Record(Stopwatch.GetElapsedTime(started, now).TotalSeconds, FunctionTag);
        }
    }
}
