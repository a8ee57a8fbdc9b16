using System.Diagnostics;
using System.Globalization;
using System.Text.RegularExpressions;

namespace FaaST.Bench;

/// <summary>
/// wrk (Debian's package), the external client a user-visible latency is measured with beside our own load generator:
/// one thread, one connection by default (or several, for throughput), closed loop, <c>--latency</c> for its percentiles. Nothing of ours is in its path, so
/// what it reports cannot be an artefact of our client.
/// </summary>
internal static partial class Wrk
{
    public readonly record struct Result(double P50Ms, double P99Ms, double RequestsPerSecond);

    /// <summary>Runs wrk against <paramref name="url"/> for <paramref name="duration"/> over <paramref name="connections"/> keep-alive connections (one thread).</summary>
    /// <exception cref="InvalidOperationException">wrk is not installed, failed, or printed no latency distribution.</exception>
    public static Task<Result> RunAsync(Uri url, TimeSpan duration, int connections = 1) => RunAsync(url, duration, connections, script: null);

    /// <summary>As <see cref="RunAsync(Uri, TimeSpan, int)"/> with a Lua <paramref name="script"/> (<c>-s</c>) that
    /// shapes each request (e.g. walks a list of paths under <paramref name="url"/>), one connection.
    /// <paramref name="requireSuccess"/>: wrk's "Non-2xx or 3xx responses" line is an error (latencies of refusals
    /// are not the figure).</summary>
    public static Task<Result> RunScriptAsync(Uri url, TimeSpan duration, string script, bool requireSuccess = false) => RunAsync(url, duration, 1, script, requireSuccess);

    private static async Task<Result> RunAsync(Uri url, TimeSpan duration, int connections, string? script, bool requireSuccess = false)
    {
        ArgumentOutOfRangeException.ThrowIfLessThan(connections, 1);
        var info = new ProcessStartInfo("wrk") { RedirectStandardOutput = true, RedirectStandardError = true, UseShellExecute = false };
        foreach (var a in (string[])["-t1", $"-c{connections.ToString(CultureInfo.InvariantCulture)}", $"-d{Math.Max(1, (int)duration.TotalSeconds)}s", "--latency"])
            info.ArgumentList.Add(a);
        if (script is not null)
        {
            info.ArgumentList.Add("-s");
            info.ArgumentList.Add(script);
        }
        info.ArgumentList.Add(url.ToString());
        Process process;
        try
        {
            process = Process.Start(info)!;
        }
        catch (System.ComponentModel.Win32Exception e)
        {
            throw new InvalidOperationException($"wrk is not installed ({e.Message}): apt-get install wrk, or run ./faast bench, which installs it", e);
        }
        using (process)
        {
            var output = process.StandardOutput.ReadToEndAsync();
            var error = process.StandardError.ReadToEndAsync();
            await process.WaitForExitAsync();
            var text = await output;
            if (process.ExitCode != 0)
                throw new InvalidOperationException($"wrk {url} exited {process.ExitCode}: {await error}{text}");
            if (requireSuccess && text.Contains("Non-2xx or 3xx responses", StringComparison.Ordinal))
                throw new InvalidOperationException($"wrk {url}: some answers were not 2xx:\n{text}");
            return Parse(text) ?? throw new InvalidOperationException($"wrk {url}: no latency distribution in its output:\n{text}");
        }
    }

    /// <summary>Whether wrk is on the PATH (./faast bench installs Debian's package).</summary>
    public static bool Available => Net.CloudNetwork.FindOnPath("wrk") is not null;

    /// <summary>The 50 % and 99 % lines of wrk's latency distribution and its requests per second; null when absent.</summary>
    internal static Result? Parse(string output)
    {
        var p50 = Percentile(output, "50");
        var p99 = Percentile(output, "99");
        var rate = RateLine().Match(output);
        if (p50 is null || p99 is null || !rate.Success)
            return null;
        return new Result(p50.Value, p99.Value, double.Parse(rate.Groups[1].Value, CultureInfo.InvariantCulture));
    }

    private static double? Percentile(string output, string percent)
    {
        foreach (Match m in LatencyLine().Matches(output))
        {
            if (m.Groups[1].Value != percent)
                continue;
            var value = double.Parse(m.Groups[2].Value, CultureInfo.InvariantCulture);
            return m.Groups[3].Value switch
            {
                "us" => value / 1000,
                "ms" => value,
                "s" => value * 1000,
                "m" => value * 60_000,
                _ => null,
            };
        }
        return null;
    }

    [GeneratedRegex(@"^\s+(\d+)%\s+([\d.]+)(us|ms|s|m)\s*$", RegexOptions.Multiline)]
    private static partial Regex LatencyLine();

    [GeneratedRegex(@"Requests/sec:\s+([\d.]+)")]
    private static partial Regex RateLine();
}
