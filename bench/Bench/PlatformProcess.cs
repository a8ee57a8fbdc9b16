using System.Collections.Concurrent;
using System.Diagnostics;
using System.Globalization;
using System.Net.Sockets;
using System.Text.RegularExpressions;

namespace FaaST.Bench;

/// <summary>
/// A real platform process for the attack run and the platform fuzzers, as an operator starts it:
/// <c>dotnet FaaST.ScaleController.dll platform --port P --control-port C --state DIR</c> with FAAST_HOME set,
/// the Release build, its own Azurite (data in the state folder, so a restart keeps the deployments). Keeps its
/// whole output (the oracle of "logged" and of unhandled exceptions). Ports are chosen here, so the control
/// port is known without parsing the log.
/// </summary>
public sealed partial class PlatformProcess : IAsyncDisposable
{
    private readonly ConcurrentQueue<string> _output = new();
    private readonly string _home;
    private readonly string[] _extraArguments;
    private long _lines;

    public PlatformProcess(string home, string state, params string[] extraArguments)
    {
        _home = home;
        State = state;
        _extraArguments = extraArguments;
        Port = FreePort();
        ControlPort = FreePort();
    }

    public Process? Process { get; private set; }
    public string State { get; }
    public int Port { get; }
    public int ControlPort { get; }
    public Uri Address => new($"http://127.0.0.1:{Port}/");
    public Uri ControlAddress => new($"http://127.0.0.1:{ControlPort}/");

    /// <summary>The platform's blob endpoint, from its "storage ..." log line (null before it logged one).</summary>
    public string? StorageEndpoint { get; private set; }

    /// <summary>How many output lines so far: a mark for <see cref="LinesSince"/>.</summary>
    public long Mark => Interlocked.Read(ref _lines);

    public IReadOnlyList<string> Lines => _output.ToArray();

    /// <summary>The lines written after <paramref name="mark"/> (bounded: the last 20,000 lines are kept).</summary>
    public IReadOnlyList<string> LinesSince(long mark)
    {
        var all = _output.ToArray();
        var kept = Mark - all.Length;
        return all.Skip((int)Math.Max(0, mark - kept)).ToArray();
    }

    /// <summary>The platform's admin key file (STATE/keys/admin), as the contract of issue 19 names it.</summary>
    public string AdminKeyFile => Path.Combine(State, "keys", "admin");

    /// <summary>The admin key, or null when the platform wrote none (a platform from before issue 19).</summary>
    public string? AdminKey => File.Exists(AdminKeyFile) ? File.ReadAllText(AdminKeyFile).Trim() : null;

    /// <summary>Starts the process and waits for "faast: platform at" (or its exit).</summary>
    public async Task StartAsync(TimeSpan timeout)
    {
        var dll = Path.Combine(_home, "src", "ScaleController", "bin", "Release", "net10.0", "FaaST.ScaleController.dll");
        if (!File.Exists(dll))
            throw new FileNotFoundException($"{dll} is missing; run ./faast setup", dll);
        var info = new ProcessStartInfo("dotnet") { RedirectStandardOutput = true, RedirectStandardError = true, RedirectStandardInput = true, UseShellExecute = false };
        foreach (var a in new[] { dll, "platform", "--port", Text(Port), "--control-port", Text(ControlPort), "--state", State }.Concat(_extraArguments))
            info.ArgumentList.Add(a);
        info.Environment["FAAST_HOME"] = _home;
        // The platform's storage is its own Azurite; an operator's variables must not change what is measured.
        foreach (var name in new[] { "AzureWebJobsStorage", "FAAST_PEER_SECRET", "FAAST_ADMIN_KEY", "FAAST_ENFORCE_KEYS", "OTEL_EXPORTER_OTLP_ENDPOINT" })
            info.Environment.Remove(name);
        var process = System.Diagnostics.Process.Start(info) ?? throw new InvalidOperationException("dotnet did not start");
        Process = process;
        process.OutputDataReceived += (_, e) => Keep(e.Data);
        process.ErrorDataReceived += (_, e) => Keep(e.Data);
        process.BeginOutputReadLine();
        process.BeginErrorReadLine();
        var deadline = DateTime.UtcNow + timeout;
        while (!_output.Any(l => l.StartsWith("faast: platform at ", StringComparison.Ordinal)))
        {
            if (process.HasExited)
                throw new InvalidOperationException($"the platform exited with {process.ExitCode} while starting:\n{string.Join('\n', _output.TakeLast(40))}");
            if (DateTime.UtcNow > deadline)
                throw new TimeoutException($"the platform did not start within {timeout.TotalSeconds:0} s:\n{string.Join('\n', _output.TakeLast(40))}");
            await Task.Delay(100);
        }
    }

    private void Keep(string? line)
    {
        if (line is null)
            return;
        _output.Enqueue(line);
        Interlocked.Increment(ref _lines);
        if (StorageEndpoint is null && StorageLine().Match(line) is { Success: true } m)
            StorageEndpoint = m.Groups[1].Value;
        while (_output.Count > 20000)
            _output.TryDequeue(out _);
    }

    /// <summary>Unhandled exceptions and errors in the platform's output after <paramref name="mark"/>.</summary>
    public IReadOnlyList<string> ErrorsSince(long mark) =>
        LinesSince(mark).Where(l => l.Contains("Unhandled exception", StringComparison.OrdinalIgnoreCase)
            || l.Contains("fail: Microsoft.AspNetCore", StringComparison.Ordinal)).ToArray();

    /// <summary>SIGTERM, then a kill after <paramref name="grace"/>; the instances end with it (tied to it by stdin).</summary>
    public async Task StopAsync(TimeSpan grace)
    {
        if (Process is not { } p || p.HasExited)
            return;
        try
        {
            System.Diagnostics.Process.Start("kill", ["-TERM", Text(p.Id)])?.WaitForExit();
            using var timeout = new CancellationTokenSource(grace);
            await p.WaitForExitAsync(timeout.Token);
        }
        catch (OperationCanceledException)
        {
            p.Kill(entireProcessTree: true);
            await p.WaitForExitAsync();
        }
    }

    public async ValueTask DisposeAsync()
    {
        try
        {
            await StopAsync(TimeSpan.FromSeconds(20));
        }
        finally
        {
            if (Process is { HasExited: false } p)
                p.Kill(entireProcessTree: true);
            Process?.Dispose();
            KillProcessesMentioning(State);
        }
    }

    /// <summary>Whatever still runs with the state folder on its command line (instances of a crashed or killed platform).</summary>
    public static void KillProcessesMentioning(string path)
    {
        foreach (var dir in Directory.EnumerateDirectories("/proc").Where(d => int.TryParse(Path.GetFileName(d), out _)))
        {
            try
            {
                var pid = int.Parse(Path.GetFileName(dir), CultureInfo.InvariantCulture);
                if (pid != Environment.ProcessId && File.ReadAllText(Path.Combine(dir, "cmdline")).Contains(path, StringComparison.Ordinal))
                    System.Diagnostics.Process.GetProcessById(pid).Kill(entireProcessTree: true);
            }
            catch (Exception e) when (e is IOException or UnauthorizedAccessException or ArgumentException or InvalidOperationException or System.ComponentModel.Win32Exception)
            {
                // ended meanwhile
            }
        }
    }

    public static int FreePort()
    {
        using var l = new TcpListener(System.Net.IPAddress.Loopback, 0);
        l.Start();
        return ((System.Net.IPEndPoint)l.LocalEndpoint).Port;
    }

    private static string Text(int n) => n.ToString(CultureInfo.InvariantCulture);

    [GeneratedRegex(@"storage (https?://\S+?)/?(?:\s|$)")]
    private static partial Regex StorageLine();
}
