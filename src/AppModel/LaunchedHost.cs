using System.Collections.Concurrent;
using System.Diagnostics;
using System.Globalization;

namespace FaaST.AppModel;

/// <summary>How <see cref="LaunchedHost.StartAsync"/> starts one runtime host process.</summary>
public sealed record HostLaunchOptions
{
    /// <summary>FaaST.Runtime.dll.</summary>
    public required string RuntimeDll { get; init; }

    public required string AppDirectory { get; init; }

    /// <summary>The host's arguments after the app directory (--port, --workers, ...); the launcher adds --ready-file.</summary>
    public IReadOnlyList<string> Arguments { get; init; } = [];

    /// <summary>
    /// Passed as --instance-id; the ready file must then name this instance. Null: the host names itself and
    /// the ready file's name is taken as it is.
    /// </summary>
    public string? InstanceId { get; init; }

    /// <summary>
    /// A command the host is started through, which must end by exec-ing its arguments (so the process the launcher
    /// holds becomes the host, and the ready file's pid is that process's): e.g. <c>ip netns exec NS</c>, or
    /// <c>sh -c 'echo $$ &gt; "$0" &amp;&amp; exec "$@"' PROCS</c> to start inside a cgroup.
    /// </summary>
    public IReadOnlyList<string> Wrapper { get; init; } = [];

    /// <summary>Set on top of the starting environment (which <see cref="InheritEnvironment"/> decides).</summary>
    public IReadOnlyDictionary<string, string> Environment { get; init; } = new Dictionary<string, string>();

    /// <summary>True (default): the host starts with this process's environment; false: with <see cref="Environment"/> only.</summary>
    public bool InheritEnvironment { get; init; } = true;

    /// <summary>The host's standard input is a pipe this process holds (with FAAST_EXIT_WITH_STDIN=1 the host ends with it).</summary>
    public bool HoldStandardInput { get; init; }

    /// <summary>
    /// Where the ready file goes: an existing folder only this process's user may enter (the caller checks that).
    /// Null (default): a fresh private folder (0700, random name) under the temporary folder, deleted with the host.
    /// </summary>
    public string? ReadyDirectory { get; init; }

    /// <summary>Names the host in errors, e.g. "instance python-app v1 #2"; default "the host of APPDIR".</summary>
    public string? Label { get; init; }

    /// <summary>How long the host has to write its ready file. Default 90 s.</summary>
    public TimeSpan StartupTimeout { get; init; } = TimeSpan.FromSeconds(90);

    /// <summary>How long disposing the host waits after SIGTERM before it kills the process tree. Default 20 s.</summary>
    public TimeSpan StopGrace { get; init; } = TimeSpan.FromSeconds(20);

    /// <summary>Receives each line the host writes to stdout or stderr, as written (it carries the functions' output: escape it before showing it).</summary>
    public Action<string>? Output { get; init; }
}

/// <summary>Why a host did not become ready.</summary>
public enum HostStartFailure
{
    /// <summary>The process ended before it wrote its ready file.</summary>
    Exited,

    /// <summary>No ready file within the start timeout; the process (tree) was killed.</summary>
    TimedOut,

    /// <summary>The ready file is malformed, or names another instance or process; the process was killed.</summary>
    BadReadyFile,
}

/// <summary>A host did not start: why, with its exit code (when it exited) and its last output lines (escaped).</summary>
public sealed class HostStartException(HostStartFailure failure, string message, int? exitCode, IReadOnlyList<string> lastLines, string? detail = null)
    : Exception(message)
{
    public HostStartFailure Failure { get; } = failure;

    public int? ExitCode { get; } = exitCode;

    public IReadOnlyList<string> LastLines { get; } = lastLines;

    /// <summary>What is wrong with the ready file (<see cref="HostStartFailure.BadReadyFile"/>).</summary>
    public string? Detail { get; } = detail;
}

/// <summary>
/// One runtime host process (<c>dotnet FaaST.Runtime.dll APPDIR ... --ready-file F</c>) that reported itself ready.
/// Ready means its ready file (<see cref="ReadyFile"/>), which the host writes once its lifecycle reached Started,
/// in a folder only this process's user may enter; never what the host prints, which carries the functions' own
/// output. Disposing stops it: SIGTERM (the host drains, stops its workers and removes its /dev/shm segments), then,
/// after a grace period, the whole process tree is killed.
/// </summary>
public sealed class LaunchedHost : IAsyncDisposable
{
    private const int TailLines = 20;
    private readonly ConcurrentQueue<string> _tail;
    private readonly string _readyFile;
    private readonly string? _ownedDirectory;
    private readonly TimeSpan _stopGrace;
    private int _disposed;

    private LaunchedHost(Process process, ReadyFile ready, TimeSpan loadTime, ConcurrentQueue<string> tail, string readyFile, string? ownedDirectory, TimeSpan stopGrace)
    {
        _stopGrace = stopGrace;
        Process = process;
        Ready = ready;
        LoadTime = loadTime;
        _tail = tail;
        _readyFile = readyFile;
        _ownedDirectory = ownedDirectory;
    }

    /// <summary>The host's report: its instance id, HTTP and peer addresses, pid.</summary>
    public ReadyFile Ready { get; }

    public Process Process { get; }

    /// <summary>From starting the process to reading its ready file.</summary>
    public TimeSpan LoadTime { get; }

    /// <summary>The host's last output lines, escaped (for error messages).</summary>
    public IReadOnlyList<string> LastLines => _tail.ToArray();

    /// <summary>
    /// Starts the host and waits for its ready file, racing the process's exit and the start timeout. Throws
    /// <see cref="HostStartException"/> naming the host and saying why, with its last lines; whatever the outcome
    /// other than ready, the process is gone when this returns.
    /// </summary>
    public static async Task<LaunchedHost> StartAsync(HostLaunchOptions options, CancellationToken ct = default)
    {
        ArgumentNullException.ThrowIfNull(options);
        if (!File.Exists(options.RuntimeDll))
            throw new FileNotFoundException($"the runtime {options.RuntimeDll} does not exist; build it first (./faast setup)", options.RuntimeDll);
        var label = options.Label ?? $"the host of {options.AppDirectory}";
        var owned = options.ReadyDirectory is null ? Directory.CreateTempSubdirectory("faast-ready-").FullName : null; // 0700, a fresh random name
        var readyFile = Path.Combine(options.ReadyDirectory ?? owned!, (options.InstanceId ?? Guid.NewGuid().ToString("N")) + ".ready");
        var tail = new ConcurrentQueue<string>();
        Process? process = null;
        try
        {
            var info = StartInfo(options, readyFile);
            var clock = Stopwatch.StartNew();
            process = Process.Start(info) ?? throw new InvalidOperationException($"{info.FileName} did not start");
            void OnLine(string? line)
            {
                if (line is null)
                    return;
                tail.Enqueue(LogText.EscapeOutput(line));
                while (tail.Count > TailLines)
                    tail.TryDequeue(out _);
                options.Output?.Invoke(line);
            }
            process.OutputDataReceived += (_, e) => OnLine(e.Data);
            process.ErrorDataReceived += (_, e) => OnLine(e.Data);
            process.BeginOutputReadLine();
            process.BeginErrorReadLine();
            var ready = await WaitForReadyAsync(process, readyFile, options, label, tail, ct);
            // Read: what it says is kept here, and a folder of ready files holds only hosts still starting.
            Cleanup(readyFile, null);
            return new LaunchedHost(process, ready, clock.Elapsed, tail, readyFile, owned, options.StopGrace);
        }
        catch
        {
            if (process is not null)
            {
                await KillAsync(process);
                process.Dispose();
            }
            Cleanup(readyFile, owned);
            throw;
        }
    }

    private static ProcessStartInfo StartInfo(HostLaunchOptions options, string readyFile)
    {
        var command = options.Wrapper.Concat(["dotnet", options.RuntimeDll, options.AppDirectory]).ToList();
        if (options.InstanceId is { } id)
            command.AddRange(["--instance-id", id]);
        command.AddRange(options.Arguments);
        command.AddRange(["--ready-file", readyFile]);
        var info = new ProcessStartInfo(command[0])
        {
            RedirectStandardOutput = true,
            RedirectStandardError = true,
            RedirectStandardInput = options.HoldStandardInput,
            UseShellExecute = false,
        };
        foreach (var a in command.Skip(1))
            info.ArgumentList.Add(a);
        if (!options.InheritEnvironment)
            info.Environment.Clear();
        foreach (var (name, value) in options.Environment)
            info.Environment[name] = value;
        return info;
    }

    private static async Task<ReadyFile> WaitForReadyAsync(Process process, string path, HostLaunchOptions options, string label,
        ConcurrentQueue<string> tail, CancellationToken ct)
    {
        string Lines() => $"; its last lines:{System.Environment.NewLine}  {string.Join(System.Environment.NewLine + "  ", tail)}";
        using var waiting = CancellationTokenSource.CreateLinkedTokenSource(ct);
        waiting.CancelAfter(options.StartupTimeout);
        var exited = process.WaitForExitAsync(waiting.Token);
        var appeared = ReadyFileWatch.WaitAsync(path, waiting.Token);
        try
        {
            if (await Task.WhenAny(appeared, exited) != appeared || appeared.IsCanceled)
            {
                await exited; // throws when it was the timeout or the caller
                throw new HostStartException(HostStartFailure.Exited, $"{label} exited with code {process.ExitCode} while starting{Lines()}",
                    process.ExitCode, tail.ToArray());
            }
        }
        catch (OperationCanceledException) when (!ct.IsCancellationRequested)
        {
            await KillAsync(process);
            throw new HostStartException(HostStartFailure.TimedOut,
                $"{label} did not start within {options.StartupTimeout.TotalSeconds:0.#} s and was killed{Lines()}", null, tail.ToArray());
        }
        finally
        {
            await waiting.CancelAsync(); // ends the file watch when the exit came first
        }
        try
        {
            var report = ReadyFile.Read(path);
            if (options.InstanceId is { } id && report.Instance != id)
                throw new InvalidDataException($"{path}: instance is \"{report.Instance}\", not \"{id}\"");
            if (report.Pid != process.Id)
                throw new InvalidDataException($"{path}: pid is {report.Pid}, not the host's {process.Id}");
            return report;
        }
        catch (InvalidDataException e)
        {
            throw new HostStartException(HostStartFailure.BadReadyFile, $"{label} wrote a ready file that cannot be used: {e.Message}", null, tail.ToArray(), e.Message);
        }
    }

    /// <summary>SIGTERM, as a supervisor sends it; waits up to <paramref name="grace"/> for the exit, then kills the tree. The exit code.</summary>
    public async Task<int> StopAsync(TimeSpan grace, CancellationToken ct = default)
    {
        if (!Process.HasExited)
        {
            Terminate(Process);
            try
            {
                await Process.WaitForExitAsync(ct).WaitAsync(grace, ct);
            }
            catch (TimeoutException)
            {
                await KillAsync(Process);
            }
        }
        return Process.ExitCode;
    }

    /// <summary>SIGKILL to the host and everything it started (a crash: no drain, no deregistration).</summary>
    public Task KillAsync() => KillAsync(Process);

    /// <summary>Sends SIGTERM to <paramref name="process"/> (through kill(1): .NET sends only SIGKILL).</summary>
    public static void Terminate(Process process)
    {
        ArgumentNullException.ThrowIfNull(process);
        try
        {
            using var kill = Process.Start("kill", ["-TERM", process.Id.ToString(CultureInfo.InvariantCulture)]);
            kill?.WaitForExit();
        }
        catch (System.ComponentModel.Win32Exception)
        {
            process.Kill(entireProcessTree: true);
        }
    }

    private static async Task KillAsync(Process process)
    {
        try
        {
            if (!process.HasExited)
                process.Kill(entireProcessTree: true);
            await process.WaitForExitAsync(CancellationToken.None);
        }
        catch (InvalidOperationException)
        {
            // it exited meanwhile, or was never started
        }
    }

    private static void Cleanup(string readyFile, string? ownedDirectory)
    {
        try
        {
            File.Delete(readyFile);
            File.Delete(readyFile + ".tmp");
            if (ownedDirectory is not null)
                Directory.Delete(ownedDirectory, recursive: true);
        }
        catch (Exception e) when (e is IOException or UnauthorizedAccessException)
        {
            // best effort: a private folder's leftover of a unique name
        }
    }

    /// <summary>Stops the host (SIGTERM, then kill after <see cref="HostLaunchOptions.StopGrace"/>) and deletes its ready file (and folder, when the launcher made it).</summary>
    public async ValueTask DisposeAsync()
    {
        if (Interlocked.Exchange(ref _disposed, 1) != 0)
            return;
        try
        {
            await StopAsync(_stopGrace);
        }
        catch (InvalidOperationException)
        {
            // the process object no longer tracks a process
        }
        Process.Dispose();
        Cleanup(_readyFile, _ownedDirectory);
    }
}
