using System.Diagnostics;
using System.Net.Http.Json;
using FaaST.Hosting.Status;

namespace FaaST.Bench;

/// <summary>A runtime host in its own process, as in production, started from the Release build (<see cref="LaunchedHost"/>; SIGTERM, then kill after 15 s).</summary>
public sealed class HostProcess : IAsyncDisposable
{
    private readonly LaunchedHost _host;

    private HostProcess(LaunchedHost host) => _host = host;

    /// <summary>Where the host serves, as its ready file says.</summary>
    public Uri BaseAddress => _host.Ready.Http;

    /// <summary>What the host wrote (warnings and errors: the bench runs hosts at Warning), for a scenario's error message.</summary>
    public string Output => string.Join("\n", _output ?? new());

    private System.Collections.Concurrent.ConcurrentQueue<string>? _output;

    // Every app copy of this bench run lives under one folder, deleted when the run ends.
    private static readonly string CopiesRoot = Path.Combine(Path.GetTempPath(), $"faast-bench-{Environment.ProcessId}");

    /// <summary>Copies an app to a new temporary folder under its own name (the name is the app's identity
    /// for peers and its workers' user) with the given faast.json; <paramref name="name"/> names the copy
    /// otherwise (instances of one name in one storage form one cooperative cache).</summary>
    public static string CopyApp(string app, string faastJson, string? name = null)
    {
        var dir = Path.Combine(CopiesRoot, Guid.NewGuid().ToString("N")[..8], name ?? Path.GetFileName(app));
        foreach (var file in Directory.EnumerateFiles(app, "*", SearchOption.AllDirectories))
        {
            var target = Path.Combine(dir, Path.GetRelativePath(app, file));
            Directory.CreateDirectory(Path.GetDirectoryName(target)!);
            File.Copy(file, target);
        }
        File.WriteAllText(Path.Combine(dir, "faast.json"), faastJson);
        return dir;
    }

    /// <summary>Deletes the copies <see cref="CopyApp"/> made (once their hosts have stopped).</summary>
    public static void DeleteAppCopies()
    {
        if (Directory.Exists(CopiesRoot))
            Directory.Delete(CopiesRoot, recursive: true);
    }

    public static async Task<HostProcess> StartAsync(string home, string appDirectory, int workers, IDictionary<string, string> environment, params string[] extraArguments) =>
        (await StartCoreAsync(home, appDirectory, workers, environment, extraArguments, firstRequest: null)).Host;

    /// <summary>
    /// Starts a host and measures process start to the first answered request for <paramref name="path"/>
    /// (polled every 5 ms): what a cold instance costs before it serves (host_start_ms).
    /// </summary>
    public static async Task<(HostProcess Host, double StartMs)> StartTimedAsync(string home, string appDirectory, int workers,
        IDictionary<string, string> environment, string path, params string[] extraArguments) =>
        await StartCoreAsync(home, appDirectory, workers, environment, extraArguments, path);

    private static async Task<(HostProcess Host, double StartMs)> StartCoreAsync(string home, string appDirectory, int workers,
        IDictionary<string, string> environment, string[] extraArguments, string? firstRequest)
    {
        var dll = Path.Combine(home, "src", "Runtime", "bin", "Release", "net10.0", "FaaST.Runtime.dll");
        if (!File.Exists(dll))
            throw new FileNotFoundException($"{dll} is missing; run ./faast setup", dll);
        var variables = new Dictionary<string, string>(environment)
        {
            ["FAAST_HOME"] = home,
            ["Logging__LogLevel__Default"] = "Warning",
        };
        var output = new System.Collections.Concurrent.ConcurrentQueue<string>();
        var timeout = TimeSpan.FromSeconds(60);
        var started = Stopwatch.GetTimestamp();
        LaunchedHost launched;
        try
        {
            launched = await LaunchedHost.StartAsync(new HostLaunchOptions
            {
                RuntimeDll = dll,
                AppDirectory = appDirectory,
                Arguments = ["--port", "0", "--workers", workers.ToString(System.Globalization.CultureInfo.InvariantCulture), "--azurite-in-memory", .. extraArguments],
                Environment = variables,
                StartupTimeout = timeout,
                StopGrace = TimeSpan.FromSeconds(15),
                Output = output.Enqueue,
            });
        }
        catch (HostStartException e) when (e.Failure == HostStartFailure.TimedOut)
        {
            throw new TimeoutException($"the host did not start within 60 s:\n{string.Join("\n", output)}", e);
        }
        catch (HostStartException e)
        {
            throw new InvalidOperationException($"{e.Message}\nall its output:\n{string.Join("\n", output)}", e);
        }
        var host = new HostProcess(launched) { _output = output };
        // Ready (its ready file) is the host's lifecycle at Started; the bench also waits for its workers, and the timed
        // start is the first answered request (polled every 5 ms), what a cold instance costs before it serves.
        using var client = new HttpClient { Timeout = TimeSpan.FromSeconds(2) };
        var deadline = DateTime.UtcNow + timeout - Stopwatch.GetElapsedTime(started);
        while (DateTime.UtcNow < deadline)
        {
            if (launched.Process.HasExited)
            {
                await host.DisposeAsync();
                throw new InvalidOperationException($"the host exited with {launched.Process.ExitCode}:\n{string.Join("\n", output)}");
            }
            try
            {
                if (firstRequest is not null)
                {
                    using var response = await client.GetAsync(new Uri(host.BaseAddress, firstRequest));
                    if (response.IsSuccessStatusCode)
                        return (host, Stopwatch.GetElapsedTime(started).TotalMilliseconds);
                }
                else
                {
                    var status = await client.GetFromJsonAsync(new Uri(host.BaseAddress, "/admin/host/status"), StatusJsonContext.Default.HostStatus);
                    if (status?.ReadyWorkers >= workers)
                        return (host, Stopwatch.GetElapsedTime(started).TotalMilliseconds);
                }
            }
            catch (HttpRequestException)
            {
                // not answering yet
            }
            catch (TaskCanceledException)
            {
                // slow start
            }
            await Task.Delay(firstRequest is null ? 200 : 5);
        }
        await host.DisposeAsync();
        throw new TimeoutException($"the host did not get {workers} workers ready within 60 s:\n{string.Join("\n", output)}");
    }

    public async ValueTask DisposeAsync() => await _host.DisposeAsync();
}
