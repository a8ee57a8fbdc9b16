using FaaST.FlashBackend.Scheduling;

namespace FaaST.FlashBackend.Tests.Scheduling;

public class BaselineSchedulerTests
{
    private const long Poll = 10_000;

    private static void Fill(IIoScheduler s, int tenant, int n, long now)
    {
        for (int i = 0; i < n; i++)
            s.Enqueue(new IoRequest(i, tenant, IoType.Read, 4096, now), now);
    }

    private static void Round(IIoScheduler s, long now, List<int>? order = null)
    {
        Span<IoRequest> batch = stackalloc IoRequest[64];
        int n = s.Dispatch(now, batch);
        for (int i = 0; i < n; i++)
        {
            order?.Add(batch[i].Tenant);
            s.OnCompletion(batch[i], now);
        }
    }

    [Fact]
    public void FcfsDispatchesInArrivalOrderAcrossTenants()
    {
        var s = new FcfsScheduler(CostTable.I3XLarge, SchedulerLimits.Default);
        int a = s.Register(new TenantSpec("a", 10, 2000)), b = s.Register(new TenantSpec("b"));
        s.Enqueue(new IoRequest(1, b, IoType.Read, 4096, 0), 0);
        s.Enqueue(new IoRequest(2, a, IoType.Write, 4096, 0), 0);
        s.Enqueue(new IoRequest(3, b, IoType.Read, 4096, 0), 0);
        var order = new List<int>();
        Round(s, 0, order);
        Assert.Equal([b, a, b], order);
        Assert.Equal(0, s.Queued);
    }

    [Fact]
    public void FcfsStopsAtTheInFlightCap()
    {
        var s = new FcfsScheduler(CostTable.I3XLarge, SchedulerLimits.Default with { LcInFlightMax = 3, BeInFlightMax = 3 });
        int a = s.Register(new TenantSpec("a"));
        Fill(s, a, 10, 0);
        Span<IoRequest> batch = stackalloc IoRequest[64];
        Assert.Equal(3, s.Dispatch(0, batch));
        Assert.Equal(0, s.Dispatch(Poll, batch));
    }

    [Fact]
    public void ReflexHoldsABackloggedLcTenantToItsStaticRateAndBurstOverAVirtualSecond()
    {
        var s = new ReflexScheduler(CostTable.I3XLarge, SchedulerLimits.Default, DeviceProfile.I3XLarge, burstFraction: 0.1);
        int a = s.Register(new TenantSpec("a", 10_000, 2000, 1.0));
        Fill(s, a, 30_000, 0);
        for (long t = 0; t <= 1_000_000_000; t += Poll)
            Round(s, t);
        Assert.InRange(s.DispatchedOf(a), 10_000, 11_001); // 10K tokens/s plus the fixed 1,000-token burst
    }

    [Fact]
    public void ReflexHandsAnIdleLcTenantsTokensToBeAtOnce()
    {
        var s = new ReflexScheduler(CostTable.I3XLarge, SchedulerLimits.Default, DeviceProfile.I3XLarge);
        int lc = s.Register(new TenantSpec("idle-lc", 100_000, 2000, 1.0));
        int be = s.Register(new TenantSpec("be"));
        Fill(s, be, 100_000, 0);
        for (long t = 0; t <= 100_000_000; t += Poll)
            Round(s, t);
        // The BE share is 200K - 100K = 100K tokens/s; the idle LC tenant's 100K flow to BE every round (§4.5's leak).
        Assert.True(s.DispatchedOf(be) > 15_000, $"BE dispatched {s.DispatchedOf(be)} in 100 ms");
        Assert.Equal(0, s.CreditOf(lc));
    }
}
