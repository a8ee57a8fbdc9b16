using FaaST.FlashBackend.Scheduling;

namespace FaaST.FlashBackend.Tests.Scheduling;

/// <summary>
/// Issue 22's goal on the device model (fixed seeds): Fig. 10's 1,000 tenants (LC G0 60K IOPS all reads, LC G1 30K at
/// 80 % read, BE G0 30K at 95 %, BE G1 15K at 25 %, a quarter of the tenants each, open-loop Poisson clients at their SLO)
/// on the 200K-token device: LC goodput at least 85 % of the SLO with the LC read p95 within 2 ms, under En4S's defaults.
/// </summary>
public class ThousandTenantTests
{
    private static WorkloadResult Run(En4sSettings settings)
    {
        var tenants = new List<WorkloadTenant>(1000);
        for (int i = 0; i < 250; i++)
            tenants.Add(new(new TenantSpec($"lc-g0-{i}", 240, 2000, 1.0), 240, 1.0) { Group = "LC G0" });
        for (int i = 0; i < 250; i++)
            tenants.Add(new(new TenantSpec($"lc-g1-{i}", 120, 2000, 0.8), 120, 0.8) { Group = "LC G1" });
        for (int i = 0; i < 250; i++)
            tenants.Add(new(new TenantSpec($"be-g0-{i}"), 120, 0.95) { Group = "BE G0" });
        for (int i = 0; i < 250; i++)
            tenants.Add(new(new TenantSpec($"be-g1-{i}"), 60, 0.25) { Group = "BE G1" });
        var scheduler = new En4sScheduler(CostTable.I3XLarge, SchedulerLimits.Default, DeviceProfile.I3XLarge, settings);
        // 2 virtual seconds: a small tenant's credit needs more than a second to show whether it random-walks to its floor.
        return WorkloadDriver.RunDetailed(scheduler, new DeviceModel(DeviceProfile.I3XLarge, 1), tenants,
            new WorkloadRun { DurationNs = 2_000_000_000, WarmupNs = 500_000_000 });
    }

    [Fact]
    public void WithTheDefaultSettingsBothLcGroupsGetAtLeast85PercentOfTheirSloWithTheReadTailWithin2Ms()
    {
        var r = Run(En4sSettings.Conservative);
        var g = r.Groups.ToDictionary(x => x.Group);
        Assert.True(g["LC G0"].GoodputFraction >= 0.85, $"LC G0 goodput {g["LC G0"].GoodputFraction:0.000} of its SLO");
        Assert.True(g["LC G1"].GoodputFraction >= 0.85, $"LC G1 goodput {g["LC G1"].GoodputFraction:0.000} of its SLO");
        Assert.True(r.LcReadP95Us <= 2000, $"LC read p95 {r.LcReadP95Us:0} µs");
        Assert.True(g["BE G0"].CompletedIops > 10_000, $"BE G0 starved: {g["BE G0"].CompletedIops:0} IOPS");
    }

    [Fact]
    public void WithTheAuthorsTenPercentAllowanceSmallLcTenantsQueueUpAndMissTheirSlo()
    {
        // Why the default is 50 %: at 10 % a 120-IOPS tenant's credit reaches its floor and its queue builds.
        var r = Run(En4sSettings.Conservative with { DeficitLimitFraction = 0.10 });
        var g = r.Groups.ToDictionary(x => x.Group);
        Assert.True(g["LC G1"].GoodputFraction < 0.85, $"LC G1 goodput {g["LC G1"].GoodputFraction:0.000}");
        Assert.True(r.LcReadP95Us > 2000, $"LC read p95 {r.LcReadP95Us:0} µs");
    }
}
