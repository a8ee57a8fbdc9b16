using System.Diagnostics.Metrics;

namespace FaaST.ScaleController.Telemetry;

/// <summary>
/// The frontend's per-request instruments, recorded from one-line hooks in <c>AppFrontend</c> (the forwarding path
/// belongs to the frontend; this is all the platform's telemetry adds to it). A static meter, so that the hook costs a
/// static field read and, with no listener, nothing more; with one, a histogram record with one tag (the app), which
/// the SDK aggregates without allocating. Process-wide: a process runs one platform (tests that run several tell their
/// apps apart by the <c>app</c> tag).
/// </summary>
internal static class FrontendMetrics
{
    public const string Name = "FaaST.Platform.Frontend";

    // Seconds; from a tenth of a millisecond (the frontend's hop, docs/benchmarks.md) to the queue's 30 s timeout and beyond.
    private static readonly double[] Buckets =
        [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

    private static readonly Meter Meter = new(Name, "1.0");

    private static readonly Histogram<double> Duration = Meter.CreateHistogram("faast.platform.request.duration", "s",
        "Invocations forwarded and answered, from the frontend's receipt to the last byte of the instance's answer (the hop and any queueing included), by app",
        advice: new InstrumentAdvice<double> { HistogramBucketBoundaries = Buckets });

    private static readonly Histogram<double> QueueWait = Meter.CreateHistogram("faast.platform.queue.wait", "s",
        "How long an invocation waited in the frontend's queue for a ready instance (cold starts, every instance busy), by app",
        advice: new InstrumentAdvice<double> { HistogramBucketBoundaries = Buckets });

    /// <summary>An invocation answered: its time in the frontend, hop included.</summary>
    public static void Forwarded(string app, TimeSpan elapsed) => Duration.Record(elapsed.TotalSeconds, new KeyValuePair<string, object?>("app", app));

    /// <summary>An invocation that waited in the queue got an instance after <paramref name="waited"/>.</summary>
    public static void Dequeued(string app, TimeSpan waited) => QueueWait.Record(waited.TotalSeconds, new KeyValuePair<string, object?>("app", app));
}
