using FaaST.FlashBackend.Scheduling;

namespace FaaST.FlashBackend.Tests.Scheduling;

public class DeviceModelTests
{
    /// <summary>Open-loop Poisson arrivals straight onto the device for one virtual second at a fraction of its token
    /// rate; returns every read's latency, sorted.</summary>
    private static long[] RunOpenLoop(double loadFraction, double writeShare, ulong seed)
    {
        var profile = DeviceProfile.I3XLarge;
        var device = new DeviceModel(profile, seed);
        var arrivals = new SeededRng(seed ^ 0xA5A5);
        double meanCost = (1 - writeShare) * 1 + writeShare * CostTable.I3XLarge.PerBlock(IoType.Write, 1 - writeShare);
        double meanGapNs = 1e9 / (loadFraction * profile.TokensPerSecond / meanCost);
        var reads = new List<long>();
        double t = 0;
        long id = 0;
        while (t < 1e9)
        {
            t += arrivals.NextExponential(meanGapNs);
            long now = (long)t;
            while (device.TryComplete(now, out var c))
                if (c.Request.Type == IoType.Read) reads.Add(c.LatencyNs);
            var type = arrivals.NextDouble() < writeShare ? IoType.Write : IoType.Read;
            var r = new IoRequest(id++, 0, type, 4096, now)
            {
                Cost = CostTable.I3XLarge.Cost(type, 4096, 1 - writeShare),
            };
            Assert.True(device.TrySubmit(r, now), $"queue full at {now} ns");
        }
        while (device.TryComplete(long.MaxValue, out var c))
            if (c.Request.Type == IoType.Read) reads.Add(c.LatencyNs);
        var sorted = reads.ToArray();
        Array.Sort(sorted);
        return sorted;
    }

    private static long P95(long[] sorted) => sorted[(int)(0.95 * (sorted.Length - 1))];

    [Fact]
    public void TheSameSeedGivesTheSameLatencies() =>
        Assert.Equal(RunOpenLoop(0.7, 0.2, 42), RunOpenLoop(0.7, 0.2, 42));

    [Fact]
    public void ADifferentSeedGivesDifferentLatencies() =>
        Assert.NotEqual(RunOpenLoop(0.7, 0.2, 42), RunOpenLoop(0.7, 0.2, 43));

    [Fact]
    public void TheReadTailBendsUpNearSaturation()
    {
        long light = P95(RunOpenLoop(0.3, 0, 7));
        long heavy = P95(RunOpenLoop(0.95, 0, 7));
        Assert.True(heavy > 2 * light, $"p95 at 95 % load {heavy} ns is not above twice the p95 at 30 % load {light} ns");
    }

    [Fact]
    public void TheReadTailRisesWithTheWriteShareAtTheSameTokenLoad()
    {
        long readsOnly = P95(RunOpenLoop(0.6, 0, 7));
        long mixed = P95(RunOpenLoop(0.6, 0.25, 7));
        Assert.True(mixed > readsOnly, $"p95 with 25 % writes {mixed} ns is not above reads-only {readsOnly} ns");
    }

    [Fact]
    public void AnUnloadedReadCompletesNearItsServiceTime()
    {
        var device = new DeviceModel(DeviceProfile.I3XLarge, 1);
        var r = new IoRequest(1, 0, IoType.Read, 4096, 1000) { Cost = 1 };
        Assert.True(device.TrySubmit(r, 1000));
        Assert.True(device.TryComplete(long.MaxValue, out var c));
        Assert.InRange(c.LatencyNs, 30_000, 300_000);
    }

    [Fact]
    public void ASubmissionBeyondTheQueueDepthIsRefused()
    {
        var device = new DeviceModel(DeviceProfile.I3XLarge with { QueueDepth = 2 }, 1);
        var r = new IoRequest(1, 0, IoType.Read, 4096, 0) { Cost = 1 };
        Assert.True(device.TrySubmit(r, 0));
        Assert.True(device.TrySubmit(r, 0));
        Assert.False(device.TrySubmit(r, 0));
        Assert.Equal(2, device.InFlight);
    }

    [Fact]
    public void CompletionsComeOutInTimeOrderAndOnlyWhenDue()
    {
        var device = new DeviceModel(DeviceProfile.I3XLarge, 3);
        for (int i = 0; i < 100; i++)
            Assert.True(device.TrySubmit(new IoRequest(i, 0, IoType.Read, 4096, 0) { Cost = 1 }, 0));
        long first = device.NextCompletionNs;
        Assert.False(device.TryComplete(first - 1, out _));
        long last = 0;
        int n = 0;
        while (device.TryComplete(long.MaxValue, out var c))
        {
            Assert.True(c.CompleteNs >= last);
            last = c.CompleteNs;
            n++;
        }
        Assert.Equal(100, n);
    }

    [Fact]
    public void TimeGoingBackwardsIsRefused()
    {
        var device = new DeviceModel(DeviceProfile.I3XLarge, 1);
        var r = new IoRequest(1, 0, IoType.Read, 4096, 0) { Cost = 1 };
        device.TrySubmit(r, 5000);
        var e = Assert.Throws<ArgumentOutOfRangeException>(() => device.TrySubmit(r, 4000));
        Assert.Contains("backwards", e.Message);
    }

    [Fact]
    public void AProfileWithAZeroTokenRateIsRefused() =>
        Assert.Throws<ArgumentException>(() => new DeviceModel(DeviceProfile.I3XLarge with { TokensPerSecond = 0 }, 1));
}
