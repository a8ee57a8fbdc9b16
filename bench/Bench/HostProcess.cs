using System.Diagnostics;
using System.Net.Http.Json;
using FaaST.Hosting.Status;

namespace FaaST.Bench;

/// <summary>A runtime host in its own process, as in production, started from the Release build.</summary>
public sealed class HostProcess : IAsyncDisposable
{
    private readonly Process _process;

    private HostProcess(Process process, Uri baseAddress)
    {
        _process = process;
        BaseAddress = baseAddress;
    }

    public Uri BaseAddress { get; }

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
        var port = FreePort();
        var dll = Path.Combine(home, "src", "Runtime", "bin", "Release", "net10.0", "FaaST.Runtime.dll");
        if (!File.Exists(dll))
            throw new FileNotFoundException($"{dll} is missing; run ./faast setup", dll);
        var info = new ProcessStartInfo("dotnet")
        {
            RedirectStandardOutput = true,
            RedirectStandardError = true,
            UseShellExecute = false,
        };
        foreach (var a in new[] { dll, appDirectory, "--port", port.ToString(System.Globalization.CultureInfo.InvariantCulture), "--workers", workers.ToString(System.Globalization.CultureInfo.InvariantCulture), "--azurite-in-memory" })
            info.ArgumentList.Add(a);
        foreach (var a in extraArguments)
            info.ArgumentList.Add(a);
        foreach (var (k, v) in environment)
            info.Environment[k] = v;
        info.Environment["FAAST_HOME"] = home;
        info.Environment["Logging__LogLevel__Default"] = "Warning";
        var started = Stopwatch.GetTimestamp();
        var process = Process.Start(info)!;
        var output = new System.Collections.Concurrent.ConcurrentQueue<string>();
        process.OutputDataReceived += (_, e) => { if (e.Data is not null) output.Enqueue(e.Data); };
        process.ErrorDataReceived += (_, e) => { if (e.Data is not null) output.Enqueue(e.Data); };
        process.BeginOutputReadLine();
        process.BeginErrorReadLine();
        var host = new HostProcess(process, new Uri($"http://127.0.0.1:{port}")) { _output = output };
        using var client = new HttpClient { Timeout = TimeSpan.FromSeconds(2) };
        var deadline = DateTime.UtcNow.AddSeconds(60);
        while (DateTime.UtcNow < deadline)
        {
            if (process.HasExited)
                throw new InvalidOperationException($"the host exited with {process.ExitCode}:\n{string.Join("\n", output)}");
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
                // not listening yet
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

    private static int FreePort()
    {
        using var l = new System.Net.Sockets.TcpListener(System.Net.IPAddress.Loopback, 0);
        l.Start();
        return ((System.Net.IPEndPoint)l.LocalEndpoint).Port;
    }

    public async ValueTask DisposeAsync()
    {
        if (!_process.HasExited)
        {
            // SIGTERM: the host stops its workers gracefully.
            Process.Start("kill", ["-TERM", _process.Id.ToString(System.Globalization.CultureInfo.InvariantCulture)])?.WaitForExit();
            using var cts = new CancellationTokenSource(TimeSpan.FromSeconds(15));
            try
            {
                await _process.WaitForExitAsync(cts.Token);
            }
            catch (OperationCanceledException)
            {
                _process.Kill(entireProcessTree: true);
            }
        }
        _process.Dispose();
    }
}
