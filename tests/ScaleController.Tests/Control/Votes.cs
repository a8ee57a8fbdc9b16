using FaaST.ScaleController.Control;

namespace FaaST.ScaleController.Tests.Control;

/// <summary>Builds instance votes for the unit tests of the conflict rule and the decider.</summary>
internal static class Votes
{
    public static readonly DateTimeOffset At = new(2026, 1, 1, 0, 0, 0, TimeSpan.Zero);

    /// <summary>An instance that answered with (policy, delta) pairs; each reason is "POLICY DELTA".</summary>
    public static InstanceVote Instance(string id, params (string Policy, int Delta)[] votes) =>
        new(id, true, [.. votes.Select(v => new PolicyVoteEntry(v.Policy, v.Delta, $"{v.Policy} {v.Delta}"))], "active", null, null, At);

    /// <summary>An instance whose three policies all vote <paramref name="delta"/>.</summary>
    public static InstanceVote All(string id, int delta) =>
        Instance(id, (PolicyNames.Compute, delta), (PolicyNames.CacheSize, delta), (PolicyNames.Bandwidth, delta));

    public static InstanceVote Silent(string id) => InstanceVote.NoAnswer(id, "no reply within 500 ms", At);

    public static IReadOnlyList<InstanceVote> AllIn(int instances) =>
        [.. Enumerable.Range(0, instances).Select(i => All("i" + i, -1))];

    public static IReadOnlyList<InstanceVote> AllKeep(int instances) =>
        [.. Enumerable.Range(0, instances).Select(i => All("i" + i, 0))];

    /// <summary>One instance votes compute +<paramref name="delta"/>, the others keep.</summary>
    public static IReadOnlyList<InstanceVote> OneOut(int instances, int delta) =>
        [Instance("i0", (PolicyNames.Compute, delta), (PolicyNames.CacheSize, 0), (PolicyNames.Bandwidth, 0)),
            .. Enumerable.Range(1, instances - 1).Select(i => All("i" + i, 0))];
}
