using System.Globalization;
using FaaST.Policy;

namespace FaaST.ScaleController.Control;

/// <summary>
/// The conflict rule of Faa$T §4: the app scales out if any policy of any instance says out (by the largest
/// out), in only if every policy of every instance says in (by one, whatever the size of the in votes:
/// removing instances is cheap to delay and costly to overdo, since a drained instance's cache is lost),
/// else it keeps its size. The frontend's own signal comes first: invocations queued while no instance is
/// ready need an instance whatever the (absent) votes say.
/// </summary>
public static class VoteCombiner
{
    /// <summary>Combines one round's votes. A policy disabled in <paramref name="enabled"/> is not
    /// counted; an instance that did not answer counts as a 0 vote (it blocks an in).</summary>
    /// <param name="votes">One entry per ready instance asked this round.</param>
    /// <param name="enabled">Which policies vote (<c>scale.votes</c>).</param>
    /// <param name="load">The frontend's measurements.</param>
    public static CombinedVote Combine(IReadOnlyList<InstanceVote> votes, ScaleVotes enabled, FrontendLoad load)
    {
        ArgumentNullException.ThrowIfNull(votes);
        ArgumentNullException.ThrowIfNull(enabled);
        ArgumentNullException.ThrowIfNull(load);
        if (load.Queued > 0 && votes.Count == 0)
            return new CombinedVote(1, F($"frontend: {load.Queued} invocation(s) queued with no ready instance"), ScaleDimension.FrontendQueue);

        (string Instance, PolicyVoteEntry Vote)? largestOut = null;
        (string Instance, PolicyVoteEntry Vote)? firstIn = null;
        string? blocker = null;
        var counted = 0;
        foreach (var instance in votes)
        {
            if (!instance.Answered)
            {
                blocker ??= F($"instance {instance.InstanceId}: {instance.Error}");
                continue;
            }
            var countedHere = 0;
            foreach (var vote in instance.Votes)
            {
                if (!IsEnabled(vote.Policy, enabled))
                    continue;
                countedHere++;
                if (vote.Delta > 0)
                {
                    if (largestOut is null || vote.Delta > largestOut.Value.Vote.Delta)
                        largestOut = (instance.InstanceId, vote);
                }
                else if (vote.Delta < 0)
                {
                    firstIn ??= (instance.InstanceId, vote);
                }
                else
                {
                    blocker ??= F($"instance {instance.InstanceId} {vote.Policy} votes 0: {vote.Reason}");
                }
            }
            // An instance with no enabled vote has not agreed to an in.
            if (countedHere == 0)
                blocker ??= F($"instance {instance.InstanceId} has no vote of an enabled policy");
            counted += countedHere;
        }

        if (largestOut is { } o)
            return new CombinedVote(o.Vote.Delta, F($"instance {o.Instance} {o.Vote.Policy} votes +{o.Vote.Delta}: {o.Vote.Reason}"), ScaleDimension.OfPolicy(o.Vote.Policy));
        if (votes.Count == 0)
            return new CombinedVote(0, "no ready instance to ask", ScaleDimension.None);
        if (blocker is null && firstIn is { } i)
        {
            return new CombinedVote(-1, F($"all {counted} vote(s) of {votes.Count} instance(s) say in (instance {i.Instance} {i.Vote.Policy}: {i.Vote.Reason})"), ScaleDimension.AllIn);
        }
        return new CombinedVote(0, F($"no policy says out, not all say in ({blocker})"), ScaleDimension.None);
    }

    /// <summary>Whether <c>scale.votes</c> counts a policy; a policy it does not name (a newer instance's) is counted.</summary>
    internal static bool IsEnabled(string policy, ScaleVotes enabled) => policy switch
    {
        PolicyNames.Compute => enabled.Compute,
        PolicyNames.CacheSize => enabled.CacheSize,
        PolicyNames.Bandwidth => enabled.Bandwidth,
        _ => true,
    };

    private static string F(FormattableString s) => s.ToString(CultureInfo.InvariantCulture);
}
