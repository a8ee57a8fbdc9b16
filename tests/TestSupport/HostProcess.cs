using System.Collections.Concurrent;
using System.Diagnostics;
using System.Globalization;
using System.Text.RegularExpressions;

namespace FaaST.TestSupport;

/// <summary>
/// The host as `./faast start` runs it: FaaST.Runtime.dll (beside the test assembly) as its own process on a free
/// port, optionally started inside a cgroup. Disposing sends SIGTERM first (the host stops its workers and removes its
/// /dev/shm segments), then kills what is left.
/// </summary>
public sealed partial class HostProcess : IAsyncDisposable
{
    private readonly Process _process;
    private readonly ConcurrentQueue<string> _output = new();

    private HostProcess(Process process) => _process = process;

    public HttpClient Http { get; private set; } = null!;

    public int ProcessId => _process.Id;

    /// <summary>What the host wrote to stdout and stderr so far.</summary>
    public IReadOnlyCollection<string> Output => _output;

    /// <summary>VmRSS of the host process.</summary>
    public long ResidentBytes()
    {
        var line = File.ReadLines($"/proc/{_process.Id}/status").First(l => l.StartsWith("VmRSS:", StringComparison.Ordinal));
        return long.Parse(line.Split(' ', StringSplitOptions.RemoveEmptyEntries)[1], CultureInfo.InvariantCulture) * 1024;
    }

    /// <summary>Starts the host on <paramref name="app"/> with AzureWebJobsStorage <paramref name="storage"/> and waits
    /// (up to a minute) until it says where it listens.</summary>
    /// <param name="arguments">More command-line arguments (e.g. "--no-peers").</param>
    /// <param name="cgroupProcs">A cgroup's cgroup.procs file: the host (and so its workers) start inside that group.</param>
    /// <param name="httpTimeout">The timeout of <see cref="Http"/> (default 100 s).</param>
    /// <param name="environment">More environment variables for the host, on top of this process's.</param>
    public static async Task<HostProcess> StartAsync(string app, string storage, IReadOnlyList<string>? arguments = null,
        string? cgroupProcs = null, TimeSpan? httpTimeout = null, IReadOnlyDictionary<string, string>? environment = null)
    {
        var dll = Path.Combine(AppContext.BaseDirectory, "FaaST.Runtime.dll");
        var info = new ProcessStartInfo(cgroupProcs is null ? "dotnet" : "sh") { RedirectStandardOutput = true, RedirectStandardError = true, UseShellExecute = false };
        if (cgroupProcs is not null)
        {
            // The shell joins the group, then becomes the host: the host and its workers start inside it.
            foreach (var a in new[] { "-c", "echo $$ > \"$0\" && exec \"$@\"", cgroupProcs, "dotnet" })
                info.ArgumentList.Add(a);
        }
        foreach (var a in new[] { dll, app, "--port", "0" }.Concat(arguments ?? []))
            info.ArgumentList.Add(a);
        info.Environment["FAAST_HOME"] = Repo.Root;
        info.Environment["AzureWebJobsStorage"] = storage;
        foreach (var (name, value) in environment ?? new Dictionary<string, string>())
            info.Environment[name] = value;
        var host = new HostProcess(Process.Start(info)!);
        var address = new TaskCompletionSource<string>(TaskCreationOptions.RunContinuationsAsynchronously);
        host._process.OutputDataReceived += (_, e) =>
        {
            if (e.Data is null)
                return;
            host._output.Enqueue(e.Data);
            if (ListeningOn().Match(e.Data) is { Success: true } m)
                address.TrySetResult(m.Groups[1].Value);
        };
        host._process.ErrorDataReceived += (_, e) => { if (e.Data is not null) host._output.Enqueue(e.Data); };
        host._process.BeginOutputReadLine();
        host._process.BeginErrorReadLine();
        var started = await Task.WhenAny(address.Task, host._process.WaitForExitAsync(), Task.Delay(TimeSpan.FromSeconds(60)));
        if (started != address.Task)
        {
            await host.DisposeAsync();
            Assert.Fail("the host did not report its address:\n" + string.Join("\n", host._output));
        }
        host.Http = new HttpClient { BaseAddress = new Uri(await address.Task), Timeout = httpTimeout ?? TimeSpan.FromSeconds(100) };
        return host;
    }

    /// <summary>SIGTERM, as `./faast start` gets on Ctrl-C or from a supervisor; asserts a clean exit.</summary>
    public async Task StopAsync()
    {
        Terminate();
        await Task.WhenAny(_process.WaitForExitAsync(), Task.Delay(TimeSpan.FromSeconds(30)));
        Assert.True(_process.HasExited, "the host did not stop on SIGTERM:\n" + string.Join("\n", _output));
        Assert.Equal(0, _process.ExitCode);
    }

    /// <summary>Waits up to <paramref name="timeout"/> for the host to exit on its own (say, after a drain); its exit code.</summary>
    public async Task<int> WaitForExitAsync(TimeSpan timeout)
    {
        await Task.WhenAny(_process.WaitForExitAsync(), Task.Delay(timeout));
        Assert.True(_process.HasExited, $"the host did not exit within {timeout}:\n" + string.Join("\n", _output));
        return _process.ExitCode;
    }

    public async ValueTask DisposeAsync()
    {
        if (!_process.HasExited)
        {
            Terminate();
            await Task.WhenAny(_process.WaitForExitAsync(), Task.Delay(TimeSpan.FromSeconds(20)));
            if (!_process.HasExited)
                _process.Kill(entireProcessTree: true);
            await _process.WaitForExitAsync();
        }
        Http?.Dispose();
        _process.Dispose();
    }

    private void Terminate() => Process.Start("kill", ["-TERM", _process.Id.ToString(CultureInfo.InvariantCulture)])!.WaitForExit();

    [GeneratedRegex(@"listening on (http://127\.0\.0\.1:\d+/?)")]
    private static partial Regex ListeningOn();
}
