using FaaST.FlashBackend.Scheduling;

namespace FaaST.FlashBackend.Tests.Scheduling;

/// <summary>The schedulers' own work counter (<see cref="IIoScheduler.TenantVisits"/>) and Fig. 8's driver, which
/// charges that work in virtual time (En4S §6.2.1).</summary>
public class SchedulerWorkTests
{
    private static SchedulerLimits Limits => SchedulerLimits.Default with { LcInFlightMax = 512, BeInFlightMax = 512 };

    private static IIoScheduler New(string name) => name switch
    {
        "en4s" => new En4sScheduler(CostTable.I3XLarge, Limits, DeviceProfile.I3XLarge, En4sSettings.Conservative),
        "reflex" => new ReflexScheduler(CostTable.I3XLarge, Limits, DeviceProfile.I3XLarge),
        _ => new FcfsScheduler(CostTable.I3XLarge, Limits),
    };

    /// <summary>Registers <paramref name="tenants"/> BE tenants, queues one request for each of the first
    /// <paramref name="active"/>, runs one Dispatch and returns the visits it made.</summary>
    private static long OnePass(string name, int tenants, int active)
    {
        var s = New(name);
        var ids = new int[tenants];
        for (int i = 0; i < tenants; i++)
            ids[i] = s.Register(new TenantSpec($"t{i}"));
        for (int i = 0; i < active; i++)
            s.Enqueue(new IoRequest(i, ids[i], IoType.Read, 4096, 0), 0);
        long before = s.TenantVisits;
        s.Dispatch(0, new IoRequest[64]);
        return s.TenantVisits - before;
    }

    [Theory]
    [InlineData(10)]
    [InlineData(100)]
    [InlineData(1000)]
    public void ReflexVisitsEveryTenantEachPass(int tenants)
    {
        // §3.1: ReFlex walks all registered tenants per round, whether they have work or not.
        Assert.Equal(tenants, OnePass("reflex", tenants, active: 3));
    }

    [Theory]
    [InlineData(10)]
    [InlineData(100)]
    [InlineData(1000)]
    public void En4sVisitsOnlyActiveTenants(int tenants)
    {
        // §4.3.2: only tenants with queued work are in the active list; the count does not grow with the tenants.
        long visits = OnePass("en4s", tenants, active: 3);
        Assert.InRange(visits, 1, 3);
    }

    [Fact]
    public void En4sCountsTheReclaimWalkOfLcTenants()
    {
        // The reclaim (§4.5) visits every LC tenant once an interval: that work is counted, not hidden.
        var s = (En4sScheduler)New("en4s");
        for (int i = 0; i < 40; i++)
            s.Register(new TenantSpec($"lc{i}", 100, 2000, 1.0));
        s.RunAdmission(0);
        long before = s.TenantVisits;
        s.Dispatch(0, new IoRequest[64]); // the first Dispatch reclaims
        Assert.Equal(40, s.TenantVisits - before);
        before = s.TenantVisits;
        s.Dispatch(10_000, new IoRequest[64]); // within the interval, nothing active: no visit
        Assert.Equal(0, s.TenantVisits - before);
    }

    [Fact]
    public void FcfsCountsOneOperationPerDispatchedRequest()
    {
        var s = New("fcfs");
        int a = s.Register(new TenantSpec("a"));
        for (int i = 0; i < 5; i++)
            s.Enqueue(new IoRequest(i, a, IoType.Read, 4096, 0), 0);
        Assert.Equal(5, s.Dispatch(0, new IoRequest[64]));
        Assert.Equal(5, s.TenantVisits);
    }

    [Theory]
    [InlineData("en4s")]
    [InlineData("reflex")]
    public void WaitDriverIsDeterministic(string name)
    {
        var cost = new PassCost(100, 10);
        var a = SchedulingWaitDriver.Run(New(name), 200, 0.25, 16, 4_000, cost);
        var b = SchedulingWaitDriver.Run(New(name), 200, 0.25, 16, 4_000, cost);
        Assert.Equal(a.CompletionNs, b.CompletionNs);
        Assert.Equal(a.IsLc, b.IsLc);
        Assert.Equal(a.Passes, b.Passes);
        Assert.Equal(a.Visits, b.Visits);
        Assert.All(a.CompletionNs, t => Assert.True(t > 0)); // every request completed
    }

    [Fact]
    public void PassCostDelaysReflexInProportionToItsWalk()
    {
        // All tenants LC, so no request is moved ahead of FCFS (a mixed batch served LC first completes its LC requests
        // earlier than FCFS, which hides a small pass cost: see docs/flash.md, Fig. 8).
        var ideal = SchedulingWaitDriver.Run(New("fcfs"), 100, 1.0, 64, 4_000, PassCost.Free);
        Assert.Equal(0, SchedulingWaitDriver.MeanLcWaitNs(ideal, ideal));
        var free = SchedulingWaitDriver.Run(New("reflex"), 100, 1.0, 64, 4_000, PassCost.Free);
        var paid = SchedulingWaitDriver.Run(New("reflex"), 100, 1.0, 64, 4_000, new PassCost(0, 100));
        Assert.Equal(100.0, (double)paid.Visits / paid.Passes, 1);
        double freeWait = SchedulingWaitDriver.MeanLcWaitNs(free, ideal), paidWait = SchedulingWaitDriver.MeanLcWaitNs(paid, ideal);
        // Each pass walks the 100 tenants at 100 ns: its dispatches reach the device 10 µs late. Measured 6.9 µs more
        // wait: less than 10 where ReFlex's token bucket already held a request back and the two delays overlap.
        Assert.InRange(paidWait - freeWait, 3_000, 10_500);
    }

    [Fact]
    public void WaitDriverRefusesBadArguments()
    {
        var e = Assert.Throws<ArgumentException>(() => SchedulingWaitDriver.Run(New("en4s"), 0, 0.25, 16, 100, PassCost.Free));
        Assert.Contains("tenants 0", e.Message);
        Assert.Throws<ArgumentException>(() => SchedulingWaitDriver.Run(New("en4s"), 10, 1.5, 16, 100, PassCost.Free));
    }
}
