using FaaST.Policy;
using FaaST.ScaleController.Control;
using static FaaST.ScaleController.Tests.Control.Votes;

namespace FaaST.ScaleController.Tests.Control;

/// <summary>The conflict rule of Faa$T §4: out if any policy says out (by the largest), in only if all say
/// in (by one), else keep; and the frontend's own signal.</summary>
public sealed class VoteCombinerTests
{
    private static CombinedVote Combine(params InstanceVote[] votes) =>
        VoteCombiner.Combine(votes, ScaleVotes.Default, FrontendLoad.Idle);

    [Fact]
    public void One_out_vote_among_in_votes_scales_out()
    {
        var combined = Combine(All("a", -1), Instance("b", (PolicyNames.Compute, -1), (PolicyNames.CacheSize, 1), (PolicyNames.Bandwidth, -1)));

        Assert.Equal(1, combined.Delta);
    }

    [Fact]
    public void Out_is_by_the_largest_out_vote_and_names_its_instance_and_policy()
    {
        var combined = Combine(
            Instance("a", (PolicyNames.Compute, 2), (PolicyNames.CacheSize, 1)),
            Instance("b", (PolicyNames.Bandwidth, 3), (PolicyNames.Compute, 1)));

        Assert.Equal(3, combined.Delta);
        Assert.Contains("instance b bandwidth votes +3: bandwidth 3", combined.Reason);
    }

    [Fact]
    public void In_when_every_policy_of_every_instance_says_in_is_by_one()
    {
        var combined = Combine(Instance("a", (PolicyNames.Compute, -2), (PolicyNames.CacheSize, -1), (PolicyNames.Bandwidth, -3)), All("b", -1));

        Assert.Equal(-1, combined.Delta);
        Assert.Contains("all 6 vote(s) of 2 instance(s) say in", combined.Reason);
    }

    [Fact]
    public void One_keep_vote_blocks_an_in_and_is_named()
    {
        var combined = Combine(All("a", -1), Instance("b", (PolicyNames.Compute, -1), (PolicyNames.CacheSize, 0), (PolicyNames.Bandwidth, -1)));

        Assert.Equal(0, combined.Delta);
        Assert.Contains("instance b cache-size votes 0", combined.Reason);
    }

    [Fact]
    public void An_instance_that_did_not_answer_blocks_an_in()
    {
        var combined = Combine(All("a", -1), Silent("b"));

        Assert.Equal(0, combined.Delta);
        Assert.Contains("instance b: no answer", combined.Reason);
    }

    [Fact]
    public void An_instance_that_did_not_answer_does_not_stop_another_scaling_out()
    {
        Assert.Equal(2, Combine(Silent("a"), Instance("b", (PolicyNames.Compute, 2))).Delta);
    }

    [Fact]
    public void A_disabled_policy_neither_scales_out_nor_blocks_an_in()
    {
        var votes = new[] { Instance("a", (PolicyNames.Compute, -1), (PolicyNames.CacheSize, 4), (PolicyNames.Bandwidth, 0)) };

        var combined = VoteCombiner.Combine(votes, new ScaleVotes { CacheSize = false, Bandwidth = false }, FrontendLoad.Idle);

        Assert.Equal(-1, combined.Delta);
    }

    [Fact]
    public void An_instance_without_any_enabled_vote_blocks_an_in()
    {
        var votes = new[] { All("a", -1), Instance("b", (PolicyNames.CacheSize, -1)) };

        var combined = VoteCombiner.Combine(votes, new ScaleVotes { CacheSize = false }, FrontendLoad.Idle);

        Assert.Equal(0, combined.Delta);
        Assert.Contains("instance b has no vote of an enabled policy", combined.Reason);
    }

    [Fact]
    public void Invocations_queued_with_no_ready_instance_scale_out_by_one()
    {
        var combined = VoteCombiner.Combine([], ScaleVotes.Default, FrontendLoad.Idle with { Queued = 7 });

        Assert.Equal(1, combined.Delta);
        Assert.Contains("frontend: 7 invocation(s) queued with no ready instance", combined.Reason);
    }

    [Fact]
    public void No_ready_instance_and_nothing_queued_keeps_the_size()
    {
        Assert.Equal(0, VoteCombiner.Combine([], ScaleVotes.Default, FrontendLoad.Idle).Delta);
    }
}
