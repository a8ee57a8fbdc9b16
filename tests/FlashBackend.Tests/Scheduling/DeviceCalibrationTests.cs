using FaaST.FlashBackend.Scheduling;

namespace FaaST.FlashBackend.Tests.Scheduling;

/// <summary>
/// The device model against the table it was calibrated to (<see cref="DeviceProfile.TokenLimits"/>: the token rate the
/// device carries within each p95 bound, the curve LC admission relies on). Open-loop Poisson 4 KiB requests straight onto
/// the model at a row's token rate for one virtual second, fixed seeds: the read p95 lies within the row's bound, and a
/// load well past the row breaks it (so the table is neither loose nor a bound the model never approaches).
/// </summary>
public class DeviceCalibrationTests
{
    private const ulong Seed = 7;

    private static double ReadP95Us(double tokensPerSecond, double writeShare, ulong seed)
    {
        var profile = DeviceProfile.I3XLarge;
        var costs = CostTable.I3XLarge;
        var device = new DeviceModel(profile, seed);
        var arrivals = new SeededRng(seed * 31 + 5);
        double readRatio = 1 - writeShare;
        double meanCost = readRatio * CostTable.ReadCost + writeShare * costs.PerBlock(IoType.Write, readRatio);
        double meanGapNs = 1e9 * meanCost / tokensPerSecond;
        var reads = new List<long>();
        double t = 0;
        long id = 0;
        while (t < 1e9)
        {
            t += arrivals.NextExponential(meanGapNs);
            long now = (long)t;
            while (device.TryComplete(now, out var c))
                if (c.Request.Type == IoType.Read && c.CompleteNs > 100_000_000) reads.Add(c.LatencyNs);
            var type = arrivals.NextDouble() < writeShare ? IoType.Write : IoType.Read;
            var r = new IoRequest(id++, 0, type, 4096, now) { Cost = costs.Cost(type, 4096, readRatio) };
            Assert.True(device.TrySubmit(r, now), $"device queue ({profile.QueueDepth}) full at {now} ns at {tokensPerSecond} tokens/s");
        }
        while (device.TryComplete(long.MaxValue, out var c))
            if (c.Request.Type == IoType.Read) reads.Add(c.LatencyNs);
        reads.Sort();
        return reads[(int)Math.Ceiling(0.95 * reads.Count) - 1] / 1000.0;
    }

    public static TheoryData<int, double, double> Rows()
    {
        var data = new TheoryData<int, double, double>();
        foreach (var row in DeviceProfile.I3XLarge.TokenLimits)
            if (row.TokensPerSecond < DeviceProfile.I3XLarge.TokensPerSecond) // the raw rate has no bound to check
                foreach (double w in new[] { 0.0, 0.1 })
                    data.Add(row.P95LatencyUs, row.TokensPerSecond, w);
        return data;
    }

    [Theory]
    [MemberData(nameof(Rows))]
    public void AtEachCalibratedTokenRateTheModelsReadP95StaysWithinTheRowsBound(int boundUs, double tokensPerSecond, double writeShare)
    {
        double p95 = ReadP95Us(tokensPerSecond, writeShare, Seed);
        Assert.True(p95 <= boundUs, $"at {tokensPerSecond} tokens/s, {writeShare:P0} writes: read p95 {p95:0} µs > the table's {boundUs} µs");
    }

    [Fact]
    public void TheTightestRowIsNotLooseTheReadP95PassesItWellBeyondItsRate()
    {
        var row = DeviceProfile.I3XLarge.TokenLimits[0];
        double p95 = ReadP95Us(row.TokensPerSecond * 1.5, 0, Seed);
        Assert.True(p95 > row.P95LatencyUs, $"at 1.5 x {row.TokensPerSecond} tokens/s the read p95 is still {p95:0} µs <= {row.P95LatencyUs} µs");
    }

    [Fact]
    public void TheSameSeedGivesTheSameP95AndAnotherSeedADifferentOne()
    {
        double a = ReadP95Us(180_000, 0.1, Seed), b = ReadP95Us(180_000, 0.1, Seed), c = ReadP95Us(180_000, 0.1, Seed + 1);
        Assert.Equal(a, b);
        Assert.NotEqual(a, c);
    }
}
