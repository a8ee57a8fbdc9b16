using BenchmarkDotNet.Configs;
using BenchmarkDotNet.Jobs;
using BenchmarkDotNet.Running;
using BenchmarkDotNet.Toolchains.InProcess.Emit;

namespace FaaST.Bench;

/// <summary>./faast bench SCENARIO [--quick]. Scenarios: runtime (--baseline-ref REF: beside a git ref's host), cachelet, distributed, faults, attacks (issue 19's attack run on a real platform), bandwidth (end to end), prewarm (issue 21: the first invocation after a predicted reload), latency (issue 21: the simulator's read/write latency table by object size), flash (issue 22: En4S's figures on the device model, the scheduling cost, the real device beside fio, the tier end to end), flash-server (the real server beside fio alone), flash-e2e (the tier end to end alone), fuzz (seeded fuzzers; --seed N, --only T), micro (BenchmarkDotNet).</summary>
public static class Program
{
    public static async Task<int> Main(string[] args)
    {
        var quick = args.Contains("--quick");
        var scenario = args.FirstOrDefault(a => !a.StartsWith("--", StringComparison.Ordinal));
        var home = Environment.GetEnvironmentVariable("FAAST_HOME") is { Length: > 0 } h ? h : FindHome();
        try
        {
            switch (scenario)
            {
                case "runtime":
                    var baseline = Array.IndexOf(args, "--baseline-ref") is var at and >= 0 && at + 1 < args.Length ? args[at + 1] : null;
                    await RuntimeScenario.RunAsync(home, quick, baseline);
                    return 0;
                case "cachelet":
                    await CacheletScenario.RunAsync(home, quick);
                    return 0;
                case "distributed":
                    await DistributedScenario.RunAsync(home, quick);
                    return 0;
                case "fuzz":
                    return await Fuzz.FuzzScenario.RunAsync(home, quick, args);
                case "faults":
                    await FaultsScenario.RunAsync(home, quick);
                    return 0;
                case "attacks":
                    await AttacksScenario.RunAsync(home, quick);
                    return 0;
                case "scaling":
                    await ScalingScenario.RunAsync(home, quick);
                    return 0;
                case "net":
                    await Net.NetScenario.RunAsync(home, quick, args);
                    return 0;
                case "bandwidth":
                    await BandwidthScenario.RunAsync(home, quick, args);
                    return 0;
                case "prewarm":
                    await PrewarmScenario.RunAsync(home, quick);
                    return 0;
                case "latency":
                    return await LatencyScenario.RunAsync(home, quick, args);
                case "flash":
                    return await Flash.FlashScenario.RunAsync(home, quick, args);
                case "flash-server":
                    return await Flash.FlashScenario.RunServerScenarioAsync(home, quick);
                case "flash-e2e":
                    return await Flash.FlashEndToEnd.RunScenarioAsync(home, quick, args);
                case "jupyterless":
                    return await JupyterLessScenario.RunAsync(home, quick, args);
                case "libs":
                    return await LibrariesScenario.RunAsync(home, args);
                case "micro":
                    // In-process: the project file is not named after the assembly, so BenchmarkDotNet's
                    // default out-of-process toolchain cannot find it. Reports land in bench/results/micro.
                    var job = (quick ? Job.ShortRun : Job.Default).WithToolchain(InProcessEmitToolchain.Instance);
                    var config = DefaultConfig.Instance
                        .WithArtifactsPath(Path.Combine(home, "bench", "results", "micro"))
                        .AddJob(job);
                    var rest = args.Where(a => a != "micro" && a != "--quick").ToArray();
                    BenchmarkSwitcher.FromAssembly(typeof(Program).Assembly).Run(rest.Length > 0 ? rest : ["--filter", "*"], config);
                    return 0;
                default:
                    await Console.Error.WriteLineAsync($"unknown scenario \"{scenario}\"; scenarios: runtime, cachelet, distributed, faults, attacks, fuzz, scaling, bandwidth, net, prewarm, latency, flash, flash-server, flash-e2e, jupyterless, micro");
                    return 2;
            }
        }
        finally
        {
            HostProcess.DeleteAppCopies();
        }
    }

    private static string FindHome()
    {
        for (var dir = new DirectoryInfo(AppContext.BaseDirectory); dir is not null; dir = dir.Parent)
            if (File.Exists(Path.Combine(dir.FullName, "FaaST.sln")))
                return dir.FullName;
        throw new InvalidOperationException("set FAAST_HOME to the FaaST checkout");
    }
}
