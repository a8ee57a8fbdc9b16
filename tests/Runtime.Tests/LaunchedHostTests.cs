using System.Collections.Concurrent;
using System.Globalization;

namespace FaaST.Runtime.Tests;

/// <summary>
/// The one process launcher (<see cref="LaunchedHost"/>) against the real FaaST.Runtime.dll: ready by the host's ready
/// file, never by what it prints; an exit or a timeout before that is an error that says why; disposing is SIGTERM.
/// </summary>
[Collection("azurite")]
public sealed class LaunchedHostTests(AzuriteFixture azurite)
{
    private static string RuntimeDll => Path.Combine(AppContext.BaseDirectory, "FaaST.Runtime.dll");

    private HostLaunchOptions Options(string app, ConcurrentQueue<string> output) => new()
    {
        RuntimeDll = RuntimeDll,
        AppDirectory = app,
        Arguments = ["--port", "0", "--azurite-in-memory", "--no-peers"],
        Environment = new Dictionary<string, string> { ["FAAST_HOME"] = Repo.Root, ["AzureWebJobsStorage"] = azurite.ConnectionString },
        Output = output.Enqueue,
    };

    [Fact]
    public async Task A_host_is_ready_when_its_ready_file_says_so_and_serves_at_the_address_the_file_names()
    {
        using var app = TestApp.CopySample("python-app");
        using var run = new TempDirectory("faast-launch-");
        var output = new ConcurrentQueue<string>();
        await using var host = await LaunchedHost.StartAsync(Options(app.Directory, output) with { ReadyDirectory = run.Path, InstanceId = "launched-1" });

        Assert.Equal("launched-1", host.Ready.Instance);
        Assert.Equal(host.Process.Id, host.Ready.Pid);
        Assert.Null(host.Ready.Peer); // --no-peers
        using var http = new HttpClient { BaseAddress = host.Ready.Http };
        Assert.Equal("Hello, Launcher!", await http.GetStringAsync("api/Hello?name=Launcher"));
        // Read and gone: a folder of ready files holds only hosts still starting.
        Assert.Empty(Directory.GetFiles(run.Path));
        Assert.Contains(output, line => line.Contains("Host started", StringComparison.Ordinal));
    }

    [Fact]
    public async Task An_app_that_fails_to_load_is_an_error_with_the_hosts_exit_code_and_its_last_lines()
    {
        using var app = TestApp.CopySample("python-app");
        File.WriteAllText(Path.Combine(app.Directory, "host.json"), "{ \"version\": ");
        var output = new ConcurrentQueue<string>();

        var e = await Assert.ThrowsAsync<HostStartException>(() => LaunchedHost.StartAsync(Options(app.Directory, output)));

        Assert.Equal(HostStartFailure.Exited, e.Failure);
        Assert.Equal(3, e.ExitCode); // the host's "the app cannot start"
        Assert.Contains($"the host of {app.Directory} exited with code 3 while starting", e.Message, StringComparison.Ordinal);
        Assert.Contains(e.LastLines, line => line.Contains("the app cannot start", StringComparison.Ordinal) && line.Contains("host.json", StringComparison.Ordinal));
        Assert.Contains("host.json", e.Message, StringComparison.Ordinal);
    }

    [Fact]
    public async Task A_host_that_never_becomes_ready_is_killed_at_the_timeout_with_everything_it_started()
    {
        using var app = TestApp.CopySample("python-app");
        using var pids = new TempDirectory("faast-launch-pids-");
        var pidFile = Path.Combine(pids.Path, "pids");
        var output = new ConcurrentQueue<string>();
        // A wrapper that starts a child, then stops itself before it would exec the host: it never becomes ready,
        // whatever the machine's speed, and leaves a process tree behind unless the launcher kills all of it.
        var options = Options(app.Directory, output) with
        {
            Wrapper = ["sh", "-c", "sleep 600 & echo $$ $! > \"$0.tmp\" && mv \"$0.tmp\" \"$0\"; kill -STOP $$; exec \"$@\"", pidFile],
            StartupTimeout = TimeSpan.FromSeconds(3),
        };

        var e = await Assert.ThrowsAsync<HostStartException>(() => LaunchedHost.StartAsync(options));

        Assert.Equal(HostStartFailure.TimedOut, e.Failure);
        Assert.Contains($"the host of {app.Directory} did not start within 3 s and was killed", e.Message, StringComparison.Ordinal);
        var started = File.ReadAllText(pidFile).Split(' ', StringSplitOptions.RemoveEmptyEntries).Select(p => int.Parse(p, CultureInfo.InvariantCulture)).ToArray();
        Assert.Equal(2, started.Length);
        foreach (var pid in started)
            await Eventually.TrueAsync(() => !IsAlive(pid), $"process {pid} of the launch gone (no orphan)");
    }

    [Fact]
    public async Task Disposing_a_host_stops_it_with_sigterm_so_it_removes_its_shared_memory()
    {
        using var app = TestApp.CopySample("python-app");
        var output = new ConcurrentQueue<string>();
        var host = await LaunchedHost.StartAsync(Options(app.Directory, output));
        var pid = host.Process.Id;
        Assert.NotEmpty(Directory.GetDirectories("/dev/shm", $"faast-*-{pid}"));

        await host.DisposeAsync();

        Assert.False(IsAlive(pid), $"the host {pid} outlived its disposal");
        // A killed host leaves its segments for the next start to sweep; only a host that ran its SIGTERM stop removes them.
        Assert.Empty(Directory.GetDirectories("/dev/shm", $"faast-*-{pid}"));
        Assert.Contains("faast: stopping", output); // what the host says on SIGTERM (a kill says nothing)
    }

    /// <summary>Running (a zombie, dead but not yet reaped by its new parent, counts as gone).</summary>
    private static bool IsAlive(int pid)
    {
        try
        {
            var status = File.ReadAllLines($"/proc/{pid}/status");
            return !status.Any(l => l.StartsWith("State:", StringComparison.Ordinal) && l.Contains('Z', StringComparison.Ordinal));
        }
        catch (Exception e) when (e is FileNotFoundException or DirectoryNotFoundException or IOException)
        {
            return false;
        }
    }
}
