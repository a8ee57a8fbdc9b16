namespace FaaST.Scaling.Tests;

public sealed class VoteOptionsTests
{
    [Fact]
    public void The_defaults_are_the_documented_band_threshold_and_large_object_size()
    {
        var d = VoteOptions.Default.Validate("defaults");

        Assert.Equal((0.6, 0.8, 0.7), (d.BandLow, d.BandHigh, d.Target), new ToleranceComparer());
        Assert.Equal(1.0, d.RareAccessesPerSecond);
        Assert.Equal(64L << 20, d.LargeObjectBytes);
        Assert.True(d.ComputeEnabled && d.CacheSizeEnabled && d.BandwidthEnabled);
    }

    [Theory]
    [InlineData(0.8, 0.6)]
    [InlineData(0.7, 0.7)]
    [InlineData(0, 0.8)]
    [InlineData(-0.1, 0.8)]
    [InlineData(double.NaN, 0.8)]
    [InlineData(0.6, double.PositiveInfinity)]
    public void A_band_whose_low_is_not_below_its_high_is_refused_naming_the_file_and_key(double low, double high)
    {
        var e = Assert.Throws<ArgumentException>(() => new VoteOptions { BandLow = low, BandHigh = high }.Validate("apps/x/faast.json"));

        Assert.StartsWith("apps/x/faast.json: scale.band", e.Message, StringComparison.Ordinal);
    }

    [Theory]
    [InlineData(-1)]
    [InlineData(double.NaN)]
    [InlineData(double.PositiveInfinity)]
    public void A_negative_or_not_finite_rare_access_rate_is_refused(double rate)
    {
        var e = Assert.Throws<ArgumentException>(() => new VoteOptions { RareAccessesPerSecond = rate }.Validate("faast.json"));

        Assert.Contains("scale.rareAccessesPerSecond", e.Message, StringComparison.Ordinal);
    }

    [Fact]
    public void A_large_object_size_of_zero_is_refused()
    {
        var e = Assert.Throws<ArgumentException>(() => new VoteOptions { LargeObjectBytes = 0 }.Validate("faast.json"));

        Assert.Contains("scale.bandwidth.minObjectSize", e.Message, StringComparison.Ordinal);
    }

    private sealed class ToleranceComparer : IEqualityComparer<(double, double, double)>
    {
        public bool Equals((double, double, double) x, (double, double, double) y) =>
            Math.Abs(x.Item1 - y.Item1) < 1e-9 && Math.Abs(x.Item2 - y.Item2) < 1e-9 && Math.Abs(x.Item3 - y.Item3) < 1e-9;

        public int GetHashCode((double, double, double) obj) => 0;
    }
}
