using FaaST.Policy;
using FaaST.ScaleController.Control;
using Microsoft.Extensions.Time.Testing;
using static FaaST.ScaleController.Tests.Control.Votes;

namespace FaaST.ScaleController.Tests.Control;

/// <summary>The decider: cool-downs, hysteresis, clamps, keep-alive unload and unrequested requests, on a fake
/// clock moved one step at a time.</summary>
public sealed class ScaleDeciderTests
{
    private readonly FakeTimeProvider _time = new(At);

    private static readonly ScalePolicy Policy = ScalePolicy.Default with
    {
        MinInstances = 1,
        MaxInstances = 8,
        ScaleOutCooldown = TimeSpan.FromSeconds(5),
        ScaleInCooldown = TimeSpan.FromSeconds(30),
        ScaleInRounds = 3,
        KeepAlive = TimeSpan.FromMinutes(10),
    };

    private ScaleDecider NewDecider(ScalePolicy? policy = null) => new("app", policy ?? Policy, _time);

    /// <summary>A round with traffic up to now (so the keep-alive never runs out).</summary>
    private ScaleDecision Round(ScaleDecider decider, int current, IReadOnlyList<InstanceVote> votes, FrontendLoad? load = null) =>
        decider.Decide(current, votes, load ?? FrontendLoad.Idle with { RequestsPerSecond = 10 }, _time.GetUtcNow());

    private void Wait(double seconds) => _time.Advance(TimeSpan.FromSeconds(seconds));

    [Fact]
    public void An_out_vote_adds_its_instances_at_once_when_nothing_changed_before()
    {
        var decision = Round(NewDecider(), 2, OneOut(2, 3));

        Assert.Equal(ScaleDecisionKind.Out, decision.Kind);
        Assert.Equal(5, decision.Target);
        Assert.Equal(3, decision.Delta);
        Assert.Contains("instance i0 compute votes +3", decision.Reason);
        Assert.Equal(ScaleDimension.Compute, decision.Dimension);
    }

    [Fact]
    public void A_second_out_within_the_scale_out_cool_down_holds()
    {
        var decider = NewDecider();
        Round(decider, 2, OneOut(2, 1));
        Wait(4.9);

        var decision = Round(decider, 3, OneOut(3, 1));

        Assert.Equal(ScaleDecisionKind.Hold, decision.Kind);
        Assert.Equal(3, decision.Target);
        Assert.Contains("scale-out cool-down", decision.Reason);
    }

    [Fact]
    public void A_second_out_after_the_scale_out_cool_down_acts()
    {
        var decider = NewDecider();
        Round(decider, 2, OneOut(2, 1));
        Wait(5);

        var decision = Round(decider, 3, OneOut(3, 1));

        Assert.Equal(ScaleDecisionKind.Out, decision.Kind);
        Assert.Equal(4, decision.Target);
    }

    [Fact]
    public void An_out_never_goes_above_max_instances()
    {
        var decision = Round(NewDecider(), 6, OneOut(6, 5));

        Assert.Equal(8, decision.Target);
        Assert.Equal(2, decision.Delta);
    }

    [Fact]
    public void An_out_vote_at_max_instances_holds_and_says_so()
    {
        var decision = Round(NewDecider(), 8, OneOut(8, 1));

        Assert.Equal(ScaleDecisionKind.Hold, decision.Kind);
        Assert.Contains("at maxInstances 8", decision.Reason);
    }

    [Fact]
    public void In_needs_scale_in_rounds_consecutive_all_in_rounds()
    {
        var decider = NewDecider();

        var first = Round(decider, 3, AllIn(3));
        Wait(1);
        var second = Round(decider, 3, AllIn(3));
        Wait(1);
        var third = Round(decider, 3, AllIn(3));

        Assert.Equal(ScaleDecisionKind.Hold, first.Kind);
        Assert.Contains("all-in round 1 of 3", first.Reason);
        Assert.Equal(ScaleDecisionKind.Hold, second.Kind);
        Assert.Equal(ScaleDecisionKind.In, third.Kind);
        Assert.Equal(2, third.Target);
        Assert.Equal(-1, third.Delta);
        Assert.Equal(ScaleDimension.AllIn, third.Dimension);
    }

    [Fact]
    public void A_round_that_is_not_all_in_restarts_the_count()
    {
        var decider = NewDecider();
        Round(decider, 3, AllIn(3));
        Round(decider, 3, AllIn(3));
        Round(decider, 3, AllKeep(3));
        Round(decider, 3, AllIn(3));

        var decision = Round(decider, 3, AllIn(3));

        Assert.Equal(ScaleDecisionKind.Hold, decision.Kind);
        Assert.Contains("all-in round 2 of 3", decision.Reason);
    }

    [Fact]
    public void After_an_in_the_next_in_needs_its_rounds_again()
    {
        var decider = NewDecider(Policy with { ScaleInCooldown = TimeSpan.Zero });
        for (var i = 0; i < 3; i++)
            Round(decider, 4, AllIn(4));

        var decision = Round(decider, 3, AllIn(3));

        Assert.Equal(ScaleDecisionKind.Hold, decision.Kind);
        Assert.Equal(1, decider.AllInRounds);
    }

    [Fact]
    public void An_in_within_the_scale_in_cool_down_after_a_change_holds()
    {
        var decider = NewDecider();
        Round(decider, 2, OneOut(2, 1));
        Wait(10);
        for (var i = 0; i < 2; i++)
            Round(decider, 3, AllIn(3));

        var decision = Round(decider, 3, AllIn(3));

        Assert.Equal(ScaleDecisionKind.Hold, decision.Kind);
        Assert.Contains("scale-in cool-down for 20 s more", decision.Reason);
    }

    [Fact]
    public void An_in_after_the_scale_in_cool_down_acts()
    {
        var decider = NewDecider();
        Round(decider, 2, OneOut(2, 1));
        Wait(30);
        for (var i = 0; i < 2; i++)
            Round(decider, 3, AllIn(3));

        var decision = Round(decider, 3, AllIn(3));

        Assert.Equal(ScaleDecisionKind.In, decision.Kind);
        Assert.Equal(2, decision.Target);
    }

    [Fact]
    public void An_in_never_goes_below_min_instances()
    {
        var decider = NewDecider(Policy with { MinInstances = 2 });
        for (var i = 0; i < 2; i++)
            Round(decider, 2, AllIn(2));

        var decision = Round(decider, 2, AllIn(2));

        Assert.Equal(ScaleDecisionKind.Hold, decision.Kind);
        Assert.Contains("at minInstances 2", decision.Reason);
    }

    [Fact]
    public void Below_min_instances_the_count_is_restored_at_once_even_in_a_cool_down()
    {
        var decider = NewDecider(Policy with { MinInstances = 3 });
        Round(decider, 3, OneOut(3, 1));

        var decision = Round(decider, 2, AllKeep(2));

        Assert.Equal(ScaleDecisionKind.Out, decision.Kind);
        Assert.Equal(3, decision.Target);
        Assert.Contains("below minInstances 3", decision.Reason);
    }

    [Fact]
    public void Above_max_instances_the_count_is_cut_at_once()
    {
        var decision = Round(NewDecider(Policy with { MaxInstances = 4 }), 6, OneOut(6, 1));

        Assert.Equal(ScaleDecisionKind.In, decision.Kind);
        Assert.Equal(4, decision.Target);
    }

    [Fact]
    public void No_invocation_for_the_keep_alive_unloads_the_app()
    {
        var decider = NewDecider();
        var last = _time.GetUtcNow();
        _time.Advance(Policy.KeepAlive);

        var decision = decider.Decide(2, AllKeep(2), FrontendLoad.Idle, last);

        Assert.Equal(ScaleDecisionKind.Unload, decision.Kind);
        Assert.Equal(0, decision.Target);
        Assert.Contains("no invocation for 600 s", decision.Reason);
        Assert.Equal(ScaleDimension.KeepAlive, decision.Dimension);
    }

    [Fact]
    public void The_reload_schedules_unload_time_replaces_the_keep_alive_and_is_named_in_the_reason()
    {
        var decider = NewDecider();
        var last = _time.GetUtcNow();
        var at = last + TimeSpan.FromMinutes(1);
        _time.Advance(TimeSpan.FromSeconds(59));

        Assert.Equal(ScaleDecisionKind.Hold, decider.Decide(2, AllKeep(2), FrontendLoad.Idle, last, 0, (at, "unloaded 60 s after an invocation")).Kind);

        _time.Advance(TimeSpan.FromSeconds(1));
        var decision = decider.Decide(2, AllKeep(2), FrontendLoad.Idle, last, 0, (at, "unloaded 60 s after an invocation"));

        Assert.Equal(ScaleDecisionKind.Unload, decision.Kind);
        Assert.Equal(ScaleDimension.KeepAlive, decision.Dimension);
        Assert.Contains("no invocation for 60 s (unloaded 60 s after an invocation)", decision.Reason);
    }

    [Fact]
    public void An_unload_time_that_has_come_waits_for_invocations_in_flight()
    {
        var decider = NewDecider();
        var last = _time.GetUtcNow();
        _time.Advance(TimeSpan.FromMinutes(2));

        var decision = decider.Decide(1, AllKeep(1), FrontendLoad.Idle with { InFlight = 1 }, last, 0, (last + TimeSpan.FromMinutes(1), "schedule"));

        Assert.NotEqual(ScaleDecisionKind.Unload, decision.Kind);
    }

    [Theory]
    [InlineData(PolicyNames.Compute, ScaleDimension.Compute)]
    [InlineData(PolicyNames.CacheSize, ScaleDimension.CacheSize)]
    [InlineData(PolicyNames.Bandwidth, ScaleDimension.Bandwidth)]
    [InlineData("gpu", ScaleDimension.Other)]
    public void An_out_decision_carries_the_policy_that_decided_it_and_a_policy_it_does_not_know_counts_as_other(string policy, string dimension)
    {
        var decision = Round(NewDecider(), 2, [Votes.Instance("i0", (policy, 2)), All("i1", 0)]);

        Assert.Equal(ScaleDecisionKind.Out, decision.Kind);
        Assert.Equal(dimension, decision.Dimension);
    }

    [Fact]
    public void Decisions_of_the_controllers_own_rules_carry_the_rule_that_decided()
    {
        Assert.Equal(ScaleDimension.Bounds, Round(NewDecider(), 9, AllKeep(9)).Dimension);
        Assert.Equal(ScaleDimension.FrontendQueue, Round(NewDecider(), 1, [], FrontendLoad.Idle with { Queued = 3 }).Dimension);
        Assert.Equal(ScaleDimension.Unrequested, NewDecider().RequestImmediate(1, 4, "a large object").Dimension);
        Assert.Equal(ScaleDimension.None, Round(NewDecider(), 2, AllKeep(2)).Dimension);
    }

    [Fact]
    public void Invocations_queued_while_an_instance_is_starting_wait_for_it_and_add_none()
    {
        var queued = FrontendLoad.Idle with { Queued = 4 };

        var waiting = NewDecider().Decide(1, [], queued, _time.GetUtcNow(), starting: 1);
        var noneOnItsWay = NewDecider().Decide(1, [], queued, _time.GetUtcNow(), starting: 0);

        Assert.Equal(ScaleDecisionKind.Hold, waiting.Kind);
        Assert.Equal(1, waiting.Target);
        Assert.Equal(ScaleDimension.FrontendQueue, waiting.Dimension);
        Assert.Contains("4 invocation(s) queued with no ready instance; 1 instance(s) starting", waiting.Reason);
        Assert.Equal(ScaleDecisionKind.Out, noneOnItsWay.Kind);
        Assert.Equal(2, noneOnItsWay.Target);
    }

    [Fact]
    public void An_app_idle_for_less_than_the_keep_alive_stays_loaded()
    {
        var decider = NewDecider();
        var last = _time.GetUtcNow();
        _time.Advance(Policy.KeepAlive - TimeSpan.FromSeconds(1));

        Assert.Equal(ScaleDecisionKind.Hold, decider.Decide(2, AllKeep(2), FrontendLoad.Idle, last).Kind);
    }

    [Fact]
    public void An_invocation_still_in_flight_keeps_the_app_loaded_past_the_keep_alive()
    {
        var decider = NewDecider();
        var last = _time.GetUtcNow();
        _time.Advance(Policy.KeepAlive * 2);

        Assert.Equal(ScaleDecisionKind.Hold, decider.Decide(1, AllKeep(1), FrontendLoad.Idle with { InFlight = 1 }, last).Kind);
    }

    [Fact]
    public void An_unloaded_app_holds_at_zero_until_the_frontend_loads_it()
    {
        var decision = Round(NewDecider(), 0, []);

        Assert.Equal(ScaleDecisionKind.Hold, decision.Kind);
        Assert.Equal(0, decision.Target);
    }

    [Fact]
    public void A_load_from_zero_starts_the_scale_out_cool_down()
    {
        var decider = NewDecider();
        Round(decider, 0, []);
        Wait(1);

        var decision = Round(decider, 1, OneOut(1, 1));

        Assert.Equal(ScaleDecisionKind.Hold, decision.Kind);
        Assert.Contains("scale-out cool-down", decision.Reason);
    }

    [Fact]
    public void Requests_queued_with_no_ready_instance_scale_out()
    {
        var decision = Round(NewDecider(), 1, [], FrontendLoad.Idle with { Queued = 3 });

        Assert.Equal(ScaleDecisionKind.Out, decision.Kind);
        Assert.Equal(2, decision.Target);
    }

    [Fact]
    public void An_unrequested_request_acts_at_once_inside_the_cool_down_of_a_vote()
    {
        var decider = NewDecider();
        Round(decider, 2, OneOut(2, 1));
        Wait(1);

        var decision = decider.RequestImmediate(3, 6, "bandwidth: 800 MB object");

        Assert.Equal(ScaleDecisionKind.Out, decision.Kind);
        Assert.Equal(6, decision.Target);
        Assert.Contains("unrequested: bandwidth: 800 MB object", decision.Reason);
    }

    [Fact]
    public void An_unrequested_request_is_cut_to_max_instances()
    {
        var decision = NewDecider().RequestImmediate(1, 100, "bandwidth");

        Assert.Equal(8, decision.Target);
        Assert.Contains("cut from 100 to maxInstances 8", decision.Reason);
    }

    [Fact]
    public void An_unrequested_request_for_no_more_than_the_app_has_holds()
    {
        var decision = NewDecider().RequestImmediate(4, 3, "bandwidth");

        Assert.Equal(ScaleDecisionKind.Hold, decision.Kind);
        Assert.Equal(4, decision.Target);
    }

    [Fact]
    public void A_storm_of_unrequested_requests_within_the_cool_down_is_one_decision_for_the_largest_target()
    {
        var decider = NewDecider();
        var first = decider.RequestImmediate(1, 2, "owner a");
        var storm = new List<ScaleDecision>();
        foreach (var target in new[] { 3, 6, 4, 5, 6, 2 })
        {
            Wait(0.5);
            storm.Add(decider.RequestImmediate(2, target, "owner " + target));
        }

        Assert.Equal(ScaleDecisionKind.Out, first.Kind);
        Assert.All(storm, d => Assert.Equal(ScaleDecisionKind.Hold, d.Kind));
        Assert.Equal([3, 6, 6, 6, 6, 6], storm.Select(d => d.Target));

        Wait(2);
        var collapsed = Round(decider, 2, AllKeep(2));
        Wait(1);
        var after = Round(decider, 6, AllKeep(6));

        Assert.Equal(ScaleDecisionKind.Out, collapsed.Kind);
        Assert.Equal(6, collapsed.Target);
        Assert.Contains("owner 6", collapsed.Reason);
        Assert.Equal(ScaleDecisionKind.Hold, after.Kind);
    }

    [Fact]
    public void A_collapsed_request_waits_while_the_cool_down_lasts_then_acts()
    {
        var decider = NewDecider();
        decider.RequestImmediate(1, 2, "owner a");
        Wait(1);
        var collapsed = decider.RequestImmediate(2, 4, "owner b");
        Wait(1);
        var during = Round(decider, 2, AllKeep(2));
        Wait(3);
        var after = Round(decider, 2, AllKeep(2));

        Assert.Equal(ScaleDecisionKind.Hold, collapsed.Kind);
        Assert.Equal(4, collapsed.Target);
        Assert.Equal(ScaleDecisionKind.Hold, during.Kind);
        Assert.Equal(ScaleDecisionKind.Out, after.Kind);
        Assert.Equal(4, after.Target);
    }

    [Fact]
    public void Flapping_votes_change_the_count_at_most_once_per_cool_down()
    {
        var decider = NewDecider(Policy with { ScaleInRounds = 1, ScaleInCooldown = TimeSpan.FromSeconds(5) });
        var current = 4;
        var changes = 0;
        for (var second = 0; second < 60; second++)
        {
            var decision = Round(decider, current, second % 2 == 0 ? OneOut(current, 1) : AllIn(current));
            if (decision.Changes)
            {
                changes++;
                current = decision.Target;
            }
            Wait(1);
        }

        Assert.InRange(changes, 1, 12);
    }
}
