using System.Collections.Concurrent;
using System.Diagnostics;
using System.Globalization;
using System.Net.Http.Json;
using System.Net.Sockets;

namespace FaaST.Bench.Fuzz;

/// <summary>
/// A runtime host process for the fuzzers: the Release build, loopback only, storage given (the
/// fuzz run's one Azurite), a fixed peer port and secret so the fuzzer can talk to its peer
/// endpoint, and its whole output kept so an unhandled exception is found in it.
/// </summary>
public sealed class FuzzHost : IAsyncDisposable
{
    private readonly ConcurrentQueue<string> _output = new();

    private FuzzHost(Process process, int port, int peerPort)
    {
        Process = process;
        Port = port;
        PeerPort = peerPort;
        BaseAddress = new Uri($"http://127.0.0.1:{port}");
    }

    public Process Process { get; }
    public int Port { get; }
    public int PeerPort { get; }
    public Uri BaseAddress { get; }
    public string Output => string.Join("\n", _output);

    public const string PeerSecret = "fuzz-peer-secret";

    /// <summary>Starts the host; does not wait for it (see <see cref="WaitServingAsync"/>).</summary>
    public static FuzzHost Start(string home, string appDirectory, string storage, IDictionary<string, string>? environment = null, string? fakeHome = null)
    {
        var port = FreePort();
        var peerPort = FreePort();
        var dll = Path.Combine(home, "src", "Runtime", "bin", "Release", "net10.0", "FaaST.Runtime.dll");
        if (!File.Exists(dll))
            throw new FileNotFoundException($"{dll} is missing; run ./faast setup", dll);
        var info = new ProcessStartInfo("dotnet") { RedirectStandardOutput = true, RedirectStandardError = true, UseShellExecute = false };
        foreach (var a in new[] { dll, appDirectory, "--port", Text(port), "--peer-port", Text(peerPort), "--workers", "1", "--isolation", "off", "--azurite-in-memory" })
            info.ArgumentList.Add(a);
        info.Environment["FAAST_HOME"] = fakeHome ?? home;
        info.Environment["AzureWebJobsStorage"] = storage;
        info.Environment["FAAST_PEER_SECRET"] = PeerSecret;
        info.Environment["Logging__LogLevel__Default"] = "Warning";
        // Never export telemetry anywhere from a fuzz run.
        info.Environment.Remove("OTEL_EXPORTER_OTLP_ENDPOINT");
        foreach (var (k, v) in environment ?? new Dictionary<string, string>())
            info.Environment[k] = v;
        var process = Process.Start(info)!;
        var host = new FuzzHost(process, port, peerPort);
        process.OutputDataReceived += (_, e) => host.Keep(e.Data);
        process.ErrorDataReceived += (_, e) => host.Keep(e.Data);
        process.BeginOutputReadLine();
        process.BeginErrorReadLine();
        return host;
    }

    private void Keep(string? line)
    {
        if (line is null)
            return;
        _output.Enqueue(line);
        if (line.Contains("unhandled exception", StringComparison.OrdinalIgnoreCase))
            _errors.Enqueue(line);
        while (_output.Count > 20000)
            _output.TryDequeue(out _);
    }

    /// <summary>True once /admin/host/status answers (and <paramref name="workers"/> are ready); false if the process exits first or time runs out.</summary>
    public async Task<bool> WaitServingAsync(int workers, TimeSpan timeout)
    {
        using var client = new HttpClient { Timeout = TimeSpan.FromSeconds(3) };
        var deadline = DateTime.UtcNow + timeout;
        while (DateTime.UtcNow < deadline)
        {
            if (Process.HasExited)
                return false;
            try
            {
                using var response = await client.GetAsync(new Uri(BaseAddress, "/admin/host/status"));
                if (response.IsSuccessStatusCode)
                {
                    var status = await response.Content.ReadFromJsonAsync(FaaST.Hosting.Status.StatusJsonContext.Default.HostStatus);
                    if (status?.ReadyWorkers >= workers)
                        return true;
                }
            }
            catch (Exception e) when (e is HttpRequestException or TaskCanceledException)
            {
                // not listening yet
            }
            await Task.Delay(150);
        }
        return false;
    }

    /// <summary>An unhandled exception in the host's output (the runtime prints "Unhandled exception." before aborting).</summary>
    public string? UnhandledException()
    {
        var lines = _output.ToArray();
        var i = Array.FindIndex(lines, l => l.StartsWith("Unhandled exception.", StringComparison.Ordinal));
        return i < 0 ? null : string.Join("\n", lines.Skip(i).Take(12));
    }

    private readonly ConcurrentQueue<string> _errors = new();

    /// <summary>
    /// Exceptions the host logged as unhandled by a request or connection (Kestrel's "An unhandled
    /// exception was thrown by the application", or the runtime's "Unhandled exception") since the
    /// last call: each one a crash of that request, whatever the client saw.
    /// </summary>
    public List<string> TakeNewErrors()
    {
        var fresh = new List<string>();
        while (_errors.TryDequeue(out var e))
            fresh.Add(e);
        return fresh;
    }

    /// <summary>Process ids of the host's children (its workers).</summary>
    public IEnumerable<int> Children()
    {
        foreach (var dir in Directory.EnumerateDirectories("/proc"))
        {
            if (!int.TryParse(Path.GetFileName(dir), NumberStyles.None, CultureInfo.InvariantCulture, out var pid))
                continue;
            string stat;
            try
            {
                stat = File.ReadAllText(Path.Combine(dir, "stat"));
            }
            catch (IOException)
            {
                continue;
            }
            catch (UnauthorizedAccessException)
            {
                continue;
            }
            // pid (comm) state ppid ...: comm may hold spaces, so split after the last ')'.
            var rest = stat[(stat.LastIndexOf(')') + 2)..].Split(' ');
            if (rest.Length > 1 && rest[1] == Text(Process.Id))
                yield return pid;
        }
    }

    public static string Text(int n) => n.ToString(CultureInfo.InvariantCulture);

    public static int FreePort()
    {
        using var l = new TcpListener(System.Net.IPAddress.Loopback, 0);
        l.Start();
        return ((System.Net.IPEndPoint)l.LocalEndpoint).Port;
    }

    public async ValueTask DisposeAsync()
    {
        // FAAST_FUZZ_KEEP_LOGS=DIR keeps each host's whole output there (for looking into a finding).
        if (Environment.GetEnvironmentVariable("FAAST_FUZZ_KEEP_LOGS") is { Length: > 0 } logs)
        {
            Directory.CreateDirectory(logs);
            await File.WriteAllTextAsync(Path.Combine(logs, $"host-{Process.Id}.log"), Output);
        }
        if (!Process.HasExited)
        {
            // SIGTERM: the host stops its workers gracefully; killed if it does not within 15 s.
            using (var kill = Process.Start("kill", ["-TERM", Text(Process.Id)]))
                kill?.WaitForExit();
            using var cts = new CancellationTokenSource(TimeSpan.FromSeconds(15));
            try
            {
                await Process.WaitForExitAsync(cts.Token);
            }
            catch (OperationCanceledException)
            {
                Process.Kill(entireProcessTree: true);
            }
        }
        Process.Dispose();
    }
}
