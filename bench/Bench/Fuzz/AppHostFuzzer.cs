using System.Diagnostics;
using System.Text.RegularExpressions;

namespace FaaST.Bench.Fuzz;

/// <summary>
/// A sample of the config fuzzers' inputs (the same inputs, by index) run for real: a copy of
/// bench/apps/fuzz-app with one file replaced by the mutated one, started as a host process.
/// Oracle: the host either exits with the documented start-up error naming the file (exit code 3),
/// or serves: its status page answers and a function the mutation did not touch (Files) answers
/// correctly. An abort, an unhandled exception, or a host that serves nothing is a crash.
/// Storage is always the run's Azurite (the environment overrides a mutated AzureWebJobsStorage,
/// so no mutated address is ever dialled); the in-process fuzzer covers that setting.
/// </summary>
public static partial class AppHostFuzzer
{
    public static async Task<TargetResult> RunAsync(string home, string work, string storage, int seed, int count, TimeSpan budget)
    {
        var result = new TargetResult("host-apps", seed);
        var clock = Stopwatch.StartNew();
        var source = Path.Combine(home, "bench", "apps", "fuzz-app");
        // Two at a time: each host start is mostly waiting (process start, worker start).
        var gate = new object();
        var next = await FuzzRun.ForEachInputAsync(2, count, clock, budget, async i =>
        {
            var target = ConfigFuzzer.Targets[i % ConfigFuzzer.Targets.Length];
            var input = ConfigFuzzer.Input(target, seed, i);
            var app = Path.Combine(work, "apps", i.ToString(System.Globalization.CultureInfo.InvariantCulture), "fuzz-app");
            foreach (var file in Directory.EnumerateFiles(source, "*", SearchOption.AllDirectories))
            {
                var to = Path.Combine(app, Path.GetRelativePath(source, file));
                Directory.CreateDirectory(Path.GetDirectoryName(to)!);
                File.Copy(file, to);
            }
            var mutated = target == "function.json" ? Path.Combine(app, "Echo", "function.json") : Path.Combine(app, target);
            await File.WriteAllBytesAsync(mutated, input);
            var (outcome, counter) = await RunOneAsync(home, app, storage, mutated);
            lock (gate)
            {
                result.Count(counter);
                result.Add(outcome, i, _ => $"{target} (config input {i} of seed {seed}): {ConfigFuzzer.Printable(input)}");
            }
            try
            {
                Directory.Delete(Path.GetDirectoryName(app)!, recursive: true);
            }
            catch (IOException)
            {
                // best effort; the run's folder goes at the end anyway
            }
            return true;
        });
        if (next < count)
            result.Stopped = $"time bound of {budget.TotalSeconds:0} s reached after {next} apps";
        result.Seconds = clock.Elapsed.TotalSeconds;
        return result;
    }

    private static async Task<(Outcome, string)> RunOneAsync(string home, string app, string storage, string mutated)
    {
        // The host checks its ports before it starts (exit 4, one line): a free port picked here can be taken
        // by a host of a parallel input before this one binds it. That is the harness's race, not a finding:
        // start again on other ports.
        for (var tries = 1; ; tries++)
        {
            var (outcome, counter) = await RunOnceAsync(home, app, storage, mutated);
            if (counter != "exit_4_port_taken" || tries == 3)
                return (outcome, counter);
        }
    }

    private static async Task<(Outcome, string)> RunOnceAsync(string home, string app, string storage, string mutated)
    {
        await using var host = FuzzHost.Start(home, app, storage);
        var serving = await WaitAsync(host, TimeSpan.FromSeconds(60));
        if (host.Process.HasExited)
        {
            await host.Process.WaitForExitAsync();
            var code = host.Process.ExitCode;
            var output = host.Output;
            if (host.UnhandledException() is { } unhandled)
            {
                var m = ExceptionAt().Match(unhandled);
                return (Outcome.Crash($"the host aborted: {(m.Success ? $"{m.Groups[1].Value} at {m.Groups[2].Value}" : "unhandled exception")}", unhandled), $"exit_{code}");
            }
            if (code == 4 && output.Contains("is already in use", StringComparison.Ordinal))
                return (Outcome.Crash("the host's port was taken three times", Tail(output)), "exit_4_port_taken");
            if (code == 3 && output.Contains(mutated, StringComparison.Ordinal))
                return (Outcome.Rejected, "exit_3_error_names_the_file");
            return (Outcome.Crash($"the host exited with {code} without an error naming the file", Tail(output)), $"exit_{code}");
        }
        if (!serving)
            return (Outcome.Crash("the host neither served nor exited within 60 s", Tail(host.Output)), "hung");
        // It serves: the status page, and a function the mutation did not touch.
        using var client = new HttpClient { BaseAddress = host.BaseAddress, Timeout = TimeSpan.FromSeconds(40) };
        string? problem = null;
        try
        {
            using var status = await client.GetAsync("/admin/host/status");
            if (!status.IsSuccessStatusCode)
                problem = $"/admin/host/status answered {(int)status.StatusCode}";
            else
            {
                // Files is untouched by a mutated function.json (of Echo) or faast.json, so it must answer.
                // (A mutated host.json or local.settings.json may legitimately filter, disable or
                // re-route it: there the status page is the check.)
                var untouched = mutated.EndsWith(Path.Combine("Echo", "function.json"), StringComparison.Ordinal) || mutated.EndsWith("faast.json", StringComparison.Ordinal);
                if (untouched)
                {
                    using var files = await client.GetAsync("/api/files/probe");
                    var body = await files.Content.ReadAsStringAsync();
                    if ((int)files.StatusCode != 200 || body != "probe")
                        problem = $"GET /api/files/probe (an untouched function) answered {(int)files.StatusCode}: {body[..Math.Min(300, body.Length)]}";
                }
            }
        }
        catch (Exception e) when (e is HttpRequestException or TaskCanceledException)
        {
            problem = "a request failed: " + e.Message;
        }
        var logged = host.TakeNewErrors();
        if (logged.Count > 0)
        {
            var m = ExceptionAt().Match(logged[0]);
            return (Outcome.Crash($"the host logged an unhandled {(m.Success ? $"{m.Groups[1].Value} at {m.Groups[2].Value}" : "exception")}", logged[0]), "served_with_unhandled_exception");
        }
        if (problem is not null)
        {
            var shape = Regex.Replace(problem, "[0-9a-f]{8,}|\\d{4,}", "#");
            return (Outcome.Crash("the host serves, but not correctly: " + (shape.Length > 140 ? shape[..140] : shape), problem), "served_incorrectly");
        }
        return (Outcome.Accepted, "served");
    }

    private static async Task<bool> WaitAsync(FuzzHost host, TimeSpan timeout)
    {
        using var client = new HttpClient { Timeout = TimeSpan.FromSeconds(3) };
        var deadline = DateTime.UtcNow + timeout;
        while (DateTime.UtcNow < deadline && !host.Process.HasExited)
        {
            try
            {
                using var r = await client.GetAsync(new Uri(host.BaseAddress, "/admin/host/status"));
                return true;
            }
            catch (Exception e) when (e is HttpRequestException or TaskCanceledException)
            {
                await Task.Delay(100);
            }
        }
        return false;
    }

    private static string Tail(string output) => output.Length > 1500 ? output[^1500..] : output;

    [GeneratedRegex(@"([A-Za-z.]+(?:Exception|Error))[: ].*?\s+at ([A-Za-z0-9_.`<>]+)", RegexOptions.Singleline)]
    private static partial Regex ExceptionAt();
}
