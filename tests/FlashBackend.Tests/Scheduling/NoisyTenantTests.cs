using FaaST.FlashBackend.Scheduling;

namespace FaaST.FlashBackend.Tests.Scheduling;

/// <summary>Issue 22, "a noisy tenant cannot break another's SLO", on the device model with fixed seeds.</summary>
public class NoisyTenantTests
{
    // Fig. 3b's setting: LC G0 registers 40K IOPS, LC G1 20K, both 90 % read and 2 ms p95. G0 offers 3x its SLO.
    private static readonly TenantSpec Noisy = new("noisy-g0", 40_000, 2000, 0.9);
    private static readonly TenantSpec Benign = new("benign-g1", 20_000, 2000, 0.9);

    private static IReadOnlyList<TenantOutcome> Run(IIoScheduler scheduler, ulong seed, double noisyFactor = 3,
        long durationNs = 500_000_000, bool withBe = false)
    {
        var tenants = new List<WorkloadTenant> { new(Noisy, noisyFactor * Noisy.IopsSlo, 0.9), new(Benign, Benign.IopsSlo, 0.9) };
        if (withBe)
            tenants.Add(new(new TenantSpec("be-group"), 100_000, 1.0)); // Fig. 11's BE group, all reads, asking for more than is left
        return WorkloadDriver.Run(scheduler, new DeviceModel(DeviceProfile.I3XLarge, seed), tenants,
            new WorkloadRun { DurationNs = durationNs, WarmupNs = 100_000_000, DeviceSeed = seed, ArrivalSeed = seed + 1 });
    }

    private static En4sScheduler En4s(bool aggressive = false) =>
        new(CostTable.I3XLarge, SchedulerLimits.Default, DeviceProfile.I3XLarge,
            aggressive ? En4sSettings.Aggressive : En4sSettings.Conservative);

    [Theory]
    [InlineData(false, false)]
    [InlineData(true, false)]
    [InlineData(false, true)]
    [InlineData(true, true)]
    public void UnderEn4sANoisyLcTenantDoesNotPushAWellBehavedOneBelowItsSlo(bool aggressive, bool withBe)
    {
        var outcomes = Run(En4s(aggressive), 11, withBe: withBe);
        var noisy = outcomes[0];
        var benign = outcomes[1];
        Assert.Equal("admitted", benign.Admission);
        Assert.True(benign.GoodputFraction >= 0.95, $"benign goodput {benign.GoodputIops:0} IOPS = {benign.GoodputFraction:P1} of its SLO");
        Assert.True(benign.P95Us <= 2000, $"benign p95 {benign.P95Us:0} µs above its 2000 µs SLO");
        // The noisy tenant is held near its own reservation, not its 120K offer (its deficit allowance on top).
        Assert.True(noisy.CompletedIops < 1.2 * Noisy.IopsSlo, $"noisy tenant completed {noisy.CompletedIops:0} IOPS");
    }

    [Fact]
    public void UnderFcfsTheSameNoisyTenantPushesTheWellBehavedOneBelowItsSlo()
    {
        var benign = Run(new FcfsScheduler(CostTable.I3XLarge, SchedulerLimits.Default), 11)[1];
        Assert.True(benign.GoodputFraction < 0.5 || benign.P95Us > 2000,
            $"FCFS kept the benign tenant at {benign.GoodputFraction:P1} of its SLO with p95 {benign.P95Us:0} µs");
    }

    [Fact]
    public void WithoutTheNoisyOverloadFcfsAlsoMeetsTheBenignSlo()
    {
        // The control: the FCFS failure above is the noisy tenant's doing, not the device's.
        var benign = Run(new FcfsScheduler(CostTable.I3XLarge, SchedulerLimits.Default), 11, noisyFactor: 1)[1];
        Assert.True(benign.GoodputFraction >= 0.95 && benign.P95Us <= 2000,
            $"benign at {benign.GoodputFraction:P1} with p95 {benign.P95Us:0} µs");
    }

    [Fact]
    public void TheSameSeedGivesTheSameOutcomes() =>
        Assert.Equal(Run(En4s(), 5, durationNs: 200_000_000), Run(En4s(), 5, durationNs: 200_000_000));

    [Fact]
    public void ADifferentSeedGivesDifferentOutcomes() =>
        Assert.NotEqual(Run(En4s(), 5, durationNs: 200_000_000)[1], Run(En4s(), 6, durationNs: 200_000_000)[1]);
}
