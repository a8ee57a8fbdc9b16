using System.Diagnostics;
using System.Text;
using System.Text.Json;

namespace FaaST.ScaleController.Deploy;

/// <summary>
/// The runtime host's start checks of an app (keys, queue leases, telemetry exporters: what its components read as
/// an instance starts), run by the host's own binary (`FaaST.Runtime.dll check`) so that a deploy is refused with the
/// very messages an instance would exit with, while the platform does not reference the host. One short process per
/// deploy (a few hundred milliseconds on the development machine), never on a request path.
/// </summary>
internal static class RuntimeChecks
{
    /// <summary>How long the check may take before the deploy fails (default 90 s: a busy machine starts .NET slowly, and
    /// indexing a worker-indexed app starts a worker, which has 30 s).</summary>
    public static readonly TimeSpan Timeout = TimeSpan.FromSeconds(90);

    /// <summary>The problems found (empty: none). Throws <see cref="InvalidOperationException"/> when the check itself
    /// could not run (no runtime binary, a crash, a timeout), naming the command and what it printed.</summary>
    /// <param name="settings">The settings on top of local.settings.json; null: this process's environment.</param>
    /// <param name="index">Also index the app with a worker (Python v2 / Node v4: `check --index`), as its own user.</param>
    public static IReadOnlyList<string> Problems(string runtimeDll, string appDirectory, IReadOnlyDictionary<string, string>? settings, bool index = false)
    {
        if (!File.Exists(runtimeDll))
            throw new InvalidOperationException($"the runtime {runtimeDll} does not exist; build it first (./faast setup)");
        var info = new ProcessStartInfo("dotnet")
        {
            RedirectStandardInput = true,
            RedirectStandardOutput = true,
            RedirectStandardError = true,
            UseShellExecute = false,
            StandardOutputEncoding = Encoding.UTF8,
            StandardErrorEncoding = Encoding.UTF8,
        };
        foreach (var a in (string[])[runtimeDll, "check", appDirectory, "--listen", "127.0.0.1"])
            info.ArgumentList.Add(a);
        if (settings is not null)
            info.ArgumentList.Add("--settings-from-stdin");
        if (index)
            info.ArgumentList.Add("--index");
        using var process = Process.Start(info) ?? throw new InvalidOperationException($"cannot start dotnet {runtimeDll} check");
        var output = process.StandardOutput.ReadToEndAsync();
        var error = process.StandardError.ReadToEndAsync();
        if (settings is not null)
            process.StandardInput.Write(JsonSerializer.Serialize(settings));
        process.StandardInput.Close();
        if (!process.WaitForExit(Timeout))
        {
            process.Kill(entireProcessTree: true);
            throw new InvalidOperationException($"dotnet {runtimeDll} check {appDirectory} did not finish in {Timeout.TotalSeconds:0} s");
        }
        var printed = output.GetAwaiter().GetResult();
        var errors = error.GetAwaiter().GetResult().Trim();
        if (process.ExitCode == 3 && errors.StartsWith("faast: the app cannot start: ", StringComparison.Ordinal))
            return [errors["faast: the app cannot start: ".Length..]];
        if (process.ExitCode != 0)
            throw new InvalidOperationException($"dotnet {runtimeDll} check {appDirectory} failed (exit {process.ExitCode}): {errors}");
        try
        {
            return JsonSerializer.Deserialize<string[]>(printed) ?? [];
        }
        catch (JsonException e)
        {
            throw new InvalidOperationException($"dotnet {runtimeDll} check {appDirectory} printed no JSON list: {e.Message}", e);
        }
    }
}
