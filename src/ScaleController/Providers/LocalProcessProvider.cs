using System.Collections.Concurrent;
using System.Diagnostics;

namespace FaaST.ScaleController.Providers;

/// <summary>Settings of <see cref="LocalProcessProvider"/>.</summary>
public sealed record LocalProcessOptions
{
    /// <summary>FaaST.Runtime.dll. Default: <see cref="FaaSTHome.RuntimeDll"/>.</summary>
    public string RuntimeDll { get; init; } = DefaultRuntimeDll();

    /// <summary>The address instances listen on (HTTP and peers). Default 127.0.0.1: only the frontend reaches them.</summary>
    public string ListenAddress { get; init; } = "127.0.0.1";

    /// <summary>How long an instance has to load its app and write its ready file. Default 90 s.</summary>
    public TimeSpan StartupTimeout { get; init; } = TimeSpan.FromSeconds(90);

    /// <summary>Receives each output line of an instance with the instance's label (e.g. "python-app v1 #2").</summary>
    public Action<string, string>? Output { get; init; }

    /// <summary>
    /// Instances end with the platform process, also when it is SIGKILLed (their standard input is a pipe the
    /// platform holds; the host stops at its end). True when the platform owns what the instances need (the Azurite
    /// it started); false (default) lets instances outlive a crashed platform, for the next one to take over.
    /// </summary>
    public bool TiedToPlatform { get; init; }

    /// <summary>
    /// Where instances write their ready files (--ready-file): a folder only this process's user may enter (0700,
    /// checked; created when missing). Null (default): a fresh private folder under the temporary folder, deleted
    /// with the provider. The platform uses STATE/run.
    /// </summary>
    public string? RunDirectory { get; init; }

    /// <summary>Wraps the instance's command line (e.g. `ip netns exec NS`), for the benchmarks' shaped network.</summary>
    public IReadOnlyList<string> CommandPrefix { get; init; } = [];

    internal static string DefaultRuntimeDll() => FaaSTHome.RuntimeDll();
}

/// <summary>
/// Instances as local processes (<see cref="LaunchedHost"/>): each is the runtime host (<c>dotnet FaaST.Runtime.dll APPDIR --port 0</c>), on a
/// free loopback port it reports itself. Ready means the host wrote its ready file (<c>--ready-file</c>, in
/// <see cref="LocalProcessOptions.RunDirectory"/>), which it does once its lifecycle reached Started (workers up,
/// functions loaded, peers joined), with its id, addresses and pid; never what it prints, which carries the
/// functions' own output. Stopping sends SIGTERM, which makes the host drain
/// (503 to new requests, in-flight ones finish), leave membership and exit; a host still running at the
/// deadline is killed.
/// </summary>
public sealed partial class LocalProcessProvider(LocalProcessOptions options) : IInstanceProvider
{
    private readonly ConcurrentDictionary<string, Tracked> _running = new();
    // The starts under way: disposing cancels them (each kills its process) and waits for them.
    private readonly ConcurrentDictionary<Task<LaunchedHost>, byte> _starting = new();
    private readonly CancellationTokenSource _disposing = new();
    private volatile bool _disposed;
    private int _sequence;
    private string? _runDirectory;
    private bool _ownsRunDirectory;

    public event Action<InstanceHandle, string>? Exited;

    /// <summary>The running instances' processes (tests kill them to play a crash).</summary>
    public IReadOnlyDictionary<string, Process> Processes => _running.ToDictionary(p => p.Key, p => p.Value.Process);

    public async Task<InstanceHandle> StartAsync(InstanceSpec spec, CancellationToken ct)
    {
        var n = Interlocked.Increment(ref _sequence);
        // The platform names the instance, so that it finds the instance in the membership view and in its logs.
        var id = $"{spec.App}-v{spec.Version}-{n}-{Guid.NewGuid().ToString("N")[..8]}";
        var label = $"{spec.App} v{spec.Version} #{n}";
        // Tied to the platform: all instances (the platform's own Azurite), or this app's (its Azurite is the platform's).
        var tied = options.TiedToPlatform || spec.Environment.GetValueOrDefault(HostCommandLine.ExitWithStdinVariable) == "1";
        // An allow-list of the platform's environment, not all of it: the operator's AzureWebJobsStorage, a secret in
        // their shell must not reach a tenant's instance (and would override its local.settings.json there).
        var environment = new Dictionary<string, string>(InstanceEnvironment(Environment.GetEnvironmentVariables()));
        if (tied)
            environment[HostCommandLine.ExitWithStdinVariable] = "1";
        foreach (var (name, value) in spec.Environment)
            environment[name] = value;
        var launch = new HostLaunchOptions
        {
            RuntimeDll = options.RuntimeDll,
            AppDirectory = spec.AppDirectory,
            InstanceId = id,
            Arguments = ["--port", "0", "--listen", options.ListenAddress, .. spec.Arguments],
            Wrapper = options.CommandPrefix,
            Environment = environment,
            InheritEnvironment = false,
            HoldStandardInput = tied,
            ReadyDirectory = RunDirectory(),
            Label = $"instance {label}",
            StartupTimeout = options.StartupTimeout,
            // An instance's output carries its workers' (tenants' code): shown escaped, on the terminal and in errors.
            Output = options.Output is { } output ? line => output(label, LogText.EscapeOutput(line)) : null,
        };
        var started = DateTimeOffset.UtcNow;
        ObjectDisposedException.ThrowIf(_disposed, this);
        using var starting = CancellationTokenSource.CreateLinkedTokenSource(ct, _disposing.Token);
        // Tracked from its first moment: a provider disposed while an instance starts must not leave it running.
        var start = LaunchedHost.StartAsync(launch, starting.Token);
        _starting[start] = 0;
        LaunchedHost host;
        try
        {
            host = await start;
        }
        catch (HostStartException e)
        {
            throw new InstanceStartException(e.Failure switch
            {
                HostStartFailure.TimedOut => $"instance {label} did not start within {options.StartupTimeout.TotalSeconds:0} s; its last lines:{Environment.NewLine}  {string.Join(Environment.NewLine + "  ", e.LastLines)}",
                HostStartFailure.BadReadyFile => $"instance {label} wrote a ready file the platform cannot use: {e.Detail}",
                _ => e.Message,
            });
        }
        catch (OperationCanceledException) when (_disposing.IsCancellationRequested && !ct.IsCancellationRequested)
        {
            throw new ObjectDisposedException(nameof(LocalProcessProvider), $"the provider was disposed while instance {label} started; it was stopped");
        }
        finally
        {
            _starting.TryRemove(start, out _);
        }
        var report = host.Ready;
        var handle = new InstanceHandle(id, spec.App, spec.Version, report.Http, report.Peer, host.Process.Id, started) { LoadTime = host.LoadTime };
        var tracked = new Tracked(handle, host.Process, host);
        _running[id] = tracked;
        if (_disposed)
        {
            await StopAsync(handle, TimeSpan.FromSeconds(5), CancellationToken.None);
            throw new ObjectDisposedException(nameof(LocalProcessProvider), $"the provider was disposed while instance {label} started; it was stopped");
        }
        _ = WatchAsync(tracked);
        return handle;
    }

    /// <summary>
    /// Takes over an instance whose (signed) record a previous platform process left, only when the process is
    /// provably that instance: /proc/PID/exe is the dotnet this platform runs, its uid is the platform's, its command
    /// line is the runtime dll with <c>--instance-id ID</c>, and it answers a vote query signed with the app's peer
    /// credentials (only the app's instances hold its secret) and /admin/host/status as that instance. Anything else
    /// is not adopted and left alone: the caller stops only what was adopted.
    /// </summary>
    public async Task<InstanceHandle?> AdoptAsync(InstanceHandle recorded, FaaST.Peers.PeerAuth credentials, CancellationToken ct)
    {
        ArgumentNullException.ThrowIfNull(recorded);
        ArgumentNullException.ThrowIfNull(credentials);
        void Refused(string why) => options.Output?.Invoke($"{recorded.App} {recorded.Id}", $"not taken over (pid {recorded.ProcessId}): {why}");
        Process process;
        try
        {
            process = Process.GetProcessById(recorded.ProcessId);
            // The pid may have been reused since, or the record point at another program: all of these must hold.
            var exe = new FileInfo($"/proc/{recorded.ProcessId}/exe").LinkTarget;
            var own = new FileInfo("/proc/self/exe").LinkTarget;
            if (exe is null || exe != own)
            {
                Refused($"its executable is {exe ?? "unknown"}, not {own}");
                return null;
            }
            if (UidLine(recorded.ProcessId) is not { } uid || uid != UidLine(Environment.ProcessId))
            {
                Refused("it runs as another user than the platform");
                return null;
            }
            var args = (await File.ReadAllTextAsync($"/proc/{recorded.ProcessId}/cmdline", ct)).Split('\0');
            var at = Array.IndexOf(args, "--instance-id");
            if (!args.Contains(options.RuntimeDll, StringComparer.Ordinal) || at < 0 || at + 1 >= args.Length || args[at + 1] != recorded.Id)
            {
                Refused($"its command line is not {options.RuntimeDll} with --instance-id {recorded.Id}");
                return null;
            }
        }
        catch (Exception e) when (e is ArgumentException or IOException or UnauthorizedAccessException or InvalidOperationException)
        {
            return null; // not running any more (or not ours to inspect)
        }
        if (recorded.PeerAddress is null)
        {
            Refused("it has no peer endpoint to prove it holds the app's peer secret");
            return null;
        }
        try
        {
            // A signed peer call: only an instance holding the app's peer secret answers it.
            using var votes = new Control.GrpcVoteClient(credentials, TimeProvider.System);
            using var deadline = CancellationTokenSource.CreateLinkedTokenSource(ct);
            deadline.CancelAfter(TimeSpan.FromSeconds(10));
            await votes.GetVoteAsync(new Control.VoteEndpoint(recorded.Id, recorded.PeerAddress), new Control.VoteQuery(recorded.App, 1, 0), deadline.Token);
        }
        catch (Exception e) when (e is Grpc.Core.RpcException or HttpRequestException or OperationCanceledException or InvalidOperationException)
        {
            Refused($"it did not answer a vote query signed with the app's peer secret: {e.Message}");
            return null;
        }
        // ...and answer as itself on its address.
        try
        {
            using var http = new HttpClient { Timeout = TimeSpan.FromSeconds(5) };
            using var status = System.Text.Json.JsonDocument.Parse(await http.GetStringAsync(new Uri(recorded.BaseAddress, "admin/host/status"), ct));
            if (!status.RootElement.TryGetProperty("instance", out var self) || self.ValueKind != System.Text.Json.JsonValueKind.Object
                || self.GetProperty("id").GetString() != recorded.Id)
                return null;
        }
        catch (Exception e) when (e is HttpRequestException or TaskCanceledException or System.Text.Json.JsonException or KeyNotFoundException)
        {
            return null;
        }
        var tracked = new Tracked(recorded, process, null);
        if (!_running.TryAdd(recorded.Id, tracked))
            return _running[recorded.Id].Handle;
        _ = WatchAsync(tracked);
        return recorded;
    }

    /// <summary>The "Uid:" line of /proc/PID/status (real, effective, saved and file-system uid), or null.</summary>
    private static string? UidLine(int pid) =>
        File.ReadLines($"/proc/{pid}/status").FirstOrDefault(l => l.StartsWith("Uid:", StringComparison.Ordinal));

    public async Task StopAsync(InstanceHandle instance, TimeSpan deadline, CancellationToken ct)
    {
        if (!_running.TryGetValue(instance.Id, out var tracked))
            return;
        tracked.Stopping = true;
        // SIGTERM: the host's own drain (lifecycle Draining: 503 with Retry-After to new requests, in-flight
        // invocations finish), then it leaves membership and exits. The host gives in-flight work 5 s, then stops
        // workers and flushes; allow for that beyond the deadline before killing it.
        if (tracked.Launched is { } launched)
        {
            await launched.StopAsync(deadline + TimeSpan.FromSeconds(10), ct);
            await launched.DisposeAsync();
        }
        else
        {
            await StopAdoptedAsync(tracked.Process, deadline + TimeSpan.FromSeconds(10), ct);
        }
        _running.TryRemove(instance.Id, out _);
        tracked.Process.Dispose();
    }

    /// <summary>An instance a previous platform started (not this process's child): SIGTERM, then kill at the deadline.</summary>
    private static async Task StopAdoptedAsync(Process process, TimeSpan deadline, CancellationToken ct)
    {
        if (process.HasExited)
            return;
        LaunchedHost.Terminate(process);
        try
        {
            await process.WaitForExitAsync(ct).WaitAsync(deadline, ct);
        }
        catch (TimeoutException)
        {
            Kill(process);
            await process.WaitForExitAsync(CancellationToken.None);
        }
    }

    private async Task WatchAsync(Tracked tracked)
    {
        try
        {
            await tracked.Process.WaitForExitAsync();
        }
        catch (InvalidOperationException)
        {
            return; // disposed after a stop
        }
        if (!tracked.Stopping && _running.TryRemove(tracked.Handle.Id, out _))
        {
            var code = tracked.Process.ExitCode;
            Exited?.Invoke(tracked.Handle, code is 137 or -1 ? $"killed (exit code {code})" : $"exited with code {code}");
        }
    }

    /// <summary>
    /// The variables of the platform's environment an instance starts with: PATH, LANG, LC_*, TZ, DOTNET_* (the runtime
    /// finds itself and its settings), FAAST_HOME (the checkout: workers, Azurite), TMPDIR and HOME. Everything else an
    /// instance gets is the spec's (peer secret, development storage, the controller's address).
    /// </summary>
    internal static IEnumerable<KeyValuePair<string, string>> InstanceEnvironment(System.Collections.IDictionary platform)
    {
        foreach (System.Collections.DictionaryEntry e in platform)
            if (e.Key is string name && e.Value is string value && IsAllowed(name))
                yield return new(name, value);

        static bool IsAllowed(string name) =>
            name is "PATH" or "LANG" or "TZ" or "FAAST_HOME" or "TMPDIR" or "HOME"
            || name.StartsWith("LC_", StringComparison.Ordinal) || name.StartsWith("DOTNET_", StringComparison.Ordinal);
    }

    private static void Kill(Process process)
    {
        try
        {
            if (!process.HasExited)
                process.Kill(entireProcessTree: true);
        }
        catch (InvalidOperationException)
        {
            // it exited meanwhile
        }
    }

    /// <summary>Stops every instance it started (SIGTERM, then kill at 30 s).</summary>
    public async ValueTask DisposeAsync()
    {
        _disposed = true;
        await _disposing.CancelAsync();
        foreach (var start in _starting.Keys)
        {
            try
            {
                await start;
            }
            catch (Exception e) when (e is OperationCanceledException or HostStartException or InvalidOperationException or IOException)
            {
                // cancelled: its process is killed; the start's caller hears why
            }
        }
        var all = _running.Values.ToArray();
        await Task.WhenAll(all.Select(t => StopAsync(t.Handle, TimeSpan.FromSeconds(20), CancellationToken.None)));
        _disposing.Dispose();
        if (_ownsRunDirectory && _runDirectory is { } run)
        {
            try
            {
                Directory.Delete(run, recursive: true);
            }
            catch (Exception e) when (e is IOException or UnauthorizedAccessException)
            {
                // best effort: an empty private folder in the temporary folder
            }
        }
    }

    private sealed class Tracked(InstanceHandle handle, Process process, LaunchedHost? launched)
    {
        public InstanceHandle Handle { get; } = handle;

        public Process Process { get; } = process;

        /// <summary>Null for an adopted instance (another platform process started it).</summary>
        public LaunchedHost? Launched { get; } = launched;

        public volatile bool Stopping;
    }

    /// <summary>The ready files' folder: created 0700 on first use (an existing one is made 0700; a link is refused).</summary>
    private string RunDirectory()
    {
        if (Volatile.Read(ref _runDirectory) is { } known)
            return known;
        lock (_running)
        {
            if (_runDirectory is not null)
                return _runDirectory;
            string dir;
            if (options.RunDirectory is { } configured && !OperatingSystem.IsWindows())
            {
                dir = Path.GetFullPath(configured);
                Directory.CreateDirectory(dir, UnixFileMode.UserRead | UnixFileMode.UserWrite | UnixFileMode.UserExecute);
                var info = new DirectoryInfo(dir);
                if (info.LinkTarget is not null)
                    throw new InvalidOperationException($"{dir}: the instances' run folder must not be a link");
                // 0700 whatever it was (only its owner, or root, may change that: another user's folder fails here).
                File.SetUnixFileMode(dir, UnixFileMode.UserRead | UnixFileMode.UserWrite | UnixFileMode.UserExecute);
            }
            else
            {
                dir = Directory.CreateTempSubdirectory("faast-run-").FullName; // 0700, a fresh random name
                _ownsRunDirectory = true;
            }
            Volatile.Write(ref _runDirectory, dir);
            return dir;
        }
    }
}

/// <summary>An instance did not start: why, with its last output lines.</summary>
public sealed class InstanceStartException(string message) : Exception(message);
