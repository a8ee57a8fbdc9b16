using System.Diagnostics;
using FaaST.FlashBackend.Server;
using FaaST.Protos.Flash;
using Google.Protobuf;
using Grpc.Core;
using Grpc.Net.Client;

namespace FaaST.FlashBackend.Tests.Server;

/// <summary>A folder in /var/tmp (disk-backed: the device needs O_DIRECT) with the device file and the state folder.</summary>
internal sealed class ServerFiles : IDisposable
{
    public ServerFiles()
    {
        string root = Directory.Exists("/var/tmp") ? "/var/tmp" : Path.GetTempPath();
        Dir = Directory.CreateDirectory(Path.Combine(root, "faast-flash-srv-" + Guid.NewGuid().ToString("N"))).FullName;
    }

    public string Dir { get; }
    public string Device => Path.Combine(Dir, "device.dat");
    public string State => Path.Combine(Dir, "state");
    public string ReadyFile => Path.Combine(Dir, "ready");

    public void Dispose()
    {
        try
        {
            Directory.Delete(Dir, recursive: true);
        }
        catch (DirectoryNotFoundException)
        {
        }
    }
}

/// <summary>Calls to a server over real gRPC (one HTTP/2 connection), with the admin key read from the state folder.</summary>
internal class FlashClients : IDisposable
{
    public FlashClients(Uri address, string adminKeyPath)
    {
        Channel = GrpcChannel.ForAddress(address);
        Admin = new FlashAdmin.FlashAdminClient(Channel);
        Tier = new FlashTier.FlashTierClient(Channel);
        AdminKey = File.ReadAllText(adminKeyPath).Trim();
    }

    public GrpcChannel Channel { get; }
    public FlashAdmin.FlashAdminClient Admin { get; }
    public FlashTier.FlashTierClient Tier { get; }
    public string AdminKey { get; }

    public static Metadata Bearer(string credential) => new() { { "authorization", "Bearer " + credential } };

    public Metadata AdminAuth => Bearer(AdminKey);

    /// <summary>Registers <paramref name="tenant"/> and opens a flow for it.</summary>
    public async Task<TenantClient> TenantAsync(string tenant, double iops = 0, int p95Us = 0)
    {
        RegisterTenantReply reply = await Admin.RegisterTenantAsync(new RegisterTenantRequest { Tenant = tenant, IopsSlo = iops, P95LatencyUs = p95Us }, AdminAuth);
        return await TenantClient.OpenAsync(Tier, reply.Token);
    }

    public virtual void Dispose() => Channel.Dispose();
}

internal sealed class TenantClient
{
    private TenantClient(FlashTier.FlashTierClient tier, string token, int flow, long maxValue)
    {
        Tier = tier;
        Token = token;
        Flow = flow;
        MaxValue = maxValue;
    }

    public FlashTier.FlashTierClient Tier { get; }
    public string Token { get; }
    public int Flow { get; }
    public long MaxValue { get; }
    public Metadata Auth => FlashClients.Bearer(Token);

    public static async Task<TenantClient> OpenAsync(FlashTier.FlashTierClient tier, string token)
    {
        OpenFlowReply flow = await tier.OpenFlowAsync(new OpenFlowRequest { Instance = "test" }, FlashClients.Bearer(token));
        return new TenantClient(tier, token, flow.Flow, flow.MaxValueBytes);
    }

    public static ObjectKey Key(string blob, string container = "c") => new() { Container = container, Blob = blob };

    /// <summary>Streams <paramref name="value"/> in <paramref name="chunk"/>-byte messages after a header declaring
    /// <paramref name="declared"/> bytes (the value's length unless a test lies).</summary>
    public async Task<PutReply> PutAsync(string blob, string etag, byte[] value, int chunk = 64 << 10, long? declared = null)
    {
        using var call = Tier.Put(Auth);
        await call.RequestStream.WriteAsync(new PutRequest { Header = new PutHeader { Flow = Flow, Key = Key(blob), Etag = etag, Length = declared ?? value.Length } });
        for (int o = 0; o < value.Length; o += chunk)
            await call.RequestStream.WriteAsync(new PutRequest { Data = ByteString.CopyFrom(value, o, Math.Min(chunk, value.Length - o)) });
        await call.RequestStream.CompleteAsync();
        return await call;
    }

    /// <summary>The header and every byte that followed; and the largest data message's size.</summary>
    public async Task<(GetHeader Header, byte[] Data, int LargestMessage)> GetAsync(string blob, string etag = "", long offset = 0, long length = 0, string container = "c")
    {
        using var call = Tier.Get(new GetRequest { Flow = Flow, Key = Key(blob, container), Etag = etag, Offset = offset, Length = length }, Auth);
        GetHeader? header = null;
        var data = new MemoryStream();
        int largest = 0;
        await foreach (GetReply r in call.ResponseStream.ReadAllAsync())
        {
            if (r.PartCase == GetReply.PartOneofCase.Header)
                header = r.Header;
            else
            {
                r.Data.WriteTo(data);
                largest = Math.Max(largest, r.Data.Length);
            }
        }
        return (header ?? throw new InvalidOperationException($"get of {blob}: no header"), data.ToArray(), largest);
    }

    public async Task<bool> DeleteAsync(string blob) =>
        (await Tier.DeleteAsync(new DeleteRequest { Flow = Flow, Key = Key(blob) }, Auth)).Deleted;

    public async Task<TenantStats> StatsAsync() => await Tier.StatsAsync(new TenantStatsRequest(), Auth);
}

/// <summary>A server in this process on a free loopback port (real Kestrel), a real device file, real gRPC clients.</summary>
internal sealed class InProcessServer : FlashClients, IAsyncDisposable
{
    private readonly ServerFiles _files;

    private InProcessServer(ServerFiles files, FlashServer server) : base(server.Address, server.AdminKeyPath)
    {
        _files = files;
        Server = server;
    }

    public FlashServer Server { get; }
    public string DevicePath => _files.Device;

    public static async Task<InProcessServer> StartAsync(long capacity = 16 << 20, double deviceTokens = 50_000, SchedulerKind scheduler = SchedulerKind.En4s, bool useIoUring = true)
    {
        var files = new ServerFiles();
        try
        {
            FlashServer server = await FlashServer.StartAsync(new ServeOptions
            {
                Device = files.Device,
                Capacity = capacity,
                StateDirectory = files.State,
                DeviceTokensPerSecond = deviceTokens,
                Scheduler = scheduler,
                UseIoUring = useIoUring,
            }, logging: b => { });
            return new InProcessServer(files, server);
        }
        catch
        {
            files.Dispose();
            throw;
        }
    }

    public async ValueTask DisposeAsync()
    {
        Channel.Dispose();
        await Server.DisposeAsync();
        _files.Dispose();
    }

    public override void Dispose() => DisposeAsync().AsTask().GetAwaiter().GetResult();
}

/// <summary>The server as its own process (`dotnet FaaST.FlashBackend.dll serve`), ready when its ready file appears.</summary>
internal sealed class ServerProcess : IAsyncDisposable
{
    private ServerProcess(Process process, Uri address)
    {
        Process = process;
        Address = address;
    }

    public Process Process { get; }
    public Uri Address { get; }

    public static Process Launch(IEnumerable<string> args)
    {
        var psi = new ProcessStartInfo("dotnet") { RedirectStandardOutput = true, RedirectStandardError = true, UseShellExecute = false };
        psi.ArgumentList.Add(Path.Combine(AppContext.BaseDirectory, "FaaST.FlashBackend.dll"));
        foreach (string a in args)
            psi.ArgumentList.Add(a);
        return Process.Start(psi)!;
    }

    public static async Task<ServerProcess> StartAsync(ServerFiles files, long capacity = 16 << 20, params string[] extra)
    {
        File.Delete(files.ReadyFile);
        Process p = Launch(["serve", "--device", files.Device, "--capacity", capacity.ToString(System.Globalization.CultureInfo.InvariantCulture),
            "--state", files.State, "--listen", "127.0.0.1:0", "--ready-file", files.ReadyFile, .. extra]);
        var stderr = p.StandardError.ReadToEndAsync();
        _ = p.StandardOutput.ReadToEndAsync();
        await Eventually.TrueAsync(() => File.Exists(files.ReadyFile) || p.HasExited, "the flash server's ready file");
        if (p.HasExited)
            Assert.Fail($"the flash server exited with {p.ExitCode}: {await stderr}");
        return new ServerProcess(p, new Uri(File.ReadAllText(files.ReadyFile).Trim()));
    }

    public void Kill9()
    {
        Process.Kill(entireProcessTree: true);
        Process.WaitForExit();
    }

    /// <summary>SIGTERM, and the exit code once it drained.</summary>
    public async Task<int> TerminateAsync()
    {
        using (var kill = Process.Start("kill", ["-TERM", Process.Id.ToString(System.Globalization.CultureInfo.InvariantCulture)]))
            await kill.WaitForExitAsync();
        using var timeout = new CancellationTokenSource(TimeSpan.FromMinutes(2));
        await Process.WaitForExitAsync(timeout.Token);
        return Process.ExitCode;
    }

    public async ValueTask DisposeAsync()
    {
        if (!Process.HasExited)
        {
            Process.Kill(entireProcessTree: true);
            await Process.WaitForExitAsync();
        }
        Process.Dispose();
    }
}
