using FaaST.Policy;

namespace FaaST.AppModel.Tests;

/// <summary>faast.json's <c>prewarm</c> section: defaults, ranges, the rules between keys, and errors that name the file
/// and the key.</summary>
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
    public void Defaults_are_the_published_values_of_the_hybrid_histogram_policy()
    {
        var p = PrewarmPolicy.Default;

        Assert.True(p.Enabled);
        Assert.Equal(0.5, p.HitRateThreshold);
        Assert.Null(p.MaxBytes);
        Assert.Empty(p.Exclude.Patterns);
        Assert.Equal(TimeSpan.FromMinutes(1), p.ReloadLead);
        Assert.Equal(TimeSpan.FromMinutes(1), p.HistogramBinWidth);
        Assert.Equal(TimeSpan.FromHours(4), p.HistogramRange);
        Assert.Equal(5, p.HeadPercentile);
        Assert.Equal(99, p.TailPercentile);
        Assert.Equal(0.1, p.Margin);
        Assert.Equal(2, p.MinCv);
        Assert.Equal(0.5, p.MaxOutOfBounds);
        Assert.Equal(5, p.MinSamples);
        Assert.Equal(TimeSpan.FromDays(7), p.HistoryMaxAge);
        Assert.Equal(64, p.HistoryMaxRecords);
        Assert.Same(PrewarmPolicy.Default, CachePolicyFile.Parse("{ \"scale\": { \"minInstances\": 2 } }", File).Prewarm);
    }

    [Fact]
    public void A_section_that_sets_some_keys_keeps_the_rest_at_their_defaults()
    {
        var p = ParsePrewarm("\"histogram\": { \"binWidth\": \"00:00:01\", \"range\": \"00:02:00\" }, \"maxBytes\": 0");

        Assert.Equal(TimeSpan.FromSeconds(1), p.HistogramBinWidth);
        Assert.Equal(TimeSpan.FromMinutes(2), p.HistogramRange);
        Assert.Equal(0, p.MaxBytes);
        Assert.Equal(PrewarmPolicy.Default with { HistogramBinWidth = p.HistogramBinWidth, HistogramRange = p.HistogramRange, MaxBytes = 0 }, p);
    }

    [Theory]
    [InlineData("\"hitRateThreshold\": 1.5", "prewarm.hitRateThreshold", "at most 1")]
    [InlineData("\"hitRateThreshold\": \"half\"", "prewarm.hitRateThreshold", "a number")]
    [InlineData("\"maxBytes\": -1", "prewarm.maxBytes")]
    [InlineData("\"exclude\": [\"tmp\"]", "prewarm.exclude[0]", "has no \"/\"")]
    [InlineData("\"reloadLead\": \"2.00:00:00\"", "prewarm.reloadLead")]
    [InlineData("\"histogram\": { \"binWidth\": \"00:00:00.05\" }", "prewarm.histogram.binWidth")]
    [InlineData("\"histogram\": { \"minSamples\": 0 }", "prewarm.histogram.minSamples")]
    [InlineData("\"histogram\": { \"margin\": 1 }", "prewarm.histogram.margin")]
    [InlineData("\"histogram\": { \"maxOutOfBounds\": 0 }", "prewarm.histogram.maxOutOfBounds")]
    [InlineData("\"histogram\": { \"bins\": 10 }", "prewarm.histogram.bins", "unknown key")]
    [InlineData("\"history\": { \"maxRecords\": 0 }", "prewarm.history.maxRecords")]
    [InlineData("\"history\": 7", "prewarm.history", "an object")]
    [InlineData("\"enabled\": \"yes\"", "prewarm.enabled")]
    public void A_value_out_of_its_range_or_of_the_wrong_kind_names_the_key(string members, string key, params string[] reason) =>
        Fails(members, key, reason);

    [Fact]
    public void A_range_shorter_than_one_bin_is_refused_naming_the_key_the_file_set()
    {
        Fails("\"histogram\": { \"range\": \"00:00:30\" }", "prewarm.histogram.range", "shorter than one bin (00:01:00)");
        Fails("\"histogram\": { \"binWidth\": \"05:00:00\" }", "prewarm.histogram.binWidth", "shorter than one bin");
    }

    [Fact]
    public void Too_many_bins_are_refused_with_what_to_change()
    {
        Fails("\"histogram\": { \"binWidth\": \"00:00:00.1\", \"range\": \"1.00:00:00\" }", "prewarm.histogram.binWidth",
            "more than 100000 bins", "widen the bins or shorten the range");
    }

    [Fact]
    public void A_head_percentile_at_or_above_the_tail_is_refused()
    {
        Fails("\"histogram\": { \"headPercentile\": 99 }", "prewarm.histogram.headPercentile",
            "prewarm.histogram.headPercentile (99) must be less than prewarm.histogram.tailPercentile (99)");
        Fails("\"histogram\": { \"tailPercentile\": 3 }", "prewarm.histogram.tailPercentile", "must be less than");
    }
}
