using System.Text.Json.Nodes;
using FaaST.FlashBackend.Scheduling;

namespace FaaST.Bench.Flash;

/// <summary>
/// En4S §6's scheduler figures on the device model (virtual time, fixed seeds), En4S, ReFlex-style and FCFS side by side.
/// Each method adds scalar metrics to the report and returns the series the plot draws.
/// </summary>
internal static class FlashFigures
{
    public static readonly string[] Schedulers = ["en4s", "reflex", "fcfs"];

    private static IIoScheduler New(string name, SchedulerLimits? limits = null, En4sSettings? settings = null) =>
        name == "en4s" && settings is not null
            ? new En4sScheduler(CostTable.I3XLarge, limits ?? SchedulerLimits.Default, DeviceProfile.I3XLarge, settings)
            : SchedulerLoad.Create(name, limits ?? SchedulerLimits.Default);

    /// <summary>
    /// Fig. 8 (§6.2.1): extra wait of LC requests against FCFS, by number of SLOs (tenants), LC ratio and batch size.
    /// Setup (the paper: "arriving at equal rates and uniform intervals"; 64M requests, here fewer): every tenant offers
    /// the same rate, round robin at uniform intervals, 95 % of a 200K-IOPS device of 4 KiB reads; each LC tenant's SLO is
    /// its offered rate. The scheduler runs once per <c>batch</c> arrivals (the scheduling frequency the batch size stands
    /// for) and hands out at most <c>batch</c> requests; the device serves in submission order at 5 µs a request. A request's
    /// ideal completion is FCFS's under the same batching; its wait is how much later the scheduler completed it (0 if
    /// earlier). Reported: mean wait per LC request (µs).
    /// </summary>
    public static JsonArray Fig8(Report report, bool quick)
    {
        int requests = quick ? 40_000 : 400_000;
        int[] counts = [10, 100, 1000];
        double[] ratios = [0.25, 0.50, 0.75];
        int[] batches = [4, 16, 64];
        var series = new JsonArray();
        foreach (int batch in batches)
            foreach (double ratio in ratios)
                foreach (int n in counts)
                {
                    var ideal = Fig8Completions("fcfs", n, ratio, batch, requests, out _);
                    var point = new JsonObject { ["batch"] = batch, ["lc_ratio"] = ratio, ["tenants"] = n };
                    foreach (var name in new[] { "en4s", "reflex" })
                    {
                        var actual = Fig8Completions(name, n, ratio, batch, requests, out var isLc);
                        double sum = 0;
                        long lc = 0;
                        for (int i = 0; i < requests; i++)
                            if (isLc[i])
                            {
                                lc++;
                                sum += Math.Max(0, actual[i] - ideal[i]);
                            }
                        double meanUs = sum / Math.Max(1, lc) / 1000;
                        point[name + "_wait_us"] = Math.Round(meanUs, 4);
                        if (n == 1000 && batch == 64)
                            report.Add($"fig8_{name}_wait_us_1000_slos_lc{ratio * 100:0}_b64", meanUs, "mean extra wait of an LC request vs FCFS");
                    }
                    series.Add(point);
                }
        return series;
    }

    private static long[] Fig8Completions(string name, int tenants, double lcRatio, int batch, int requests, out bool[] isLc)
    {
        const double DeviceIops = 200_000, Load = 0.95;
        const long ServiceNs = 5_000; // 1 / 200K IOPS
        var s = New(name, SchedulerLimits.Default with { BatchSize = batch, LcInFlightMax = 512, BeInFlightMax = 512 });
        int lcCount = (int)Math.Round(tenants * lcRatio);
        double perTenant = Load * DeviceIops / tenants;
        var ids = new int[tenants];
        var lcTenant = new bool[tenants];
        for (int i = 0; i < tenants; i++)
        {
            // Spread LC tenants evenly through the round robin (every 4th at 25 %).
            lcTenant[i] = (int)((i + 1) * lcRatio) > (int)(i * lcRatio);
            ids[i] = s.Register(lcTenant[i] ? new TenantSpec($"lc{i}", perTenant, 2000, 1.0) : new TenantSpec($"be{i}"));
        }
        (s as En4sScheduler)?.RunAdmission(0);
        _ = lcCount;
        long gapNs = (long)(1e9 / (Load * DeviceIops));
        var done = new long[requests];
        isLc = new bool[requests];
        var buffer = new IoRequest[batch];
        double pipeFree = 0;
        long now = 0;
        int arrived = 0;
        var tenantIndex = new Dictionary<int, int>();
        for (int i = 0; i < tenants; i++) tenantIndex[ids[i]] = i;
        var inflight = new Queue<(long At, IoRequest R)>();
        while (arrived < requests || s.Queued > 0 || inflight.Count > 0)
        {
            if (arrived < requests)
            {
                for (int k = 0; k < batch && arrived < requests; k++, arrived++)
                {
                    now = arrived * gapNs;
                    int t = arrived % tenants;
                    isLc[arrived] = lcTenant[t];
                    s.Enqueue(new IoRequest(arrived, ids[t], IoType.Read, 4096, now), now);
                }
            }
            else
                now += batch * gapNs;
            while (inflight.Count > 0 && inflight.Peek().At <= now)
                s.OnCompletion(inflight.Dequeue().R, now);
            int got = s.Dispatch(now, buffer);
            for (int j = 0; j < got; j++)
            {
                pipeFree = Math.Max(pipeFree, now) + ServiceNs;
                done[buffer[j].Id] = (long)pipeFree;
                inflight.Enqueue(((long)pipeFree, buffer[j]));
            }
        }
        return done;
    }

    /// <summary>The four groups of Fig. 10 (§6.3.1) over <paramref name="tenants"/> tenants, a quarter each.</summary>
    public static List<WorkloadTenant> Fig10Tenants(int tenants = 1000)
    {
        int q = tenants / 4;
        var list = new List<WorkloadTenant>(tenants);
        for (int i = 0; i < q; i++)
            list.Add(new(new TenantSpec($"lc-g0-{i}", 60_000.0 / q, 2000, 1.0), 60_000.0 / q, 1.0) { Group = "LC G0" });
        for (int i = 0; i < q; i++)
            list.Add(new(new TenantSpec($"lc-g1-{i}", 30_000.0 / q, 2000, 0.8), 30_000.0 / q, 0.8) { Group = "LC G1" });
        for (int i = 0; i < q; i++)
            list.Add(new(new TenantSpec($"be-g0-{i}"), 30_000.0 / q, 0.95) { Group = "BE G0" });
        for (int i = 0; i < q; i++)
            list.Add(new(new TenantSpec($"be-g1-{i}"), 15_000.0 / q, 0.25) { Group = "BE G1" });
        return list;
    }

    /// <summary>Fig. 10: 1,000 tenants in four groups on the 200K-token device; goodput (completed within 2 ms) as a
    /// fraction of each LC group's SLO, pooled LC read p95.</summary>
    public static JsonObject Fig10(Report report, bool quick)
    {
        var run = new WorkloadRun { DurationNs = quick ? 400_000_000 : 2_000_000_000, WarmupNs = quick ? 100_000_000 : 500_000_000 };
        var result = new JsonObject();
        foreach (var name in Schedulers)
        {
            var outcome = WorkloadDriver.RunDetailed(New(name), new DeviceModel(DeviceProfile.I3XLarge, run.DeviceSeed), Fig10Tenants(), run);
            var g = outcome.Groups.ToDictionary(x => x.Group);
            double lcReads = outcome.LcReadP95Us / 1000;
            string prefix = name == "en4s" ? "" : name + "_";
            report.Add($"{prefix}lc_g0_goodput_frac", g["LC G0"].GoodputFraction, $"fig10 {name}: LC G0 goodput within 2 ms / 60K SLO");
            report.Add($"{prefix}lc_g1_goodput_frac", g["LC G1"].GoodputFraction, $"fig10 {name}: LC G1 goodput / 30K SLO");
            report.Add($"{prefix}lc_read_p95_ms", lcReads, $"fig10 {name}: LC tenants' reads, pooled");
            report.Add($"fig10_{name}_be_g0_iops", g["BE G0"].CompletedIops, "");
            report.Add($"fig10_{name}_be_g1_iops", g["BE G1"].CompletedIops, "");
            var groups = new JsonObject();
            foreach (var x in outcome.Groups)
                groups[x.Group] = new JsonObject
                {
                    ["slo_iops"] = x.SloIops, ["offered_iops"] = Math.Round(x.OfferedIops), ["iops"] = Math.Round(x.CompletedIops),
                    ["goodput_iops"] = Math.Round(x.GoodputIops), ["p95_ms"] = Math.Round(x.P95Us / 1000, 3),
                    ["read_p95_ms"] = Math.Round(x.ReadP95Us / 1000, 3),
                };
            groups["lc_read_p95_ms"] = Math.Round(lcReads, 3);
            result[name] = groups;
        }
        return result;
    }
}
