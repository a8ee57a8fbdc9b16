using FaaST.Policy;

namespace FaaST.AppModel.Tests;

/// <summary>faast.json's <c>scale</c> section: defaults, ranges, the rules between keys, and errors that
/// name the file and the key.</summary>
public sealed class ScalePolicyFileTests
{
    private const string File = "app/faast.json";

    private static ScalePolicy ParseScale(string members) =>
        CachePolicyFile.Parse("{ \"scale\": { " + members + " } }", File).Scale;

    private static PolicyFileException Fails(string members, string keyPath, params string[] reasonContains)
    {
        var e = Assert.Throws<PolicyFileException>(() => ParseScale(members));
        Assert.Equal(File, e.FileName);
        Assert.Equal(keyPath, e.KeyPath);
        Assert.StartsWith($"{File}: {keyPath}: ", e.Message);
        foreach (var fragment in reasonContains)
            Assert.Contains(fragment, e.Reason);
        return e;
    }

    [Fact]
    public void Defaults_are_the_documented_values()
    {
        var s = ScalePolicy.Default;

        Assert.Equal(1, s.MinInstances);
        Assert.Equal(8, s.MaxInstances);
        Assert.Equal(TimeSpan.FromSeconds(1), s.Interval);
        Assert.Equal(TimeSpan.FromSeconds(5), s.ScaleOutCooldown);
        Assert.Equal(TimeSpan.FromSeconds(30), s.ScaleInCooldown);
        Assert.Equal(3, s.ScaleInRounds);
        Assert.Equal(TimeSpan.FromMinutes(10), s.KeepAlive);
        Assert.Equal(0.6, s.Band.Low);
        Assert.Equal(0.8, s.Band.High);
        Assert.Equal(0.7, s.Band.Target, 10);
        Assert.Equal(1.0, s.RareAccessesPerSecond);
        Assert.True(s.Votes.Compute && s.Votes.CacheSize && s.Votes.Bandwidth);
        Assert.Equal(64L << 20, s.BandwidthMinObjectSize);
        Assert.Equal(TimeSpan.FromSeconds(30), s.QueueTimeout);
        Assert.Equal(1000, s.MaxQueueLength);
    }

    [Fact]
    public void An_app_without_a_scale_section_has_the_default_scale_policy() =>
        Assert.Same(ScalePolicy.Default, CachePolicyFile.Parse("{ \"cache\": { \"enabled\": false } }", File).Scale);

    [Fact]
    public void A_scale_section_leaves_the_cache_policy_at_its_defaults()
    {
        var policy = CachePolicyFile.Parse("{ \"scale\": { \"maxInstances\": 4 }, \"cache\": { \"enabled\": false } }", File);

        Assert.Equal(4, policy.Scale.MaxInstances);
        Assert.False(policy.Enabled);
        Assert.Equal(CachePolicy.Default with { Enabled = false, Scale = policy.Scale }, policy);
    }

    [Fact]
    public void Min_and_max_instances_may_be_equal() =>
        Assert.Equal(3, ParseScale("\"minInstances\": 3, \"maxInstances\": 3").MaxInstances);

    [Fact]
    public void Max_instances_may_be_the_limit_of_64() =>
        Assert.Equal(ScalePolicy.InstanceLimit, ParseScale("\"maxInstances\": 64").MaxInstances);

    [Fact]
    public void A_band_may_reach_1() =>
        Assert.Equal(1.0, ParseScale("\"band\": { \"low\": 0.9, \"high\": 1 }").Band.High);

    [Fact]
    public void Zero_cool_downs_are_allowed() =>
        Assert.Equal(TimeSpan.Zero, ParseScale("\"scaleOutCooldown\": \"00:00:00\", \"scaleInCooldown\": \"00:00:00\"").ScaleInCooldown);

    [Theory]
    [InlineData("\"maxInstances\": 65", "scale.maxInstances", "from 1 to 64")]
    [InlineData("\"maxInstances\": 0", "scale.maxInstances", "from 1 to 64")]
    [InlineData("\"minInstances\": 0", "scale.minInstances", "from 1 to 64")]
    [InlineData("\"minInstances\": 1.5", "scale.minInstances", "not a whole number")]
    [InlineData("\"minInstances\": \"2\"", "scale.minInstances", "must be a whole number")]
    [InlineData("\"maxInstances\": 1e40", "scale.maxInstances", "out of range")]
    [InlineData("\"scaleInRounds\": 0", "scale.scaleInRounds", "from 1 to 1000")]
    [InlineData("\"maxQueueLength\": 0", "scale.maxQueueLength", "from 1 to 1000000")]
    [InlineData("\"interval\": \"00:00:00.05\"", "scale.interval", "from 00:00:00.1 to 00:01:00")]
    [InlineData("\"interval\": 1", "scale.interval", "time span string")]
    [InlineData("\"keepAlive\": \"31.00:00:00\"", "scale.keepAlive", "out of range")]
    [InlineData("\"scaleOutCooldown\": \"02:00:00\"", "scale.scaleOutCooldown", "out of range")]
    [InlineData("\"queueTimeout\": \"00:00:00\"", "scale.queueTimeout", "out of range")]
    [InlineData("\"band\": { \"low\": 0 }", "scale.band.low", "greater than 0")]
    [InlineData("\"band\": { \"high\": 1.2 }", "scale.band.high", "at most 1")]
    [InlineData("\"band\": 0.7", "scale.band", "must be an object")]
    [InlineData("\"band\": { \"mid\": 0.7 }", "scale.band.mid", "unknown key", "low, high")]
    [InlineData("\"rareAccessesPerSecond\": -1", "scale.rareAccessesPerSecond", "at least 0")]
    [InlineData("\"votes\": { \"compute\": \"yes\" }", "scale.votes.compute", "true or false")]
    [InlineData("\"votes\": { \"cachesize\": true }", "scale.votes.cachesize", "Did you mean \"cacheSize\"")]
    [InlineData("\"bandwidth\": { \"minObjectSize\": 0 }", "scale.bandwidth.minObjectSize", "at least 1B")]
    [InlineData("\"maxInstance\": 4", "scale.maxInstance", "Did you mean \"maxInstances\"")]
    [InlineData("\"maxInstances\": 4, \"maxInstances\": 5", "scale.maxInstances", "duplicate key")]
    public void An_invalid_value_is_an_error_naming_the_key(string members, string keyPath, params string[] reason) =>
        Fails(members, keyPath, reason);

    [Fact]
    public void A_scale_section_that_is_not_an_object_is_an_error_naming_it()
    {
        var e = Assert.Throws<PolicyFileException>(() => CachePolicyFile.Parse("{ \"scale\": [] }", File));

        Assert.Equal("scale", e.KeyPath);
        Assert.Contains("must be an object", e.Reason);
    }

    [Fact]
    public void Min_instances_above_max_instances_is_an_error_naming_min_instances() =>
        Fails("\"minInstances\": 5, \"maxInstances\": 4", "scale.minInstances", "5 is more than scale.maxInstances (4)");

    [Fact]
    public void An_empty_band_is_an_error_naming_the_high_end() =>
        Fails("\"band\": { \"low\": 0.8, \"high\": 0.8 }", "scale.band.high", "the band is empty", "less than scale.band.high (0.8)");

    [Fact]
    public void A_low_end_above_the_default_high_end_is_an_error_naming_the_low_end() =>
        Fails("\"band\": { \"low\": 0.9 }", "scale.band.low", "scale.band.low (0.9) must be less than scale.band.high (0.8)");
}
