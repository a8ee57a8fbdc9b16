using FaaST.Policy;

namespace FaaST.AppModel.Tests;

/// <summary>faast.json's <c>prewarm</c> section: defaults, every key, ranges, the rules between keys, and errors that
/// name the file and the key.</summary>
public sealed class PrewarmPolicyFileTests
{
    private const string File = "app/faast.json";

    private static PrewarmPolicy ParsePrewarm(string members) =>
        CachePolicyFile.Parse("{ \"prewarm\": { " + members + " } }", File).Prewarm;

    private static PolicyFileException Fails(string members, string keyPath, params string[] reasonContains)
    {
        var e = Assert.Throws<PolicyFileException>(() => ParsePrewarm(members));
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
        var p = PrewarmPolicy.Default;
        Assert.True(p.Enabled);
        Assert.Equal(0.5, p.HitRateThreshold);
        Assert.Null(p.MaxBytes);
        Assert.Empty(p.Exclude.Patterns);
        Assert.Equal(TimeSpan.FromMinutes(1), p.ReloadLead);
        Assert.Equal(TimeSpan.FromMinutes(1), p.Histogram.BinWidth);
        Assert.Equal(TimeSpan.FromHours(4), p.Histogram.Range);
        Assert.Equal((5.0, 99.0, 0.1, 2.0, 0.5, 5),
            (p.Histogram.HeadPercentile, p.Histogram.TailPercentile, p.Histogram.Margin, p.Histogram.MinCv, p.Histogram.MaxOutOfBounds, p.Histogram.MinSamples));
        Assert.Equal(TimeSpan.FromDays(7), p.HistoryMaxAge);
        Assert.Equal(64, p.HistoryMaxRecords);
    }

    [Fact]
    public void An_app_without_a_prewarm_section_has_the_default_prewarm_policy() =>
        Assert.Same(PrewarmPolicy.Default, CachePolicyFile.Parse("{ \"cache\": { \"enabled\": false } }", File).Prewarm);

    [Fact]
    public void Every_key_is_read()
    {
        var p = ParsePrewarm("""
            "enabled": false, "hitRateThreshold": 0.25, "maxBytes": "2MiB", "exclude": ["tmp/*", "**/*.log"],
            "reloadLead": "00:00:30",
            "histogram": { "binWidth": "00:00:30", "range": "02:00:00", "headPercentile": 10, "tailPercentile": 90,
                           "margin": 0.2, "minCv": 1.5, "maxOutOfBounds": 0.25, "minSamples": 3 },
            "history": { "maxAge": "1.00:00:00", "maxRecords": 8 }
            """);
        Assert.False(p.Enabled);
        Assert.Equal(0.25, p.HitRateThreshold);
        Assert.Equal(2L << 20, p.MaxBytes);
        Assert.Equal(["tmp/*", "**/*.log"], p.Exclude.Patterns);
        Assert.True(p.Exclude.Matches("tmp", "a") && p.Exclude.Matches("c", "x/y.log") && !p.Exclude.Matches("models", "m"));
        Assert.Equal(TimeSpan.FromSeconds(30), p.ReloadLead);
        Assert.Equal(new PrewarmHistogramPolicy
        {
            BinWidth = TimeSpan.FromSeconds(30), Range = TimeSpan.FromHours(2), HeadPercentile = 10, TailPercentile = 90,
            Margin = 0.2, MinCv = 1.5, MaxOutOfBounds = 0.25, MinSamples = 3,
        }, p.Histogram);
        Assert.Equal(TimeSpan.FromDays(1), p.HistoryMaxAge);
        Assert.Equal(8, p.HistoryMaxRecords);
    }

    [Theory]
    [InlineData("\"enabled\": 1", "prewarm.enabled", "must be true or false")]
    [InlineData("\"hitRateThreshold\": 1.5", "prewarm.hitRateThreshold", "1.5 is out of range; must be at least 0 and at most 1")]
    [InlineData("\"hitRateThreshold\": -0.1", "prewarm.hitRateThreshold", "out of range")]
    [InlineData("\"maxBytes\": 0", "prewarm.maxBytes", "0 is out of range; must be at least")]
    [InlineData("\"maxBytes\": \"lots\"", "prewarm.maxBytes", "lots")]
    [InlineData("\"exclude\": \"tmp/*\"", "prewarm.exclude", "must be an array of glob strings")]
    [InlineData("\"exclude\": [\"tmp/*\", \"[x]/y\"]", "prewarm.exclude[1]", "bad glob \"[x]/y\"")]
    [InlineData("\"reloadLead\": \"02:00:00\"", "prewarm.reloadLead", "\"02:00:00\" is out of range; must be from 00:00:00 to 01:00:00")]
    [InlineData("\"reloadLead\": 60", "prewarm.reloadLead", "must be a time span string")]
    [InlineData("\"histogram\": { \"binWidth\": \"00:00:00.5\" }", "prewarm.histogram.binWidth", "out of range")]
    [InlineData("\"histogram\": { \"margin\": 1 }", "prewarm.histogram.margin", "1 is out of range; must be at least 0 and less than 1")]
    [InlineData("\"histogram\": { \"minSamples\": 0 }", "prewarm.histogram.minSamples", "0 is out of range; must be from 1 to 1000000")]
    [InlineData("\"histogram\": { \"headPercentile\": 99 }", "prewarm.histogram.headPercentile", "headPercentile (99) must be less than prewarm.histogram.tailPercentile (99)")]
    [InlineData("\"histogram\": { \"tailPercentile\": 4 }", "prewarm.histogram.tailPercentile", "headPercentile (5) must be less than prewarm.histogram.tailPercentile (4)")]
    [InlineData("\"histogram\": { \"binWidth\": \"00:10:00\", \"range\": \"00:05:00\" }", "prewarm.histogram.binWidth", "binWidth (00:10:00) is more than prewarm.histogram.range (00:05:00)")]
    [InlineData("\"histogram\": { \"range\": \"00:05:00\", \"binWidth\": \"00:10:00\" }", "prewarm.histogram.binWidth", "at least one bin")]
    [InlineData("\"histogram\": { \"range\": \"30.00:00:00\", \"binWidth\": \"00:00:01\" }", "prewarm.histogram.binWidth", "more than 100000 bins")]
    [InlineData("\"histogram\": { \"bins\": 10 }", "prewarm.histogram.bins", "unknown key \"bins\"", "Allowed keys in \"prewarm.histogram\": binWidth, range")]
    [InlineData("\"history\": { \"maxAge\": \"00:00:30\" }", "prewarm.history.maxAge", "out of range; must be from 00:01:00 to 365.00:00:00")]
    [InlineData("\"history\": { \"maxRecords\": 10001 }", "prewarm.history.maxRecords", "10001 is out of range; must be from 1 to 10000")]
    [InlineData("\"history\": []", "prewarm.history", "must be an object, not an array")]
    [InlineData("\"hitrateThreshold\": 0.5", "prewarm.hitrateThreshold", "Did you mean \"hitRateThreshold\"?")]
    [InlineData("\"enabled\": true, \"enabled\": false", "prewarm.enabled", "duplicate key")]
    public void A_bad_value_is_an_error_naming_the_file_the_key_and_the_reason(string members, string keyPath, params string[] reason) =>
        Fails(members, keyPath, reason);

    [Fact]
    public void A_prewarm_section_that_is_not_an_object_is_an_error()
    {
        var e = Assert.Throws<PolicyFileException>(() => CachePolicyFile.Parse("{ \"prewarm\": false }", File));
        Assert.Equal($"{File}: prewarm: must be an object, not a boolean (false)", e.Message);
    }

    [Fact]
    public void A_prewarm_section_leaves_the_cache_and_scale_policies_at_their_defaults()
    {
        var policy = CachePolicyFile.Parse("{ \"prewarm\": { \"enabled\": false } }", File);
        Assert.Equal(CachePolicy.Default with { Prewarm = PrewarmPolicy.Default with { Enabled = false } }, policy);
    }
}
