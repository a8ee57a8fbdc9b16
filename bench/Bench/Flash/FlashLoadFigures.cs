using System.Text.Json.Nodes;
using FaaST.FlashBackend.Scheduling;

namespace FaaST.Bench.Flash;

/// <summary>Fig. 11 (a misbehaving LC tenant under aggressive and conservative burst control, over time) and Fig. 12
/// (LC ratio 20–80 %), on the device model.</summary>
internal static class FlashLoadFigures
{
    /// <summary>
    /// Fig. 11 (§6.3.2, set up as §3.2's Fig. 3b): LC G0 registers 40K IOPS at 75 % read and misbehaves: it "periodically
    /// bursts beyond its SLO before falling back below it" — 3× its SLO for 250 ms of every second, 0.3× in between
    /// (0.975× on average, so only the bursts break the SLO; a burst's excess, 20K requests = 55K tokens, is its whole
    /// 50 % deficit allowance, and 330K tokens/s would swamp the device if let through); LC G1 registers
    /// 20K at 90 % read and keeps to it; a BE group of 100 clients reads (100 %) as much as it can (100K IOPS offered).
    /// Goodput (completed within 2 ms) in 25 ms windows. En4S aggressive and conservative, ReFlex-style (with §3.2's 50 %
    /// burst allowance, the setting that lets G0 through) and FCFS.
    /// </summary>
    public static JsonObject Fig11(Report report, bool quick)
    {
        long duration = quick ? 2_000_000_000 : 10_000_000_000;
        var run = new WorkloadRun { DurationNs = duration, WarmupNs = 500_000_000, WindowNs = 25_000_000 };
        var tenants = new List<WorkloadTenant>
        {
            new(new TenantSpec("lc-g0-malicious", 40_000, 2000, 0.75), 40_000 * 0.3, 0.75)
            {
                Group = "LC G0", BurstFactor = 3 / 0.3, BurstPeriodNs = 1_000_000_000, BurstOnNs = 250_000_000,
            },
            new(new TenantSpec("lc-g1-benign", 20_000, 2000, 0.9), 20_000, 0.9) { Group = "LC G1" },
        };
        for (int i = 0; i < 100; i++)
            tenants.Add(new(new TenantSpec($"be-{i}"), 1_000, 1.0) { Group = "BE" });
        var variants = new (string Name, Func<IIoScheduler> Make)[]
        {
            ("en4s_aggressive", () => new En4sScheduler(CostTable.I3XLarge, SchedulerLimits.Default, DeviceProfile.I3XLarge, En4sSettings.Aggressive)),
            ("en4s_conservative", () => new En4sScheduler(CostTable.I3XLarge, SchedulerLimits.Default, DeviceProfile.I3XLarge, En4sSettings.Conservative)),
            ("reflex_burst50", () => new ReflexScheduler(CostTable.I3XLarge, SchedulerLimits.Default, DeviceProfile.I3XLarge, 0.5)),
            ("fcfs", () => new FcfsScheduler(CostTable.I3XLarge, SchedulerLimits.Default)),
        };
        var result = new JsonObject { ["window_ms"] = 25 };
        foreach (var (name, make) in variants)
        {
            var outcome = WorkloadDriver.RunDetailed(make(), new DeviceModel(DeviceProfile.I3XLarge, run.DeviceSeed), tenants, run);
            var g = outcome.Groups.ToDictionary(x => x.Group);
            report.Add($"fig11_{name}_g0_iops_over_slo", g["LC G0"].CompletedIops / 40_000, "malicious LC G0: completed / its 40K SLO (offers 0.975x on average, 3x in bursts)");
            report.Add($"fig11_{name}_g0_goodput_frac", g["LC G0"].GoodputFraction, "");
            report.Add($"fig11_{name}_g1_goodput_frac", g["LC G1"].GoodputFraction, "benign LC G1 goodput / 20K SLO");
            report.Add($"fig11_{name}_be_iops", g["BE"].CompletedIops, "");
            // The last quarter of the run: where aggressive control has shut G0 down (the paper: near zero after 10 s).
            int windows = g["LC G0"].WindowGoodputIops.Length;
            double tail = g["LC G0"].WindowGoodputIops.Skip(windows * 3 / 4).Average();
            report.Add($"fig11_{name}_g0_goodput_frac_last_quarter", tail / 40_000, "");
            var series = new JsonObject();
            foreach (var x in outcome.Groups)
                series[x.Group] = new JsonObject
                {
                    ["iops"] = new JsonArray(x.WindowIops.Select(v => (JsonNode)Math.Round(v)).ToArray()),
                    ["goodput"] = new JsonArray(x.WindowGoodputIops.Select(v => (JsonNode)Math.Round(v)).ToArray()),
                };
            result[name] = series;
        }
        return result;
    }

    /// <summary>
    /// Fig. 12 (§6.3.3, set up as §3.3's Fig. 4): 400 tenants; LC tenants request 50K IOPS combined, BE tenants 150K, all
    /// 75 % read 4 KiB; the LC ratio (share of tenants that are LC) is 20, 40, 60, 80 %; each LC tenant's SLO is its
    /// share of the 50K at 2 ms. The device carries ~72K IOPS of that mix (200K tokens / 2.75).
    /// </summary>
    public static JsonArray Fig12(Report report, bool quick)
    {
        var run = new WorkloadRun { DurationNs = quick ? 400_000_000 : 1_500_000_000, WarmupNs = quick ? 100_000_000 : 300_000_000 };
        var series = new JsonArray();
        foreach (double ratio in new[] { 0.2, 0.4, 0.6, 0.8 })
        {
            int lc = (int)(400 * ratio), be = 400 - lc;
            var tenants = new List<WorkloadTenant>(400);
            for (int i = 0; i < lc; i++)
                tenants.Add(new(new TenantSpec($"lc{i}", 50_000.0 / lc, 2000, 0.75), 50_000.0 / lc, 0.75) { Group = "LC" });
            for (int i = 0; i < be; i++)
                tenants.Add(new(new TenantSpec($"be{i}"), 150_000.0 / be, 0.75) { Group = "BE" });
            var point = new JsonObject { ["lc_ratio"] = ratio };
            foreach (var name in FlashFigures.Schedulers)
            {
                var outcome = WorkloadDriver.RunDetailed(SchedulerLoad.Create(name, SchedulerLimits.Default),
                    new DeviceModel(DeviceProfile.I3XLarge, run.DeviceSeed), tenants, run);
                var g = outcome.Groups.ToDictionary(x => x.Group);
                point[name] = new JsonObject
                {
                    ["lc_iops"] = Math.Round(g["LC"].CompletedIops), ["lc_goodput_frac"] = Math.Round(g["LC"].GoodputFraction, 3),
                    ["lc_p95_ms"] = Math.Round(g["LC"].P95Us / 1000, 3), ["lc_read_p95_ms"] = Math.Round(g["LC"].ReadP95Us / 1000, 3),
                    ["be_iops"] = Math.Round(g["BE"].CompletedIops),
                    ["total_iops"] = Math.Round(g["LC"].CompletedIops + g["BE"].CompletedIops),
                };
                report.Add($"fig12_{name}_lc{ratio * 100:0}_goodput_frac", g["LC"].GoodputFraction, "");
                report.Add($"fig12_{name}_lc{ratio * 100:0}_read_p95_ms", g["LC"].ReadP95Us / 1000, "");
                report.Add($"fig12_{name}_lc{ratio * 100:0}_total_iops", g["LC"].CompletedIops + g["BE"].CompletedIops, "");
            }
            series.Add(point);
        }
        return series;
    }
}
