using System.Collections.Concurrent;
using System.Diagnostics;
using System.Globalization;

namespace FaaST.ScaleController.Tests.Platform;

/// <summary>
/// The platform's command line as `./faast` runs it (`start`, `platform`, `deploy`, `status`): FaaST.ScaleController.dll,
/// beside the test assembly, as a process of its own, with FAAST_HOME set to this checkout, so a test drives the same
/// process a user does.
/// </summary>
internal static class PlatformCommand
{
    /// <summary>
    /// Starts the command with <paramref name="args"/>; every line it writes (stdout and stderr) is added to
    /// <paramref name="output"/> as it comes.
    /// </summary>
    /// <param name="storage">Its AzureWebJobsStorage; null leaves it unset even when this process has it (the platform
    /// then runs an Azurite of its own).</param>
    /// <param name="environment">More environment variables, on top of this process's.</param>
    public static Process Start(IEnumerable<string> args, ConcurrentQueue<string> output, string? storage = null,
        IReadOnlyDictionary<string, string>? environment = null)
    {
        var info = new ProcessStartInfo("dotnet") { RedirectStandardOutput = true, RedirectStandardError = true, UseShellExecute = false };
        info.ArgumentList.Add(Path.Combine(AppContext.BaseDirectory, "FaaST.ScaleController.dll"));
        foreach (var a in args)
            info.ArgumentList.Add(a);
        info.Environment["FAAST_HOME"] = Repo.Root;
        info.Environment.Remove("AzureWebJobsStorage");
        if (storage is not null)
            info.Environment["AzureWebJobsStorage"] = storage;
        foreach (var (name, value) in environment ?? new Dictionary<string, string>())
            info.Environment[name] = value;
        var process = Process.Start(info)!;
        process.OutputDataReceived += (_, e) => { if (e.Data is not null) output.Enqueue(e.Data); };
        process.ErrorDataReceived += (_, e) => { if (e.Data is not null) output.Enqueue(e.Data); };
        process.BeginOutputReadLine();
        process.BeginErrorReadLine();
        return process;
    }

    /// <summary>Runs a command that ends by itself (`deploy`, `status`) to its end: its exit code and all it wrote.</summary>
    public static async Task<(int Code, string Output)> RunAsync(params string[] args)
    {
        var output = new ConcurrentQueue<string>();
        using var process = Start(args, output);
        using var timeout = new CancellationTokenSource(TimeSpan.FromSeconds(120));
        await process.WaitForExitAsync(timeout.Token);
        return (process.ExitCode, string.Join('\n', output));
    }

    /// <summary>Waits for a command that should end by itself (a refusal at start) to end; killed with what it started
    /// if it has not after <paramref name="seconds"/>, so a test that fails leaves no process behind.</summary>
    public static async Task WaitForExitAsync(Process process, int seconds = 180)
    {
        try
        {
            using var timeout = new CancellationTokenSource(TimeSpan.FromSeconds(seconds));
            await process.WaitForExitAsync(timeout.Token);
        }
        finally
        {
            if (!process.HasExited)
                process.Kill(entireProcessTree: true);
        }
    }

    /// <summary>
    /// Stops a platform as Ctrl-C or `kill -TERM` does, so it drains and stops its instances and Azurites; one that is
    /// still running a minute later is killed with what it started, so no test leaves processes behind.
    /// </summary>
    public static async Task StopAsync(Process process)
    {
        if (process.HasExited)
            return;
        Process.Start("kill", ["-TERM", process.Id.ToString(CultureInfo.InvariantCulture)])!.WaitForExit();
        if (!process.WaitForExit(60_000))
            process.Kill(entireProcessTree: true);
        await process.WaitForExitAsync();
    }
}
