using System.Collections.Concurrent;
using System.Globalization;
using FaaST.AppModel;

namespace FaaST.TestSupport;

/// <summary>
/// The host as `./faast start` runs it: FaaST.Runtime.dll (beside the test assembly) as its own process on a free
/// port, optionally started inside a cgroup, ready when its ready file says so (<see cref="LaunchedHost"/>).
/// Disposing sends SIGTERM first (the host stops its workers and removes its /dev/shm segments), then kills what is left.
/// </summary>
public sealed class HostProcess : IAsyncDisposable
{
    private readonly LaunchedHost _host;
    private readonly ConcurrentQueue<string> _output;

    private HostProcess(LaunchedHost host, ConcurrentQueue<string> output, TimeSpan httpTimeout)
    {
        _host = host;
        _output = output;
        Http = new HttpClient { BaseAddress = host.Ready.Http, Timeout = httpTimeout };
    }

    public HttpClient Http { get; }

    public int ProcessId => _host.Process.Id;

    /// <summary>What the host wrote to stdout and stderr so far.</summary>
    public IReadOnlyCollection<string> Output => _output;

    /// <summary>VmRSS of the host process.</summary>
    public long ResidentBytes()
    {
        var line = File.ReadLines($"/proc/{ProcessId}/status").First(l => l.StartsWith("VmRSS:", StringComparison.Ordinal));
        return long.Parse(line.Split(' ', StringSplitOptions.RemoveEmptyEntries)[1], CultureInfo.InvariantCulture) * 1024;
    }

    /// <summary>Starts the host on <paramref name="app"/> with AzureWebJobsStorage <paramref name="storage"/> and waits
    /// (up to a minute) until it is ready.</summary>
    /// <param name="arguments">More command-line arguments (e.g. "--no-peers").</param>
    /// <param name="cgroupProcs">A cgroup's cgroup.procs file: the host (and so its workers) start inside that group.</param>
    /// <param name="httpTimeout">The timeout of <see cref="Http"/> (default 100 s).</param>
    /// <param name="environment">More environment variables for the host, on top of this process's.</param>
    public static async Task<HostProcess> StartAsync(string app, string storage, IReadOnlyList<string>? arguments = null,
        string? cgroupProcs = null, TimeSpan? httpTimeout = null, IReadOnlyDictionary<string, string>? environment = null)
    {
        var variables = new Dictionary<string, string>
        {
            ["FAAST_HOME"] = Repo.Root,
            ["AzureWebJobsStorage"] = storage,
        };
        foreach (var (name, value) in environment ?? new Dictionary<string, string>())
            variables[name] = value;
        var output = new ConcurrentQueue<string>();
        try
        {
            var host = await LaunchedHost.StartAsync(new HostLaunchOptions
            {
                RuntimeDll = Path.Combine(AppContext.BaseDirectory, "FaaST.Runtime.dll"),
                AppDirectory = app,
                Arguments = ["--port", "0", .. arguments ?? []],
                // The shell joins the group, then becomes the host: the host and its workers start inside it.
                Wrapper = cgroupProcs is null ? [] : ["sh", "-c", "echo $$ > \"$0\" && exec \"$@\"", cgroupProcs],
                Environment = variables,
                StartupTimeout = TimeSpan.FromSeconds(60),
                Output = output.Enqueue,
            });
            return new HostProcess(host, output, httpTimeout ?? TimeSpan.FromSeconds(100));
        }
        catch (HostStartException e)
        {
            Assert.Fail($"the host did not become ready: {e.Message}\nall its output:\n{string.Join("\n", output)}");
            throw;
        }
    }

    /// <summary>SIGTERM, as `./faast start` gets on Ctrl-C or from a supervisor; asserts a clean exit.</summary>
    public async Task StopAsync()
    {
        var code = await _host.StopAsync(TimeSpan.FromSeconds(30));
        Assert.True(code == 0, $"the host did not stop cleanly on SIGTERM (exit code {code}; 137: killed after 30 s):\n" + string.Join("\n", _output));
    }

    /// <summary>Waits up to <paramref name="timeout"/> for the host to exit on its own (say, after a drain); its exit code.</summary>
    public async Task<int> WaitForExitAsync(TimeSpan timeout)
    {
        await Task.WhenAny(_host.Process.WaitForExitAsync(), Task.Delay(timeout));
        Assert.True(_host.Process.HasExited, $"the host did not exit within {timeout}:\n" + string.Join("\n", _output));
        return _host.Process.ExitCode;
    }

    public async ValueTask DisposeAsync()
    {
        await _host.DisposeAsync();
        Http.Dispose();
    }
}
