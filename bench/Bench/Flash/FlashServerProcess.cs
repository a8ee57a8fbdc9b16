using System.Diagnostics;
using System.Globalization;
using System.Net;

namespace FaaST.Bench.Flash;

/// <summary>
/// The flash server as its own process (`FaaST.FlashBackend.dll serve`), as the scenarios run it: device, state and
/// ready file in <c>work</c>, listening on <c>address</c> (a free port; beyond loopback with --allow-remote, on the
/// bench's own shaped network, where the admin key and tokens cross only the bench's bridge). Ready when its ready file
/// appears; killed on dispose. Its device file stays for the caller (RealServer's fio reads it after the server stops).
/// </summary>
internal sealed class FlashServerProcess : IAsyncDisposable
{
    private readonly Process _process;

    private FlashServerProcess(Process process, Uri address, string adminKey, string devicePath)
    {
        _process = process;
        Address = address;
        AdminKey = adminKey;
        DevicePath = devicePath;
    }

    public Uri Address { get; }

    /// <summary>The server's admin key, from its state folder.</summary>
    public string AdminKey { get; }

    public string DevicePath { get; }

    /// <summary>CPU time the server process has used so far (user + system, all threads).</summary>
    public TimeSpan CpuTime
    {
        get
        {
            _process.Refresh();
            return _process.TotalProcessorTime;
        }
    }

    /// <param name="extra">More `serve` options (--ephemeral, --device-tokens N or --device-profile FILE).</param>
    public static async Task<FlashServerProcess> StartAsync(string work, IPAddress address, long capacity, params string[] extra)
    {
        string ready = Path.Combine(work, "ready"), state = Path.Combine(work, "state"), device = Path.Combine(work, "device.dat");
        var psi = new ProcessStartInfo("dotnet") { UseShellExecute = false, RedirectStandardOutput = true, RedirectStandardError = true };
        foreach (var a in new[]
        {
            Path.Combine(AppContext.BaseDirectory, "FaaST.FlashBackend.dll"), "serve", "--device", device,
            "--capacity", capacity.ToString(CultureInfo.InvariantCulture), "--state", state, "--listen", $"{address}:0", "--ready-file", ready,
        }.Concat(extra))
            psi.ArgumentList.Add(a);
        if (!IPAddress.IsLoopback(address))
            psi.ArgumentList.Add("--allow-remote");
        var p = Process.Start(psi) ?? throw new InvalidOperationException("dotnet did not start the flash server");
        _ = p.StandardOutput.ReadToEndAsync();
        var error = p.StandardError.ReadToEndAsync();
        var clock = Stopwatch.StartNew();
        while (!File.Exists(ready))
        {
            if (p.HasExited)
                throw new InvalidOperationException($"the flash server exited with {p.ExitCode}: {await error}");
            if (clock.Elapsed > TimeSpan.FromMinutes(2))
            {
                p.Kill(entireProcessTree: true);
                throw new TimeoutException("the flash server wrote no ready file within 2 minutes");
            }
            await Task.Delay(50);
        }
        return new FlashServerProcess(p, new Uri(File.ReadAllText(ready).Trim()), File.ReadAllText(Path.Combine(state, "keys", "admin")).Trim(), device);
    }

    public async ValueTask DisposeAsync()
    {
        if (!_process.HasExited)
        {
            _process.Kill(entireProcessTree: true);
            await _process.WaitForExitAsync();
        }
        _process.Dispose();
    }
}
