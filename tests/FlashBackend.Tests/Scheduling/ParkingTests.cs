using FaaST.FlashBackend.Scheduling;

namespace FaaST.FlashBackend.Tests.Scheduling;

/// <summary>Blocked tenants are parked out of the active lists (so a round's cost follows the tenants that can
/// dispatch, not every backlogged one), batch sizes 4/16/64, and what admission reports.</summary>
public class ParkingTests
{
    private const long Poll = 10_000;

    /// <summary>With the authors' 10 % deficit limit, as in En4sSchedulerTests, so the counts below stay small.</summary>
    private static En4sScheduler NewEn4s(SchedulerLimits? limits = null) =>
        new(CostTable.I3XLarge, limits ?? SchedulerLimits.Default, DeviceProfile.I3XLarge,
            En4sSettings.Conservative with { DeficitLimitFraction = 0.10 });

    private static void Fill(IIoScheduler s, int tenant, int n, long now)
    {
        for (int i = 0; i < n; i++)
            s.Enqueue(new IoRequest(i, tenant, IoType.Read, 4096, now), now);
    }

    private static int Round(IIoScheduler s, long now)
    {
        Span<IoRequest> batch = stackalloc IoRequest[64];
        int n = s.Dispatch(now, batch);
        for (int i = 0; i < n; i++)
            s.OnCompletion(batch[i], now);
        return n;
    }

    [Fact]
    public void UnderOverloadAtAThousandTenantsAlmostEveryBackloggedTenantIsParkedOutOfTheActiveLists()
    {
        var s = NewEn4s();
        var lc = new int[250];
        var be = new int[750];
        for (int i = 0; i < lc.Length; i++)
            lc[i] = s.Register(new TenantSpec($"lc{i}", 400, 2000, 1.0)); // 100K tokens/s reserved in all
        for (int i = 0; i < be.Length; i++)
            be[i] = s.Register(new TenantSpec($"be{i}"));
        s.RunAdmission(0);
        foreach (int t in lc) Fill(s, t, 2_000, 0); // each LC tenant 2,000 reads: five seconds of its SLO
        foreach (int t in be) Fill(s, t, 200, 0);
        long dispatched = 0;
        for (long t = 0; t <= 50_000_000; t += Poll)
            dispatched += Round(s, t);
        int active = s.ActiveLcOrder().Length + s.ActiveBeOrder().Length;
        Assert.True(s.ParkedCount >= 900, $"only {s.ParkedCount} of 1,000 backlogged tenants parked ({active} active)");
        Assert.True(active <= 100, $"{active} tenants still in the active lists: every round would visit them");
        // Parking changes who is visited, not what they get (rounds complete at once here, so no in-flight cap): the
        // 200K tokens/s of the 2 ms row over 50 ms (10K) plus the LC tenants' burst allowances (250 x 40 tokens).
        Assert.InRange(dispatched, 18_000, 21_000);
    }

    [Fact]
    public void ABeTenantParkedForThePoolReturnsAtTheNextReclaimAndIsServed()
    {
        var s = NewEn4s();
        int lc = s.Register(new TenantSpec("lc", 199_000, 2000, 1.0)); // leaves 1K tokens/s: 1 token per interval
        var be = new int[20];
        for (int i = 0; i < be.Length; i++)
            be[i] = s.Register(new TenantSpec($"be{i}"));
        s.RunAdmission(0);
        foreach (int t in be) Fill(s, t, 50, 0);
        for (long t = 0; t < 3_000_000; t += Poll)
            Round(s, t);
        Assert.True(s.ParkedCount > 0, "no BE tenant was parked though their share is 50 tokens/s each");
        long before = be.Sum(t => s.DispatchedOf(t));
        for (long t = 3_000_000; t <= 203_000_000; t += Poll)
            Round(s, t);
        long got = be.Sum(t => s.DispatchedOf(t)) - before;
        // The idle LC tenant's reclaimed tokens and the 1K tokens/s leftover reach the parked BE tenants.
        Assert.True(got >= 200, $"parked BE tenants dispatched only {got} in 200 ms");
        Assert.True(s.ReclaimedTotal > 0);
        Assert.False(s.IsParked(lc));
    }

    [Theory]
    [InlineData(4)]
    [InlineData(16)]
    [InlineData(64)]
    public void EachBatchSizeCapsADispatchAndGivesABackloggedTenantTheSameRate(int batchSize)
    {
        var s = NewEn4s(SchedulerLimits.Default with { BatchSize = batchSize });
        // Two tenants of 50K: a visit's burst schedule is 50 tokens each, so a round has 100 to give, above every batch.
        int a = s.Register(new TenantSpec("a", 50_000, 2000, 1.0)), b = s.Register(new TenantSpec("b", 50_000, 2000, 1.0));
        s.RunAdmission(0);
        Fill(s, a, 80_000, 0);
        Fill(s, b, 80_000, 0);
        int most = 0;
        for (long t = 0; t <= 1_000_000_000; t += Poll)
            most = Math.Max(most, Round(s, t));
        Assert.Equal(batchSize, most);
        // 50K tokens/s each plus at most a 5K-token burst allowance; batch 4 per 10 µs round (400K/s) never limits them.
        Assert.InRange(s.DispatchedOf(a), 50_000, 55_001);
        Assert.InRange(s.DispatchedOf(b), 50_000, 55_001);
    }

    [Fact]
    public void AnAdmissionDecisionSaysWhatTheTenantAskedAndWhatWasLeft()
    {
        var s = NewEn4s();
        s.Register(new TenantSpec("first", 150_000, 2000, 1.0));
        int g1 = s.Register(new TenantSpec("g1", 30_000, 2000, 0.8));
        var d = s.RunAdmission(0);
        Assert.Equal(150_000, d[0].RequestedTokensPerSecond);
        Assert.Equal(200_000, d[0].LeftTokensPerSecond);
        var refused = d.Single(x => x.Tenant == g1);
        Assert.False(refused.Admitted);
        Assert.Equal("g1", refused.Name);
        Assert.Equal(72_000, refused.RequestedTokensPerSecond, 6); // 0.8·30K + 0.2·30K·8 (§6.3.1)
        Assert.Equal(50_000, refused.LeftTokensPerSecond, 6);
    }
}
