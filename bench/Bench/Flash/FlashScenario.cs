using System.Diagnostics;
using System.Globalization;
using System.Text.Json;
using System.Text.Json.Nodes;

namespace FaaST.Bench.Flash;

/// <summary>
/// ./faast bench flash (issue 22): En4S §6's figures on the device model — Fig. 8, 10, 11, 12, En4S, ReFlex-style and
/// FCFS side by side in one run (virtual time, fixed seeds: the same numbers on every run of the same code) — the
/// scheduling cost in ns per request at 1,000 tenants on this machine, and the real file device beside fio. Writes
/// bench/results/flash.json (scalars, the machine), flash-series.json (the curves) and flash-*.png (bench/plots/flash.py).
/// </summary>
public static class FlashScenario
{
    private static readonly Stopwatch Clock = Stopwatch.StartNew();

    private static void Say(string message) => Console.WriteLine($"[{Clock.Elapsed.TotalSeconds,6:0.0} s] {message}");

    public static async Task<int> RunAsync(string home, bool quick, string[] args)
    {
        var report = new Report("flash", quick);
        report.Config("loadavg_at_start", File.ReadAllText("/proc/loadavg").Trim());
        report.Config("device_model", "DeviceProfile.I3XLarge (200K tokens/s within 2 ms p95, 216K raw), CostTable.I3XLarge (write 7/8/10 tokens at >=90/50/0 % read)");
        var series = new JsonObject();

        Say("scheduling cost: 1,000 tenants, in capacity and 2x overloaded (Stopwatch over the SchedulerLoad loop)");
        series["sched_ns"] = SchedulingCost(report, quick);
        Say("Fig. 10: 1,000 tenants in four groups");
        series["fig10"] = FlashFigures.Fig10(report, quick);
        Say("Fig. 11: a misbehaving LC tenant, aggressive and conservative burst control");
        series["fig11"] = FlashLoadFigures.Fig11(report, quick);
        Say("Fig. 12: LC ratio 20-80 %");
        series["fig12"] = FlashLoadFigures.Fig12(report, quick);
        Say("Fig. 8: LC wait against FCFS by number of SLOs, LC ratio and batch size");
        series["fig8"] = FlashFigures.Fig8(report, quick);
        Say("real device: O_DIRECT reads through DirectFile beside fio, the cost-model fit");
        series["real"] = await FlashRealDevice.RunAsync(report, quick);
        series["real_server"] = await RealServerPart(report, quick);
        Say("end to end: samples/flash-app with the tier beside the same app without it, on the shaped network (FlashEndToEnd)");
        series["e2e"] = await FlashEndToEnd.RunAsync(home, quick, args.Contains("--loopback"), report);

        series["paper_vs_ours"] = PaperTable(series);
        var json = report.Write(home);
        var seriesFile = Path.Combine(Path.GetDirectoryName(json)!, quick ? "flash-series.quick.json" : "flash-series.json");
        await File.WriteAllTextAsync(seriesFile, series.ToJsonString(new JsonSerializerOptions { WriteIndented = false }) + "\n");
        Console.WriteLine($"wrote {Path.GetRelativePath(home, seriesFile)}");
        Plot(home, json, seriesFile, quick);
        return 0;
    }

    /// <summary><c>./faast bench flash-server</c>: the real server beside fio alone (the part of <c>flash</c> that
    /// measures the server's path; writes bench/results/flash-server.json).</summary>
    public static async Task<int> RunServerScenarioAsync(string home, bool quick)
    {
        var report = new Report("flash-server", quick);
        report.Config("loadavg_at_start", File.ReadAllText("/proc/loadavg").Trim());
        report.Config("series", await RealServerPart(report, quick));
        report.Write(home);
        return 0;
    }

    private static async Task<JsonNode> RealServerPart(Report report, bool quick)
    {
        Say("real server: 4 KiB gets over gRPC at QD 1, 32, 128 and 256 beside fio on the same file (RealServer)");
        var points = await RealServer.RunAsync(new RealServerOptions
        {
            Objects = quick ? 8_192 : 32_768,
            Duration = TimeSpan.FromSeconds(quick ? 2 : 8),
        }, Console.Out);
        foreach (var p in points)
        {
            report.Add($"real_server_get_4k_iops_unary_qd{p.QueueDepth}", p.Iops, $"a Get call per object; p95 {p.P95Us:0} µs; fio {p.FioIops:0} IOPS, p95 {p.FioP95Us:0} µs");
            report.Add($"real_server_fraction_of_fio_unary_qd{p.QueueDepth}", p.FractionOfFio, "Get per object");
            report.Add($"real_server_get_4k_iops_qd{p.QueueDepth}", p.ManyIops, $"GetMany; p95 {p.ManyP95Us:0} µs; fio {p.FioIops:0} IOPS, p95 {p.FioP95Us:0} µs");
            report.Add($"real_server_fraction_of_fio_qd{p.QueueDepth}", p.ManyFractionOfFio, "GetMany against fio at this depth");
            report.Add($"real_server_cpu_us_per_get_qd{p.QueueDepth}", p.ManyServerCpuUs, $"GetMany; the load generator: {p.ManyClientCpuUs:0.0} µs");
        }
        var (server, fio) = RealServer.Peaks(points);
        report.Add("real_server_get_4k_iops", server.ManyIops, $"GetMany's best, at QD {server.QueueDepth} (a Get per object, best: {points.Max(p => p.Iops):0})");
        report.Add("fio_4k_iops", fio.FioIops, $"fio's best, at QD {fio.QueueDepth}, same file, same run");
        report.Add("real_server_fraction_of_fio", server.ManyIops / Math.Max(1, fio.FioIops), "best against best; goal >= 0.8");
        return RealServer.ToJson(points);
    }

    /// <summary>
    /// <c>sched_ns_per_request_1000_tenants</c>: a Stopwatch over <see cref="SchedulerLoad"/> (the loop the
    /// BenchmarkDotNet class <c>FlashSchedulerBenchmarks</c> times) for 2M completed requests (quick: 200K) after a warm-up
    /// of 262K, En4S's worst of the two regimes; ReFlex walks every tenant each round, so it runs a tenth as many.
    /// </summary>
    private static JsonObject SchedulingCost(Report report, bool quick)
    {
        var result = new JsonObject();
        double worstEn4s = 0;
        foreach (var name in FlashFigures.Schedulers)
            foreach (var (label, load) in new[] { ("capacity", 0.9), ("overload2x", 2.0) })
            {
                var harness = new SchedulerLoad(name, load);
                harness.RunUntilCompleted(4 * FlashSchedulerBenchmarks.PerInvoke);
                long n = (quick ? 200_000 : 2_000_000) / (name == "reflex" ? 10 : 1);
                var sw = Stopwatch.StartNew();
                harness.RunUntilCompleted(n);
                sw.Stop();
                double ns = sw.Elapsed.TotalNanoseconds / n;
                result[$"{name}_{label}"] = Math.Round(ns, 1);
                report.Add($"sched_ns_per_request_{name}_{label}", ns, $"1,000 tenants, {n:N0} requests, {load}x the device's tokens");
                if (name == "en4s")
                    worstEn4s = Math.Max(worstEn4s, ns);
            }
        report.Add("sched_ns_per_request_1000_tenants", worstEn4s, "En4S, the worse of in capacity and 2x overload (goal < 1,000)");
        return result;
    }

    /// <summary>The paper's values (En4S SoCC'24 §6) beside ours, from the series just measured; also kept in
    /// flash-series.json under "paper_vs_ours" for docs/flash.md.</summary>
    private static JsonArray PaperTable(JsonObject series)
    {
        var rows = new JsonArray();
        void Row(string what, string paper, string ours) =>
            rows.Add(new JsonObject { ["what"] = what, ["paper"] = paper, ["ours"] = ours });
        string F(double v, string format = "0.000") => v.ToString(format, CultureInfo.InvariantCulture);
        var f10 = series["fig10"]!;
        foreach (var name in FlashFigures.Schedulers)
        {
            var g = f10[name]!;
            double g0 = g["LC G0"]!["goodput_iops"]!.GetValue<double>() / 60_000, g1 = g["LC G1"]!["goodput_iops"]!.GetValue<double>() / 30_000;
            string paper = name == "en4s" ? "0.880 / 0.842, read p95 within 2 ms" : "fails the LC SLOs";
            Row($"Fig. 10 {name}: LC G0 / G1 goodput frac, LC read p95", paper,
                $"{F(g0)} / {F(g1)}, {F(g["lc_read_p95_ms"]!.GetValue<double>())} ms");
        }
        var p8 = series["fig8"]!.AsArray().First(x => x!["tenants"]!.GetValue<int>() == 1000 && x["batch"]!.GetValue<int>() == 64
            && Math.Abs(x["lc_ratio"]!.GetValue<double>() - 0.25) < 1e-9)!;
        double e8 = p8["en4s_wait_us"]!.GetValue<double>(), r8 = p8["reflex_wait_us"]!.GetValue<double>();
        Row("Fig. 8: ReFlex / En4S LC wait, 1,000 SLOs, LC 25 %, batch 64", "1638x",
            $"{(e8 < FlashFigures.Fig8WaitFloorUs ? ">= " : "")}{F(FlashFigures.Fig8Ratio(r8, e8), "0.##")}x ({F(r8, "0.####")} / {F(e8, "0.####")} µs)");
        var f11 = series["fig11"]!;
        foreach (var name in new[] { "en4s_aggressive", "en4s_conservative" })
        {
            var g0 = f11[name]!["LC G0"]!["goodput"]!.AsArray().Select(v => v!.GetValue<double>()).ToArray();
            var g1 = f11[name]!["LC G1"]!["goodput"]!.AsArray().Select(v => v!.GetValue<double>()).ToArray();
            double g0Tail = g0.Skip(g0.Length * 3 / 4).Average() / 40_000, g1All = g1.Skip(20).Average() / 20_000;
            Row($"Fig. 11 {name}: malicious G0 goodput frac (last quarter), benign G1 goodput frac",
                name == "en4s_aggressive" ? "G0 near 0 after 10 s, G1 protected" : "G0 allowance shrinks to its SLO, G1 protected",
                $"{F(g0Tail)}, {F(g1All)}");
        }
        var e12 = series["fig12"]!.AsArray();
        Row("Fig. 12 En4S: total IOPS / LC goodput frac at LC 20, 40, 60, 80 %", "~72K, SLOs met at every ratio",
            string.Join("; ", e12.Select(x => $"{F(x!["en4s"]!["total_iops"]!.GetValue<double>() / 1000, "0.0")}K/{F(x["en4s"]!["lc_goodput_frac"]!.GetValue<double>(), "0.00")}")));
        Row("Fig. 12 ReFlex: LC read p95 ms at LC 20, 40, 60, 80 %", "within 2 ms at 20-40 %, violated at 60-80 %",
            string.Join("; ", e12.Select(x => F(x!["reflex"]!["lc_read_p95_ms"]!.GetValue<double>(), "0.00"))));
        var ns = series["sched_ns"]!;
        Row("scheduling ns/request, 1,000 tenants (capacity / 2x), En4S", "issue goal < 1,000",
            $"{ns["en4s_capacity"]} / {ns["en4s_overload2x"]}");
        Row("  ReFlex-style, FCFS", "", $"{ns["reflex_capacity"]} / {ns["reflex_overload2x"]}, {ns["fcfs_capacity"]} / {ns["fcfs_overload2x"]}");
        Console.WriteLine();
        Console.WriteLine("paper (En4S SoCC'24 §6) beside ours:");
        foreach (var r in rows)
            Console.WriteLine($"  {r!["what"],-78} paper: {r["paper"],-44} ours: {r["ours"]}");
        return rows;
    }

    private static void Plot(string home, string json, string seriesFile, bool quick)
    {
        var info = new ProcessStartInfo("/usr/bin/python3") { UseShellExecute = false, RedirectStandardError = true };
        info.ArgumentList.Add(Path.Combine(home, "bench", "plots", "flash.py"));
        info.ArgumentList.Add(json);
        info.ArgumentList.Add(seriesFile);
        info.ArgumentList.Add(Path.Combine(Path.GetDirectoryName(json)!, quick ? "flash.quick" : "flash"));
        using var python = Process.Start(info)!;
        var errors = python.StandardError.ReadToEnd();
        python.WaitForExit();
        Console.WriteLine(python.ExitCode == 0 ? $"plots: bench/results/{(quick ? "flash.quick" : "flash")}-fig*.png" : $"plot failed ({python.ExitCode}): {errors.Trim()}");
    }
}
