using FaaST.FlashBackend.Scheduling;

namespace FaaST.FlashBackend.Tests.Scheduling;

public class En4sSchedulerTests
{
    private const long Poll = 10_000; // 10 µs of virtual time per scheduling round

    /// <summary>The mechanism tests run with the authors' 10 % deficit limit (the default is 50 %, see
    /// <see cref="En4sSettings.DeficitLimitFraction"/>) so their counts stay small and readable.</summary>
    private static En4sScheduler NewEn4s(En4sSettings? settings = null, SchedulerLimits? limits = null) =>
        new(CostTable.I3XLarge, limits ?? SchedulerLimits.Default, DeviceProfile.I3XLarge,
            (settings ?? En4sSettings.Conservative) with { DeficitLimitFraction = 0.10 });

    private static int Lc(En4sScheduler s, string name, double iops, int p95Us = 2000, double read = 1.0) =>
        s.Register(new TenantSpec(name, iops, p95Us, read));

    private static void Fill(IIoScheduler s, int tenant, int n, long now, IoType type = IoType.Read)
    {
        for (int i = 0; i < n; i++)
            s.Enqueue(new IoRequest(i, tenant, type, 4096, now), now);
    }

    /// <summary>One scheduling round whose dispatched requests complete at once (no device: pure token accounting).</summary>
    private static int Round(IIoScheduler s, long now, List<int>? order = null)
    {
        Span<IoRequest> batch = stackalloc IoRequest[64];
        int n = s.Dispatch(now, batch);
        for (int i = 0; i < n; i++)
        {
            order?.Add(batch[i].Tenant);
            s.OnCompletion(batch[i], now);
        }
        return n;
    }

    [Fact]
    public void ABackloggedLcTenantGetsItsTokenRateOverAVirtualSecondPlusAtMostItsBurst()
    {
        var s = NewEn4s();
        int a = Lc(s, "a", 10_000);
        Assert.True(s.RunAdmission(0).Single().Admitted);
        Fill(s, a, 30_000, 0);
        for (long t = 0; t <= 1_000_000_000; t += Poll)
            Round(s, t);
        // 10,000 tokens/s of 1-token reads; the deficit limit (10 % = 1,000 tokens) is the most it can run ahead.
        Assert.InRange(s.DispatchedOf(a), 10_000, 11_001);
    }

    [Fact]
    public void ALoneBackloggedBeTenantGetsTheWholeDeviceOverAVirtualSecond()
    {
        var s = NewEn4s();
        int be = s.Register(new TenantSpec("be"));
        Fill(s, be, 300_000, 0);
        for (long t = 0; t <= 1_000_000_000; t += Poll)
            Round(s, t);
        // No LC tenant: the BE share is the device's raw 216K tokens/s.
        Assert.InRange(s.DispatchedOf(be), 215_000, 217_000);
    }

    [Theory]
    [InlineData(false, 50)]
    [InlineData(true, 5)]
    public void TheDeficitLimitHalvesAfterTheConfiguredConsecutiveLoansAndResetsOnRepayment(bool aggressive, int loansToHalve)
    {
        var s = NewEn4s(aggressive ? En4sSettings.Aggressive : En4sSettings.Conservative);
        int a = Lc(s, "a", 10_000);
        s.RunAdmission(0);
        Assert.Equal(1_000, s.DeficitLimitOf(a)); // 10 % of 10,000 tokens/s
        Fill(s, a, 5_000, 0);
        int maxLoans = 0;
        long t = 0;
        while (s.DeficitLimitOf(a) == 1_000)
        {
            maxLoans = Math.Max(maxLoans, s.LoanTimesOf(a));
            Round(s, t += Poll);
            Assert.True(t < 100_000_000, "the deficit limit never halved under a standing backlog");
        }
        Assert.Equal(loansToHalve, maxLoans);
        Assert.Equal(500, s.DeficitLimitOf(a));
        Assert.Equal(1, s.LoanTimesOf(a)); // the count restarts after the halving
        // Parked out of tokens, the tenant is visited (and a loan counted) only when its refill allows a dispatch:
        // the halving brought it below the new limit, so it waits 25 ms (250 tokens at 10K/s), then borrows again.
        for (int i = 0; i < 10_000; i++)
            Round(s, t += Poll);
        Assert.True(s.DeficitLimitOf(a) < 500, "a standing backlog did not keep halving the limit");
        // Drain the backlog, let the credit come back above zero, then one request: the visit finds it repaid.
        while (s.QueuedOf(a) > 0)
            Round(s, t += Poll);
        t += 200_000_000;
        Round(s, t);
        Fill(s, a, 1, t);
        Round(s, t += Poll);
        Assert.Equal(0, s.LoanTimesOf(a));
        // Additive increase: the allowance grows back with time at reclaim ticks, not in one step, up to the original.
        double limit = s.DeficitLimitOf(a);
        Assert.True(limit < 1_000, $"the limit {limit} came back in one step");
        Round(s, t += 100_000_000);
        Assert.True(s.DeficitLimitOf(a) > limit, "no additive increase after 100 ms of repayment");
        long recovery = aggressive ? 10_000_000_000 : 1_000_000_000;
        Round(s, t += recovery);
        Assert.Equal(1_000, s.DeficitLimitOf(a));
    }

    [Fact]
    public void ReclaimMovesAnIdleLcTenantsSurplusCreditToABackloggedBeTenant()
    {
        var s = NewEn4s();
        int lc = Lc(s, "idle-lc", 10_000);
        int be = s.Register(new TenantSpec("be"));
        s.RunAdmission(0);
        Fill(s, be, 100_000, 0);
        for (long t = 0; t <= 100_000_000; t += Poll)
            Round(s, t);
        // The LC tenant gains 10 tokens per 1 ms reclaim tick; above 3 ticks' worth 60 % of its credit goes to BE.
        Assert.True(s.ReclaimedTotal > 500, $"reclaimed only {s.ReclaimedTotal} tokens in 100 ms");
        Assert.InRange(s.CreditOf(lc), 0, 3 * 10 + 10 + 1);
        double share = s.BeShare * 0.1; // 190K tokens/s (200K at 2 ms minus the LC reservation) for 100 ms
        Assert.True(s.DispatchedOf(be) >= share + s.ReclaimedTotal - 250,
            $"BE dispatched {s.DispatchedOf(be)}, not its share {share} plus the reclaimed {s.ReclaimedTotal}");
    }

    [Fact]
    public void ManyBeTenantsWhoseShareIsBelowOneRequestPerIntervalStillGetTheLeftover()
    {
        var s = NewEn4s();
        int lc = Lc(s, "lc", 100_000);
        var be = new int[200];
        for (int i = 0; i < be.Length; i++)
            be[i] = s.Register(new TenantSpec($"be{i}"));
        s.RunAdmission(0);
        Fill(s, lc, 50_000, 0);
        foreach (int t in be)
            Fill(s, t, 200, 0);
        long before = be.Sum(t => s.DispatchedOf(t));
        for (long t = 0; t <= 100_000_000; t += Poll)
            Round(s, t);
        // 200K tokens/s at 2 ms minus the LC tenant's 100K: 500 tokens/s, half a read per 1 ms interval, per BE tenant.
        long got = be.Sum(t => s.DispatchedOf(t)) - before;
        Assert.InRange(got, 9_000, 11_000);
    }

    [Fact]
    public void AdmissionRefusesAnLcSloBeyondTheDevicesTokenRateNamingTheTenantAndTheShortfall()
    {
        var s = NewEn4s();
        int big = Lc(s, "big", 150_000);
        int second = Lc(s, "second", 30_000, read: 0.8); // 72K tokens/s (§6.3.1); 150K + 72K > 200K at 2 ms
        var decisions = s.RunAdmission(0);
        Assert.True(decisions.Single(d => d.Tenant == big).Admitted);
        var refused = decisions.Single(d => d.Tenant == second);
        Assert.False(refused.Admitted);
        Assert.Contains("'second'", refused.Reason);
        Assert.Contains("shortfall 22000 tokens/s", refused.Reason);
        Assert.True(s.IsLatencyCritical(big));
        Assert.False(s.IsLatencyCritical(second)); // it stays best-effort, still served
        Fill(s, second, 10, 0);
        Assert.Equal(10, Round(s, Poll));
    }

    [Fact]
    public void AdmissionUsesTheStrictestLatencyBoundAmongLcTenants()
    {
        var s = NewEn4s();
        Lc(s, "loose", 150_000, p95Us: 2000);
        s.RunAdmission(0);
        int strict = Lc(s, "strict", 10_000, p95Us: 500); // the 0.5 ms row carries 130K < 160K
        var d = s.RunAdmission(0).Single();
        Assert.Equal(strict, d.Tenant);
        Assert.False(d.Admitted);
        Assert.Contains("within p95 500 µs", d.Reason);
    }

    [Fact]
    public void ATenantWithAnLcSloJoinsAsBestEffortUntilAdmissionRuns()
    {
        var s = NewEn4s();
        int a = Lc(s, "a", 1_000);
        Assert.False(s.IsLatencyCritical(a));
        Fill(s, a, 3, 0);
        Assert.Equal(3, Round(s, 0)); // served at once as BE (fast join)
        s.RunAdmission(Poll);
        Assert.True(s.IsLatencyCritical(a));
    }

    [Fact]
    public void TenantsAreServedInActivationOrderWithExhaustiveDequeue()
    {
        var s = NewEn4s();
        int a = Lc(s, "a", 50_000), b = Lc(s, "b", 50_000), c = Lc(s, "c", 50_000);
        s.RunAdmission(0);
        Fill(s, c, 3, 0);
        Fill(s, a, 3, 0);
        Fill(s, b, 3, 0);
        Assert.Equal([c, a, b], s.ActiveLcOrder());
        var order = new List<int>();
        Round(s, 0, order);
        Assert.Equal([c, c, c, a, a, a, b, b, b], order);
        Assert.Empty(s.ActiveLcOrder());
    }

    [Fact]
    public void ATenantOutOfTokensIsParkedAndReturnsBehindTheOthersWhenItsRefillAllowsADispatch()
    {
        // A one-second burst schedule, so only the deficit limit blocks here.
        var s = NewEn4s(En4sSettings.Conservative with { VisitQuantumNs = 1_000_000_000 });
        // 100 IOPS: a 10-token deficit limit, so 11 reads from zero credit and it is blocked.
        int a = Lc(s, "small-a", 100), b = Lc(s, "small-b", 100), c = Lc(s, "big-c", 50_000);
        s.RunAdmission(0);
        Fill(s, a, 20, 0);
        Fill(s, b, 20, 0);
        Fill(s, c, 3, 0);
        var order = new List<int>();
        Round(s, 0, order);
        Assert.Equal(Enumerable.Repeat(a, 11).Concat(Enumerable.Repeat(b, 11)).Concat(Enumerable.Repeat(c, 3)), order);
        // c emptied and left; a and b are parked (no round visits them) until their credit is back at −10 tokens.
        Assert.Empty(s.ActiveLcOrder());
        Assert.Equal(2, s.ParkedCount);
        Assert.True(s.IsParked(a) && s.IsParked(b));
        int d = Lc(s, "late-d", 1_000);
        s.RunAdmission(0);
        Fill(s, d, 1, 0);
        Assert.Equal([d], s.ActiveLcOrder());
        // One token at 100 tokens/s: eligible 10 ms later, in block order, behind the tenant activated meanwhile.
        order.Clear();
        Round(s, 9_000_000, order);
        Assert.Equal([d], order);
        Assert.Equal(2, s.ParkedCount);
        Round(s, 10_000_001, order);
        Assert.Equal([d, a, b], order);
        Assert.Empty(s.ActiveLcOrder());
        Assert.Equal(2, s.ParkedCount); // one read each, out of tokens again
    }

    [Fact]
    public void ATenantThatUsedItsBurstScheduleForTheVisitGoesToTheTail()
    {
        var s = NewEn4s();
        // 2,000 IOPS: 2 tokens per 1 ms burst schedule, so two reads per visit.
        int a = Lc(s, "a", 2_000), b = Lc(s, "b", 50_000);
        s.RunAdmission(0);
        Fill(s, a, 5, 0);
        Fill(s, b, 3, 0);
        var order = new List<int>();
        Round(s, 0, order);
        Assert.Equal([a, a, b, b, b], order);
        Assert.Equal([a], s.ActiveLcOrder());
    }

    [Fact]
    public void ATenantBlockedByTheFullDeviceQueueGoesToTheTail()
    {
        var s = NewEn4s(limits: SchedulerLimits.Default with { LcInFlightMax = 2, BeInFlightMax = 1 });
        int a = Lc(s, "a", 50_000), b = Lc(s, "b", 50_000);
        s.RunAdmission(0);
        Fill(s, a, 5, 0);
        Fill(s, b, 5, 0);
        Span<IoRequest> batch = stackalloc IoRequest[64];
        Assert.Equal(2, s.Dispatch(0, batch));
        Assert.Equal(a, batch[0].Tenant);
        Assert.Equal([b, a], s.ActiveLcOrder()); // the freed slots go to b first
        s.OnCompletion(batch[0], Poll);
        Assert.Equal(1, s.Dispatch(Poll, batch));
        Assert.Equal(b, batch[0].Tenant);
    }

    [Fact]
    public void ATenantCutOffByTheBatchLimitContinuesFirstInTheNextBatch()
    {
        var s = NewEn4s(limits: SchedulerLimits.Default with { BatchSize = 4 });
        int a = Lc(s, "a", 50_000), b = Lc(s, "b", 50_000);
        s.RunAdmission(0);
        Fill(s, a, 6, 0);
        Fill(s, b, 2, 0);
        var order = new List<int>();
        Assert.Equal(4, Round(s, 0, order));
        Assert.Equal(4, Round(s, Poll, order));
        Assert.Equal([a, a, a, a, a, a, b, b], order);
    }

    [Fact]
    public void LcRequestsGoBeforeBeRequestsQueuedEarlier()
    {
        var s = NewEn4s();
        int be = s.Register(new TenantSpec("be"));
        int lc = Lc(s, "lc", 50_000);
        s.RunAdmission(0);
        Fill(s, be, 3, 0);
        Fill(s, lc, 3, 0);
        var order = new List<int>();
        Round(s, 0, order);
        Assert.Equal([lc, lc, lc, be, be, be], order);
    }

    [Fact]
    public void BeRequestsStopAtTheirInFlightCapWhileLcMayUseTheRest()
    {
        var s = NewEn4s(limits: SchedulerLimits.Default with { LcInFlightMax = 8, BeInFlightMax = 4 });
        int be = s.Register(new TenantSpec("be"));
        int lc = Lc(s, "lc", 50_000);
        s.RunAdmission(0);
        Span<IoRequest> batch = stackalloc IoRequest[64];
        Fill(s, be, 10, 0);
        Assert.Equal(4, s.Dispatch(0, batch));
        Fill(s, lc, 10, 0);
        Assert.Equal(4, s.Dispatch(Poll, batch)); // LC fills up to 8 in flight
        Assert.Equal(8, s.InFlight);
        Assert.Equal(0, s.Dispatch(2 * Poll, batch));
    }

    [Fact]
    public void DeregisteringATenantWithQueuedRequestsIsRefusedNamingIt()
    {
        var s = NewEn4s();
        int a = s.Register(new TenantSpec("busy"));
        Fill(s, a, 2, 0);
        var e = Assert.Throws<InvalidOperationException>(() => s.Deregister(a));
        Assert.Contains("'busy'", e.Message);
        Round(s, 0);
        s.Deregister(a);
        Assert.Throws<ArgumentException>(() => s.Enqueue(new IoRequest(1, a, IoType.Read, 4096, 0), 0));
    }

    [Fact]
    public void AnLcSpecWithoutALatencyBoundIsRefused()
    {
        var e = Assert.Throws<ArgumentException>(() => NewEn4s().Register(new TenantSpec("half", 1000, 0)));
        Assert.Contains("'half'", e.Message);
    }
}
