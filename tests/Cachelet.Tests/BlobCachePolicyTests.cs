using FaaST.Cachelet.Index;
using FaaST.Policy;

namespace FaaST.Cachelet.Tests;

/// <summary>faast.json's eviction settings reach the index as the policy they name.</summary>
public class BlobCachePolicyTests
{
    [Fact]
    public void Lru_is_non_owned_first_then_least_recently_used()
    {
        var policy = BlobCache.EvictionPolicyFor(EvictionOptions.Default);
        Assert.Same(EvictionPolicies.LruNonOwnedFirst, policy);
        Assert.Null(policy.TimeToLive);
        Assert.True(policy.Tier(owned: false, 100) < policy.Tier(owned: true, 100));
    }

    [Fact]
    public void Size_aware_uses_the_configured_threshold()
    {
        var policy = BlobCache.EvictionPolicyFor(new EvictionOptions { Policy = EvictionPolicy.SizeAware, SizeThreshold = 1000 });
        // non-owned large < non-owned small < owned large < owned small
        Assert.True(policy.Tier(false, 5000) < policy.Tier(false, 500));
        Assert.True(policy.Tier(false, 500) < policy.Tier(true, 5000));
        Assert.True(policy.Tier(true, 5000) < policy.Tier(true, 500));
        Assert.Equal(policy.Tier(false, 999), policy.Tier(false, 10));
    }

    [Fact]
    public void Ttl_applies_on_top_of_either_policy()
    {
        var ttl = TimeSpan.FromMinutes(3);
        Assert.Equal(ttl, BlobCache.EvictionPolicyFor(new EvictionOptions { Ttl = ttl }).TimeToLive);
        Assert.Equal(ttl, BlobCache.EvictionPolicyFor(new EvictionOptions { Policy = EvictionPolicy.SizeAware, Ttl = ttl }).TimeToLive);
    }
}
