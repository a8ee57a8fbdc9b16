using System.Diagnostics;
using System.Globalization;
using FaaST.Simulator.Latency;
using FaaST.Simulator.Simulation;
using FaaST.Simulator.Trace;

namespace FaaST.Simulator;

/// <summary>
/// <c>./faast simulate [--trace PATH] [--apps N] [--accesses N] [--days D] [--seed N] [--latency FILE] [--figure 8] [--quick]</c>:
/// replays a trace (the public Azure Functions Blob Access Trace 2020's schema, .csv or .csv.bz2, a file or a directory of
/// them; without --trace, a synthetic trace of that schema matching the paper's §2.1 statistics, written once under
/// .faast/traces and read back like a real one) through Faa$T's policies, and writes bench/results/simulation.json
/// (simulation.quick.json with --quick), a table, and with --figure 8 the PNG of Fig. 8.
/// </summary>
public static class SimulateCommand
{
    private const string Usage = "usage: faast simulate [--trace PATH] [--apps N] [--accesses N] [--days D] [--seed N] [--latency FILE] [--figure 8] [--quick]";

    public static async Task<int> RunAsync(string[] args)
    {
        CommandLine line;
        try
        {
            line = CommandLine.Parse(args);
        }
        catch (ArgumentException e)
        {
            await Console.Error.WriteLineAsync($"faast simulate: {e.Message}\n{Usage}");
            return 2;
        }
        var home = Environment.GetEnvironmentVariable("FAAST_HOME") is { Length: > 0 } h ? h : FindHome();
        try
        {
            var latencyFile = line.Latency ?? DefaultLatency(home);
            var latency = LatencyTable.Load(latencyFile);
            var trace = line.Trace ?? Synthetic(home, line);
            var options = line.Quick
                ? new SimulationOptions { ThresholdSweep = [0.0, 1.0] }
                : new SimulationOptions();
            var simulator = new TraceSimulator(options, latency);
            long problems = 0;
            var clock = Stopwatch.StartNew();
            foreach (var access in TraceReader.Read(trace, p =>
            {
                if (++problems <= 20)
                    Console.Error.WriteLine($"faast simulate: skipped {p}");
            }))
            {
                simulator.Add(access);
                if (simulator.Accesses % 1_000_000 == 0)
                    Console.WriteLine($"faast simulate: {simulator.Accesses:N0} accesses, {clock.Elapsed.TotalSeconds:0} s");
            }
            var result = simulator.Finish();
            clock.Stop();
            if (problems > 0)
                Console.Error.WriteLine($"faast simulate: {problems} malformed line(s) skipped in {trace}");
            var report = new SimulationReport(result, options, Relative(home, latency.Source), Relative(home, trace), line.Trace is null ? line.SyntheticDescription : "given", problems,
                result.Accesses / Math.Max(clock.Elapsed.TotalSeconds, 1e-9), clock.Elapsed.TotalSeconds, line.Quick);
            report.Print(Console.Out);
            var json = report.Write(Path.Combine(home, "bench", "results"));
            Console.WriteLine($"wrote {Path.GetRelativePath(home, json)}");
            if (line.Figure == 8)
                return await DrawAsync(home, json);
            return 0;
        }
        catch (Exception e) when (e is FileNotFoundException or FormatException or TraceFormatException or DirectoryNotFoundException or IOException or ArgumentException)
        {
            await Console.Error.WriteLineAsync($"faast simulate: {e.Message}");
            return 1;
        }
    }

    /// <summary>A path under the home as the results show it: relative, so results are the same on every checkout.</summary>
    private static string Relative(string home, string text) =>
        text.StartsWith(home + Path.DirectorySeparatorChar, StringComparison.Ordinal) ? text[(home.Length + 1)..] : text;

    private static string DefaultLatency(string home)
    {
        var full = Path.Combine(home, "bench", "results", "latency.json");
        return File.Exists(full) ? full : Path.Combine(home, "bench", "results", "latency.quick.json");
    }

    private static string Synthetic(string home, CommandLine line)
    {
        var options = new SyntheticTraceOptions(line.Apps, line.Accesses, TimeSpan.FromDays(line.Days), line.Seed).Validate();
        var dir = Path.Combine(home, ".faast", "traces");
        Directory.CreateDirectory(dir);
        var file = Path.Combine(dir, string.Create(CultureInfo.InvariantCulture, $"synthetic-{options.Apps}-{options.Accesses}-{line.Days}d-{options.Seed}.csv"));
        if (!File.Exists(file))
        {
            Console.WriteLine($"faast simulate: writing a synthetic trace ({line.SyntheticDescription}) to {Path.GetRelativePath(home, file)}");
            var partial = file + ".partial";
            SyntheticTrace.WriteFile(partial, options);
            File.Move(partial, file, overwrite: true);
        }
        return file;
    }

    private static async Task<int> DrawAsync(string home, string json)
    {
        // Debian's matplotlib is for Debian's python (the python3 on PATH may be another one).
        var python = File.Exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
        var png = Path.ChangeExtension(json, ".png");
        var start = new ProcessStartInfo(python) { ArgumentList = { Path.Combine(home, "bench", "plots", "simulation.py"), json, png } };
        using var process = Process.Start(start) ?? throw new IOException($"could not start {python}");
        await process.WaitForExitAsync();
        if (process.ExitCode != 0)
        {
            await Console.Error.WriteLineAsync($"faast simulate: bench/plots/simulation.py exited with {process.ExitCode}; {json} is written, the figure is not");
            return 1;
        }
        Console.WriteLine($"wrote {Path.GetRelativePath(home, png)}");
        return 0;
    }

    private static string FindHome()
    {
        for (var dir = new DirectoryInfo(AppContext.BaseDirectory); dir is not null; dir = dir.Parent)
        {
            if (File.Exists(Path.Combine(dir.FullName, "FaaST.sln")))
                return dir.FullName;
        }
        return Directory.GetCurrentDirectory();
    }

    private sealed record CommandLine(string? Trace, string? Latency, int Apps, long Accesses, int Days, int Seed, int? Figure, bool Quick)
    {
        public string SyntheticDescription => string.Create(CultureInfo.InvariantCulture, $"synthetic: {Apps} apps, {Accesses} accesses over about {Days} day(s), seed {Seed}");

        public static CommandLine Parse(string[] args)
        {
            string? trace = null, latency = null;
            int? apps = null, seed = null, figure = null, days = null;
            long? accesses = null;
            var quick = false;
            for (var i = 0; i < args.Length; i++)
            {
                string Value() => i + 1 < args.Length ? args[++i] : throw new ArgumentException($"{args[i]} needs a value");
                switch (args[i])
                {
                    case "--trace": trace = Value(); break;
                    case "--latency": latency = Value(); break;
                    case "--apps": apps = Positive("--apps", Value()); break;
                    case "--accesses": accesses = Positive("--accesses", Value()); break;
                    case "--days": days = Positive("--days", Value()); break;
                    case "--seed": seed = int.TryParse(Value(), NumberStyles.Integer, CultureInfo.InvariantCulture, out var s) ? s : throw new ArgumentException($"--seed: \"{args[i]}\" is not an integer"); break;
                    case "--figure":
                        var f = Value();
                        figure = f == "8" ? 8 : throw new ArgumentException($"--figure: only Fig. 8 is simulated (got \"{f}\")");
                        break;
                    case "--quick": quick = true; break;
                    default: throw new ArgumentException($"unknown argument \"{args[i]}\"");
                }
            }
            if (trace is not null && (apps ?? accesses ?? seed ?? (long?)days) is not null)
                throw new ArgumentException("--apps, --accesses, --days and --seed shape the synthetic trace; they do not apply with --trace");
            // The paper's log is 44.3 M accesses of 855 apps over 14 days, about 3,700 rows per app and day; the synthetic
            // trace needs that density for its rates (SyntheticTraceOptions). Full: the paper's 855 apps over 2 days
            // (6 M rows; the simulator streams, so a real file of any length runs in time proportional to it). Quick: 60
            // apps over a day, under a minute.
            return new CommandLine(trace, latency, apps ?? (quick ? 60 : 855), accesses ?? (quick ? 200_000 : 6_000_000), days ?? (quick ? 1 : 2),
                seed ?? 1, figure, quick);
        }

        private static int Positive(string name, string value) =>
            int.TryParse(value, NumberStyles.Integer, CultureInfo.InvariantCulture, out var n) && n > 0 ? n : throw new ArgumentException($"{name}: \"{value}\" is not a positive integer");
    }
}
