using FaaST.Protos.Scale;

namespace FaaST.Scaling.Tests;

/// <summary>The instance's vote rules (Faa$T §4, Pocket's band) on measured intervals.</summary>
public sealed class VoteRuleTests
{
    private static InstanceLoad Load(double utilisation, double rate = 412, double p50 = 2.1, int inFlight = 4) => new()
    {
        Utilization = utilisation,
        InvocationsPerSecond = rate,
        LatencyP50Ms = p50,
        InFlight = inFlight,
        IntervalSeconds = 1,
    };

    private static InstanceLoad Cache(long accesses, long evictedTwice = 0, long evictions = 0, double seconds = 1) => new()
    {
        CacheAccesses = accesses,
        ObjectsEvictedTwice = evictedTwice,
        Evictions = evictions,
        IntervalSeconds = seconds,
    };

    [Fact]
    public void Utilisation_above_the_band_votes_out_by_the_instances_that_bring_it_to_the_middle()
    {
        // 2 instances at 0.93: ceil(2 * 0.93 / 0.7) - 2 = ceil(2.657) - 2 = 1.
        Assert.Equal(1, VoteRules.ComputeVote(Load(0.93), 2, VoteOptions.Default).Delta);
        // 4 instances at 1.5: ceil(4 * 1.5 / 0.7) - 4 = ceil(8.57) - 4 = 5.
        Assert.Equal(5, VoteRules.ComputeVote(Load(1.5), 4, VoteOptions.Default).Delta);
    }

    [Fact]
    public void The_compute_reason_names_the_utilisation_the_band_the_rate_the_latency_and_the_invocations_in_flight()
    {
        var vote = VoteRules.ComputeVote(Load(0.93), 1, VoteOptions.Default);

        Assert.Equal(VoteRules.Compute, vote.Policy);
        Assert.Equal("utilisation 0.93 > 0.80 (412/s, p50 2.1 ms, 4 in flight)", vote.Reason);
    }

    [Fact]
    public void Utilisation_below_the_band_votes_in_by_one()
    {
        var vote = VoteRules.ComputeVote(Load(0.1, rate: 3), 5, VoteOptions.Default);

        Assert.Equal(-1, vote.Delta);
        Assert.StartsWith("utilisation 0.10 < 0.60", vote.Reason, StringComparison.Ordinal);
    }

    [Theory]
    [InlineData(0.6)]
    [InlineData(0.7)]
    [InlineData(0.8)]
    public void Utilisation_inside_the_band_keeps_the_instances(double utilisation) =>
        Assert.Equal(0, VoteRules.ComputeVote(Load(utilisation), 3, VoteOptions.Default).Delta);

    [Fact]
    public void Just_above_the_band_still_votes_out_by_at_least_one()
    {
        // ceil(10 * 0.81 / 0.7) - 10 = 12 - 10 = 2; with a band whose middle is close to the top, at least 1.
        Assert.Equal(2, VoteRules.ComputeVote(Load(0.81), 10, VoteOptions.Default).Delta);
        var narrow = new VoteOptions { BandLow = 0.79, BandHigh = 0.8 };
        Assert.Equal(1, VoteRules.ComputeVote(Load(0.8001), 1, narrow).Delta);
    }

    [Fact]
    public void A_controller_that_counts_no_instances_is_taken_to_mean_this_one()
    {
        // ceil(1 * 1.4 / 0.7) - 1 = 1.
        Assert.Equal(1, VoteRules.ComputeVote(Load(1.4), 0, VoteOptions.Default).Delta);
    }

    [Fact]
    public void A_custom_band_moves_the_thresholds_and_the_target()
    {
        var options = new VoteOptions { BandLow = 0.2, BandHigh = 0.4 };

        Assert.Equal(0, VoteRules.ComputeVote(Load(0.3), 1, options).Delta);
        Assert.Equal(-1, VoteRules.ComputeVote(Load(0.1), 1, options).Delta);
        // ceil(1 * 0.9 / 0.3) - 1 = 2.
        Assert.Equal(2, VoteRules.ComputeVote(Load(0.9), 1, options).Delta);
    }

    [Fact]
    public void A_disabled_compute_vote_keeps_the_instances_and_says_why()
    {
        var vote = VoteRules.ComputeVote(Load(5), 1, new VoteOptions { ComputeEnabled = false });

        Assert.Equal(0, vote.Delta);
        Assert.Contains("scale.votes.compute", vote.Reason, StringComparison.Ordinal);
    }

    [Fact]
    public void An_object_evicted_more_than_once_votes_the_cache_out_by_one()
    {
        var vote = VoteRules.CacheSizeVote(Cache(accesses: 0, evictedTwice: 3, evictions: 9), VoteOptions.Default);

        Assert.Equal(VoteRules.CacheSize, vote.Policy);
        Assert.Equal(1, vote.Delta);
        Assert.StartsWith("3 object(s) evicted more than once", vote.Reason, StringComparison.Ordinal);
    }

    [Fact]
    public void Substantial_accesses_without_repeated_evictions_keep_the_cache_size()
    {
        var vote = VoteRules.CacheSizeVote(Cache(accesses: 50, evictions: 4), VoteOptions.Default);

        Assert.Equal(0, vote.Delta);
        Assert.Equal("cache accesses 50.0/s, no object evicted twice", vote.Reason);
    }

    [Fact]
    public void Rare_accesses_vote_the_cache_in_by_one()
    {
        // 3 accesses in 10 s = 0.3/s, below the default 1.0/s.
        var vote = VoteRules.CacheSizeVote(Cache(accesses: 3, seconds: 10), VoteOptions.Default);

        Assert.Equal(-1, vote.Delta);
        Assert.Equal("cache accesses 0.3/s < 1.0/s (rare)", vote.Reason);
    }

    [Fact]
    public void The_rare_threshold_comes_from_the_options()
    {
        var options = new VoteOptions { RareAccessesPerSecond = 100 };

        Assert.Equal(-1, VoteRules.CacheSizeVote(Cache(accesses: 50), options).Delta);
        Assert.Equal(0, VoteRules.CacheSizeVote(Cache(accesses: 50), VoteOptions.Default).Delta);
    }

    [Fact]
    public void A_first_query_without_an_interval_keeps_the_cache_size()
    {
        Assert.Equal(0, VoteRules.CacheSizeVote(Cache(accesses: 0, seconds: 0), VoteOptions.Default).Delta);
    }

    [Fact]
    public void A_disabled_cache_size_vote_keeps_the_instances_even_when_objects_are_evicted_twice()
    {
        var vote = VoteRules.CacheSizeVote(Cache(accesses: 0, evictedTwice: 2), new VoteOptions { CacheSizeEnabled = false });

        Assert.Equal(0, vote.Delta);
        Assert.Contains("scale.votes.cacheSize", vote.Reason, StringComparison.Ordinal);
    }

    [Fact]
    public void Rare_large_object_accesses_vote_bandwidth_in_by_one()
    {
        var vote = VoteRules.BandwidthVote(largeObjectAccesses: 0, intervalSeconds: 1, VoteOptions.Default);

        Assert.Equal(VoteRules.Bandwidth, vote.Policy);
        Assert.Equal(-1, vote.Delta);
        Assert.Equal("large-object accesses 0.0/s < 1.0/s (rare)", vote.Reason);
    }

    [Fact]
    public void Frequent_large_object_accesses_keep_the_instances_and_never_vote_out_periodically()
    {
        var vote = VoteRules.BandwidthVote(largeObjectAccesses: 1000, intervalSeconds: 1, VoteOptions.Default);

        Assert.Equal(0, vote.Delta);
    }

    [Fact]
    public void A_disabled_bandwidth_vote_keeps_the_instances()
    {
        Assert.Equal(0, VoteRules.BandwidthVote(0, 1, new VoteOptions { BandwidthEnabled = false }).Delta);
    }
}
