namespace FaaST.ScaleController.Control;

/// <summary>An instance the controller asks for its vote: its id and its peer endpoint (where it serves
/// <c>InstanceScaling</c>, the address its membership record advertises).</summary>
public sealed record VoteEndpoint(string InstanceId, Uri PeerAddress);

/// <summary>
/// What the frontend measured for one app over the last interval — its own signal beside the instances'
/// votes: requests queued while no instance was ready mean scale out whatever the instances say.
/// </summary>
/// <param name="RequestsPerSecond">Invocations forwarded per second over the interval.</param>
/// <param name="InFlight">Invocations forwarded and not yet answered, now.</param>
/// <param name="Queued">Invocations waiting for a ready instance, now.</param>
/// <param name="LatencyP50Ms">Median invocation latency through the frontend over the interval.</param>
/// <param name="LatencyP99Ms">99th percentile of the same.</param>
public sealed record FrontendLoad(double RequestsPerSecond, int InFlight, int Queued, double LatencyP50Ms, double LatencyP99Ms)
{
    /// <summary>No traffic at all.</summary>
    public static FrontendLoad Idle { get; } = new(0, 0, 0, 0, 0);
}

/// <summary>The three policies of Faa$T §4, as <c>PolicyVote.policy</c> names them on the wire.</summary>
public static class PolicyNames
{
    public const string Compute = "compute";
    public const string CacheSize = "cache-size";
    public const string Bandwidth = "bandwidth";
}

/// <summary>One policy's vote from one instance: +n out by n, 0 keep, −n in by n, and why.</summary>
public sealed record PolicyVoteEntry(string Policy, int Delta, string Reason);

/// <summary>What the instance measured over the interval, as it reported it with its vote (a summary of
/// <c>InstanceLoad</c> for the operator).</summary>
public sealed record InstanceLoadSummary(double InvocationsPerSecond, int InFlight, double Utilization, double LatencyP50Ms, long Evictions, long CacheAccesses);

/// <summary>
/// One instance's answer to a vote query, or the fact that it gave none in time (<see cref="Answered"/>
/// false, <see cref="Error"/> saying why): a missing answer counts as a 0 vote, so it never adds an
/// instance and always blocks a scale-in (in needs every policy of every instance).
/// </summary>
public sealed record InstanceVote(
    string InstanceId,
    bool Answered,
    IReadOnlyList<PolicyVoteEntry> Votes,
    string State,
    InstanceLoadSummary? Load,
    string? Error,
    DateTimeOffset At)
{
    /// <summary>An instance that did not answer: "no answer" and why.</summary>
    public static InstanceVote NoAnswer(string instanceId, string why, DateTimeOffset at) =>
        new(instanceId, false, [], "unknown", null, "no answer: " + why, at);
}

/// <summary>What the controller tells an instance with the query (<c>VoteRequest</c>).</summary>
/// <param name="App">The app's name.</param>
/// <param name="Instances">How many instances the controller counts (ready or starting).</param>
/// <param name="InstanceLoadSeconds">T_Load as measured by the platform; 0 when not measured.</param>
public sealed record VoteQuery(string App, int Instances, double InstanceLoadSeconds);

/// <summary>What a decision does.</summary>
public enum ScaleDecisionKind
{
    /// <summary>Keep the instance count.</summary>
    Hold,
    /// <summary>Add instances.</summary>
    Out,
    /// <summary>Remove (drain) instances.</summary>
    In,
    /// <summary>No invocation for the keep-alive: stop every instance (0); the next invocation loads the app again.</summary>
    Unload,
}

/// <summary>
/// What decided a change, as the platform's metrics count it (faast_platform_decisions_total's "dimension"): one of
/// Faa$T's three policies (compute, cache-size, bandwidth), or a rule of the controller's own. Carried by the decision
/// from where it is made, not read back out of the reason text.
/// </summary>
public static class ScaleDimension
{
    public const string Compute = PolicyNames.Compute;
    public const string CacheSize = PolicyNames.CacheSize;
    public const string Bandwidth = PolicyNames.Bandwidth;
    /// <summary>Invocations queued at the frontend with no ready instance.</summary>
    public const string FrontendQueue = "frontend-queue";
    /// <summary>No invocation for the keep-alive: unload.</summary>
    public const string KeepAlive = "keep-alive";
    /// <summary>minInstances or maxInstances.</summary>
    public const string Bounds = "bounds";
    /// <summary>An instance's unrequested vote (a bandwidth scale-out of a large object).</summary>
    public const string Unrequested = "unrequested";
    /// <summary>Every vote of every instance said in.</summary>
    public const string AllIn = "all-in";
    /// <summary>A vote of a policy this platform does not know (a newer instance's): counted, not named.</summary>
    public const string Other = "other";
    /// <summary>Nothing decided (a hold with no vote either way).</summary>
    public const string None = "none";

    /// <summary>The dimension of an out vote of <paramref name="policy"/>: the policy's name if it is one of the three.</summary>
    public static string OfPolicy(string policy) => policy is Compute or CacheSize or Bandwidth ? policy : Other;
}

/// <summary>One decision of the controller for one app: the instance count to have, the change, why, and what decided
/// (<see cref="ScaleDimension"/>).</summary>
public sealed record ScaleDecision(int Target, int Delta, string Reason, ScaleDecisionKind Kind, DateTimeOffset At, string Dimension)
{
    /// <summary>Whether the decision changes the instance count.</summary>
    public bool Changes => Kind != ScaleDecisionKind.Hold;
}

/// <summary>The votes of one round combined by the conflict rule: the delta and the instance/policy that
/// decided it.</summary>
/// <param name="Delta">+n out, −1 in, 0 keep.</param>
/// <param name="Reason">Names the deciding instance and policy with its own reason.</param>
/// <param name="Dimension">What decided (<see cref="ScaleDimension"/>).</param>
public sealed record CombinedVote(int Delta, string Reason, string Dimension);
