namespace FaaST.Policy;

/// <summary>
/// <c>faast.json</c>'s <c>scale</c> section: how the platform's scale controller sizes the app (Faa$T §4;
/// the utilisation band and the drain-not-migrate rule after Pocket, OSDI'18 §4). Every key it leaves out
/// is at its default; <see cref="Default"/> is the policy of an app without the section.
/// </summary>
/// <remarks>
/// This record is the one place the defaults live; <c>schemas/faast.schema.json</c> repeats them and a test
/// keeps the two in agreement. The parser (<see cref="CachePolicyFile"/>) checks every range and the rules
/// between keys (<see cref="MinInstances"/> ≤ <see cref="MaxInstances"/>, <c>band.low</c> &lt;
/// <c>band.high</c>); a policy built in code is taken as given.
/// </remarks>
public sealed record ScalePolicy
{
    /// <summary>The most instances any app may have: a bound on what one platform process starts and
    /// on the fan-out of a bandwidth scale-out.</summary>
    public const int InstanceLimit = 64;

    /// <summary>The policy of an app without a <c>scale</c> section.</summary>
    public static ScalePolicy Default { get; } = new();

    /// <summary><c>scale.minInstances</c>, default 1: the fewest instances while the app is loaded; votes
    /// never go below it (only the keep-alive unload goes to 0). 1 to <see cref="InstanceLimit"/>.</summary>
    public int MinInstances { get; init; } = 1;

    /// <summary><c>scale.maxInstances</c>, default 8: the most instances, whatever the votes or an
    /// unrequested request ask. At least <see cref="MinInstances"/>, at most <see cref="InstanceLimit"/>.</summary>
    public int MaxInstances { get; init; } = 8;

    /// <summary><c>scale.interval</c>, default 1 s: how often the controller asks every instance for its
    /// vote (the "every interval"). 0.1 s to 1 minute.</summary>
    public TimeSpan Interval { get; init; } = TimeSpan.FromSeconds(1);

    /// <summary><c>scale.scaleOutCooldown</c>, default 5 s: no scale-out decision sooner than this after the
    /// previous change (an unrequested request is the exception). 0 to 1 hour.</summary>
    public TimeSpan ScaleOutCooldown { get; init; } = TimeSpan.FromSeconds(5);

    /// <summary><c>scale.scaleInCooldown</c>, default 30 s: no scale-in decision sooner than this after the
    /// previous change. 0 to 1 day.</summary>
    public TimeSpan ScaleInCooldown { get; init; } = TimeSpan.FromSeconds(30);

    /// <summary><c>scale.scaleInRounds</c>, default 3: consecutive rounds in which every policy of every
    /// instance votes in before the controller removes an instance (hysteresis). 1 to 1000.</summary>
    public int ScaleInRounds { get; init; } = 3;

    /// <summary><c>scale.keepAlive</c>, default 10 minutes: an app with no invocation for this long is
    /// unloaded (0 instances) and loaded again by its next invocation. 1 s to 30 days.</summary>
    public TimeSpan KeepAlive { get; init; } = TimeSpan.FromMinutes(10);

    /// <summary><c>scale.band</c>, default 0.6 to 0.8: the compute vote's utilisation band (Pocket §4).</summary>
    public UtilisationBand Band { get; init; } = UtilisationBand.Default;

    /// <summary><c>scale.rareAccessesPerSecond</c>, default 1.0: below this many cache accesses a second the
    /// cache-size vote says in. 0 to 1,000,000.</summary>
    public double RareAccessesPerSecond { get; init; } = 1.0;

    /// <summary><c>scale.votes</c>: which policies vote (all by default).</summary>
    public ScaleVotes Votes { get; init; } = ScaleVotes.Default;

    /// <summary><c>scale.bandwidth.minObjectSize</c>, default 64 MiB: objects smaller than this never
    /// trigger a bandwidth scale-out. At least 1 byte.</summary>
    public long BandwidthMinObjectSize { get; init; } = 64 * ByteSize.MiB;

    /// <summary><c>scale.queueTimeout</c>, default 30 s: how long the frontend queues an invocation while no
    /// instance is ready before it answers 503. 1 ms to 10 minutes.</summary>
    public TimeSpan QueueTimeout { get; init; } = TimeSpan.FromSeconds(30);

    /// <summary><c>scale.maxQueueLength</c>, default 1000: invocations the frontend queues per app while
    /// no instance is ready; more are answered 503 at once. 1 to 1,000,000.</summary>
    public int MaxQueueLength { get; init; } = 1000;
}

/// <summary><c>scale.band</c>: the compute vote's utilisation band. Out above <see cref="High"/>, in below
/// <see cref="Low"/>; both in (0, 1], <see cref="Low"/> &lt; <see cref="High"/>.</summary>
public sealed record UtilisationBand
{
    /// <summary>Pocket's band, 0.6 to 0.8.</summary>
    public static UtilisationBand Default { get; } = new();

    /// <summary><c>scale.band.low</c>, default 0.6.</summary>
    public double Low { get; init; } = 0.6;

    /// <summary><c>scale.band.high</c>, default 0.8.</summary>
    public double High { get; init; } = 0.8;

    /// <summary>The band's middle: the utilisation a compute scale-out aims for.</summary>
    public double Target => (Low + High) / 2;
}

/// <summary><c>scale.votes</c>: which of the three policies of Faa$T §4 vote. A disabled policy's vote is
/// neither asked for nor counted (it does not block an all-in).</summary>
public sealed record ScaleVotes
{
    /// <summary>All three vote.</summary>
    public static ScaleVotes Default { get; } = new();

    /// <summary><c>scale.votes.compute</c>, default true.</summary>
    public bool Compute { get; init; } = true;

    /// <summary><c>scale.votes.cacheSize</c>, default true.</summary>
    public bool CacheSize { get; init; } = true;

    /// <summary><c>scale.votes.bandwidth</c>, default true.</summary>
    public bool Bandwidth { get; init; } = true;
}
