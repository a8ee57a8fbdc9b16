using System.Diagnostics;

namespace FaaST.Bench;

/// <summary>
/// ./faast bench runtime --baseline-ref REF: the no-op rows of this tree beside the same rows of another release
/// (a git ref), so a drift shows in the next run rather than in a review (issue 20: the Node no-op had lost a
/// fifth of its throughput unnoticed). REF's runtime host is built in a temporary git worktree (its own workers,
/// this checkout's node_modules); one host of each tree runs at once, and the measuring windows alternate between
/// them round by round (which goes first alternates too), so both see the same moments of a shared machine. Each
/// row is the median over the rounds.
/// </summary>
internal static class BaselineComparison
{
    /// <summary>Adds <c>baseline_*</c> rows and the ratios (this tree / REF) for the Node and Python no-ops.</summary>
    public static async Task RunAsync(string home, string baselineRef, bool quick, Dictionary<string, string> env, LoadGenerator load,
        TimeSpan warmup, TimeSpan window, int workers, int throughputClients, Report report)
    {
        var tree = await BaselineTree.BuildAsync(home, baselineRef);
        try
        {
            report.Config("baseline_ref", $"{baselineRef} ({tree.Commit})");
            var rounds = quick ? 2 : 3;
            report.Config("baseline_rounds", rounds);
            foreach (var (runtime, app) in new[] { ("node", "node-bench"), ("python", "python-bench") })
            {
                Console.WriteLine($"{runtime} no-op: this tree vs {baselineRef}, alternating, {rounds} rounds");
                var appDirectory = Path.Combine(home, "bench", "apps", app);
                await using var current = await HostProcess.StartAsync(home, appDirectory, workers, env, "--no-cache");
                await using var baseline = await HostProcess.StartAsync(tree.Home, appDirectory, workers, env, "--no-cache");
                var mine = new List<(double P50, double Rps)>();
                var theirs = new List<(double P50, double Rps)>();
                for (var round = 0; round < rounds; round++)
                {
                    foreach (var (host, into) in round % 2 == 0 ? new[] { (current, mine), (baseline, theirs) } : [(baseline, theirs), (current, mine)])
                    {
                        var url = new Uri(host.BaseAddress, "/api/Noop");
                        var latency = await load.RunAsync(url, 1, warmup, window);
                        var throughput = await load.RunAsync(url, throughputClients, warmup, window);
                        into.Add((latency.P50Ms, throughput.Rps));
                    }
                }
                var (p50, rps) = (Median(mine.Select(m => m.P50)), Median(mine.Select(m => m.Rps)));
                var (baseP50, baseRps) = (Median(theirs.Select(m => m.P50)), Median(theirs.Select(m => m.Rps)));
                report.Add($"cmp_noop_{runtime}_p50_ms", p50, $"this tree, 1 client, median of {rounds} rounds");
                report.Add($"baseline_noop_{runtime}_p50_ms", baseP50, $"{baselineRef}, the same rounds");
                report.Add($"cmp_noop_{runtime}_rps", rps, $"this tree, {throughputClients} clients");
                report.Add($"baseline_noop_{runtime}_rps", baseRps, $"{baselineRef}, {throughputClients} clients");
                report.Add($"noop_{runtime}_rps_vs_baseline", rps / baseRps, "this tree / baseline; goal >= 0.95");
                Console.WriteLine($"  {runtime} no-op: this tree {p50:0.###} ms p50, {rps:0}/s; {baselineRef} {baseP50:0.###} ms, {baseRps:0}/s; ratio {rps / baseRps:0.###}");
            }
        }
        finally
        {
            tree.Remove();
        }
    }

    private static double Median(IEnumerable<double> values)
    {
        var sorted = values.Order().ToArray();
        return sorted.Length % 2 == 1 ? sorted[sorted.Length / 2] : (sorted[(sorted.Length / 2) - 1] + sorted[sorted.Length / 2]) / 2;
    }

    /// <summary>A git ref checked out beside the checkout (git worktree add --detach) with its runtime host built.</summary>
    private sealed class BaselineTree
    {
        private readonly string _checkout;

        private BaselineTree(string checkout, string home, string commit)
        {
            _checkout = checkout;
            Home = home;
            Commit = commit;
        }

        public string Home { get; }

        public string Commit { get; }

        public static async Task<BaselineTree> BuildAsync(string checkout, string gitRef)
        {
            var commit = (await RunAsync("git", checkout, "rev-parse", "--short", "--verify", gitRef + "^{commit}")).Trim();
            var home = Path.Combine(Path.GetTempPath(), $"faast-baseline-{commit}-{Environment.ProcessId}");
            Console.WriteLine($"baseline {gitRef} ({commit}): git worktree at {home}, building its runtime host");
            await RunAsync("git", checkout, "worktree", "add", "--detach", home, commit);
            var tree = new BaselineTree(checkout, home, commit);
            try
            {
                // The Node worker's packages (@grpc/grpc-js) come from this checkout; the workers' code is REF's own.
                var modules = Path.Combine(checkout, "node_modules");
                if (Directory.Exists(modules))
                    File.CreateSymbolicLink(Path.Combine(home, "node_modules"), modules);
                await RunAsync("dotnet", home, "build", "src/Runtime/Runtime.csproj", "-c", "Release", "-nologo", "-v", "q", "-clp:ErrorsOnly");
                return tree;
            }
            catch
            {
                tree.Remove();
                throw;
            }
        }

        public void Remove()
        {
            try
            {
                RunAsync("git", _checkout, "worktree", "remove", "--force", Home).GetAwaiter().GetResult();
            }
            catch (InvalidOperationException e)
            {
                Console.Error.WriteLine($"the baseline worktree {Home} was not removed: {e.Message}");
            }
        }

        private static async Task<string> RunAsync(string command, string directory, params string[] arguments)
        {
            var info = new ProcessStartInfo(command) { WorkingDirectory = directory, RedirectStandardOutput = true, RedirectStandardError = true, UseShellExecute = false };
            foreach (var a in arguments)
                info.ArgumentList.Add(a);
            using var process = Process.Start(info)!;
            var output = process.StandardOutput.ReadToEndAsync();
            var error = process.StandardError.ReadToEndAsync();
            await process.WaitForExitAsync();
            if (process.ExitCode != 0)
                throw new InvalidOperationException($"{command} {string.Join(' ', arguments)} (in {directory}) exited {process.ExitCode}: {await error}{await output}");
            return await output;
        }
    }
}
