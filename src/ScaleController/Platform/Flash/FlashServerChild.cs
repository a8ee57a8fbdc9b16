using System.Diagnostics;
using System.Net;
using System.Net.Sockets;

namespace FaaST.ScaleController.Platform.Flash;

/// <summary>
/// The flash server process the platform runs for its apps (`FaaST.FlashBackend serve`): state and device under
/// STATE/flash (0700), a free loopback port at first start and the same port at every restart (the instances keep the
/// address they were given), restarted when it dies until the platform stops, stopped with SIGTERM (it drains) and
/// SIGKILL after <see cref="StopGrace"/>.
/// <para>The platform holds the port for the platform's lifetime (<see cref="SharedPort"/>: a socket bound to it and
/// never listening; the server binds it too, with --reuse-port). Before, a dead server's port was free until the
/// restart, and a CI run saw the restart fail ("address already in use": another process, or an outgoing connection's
/// local port, had taken it meanwhile); the restart then waited, with an error logged each try, until the port came
/// free, or forever if it never did.</para>
/// </summary>
internal sealed class FlashServerChild(PlatformOptions options, ILogger logger) : IAsyncDisposable
{
    /// <summary>How long a started server may take to write its ready file (it preallocates the device and recovers
    /// the log first: seconds on a 1 GiB file, more on a busy machine).</summary>
    private static readonly TimeSpan ReadyTimeout = TimeSpan.FromSeconds(120);

    /// <summary>How long a stopping server may drain before it is killed.</summary>
    private static readonly TimeSpan StopGrace = TimeSpan.FromSeconds(10);

    /// <summary>The first wait before a restart after a failed one; doubled up to 30 s.</summary>
    private static readonly TimeSpan RestartDelay = TimeSpan.FromMilliseconds(500);

    private readonly SemaphoreSlim _gate = new(1, 1);
    private Process? _process;
    private Socket? _port;
    private volatile bool _stopping;

    public string Directory => Path.Combine(options.StateDirectory, "flash");

    public string StateDirectory => Path.Combine(Directory, "state");

    public string DevicePath => Path.Combine(Directory, "device");

    private string ReadyFile => Path.Combine(Directory, "ready");

    /// <summary>The profile the server is started with (<see cref="PlatformOptions.FlashDeviceProfile"/>, else
    /// STATE/flash/device-profile.json if it exists), or null: the server's default device shape.</summary>
    public string? DeviceProfile =>
        options.FlashDeviceProfile ?? (File.Exists(Path.Combine(Directory, "device-profile.json")) ? Path.Combine(Directory, "device-profile.json") : null);

    /// <summary>`serve`'s arguments: the device, state and port under STATE/flash, and the device profile if any.</summary>
    internal IReadOnlyList<string> ServeArguments(string dll)
    {
        var args = new List<string>
        {
            dll, "serve", "--device", DevicePath, "--capacity", options.FlashCapacity.ToString(System.Globalization.CultureInfo.InvariantCulture),
            "--state", StateDirectory, "--listen", $"127.0.0.1:{Port}", "--reuse-port", "--ready-file", ReadyFile,
        };
        if (DeviceProfile is { } profile)
        {
            if (!File.Exists(profile))
                throw new FlashServerException($"the flash device profile {profile} (PlatformOptions.FlashDeviceProfile) does not exist; write it with `./faast flash fit --device PATH --out {profile}`");
            args.Add("--device-profile");
            args.Add(profile);
        }
        return args;
    }

    /// <summary>The loopback port the platform holds for the server, taken at the first start.</summary>
    private int Port => ((IPEndPoint)(_port ?? throw new InvalidOperationException("the flash port is not taken yet")).LocalEndPoint!).Port;

    /// <summary>The server's address, once started.</summary>
    public Uri? Address { get; private set; }

    /// <summary>The running process's id, or null.</summary>
    public int? Pid => _process is { HasExited: false } p ? p.Id : null;

    /// <summary>The admin key the server left in its state folder (read at each use: it is the server's, not ours).</summary>
    public string AdminKey()
    {
        var path = Path.Combine(StateDirectory, "keys", "admin");
        try
        {
            return File.ReadAllText(path).Trim();
        }
        catch (Exception e) when (e is IOException or UnauthorizedAccessException)
        {
            throw new FlashServerException($"the flash server's admin key {path} cannot be read: {e.Message}", e);
        }
    }

    /// <summary>Starts the server unless it runs; returns its address.</summary>
    public async Task<Uri> EnsureStartedAsync(CancellationToken ct)
    {
        await _gate.WaitAsync(ct);
        try
        {
            if (_process is { HasExited: false } && Address is { } running)
                return running;
            ObjectDisposedException.ThrowIf(_stopping, this);
            return await StartAsync(ct);
        }
        finally
        {
            _gate.Release();
        }
    }

    private async Task<Uri> StartAsync(CancellationToken ct)
    {
        // 0700: the server's keys live under it (the server makes its own state folder 0700 too).
        if (OperatingSystem.IsWindows())
            throw new FlashServerException("the flash server needs Linux (O_DIRECT)");
        System.IO.Directory.CreateDirectory(Directory, UnixFileMode.UserRead | UnixFileMode.UserWrite | UnixFileMode.UserExecute);
        File.SetUnixFileMode(Directory, UnixFileMode.UserRead | UnixFileMode.UserWrite | UnixFileMode.UserExecute);
        File.Delete(ReadyFile);
        _port ??= SharedPort.Hold();
        var dll = options.FlashServerDll ?? DefaultDll();
        if (!File.Exists(dll))
            throw new FlashServerException($"the flash server {dll} is not built (dotnet build src/FlashBackend -c Release)");
        var start = new ProcessStartInfo("dotnet") { RedirectStandardOutput = true, RedirectStandardError = true };
        foreach (var a in ServeArguments(dll))
            start.ArgumentList.Add(a);
        var process = Process.Start(start) ?? throw new FlashServerException("dotnet did not start the flash server");
        process.OutputDataReceived += (_, e) => { if (e.Data is { } line) Log.Output(logger, LogText.EscapeOutput(line)); };
        process.ErrorDataReceived += (_, e) => { if (e.Data is { } line) Log.Output(logger, LogText.EscapeOutput(line)); };
        process.BeginOutputReadLine();
        process.BeginErrorReadLine();
        var deadline = Stopwatch.StartNew();
        while (!File.Exists(ReadyFile))
        {
            if (process.HasExited)
                throw new FlashServerException($"the flash server exited with {process.ExitCode} before it served (device {DevicePath}, state {StateDirectory}; its output is in the platform's log)");
            if (deadline.Elapsed > ReadyTimeout)
            {
                process.Kill();
                throw new FlashServerException($"the flash server did not write {ReadyFile} within {ReadyTimeout}");
            }
            await Task.Delay(50, ct);
        }
        var address = new Uri(File.ReadAllText(ReadyFile).Trim());
        Address = address;
        _process = process;
        process.EnableRaisingEvents = true;
        process.Exited += (_, _) => _ = OnExitedAsync(process);
        if (process.HasExited)
            _ = OnExitedAsync(process);
        Log.Started(logger, address, process.Id, DevicePath, StateDirectory, DeviceProfile ?? "none (the i3.xlarge shape at 50K tokens/s; ./faast flash fit writes one)");
        return address;
    }

    /// <summary>A server that died is started again (same port, state and device) until the platform stops.</summary>
    private async Task OnExitedAsync(Process process)
    {
        if (_stopping || !ReferenceEquals(Volatile.Read(ref _process), process))
            return;
        Log.Exited(logger, process.Id, process.ExitCode, Address!);
        var delay = RestartDelay;
        while (!_stopping)
        {
            try
            {
                await Task.Delay(delay);
                await EnsureStartedAsync(CancellationToken.None);
                return;
            }
            catch (Exception e) when (e is FlashServerException or IOException or InvalidOperationException or System.ComponentModel.Win32Exception)
            {
                delay = TimeSpan.FromTicks(Math.Min(delay.Ticks * 2, TimeSpan.FromSeconds(30).Ticks));
                Log.RestartFailed(logger, e.Message, delay);
            }
            catch (ObjectDisposedException)
            {
                return;
            }
        }
    }

    /// <summary>FaaST.FlashBackend.dll in the checkout the platform runs from.</summary>
    private static string DefaultDll() =>
        Path.Combine(FaaSTHome.Find(), "src", "FlashBackend", "bin", "Release", "net10.0", "FaaST.FlashBackend.dll");

    public async ValueTask DisposeAsync()
    {
        _stopping = true;
        await _gate.WaitAsync();
        try
        {
            if (_process is { } p)
            {
                if (!p.HasExited)
                {
                    LaunchedHost.Terminate(p); // SIGTERM drains: running calls finish, the store closes
                    using var grace = new CancellationTokenSource(StopGrace);
                    try
                    {
                        await p.WaitForExitAsync(grace.Token);
                    }
                    catch (OperationCanceledException)
                    {
                        p.Kill();
                        await p.WaitForExitAsync();
                    }
                }
                p.Dispose();
                _process = null;
            }
            _port?.Dispose();
            _port = null;
        }
        finally
        {
            _gate.Release();
        }
    }
}
