using System.Diagnostics;
using FaaST.Protos.Flash;
using Grpc.Core;
using Grpc.Net.Client;

namespace FaaST.Runtime.Tests.Flash;

/// <summary>
/// A real flash server process (`FaaST.FlashBackend serve`) on a real file in /var/tmp (O_DIRECT: /dev/shm is tmpfs) and
/// a free loopback port, for the host's flash tests: it registers tenants with the admin key it left in its state
/// folder, can be killed (SIGKILL, mid-load) and restarted on the same port and state (the engine recovers its log),
/// and removes its files when disposed.
/// </summary>
internal sealed class FlashServerProcess : IAsyncDisposable
{
    private readonly string _root;
    private Process? _process;
    private readonly List<string> _output = [];

    private FlashServerProcess(string root) => _root = root;

    public Uri Address { get; private set; } = null!;

    private string State => Path.Combine(_root, "state");

    private string Device => Path.Combine(_root, "device");

    private string ReadyFile => Path.Combine(_root, "ready");

    public static string Dll => Path.Combine(Repo.Root, "src", "FlashBackend", "bin", "Release", "net10.0", "FaaST.FlashBackend.dll");

    /// <param name="capacity">The log's size: 64 MiB holds four 16 MiB segments (the largest value is a segment less 4 KiB).</param>
    public static async Task<FlashServerProcess> StartAsync(string capacity = "64MiB")
    {
        var server = new FlashServerProcess(Path.Combine("/var/tmp", "faast-flash-test-" + Guid.NewGuid().ToString("N")[..12]));
        Directory.CreateDirectory(server._root);
        try
        {
            await server.RunAsync("127.0.0.1:0", capacity);
        }
        catch
        {
            await server.DisposeAsync();
            throw;
        }
        return server;
    }

    private string _capacity = "";

    private async Task RunAsync(string listen, string capacity)
    {
        _capacity = capacity;
        File.Delete(ReadyFile);
        var start = new ProcessStartInfo("dotnet")
        {
            RedirectStandardOutput = true,
            RedirectStandardError = true,
            ArgumentList = { Dll, "serve", "--device", Device, "--capacity", capacity, "--state", State, "--listen", listen, "--ready-file", ReadyFile },
        };
        var process = Process.Start(start) ?? throw new InvalidOperationException("dotnet did not start");
        process.OutputDataReceived += (_, e) => { if (e.Data is { } line) lock (_output) _output.Add(line); };
        process.ErrorDataReceived += (_, e) => { if (e.Data is { } line) lock (_output) _output.Add(line); };
        process.BeginOutputReadLine();
        process.BeginErrorReadLine();
        _process = process;
        await Eventually.TrueAsync(() => File.Exists(ReadyFile) || process.HasExited, "the flash server wrote its ready file", Output);
        if (process.HasExited)
            throw new InvalidOperationException($"the flash server exited with {process.ExitCode}: {Output()}");
        Address = new Uri(File.ReadAllText(ReadyFile).Trim());
    }

    public string Output()
    {
        lock (_output)
            return string.Join('\n', _output);
    }

    /// <summary>Registers <paramref name="tenant"/> (LC with both SLO halves, else BE) and returns its token.</summary>
    public async Task<string> RegisterAsync(string tenant, double iops = 0, int p95Us = 0)
    {
        using var channel = GrpcChannel.ForAddress(Address);
        var admin = new FlashAdmin.FlashAdminClient(channel);
        var key = File.ReadAllText(Path.Combine(State, "keys", "admin")).Trim();
        var reply = await admin.RegisterTenantAsync(new RegisterTenantRequest { Tenant = tenant, IopsSlo = iops, P95LatencyUs = p95Us },
            new Metadata { { "authorization", "Bearer " + key } });
        return reply.Token;
    }

    /// <summary>SIGKILL, as a crash: no drain, no close.</summary>
    public async Task KillAsync()
    {
        if (_process is { HasExited: false } p)
        {
            p.Kill();
            await p.WaitForExitAsync();
        }
    }

    /// <summary>Starts it again on the same port, state and device (the engine recovers the log).</summary>
    public Task RestartAsync() => RunAsync($"127.0.0.1:{Address.Port}", _capacity);

    public async ValueTask DisposeAsync()
    {
        await KillAsync();
        _process?.Dispose();
        try
        {
            Directory.Delete(_root, recursive: true);
        }
        catch (IOException)
        {
            // a file still held: /var/tmp is cleaned by the OS
        }
    }
}
