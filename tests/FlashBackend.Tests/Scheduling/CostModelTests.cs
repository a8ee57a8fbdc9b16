using FaaST.FlashBackend.Scheduling;

namespace FaaST.FlashBackend.Tests.Scheduling;

public class CostModelTests
{
    private static readonly CostTable Table = CostTable.I3XLarge;

    [Fact]
    public void A4KiBReadCostsOneTokenAtEveryReadRatio()
    {
        Assert.Equal(1.0, Table.Cost(IoType.Read, 4096, 1.0));
        Assert.Equal(1.0, Table.Cost(IoType.Read, 4096, 0.1));
    }

    [Theory]
    [InlineData(1.00, 7.0)]
    [InlineData(0.90, 7.0)]
    [InlineData(0.80, 8.0)]
    [InlineData(0.75, 8.0)]
    [InlineData(0.50, 8.0)]
    [InlineData(0.49, 10.0)]
    [InlineData(0.00, 10.0)]
    public void AWriteCostsTheCalibratedTierForItsReadRatio(double readRatio, double expected) =>
        Assert.Equal(expected, Table.Cost(IoType.Write, 4096, readRatio));

    [Theory]
    [InlineData(0, 1)]
    [InlineData(1, 1)]
    [InlineData(4096, 1)]
    [InlineData(4097, 2)]
    [InlineData(65536, 16)]
    public void CostScalesWithTheNumberOfStarted4KiBBlocks(long size, int blocks)
    {
        Assert.Equal(blocks * 1.0, Table.Cost(IoType.Read, size, 0.9));
        Assert.Equal(blocks * 8.0, Table.Cost(IoType.Write, size, 0.8));
    }

    [Fact]
    public void TheWeightedTokenRateReproducesThePapersLcG1Example() =>
        // §6.3.1: 30K IOPS at 80 % read = 0.8·30K + 0.2·30K·8 = 72K tokens/s.
        Assert.Equal(72_000, Table.WeightedTokensPerSecond(30_000, 0.8), 6);

    [Fact]
    public void AReadOnlySloReservesOneTokenPerIo() =>
        Assert.Equal(60_000, Table.WeightedTokensPerSecond(60_000, 1.0), 6);

    [Fact]
    public void ATableWhoseWriteGetsCheaperWithMoreWritesIsRefusedNamingTheTier()
    {
        var e = Assert.Throws<ArgumentException>(() => new CostTable([new(0.9, 7), new(0.0, 5)]));
        Assert.Contains("tier 1", e.Message);
    }

    [Fact]
    public void ATableWithoutATierAtReadRatioZeroIsRefused()
    {
        var e = Assert.Throws<ArgumentException>(() => new CostTable([new(0.9, 7), new(0.5, 8)]));
        Assert.Contains("must start at 0", e.Message);
    }

    [Fact]
    public void AWriteCheaperThanAReadIsRefused() =>
        Assert.Throws<ArgumentException>(() => new CostTable([new(0.0, 0.5)]));

    [Fact]
    public void ANegativeSizeIsRefused() =>
        Assert.Throws<ArgumentOutOfRangeException>(() => Table.Cost(IoType.Read, -1, 1));
}
