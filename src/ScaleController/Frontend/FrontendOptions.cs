namespace FaaST.ScaleController.Frontend;

/// <summary>
/// How an app's frontend queues and forwards invocations (Faa$T §4, Fig. 5). Every default is here and in
/// docs/scaling.md ("The frontend"); <see cref="Validate"/> names the setting that is wrong.
/// </summary>
public sealed record FrontendOptions
{
    /// <summary>Invocations that may wait for a ready instance at once; one more gets 503 at once. Default 1000.</summary>
    public int MaxQueueLength { get; init; } = 1000;

    /// <summary>How long an invocation waits for a ready instance before it gets 503. Default 30 s.</summary>
    public TimeSpan QueueTimeout { get; init; } = TimeSpan.FromSeconds(30);

    /// <summary>How long a TCP connect to an instance may take before the instance counts as failed. Default 2 s.</summary>
    public TimeSpan ConnectTimeout { get; init; } = TimeSpan.FromSeconds(2);

    /// <summary>The Retry-After a 503 carries (whole seconds, at least 1). Default 1 s.</summary>
    public TimeSpan RetryAfter { get; init; } = TimeSpan.FromSeconds(1);

    /// <summary>
    /// How many times an idempotent request without a body is sent again after it failed on an instance once
    /// sent (connect failures are retried on every other instance regardless: nothing was sent). Default 2.
    /// </summary>
    public int MaxRetries { get; init; } = 2;

    /// <summary>Bytes of one pooled buffer used to copy a body (each direction). Default 64 KiB.</summary>
    public int CopyBufferSize { get; init; } = 64 * 1024;

    /// <summary>Throws an <see cref="ArgumentException"/> naming the setting and the reason when a value is out of range.</summary>
    public FrontendOptions Validate()
    {
        if (MaxQueueLength < 0)
            throw new ArgumentException($"FrontendOptions.MaxQueueLength is {MaxQueueLength}: it must be 0 or more", nameof(MaxQueueLength));
        if (QueueTimeout < TimeSpan.Zero)
            throw new ArgumentException($"FrontendOptions.QueueTimeout is {QueueTimeout}: it must not be negative", nameof(QueueTimeout));
        if (ConnectTimeout <= TimeSpan.Zero)
            throw new ArgumentException($"FrontendOptions.ConnectTimeout is {ConnectTimeout}: it must be positive", nameof(ConnectTimeout));
        if (RetryAfter < TimeSpan.FromSeconds(1))
            throw new ArgumentException($"FrontendOptions.RetryAfter is {RetryAfter}: it must be at least 1 s (Retry-After is whole seconds)", nameof(RetryAfter));
        if (MaxRetries < 0)
            throw new ArgumentException($"FrontendOptions.MaxRetries is {MaxRetries}: it must be 0 or more", nameof(MaxRetries));
        if (CopyBufferSize is < 4096 or > 4 * 1024 * 1024)
            throw new ArgumentException($"FrontendOptions.CopyBufferSize is {CopyBufferSize}: it must be between 4096 and 4194304 bytes", nameof(CopyBufferSize));
        return this;
    }
}

/// <summary>An instance the frontend may forward to: its id, the base address of its HTTP listener and the app version it runs.</summary>
public sealed record InstanceEndpoint(string Id, Uri BaseAddress, string Version);

/// <summary>Whether an instance receives new invocations.</summary>
public enum InstanceRouting
{
    /// <summary>Receives new invocations.</summary>
    Ready,

    /// <summary>Finishes what it has; receives nothing new.</summary>
    Draining,
}

/// <summary>An instance as the frontend sees it now.</summary>
public sealed record InstanceView(string Id, Uri BaseAddress, string Version, InstanceRouting State, int Outstanding);

/// <summary>
/// An app's frontend load since the previous <see cref="AppFrontend.TakeStats"/> (the compute vote's and the
/// controller's input, Faa$T §4): invocations completed per second over the interval, in flight and queued now,
/// latency percentiles of the invocations completed in the interval (frontend-measured, queueing included).
/// </summary>
/// <param name="Interval">The time since the previous call (since creation for the first).</param>
/// <param name="InvocationsPerSecond">Invocations answered by an instance per second over the interval.</param>
/// <param name="InFlight">Invocations forwarded and not yet finished, now.</param>
/// <param name="Queued">Invocations waiting for a ready instance, now.</param>
/// <param name="LatencyP50Ms">Median latency over the interval in milliseconds (0 when nothing completed).</param>
/// <param name="LatencyP99Ms">99th percentile latency over the interval in milliseconds (0 when nothing completed).</param>
/// <param name="Completed">Invocations answered by an instance (any status code the instance chose).</param>
/// <param name="Failed">Invocations the frontend answered itself with 502 or 503, or aborted mid-response.</param>
public readonly record struct FrontendStats(
    TimeSpan Interval, double InvocationsPerSecond, int InFlight, int Queued,
    double LatencyP50Ms, double LatencyP99Ms, long Completed, long Failed);
