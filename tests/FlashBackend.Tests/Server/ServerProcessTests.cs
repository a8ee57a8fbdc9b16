using System.Net;
using System.Net.Sockets;
using System.Security.Cryptography;
using FaaST.Common;
using FaaST.Protos.Flash;
using Grpc.Core;

namespace FaaST.FlashBackend.Tests.Server;

/// <summary>The server as its own process: options, restart, kill -9 mid-load, SIGTERM, and a flooding tenant.</summary>
public sealed class ServerProcessTests : IDisposable
{
    private readonly ServerFiles _files = new();

    public void Dispose() => _files.Dispose();

    [Theory]
    [InlineData("--capacity", "12XB", "--capacity")]
    [InlineData("--listen", "10.1.2.3:80", "--listen")]
    [InlineData("--scheduler", "lifo", "--scheduler")]
    [InlineData("--device-tokens", "fast", "--device-tokens")]
    public async Task ABadOptionExitsWithCode2AndOneLineNamingIt(string option, string value, string named)
    {
        var args = new List<string> { "serve", "--device", _files.Device, "--capacity", "16MiB", "--state", _files.State };
        int i = args.IndexOf(option);
        if (i >= 0)
            args[i + 1] = value;
        else
            args.AddRange([option, value]);
        using var p = ServerProcess.Launch(args);
        string err = await p.StandardError.ReadToEndAsync();
        await p.WaitForExitAsync();

        Assert.Equal(2, p.ExitCode);
        string line = Assert.Single(err.Split('\n', StringSplitOptions.RemoveEmptyEntries));
        Assert.Contains(named, line);
        Assert.False(File.Exists(_files.Device), "nothing is created before the options are valid");
    }

    [Fact]
    public async Task ReusePortWithoutAPortExitsWithCode2NamingIt()
    {
        using var p = ServerProcess.Launch(["serve", "--device", _files.Device, "--capacity", "16MiB", "--state", _files.State, "--reuse-port"]);
        string err = await p.StandardError.ReadToEndAsync();
        await p.WaitForExitAsync();

        Assert.Equal(2, p.ExitCode);
        Assert.Contains("--reuse-port", Assert.Single(err.Split('\n', StringSplitOptions.RemoveEmptyEntries)));
    }

    /// <summary>The platform's restart path (FlashServerChild): it holds the port, the server shares it with
    /// --reuse-port, and while the server is dead nobody else can take the port its clients know.</summary>
    [Fact]
    public async Task APortItsSupervisorHoldsCannotBeTakenWhileTheServerIsDeadAndServesAgainAfterTheRestart()
    {
        using Socket held = SharedPort.Hold();
        int port = ((IPEndPoint)held.LocalEndPoint!).Port;
        string[] listen = ["--listen", $"127.0.0.1:{port}", "--reuse-port"];
        string token;
        await using (ServerProcess first = await ServerProcess.StartAsync(_files, extra: listen))
        {
            Assert.Equal(port, first.Address.Port);
            using var c = new FlashClients(first.Address, Path.Combine(_files.State, "keys", "admin"));
            token = (await c.TenantAsync("app-a", iops: 1000, p95Us: 3000)).Token;
            first.Kill9();
        }

        // Dead: a plain bind and one with SO_REUSEADDR (what most servers set; raw, because .NET's ReuseAddress on Linux
        // also sets SO_REUSEPORT, which a process of the same user may share the port with) are refused, and so is a
        // connection.
        foreach (int reuseAddress in new[] { 0, 1 })
        {
            using var other = new Socket(AddressFamily.InterNetwork, SocketType.Stream, ProtocolType.Tcp);
            other.SetRawSocketOption(1, 2, BitConverter.GetBytes(reuseAddress)); // SOL_SOCKET, SO_REUSEADDR
            var refused = Assert.Throws<SocketException>(() => other.Bind(new IPEndPoint(IPAddress.Loopback, port)));
            Assert.Equal(SocketError.AddressAlreadyInUse, refused.SocketErrorCode);
        }
        using (var client = new Socket(AddressFamily.InterNetwork, SocketType.Stream, ProtocolType.Tcp))
            Assert.Equal(SocketError.ConnectionRefused, Assert.Throws<SocketException>(() => client.Connect(IPAddress.Loopback, port)).SocketErrorCode);

        await using ServerProcess second = await ServerProcess.StartAsync(_files, extra: listen);
        Assert.Equal(port, second.Address.Port);
        using var c2 = new FlashClients(second.Address, Path.Combine(_files.State, "keys", "admin"));
        TenantStats stats = await (await TenantClient.OpenAsync(c2.Tier, token)).StatsAsync();
        Assert.Equal(("LC", 1000.0), (stats.Class, stats.IopsSlo));
    }

    [Fact]
    public async Task AFreshStateFolderIs0700WithKeys0600()
    {
        await using (ServerProcess s = await ServerProcess.StartAsync(_files))
            Assert.Equal(0, await s.TerminateAsync());
        if (!OperatingSystem.IsLinux())
        {
            Assert.Fail("the flash server runs on Linux only");
            return;
        }
        Assert.Equal(UnixFileMode.UserRead | UnixFileMode.UserWrite | UnixFileMode.UserExecute, File.GetUnixFileMode(_files.State));
        foreach (string key in new[] { "admin", "tenant" })
            Assert.Equal(UnixFileMode.UserRead | UnixFileMode.UserWrite, File.GetUnixFileMode(Path.Combine(_files.State, "keys", key)));
    }

    [Fact]
    public async Task ARestartKeepsTenantsTheirTokensAndTheirObjects()
    {
        byte[] value = RandomNumberGenerator.GetBytes(200_000);
        string token;
        await using (ServerProcess first = await ServerProcess.StartAsync(_files))
        {
            using var c = new FlashClients(first.Address, Path.Combine(_files.State, "keys", "admin"));
            TenantClient a = await c.TenantAsync("app-a", iops: 1000, p95Us: 3000);
            token = a.Token;
            await a.PutAsync("kept", "\"v1\"", value);
            Assert.Equal(0, await first.TerminateAsync());
        }

        await using ServerProcess second = await ServerProcess.StartAsync(_files);
        using var c2 = new FlashClients(second.Address, Path.Combine(_files.State, "keys", "admin"));
        TenantClient again = await TenantClient.OpenAsync(c2.Tier, token);
        (GetHeader h, byte[] data, _) = await again.GetAsync("kept", "\"v1\"");

        Assert.True(h.Found);
        Assert.Equal(value, data);
        TenantStats s = await again.StatsAsync();
        Assert.Equal(("LC", 1000.0), (s.Class, s.IopsSlo));
        Assert.Equal(1, (await c2.Admin.StatsAsync(new ServerStatsRequest(), c2.AdminAuth)).RecoveredObjects);
    }

    [Fact]
    public async Task AfterKill9DuringPutsEveryKeyServesItsExactBytesOrIsAMiss()
    {
        const int Writers = 4;
        string token;
        var sent = new System.Collections.Concurrent.ConcurrentDictionary<string, byte[]>();
        await using (ServerProcess first = await ServerProcess.StartAsync(_files))
        {
            using var c = new FlashClients(first.Address, Path.Combine(_files.State, "keys", "admin"));
            TenantClient a = await c.TenantAsync("app-a");
            token = a.Token;
            using var stop = new CancellationTokenSource();
            var writers = Enumerable.Range(0, Writers).Select(w => Task.Run(async () =>
            {
                for (int i = 0; !stop.IsCancellationRequested; i++)
                {
                    string key = $"w{w}-k{i % 40}";
                    byte[] v = RandomNumberGenerator.GetBytes(1000 + (i * 7919 % 150_000));
                    sent[key + "|" + i] = v;
                    try
                    {
                        await a.PutAsync(key, $"\"{i}\"", v, chunk: 16 << 10);
                    }
                    catch (RpcException)
                    {
                        return;   // the server died under us
                    }
                }
            })).ToArray();
            await Eventually.TrueAsync(() => sent.Count >= 200, "200 puts under way");
            first.Kill9();
            await stop.CancelAsync();
            await Task.WhenAll(writers);
        }

        await using ServerProcess second = await ServerProcess.StartAsync(_files);
        using var c2 = new FlashClients(second.Address, Path.Combine(_files.State, "keys", "admin"));
        TenantClient again = await TenantClient.OpenAsync(c2.Tier, token);
        int hits = 0;
        foreach (string key in sent.Keys.Select(k => k.Split('|')[0]).Distinct())
        {
            (GetHeader h, byte[] data, _) = await again.GetAsync(key);
            if (!h.Found)
                continue;
            string version = h.Etag.Trim('"');
            Assert.True(sent.TryGetValue(key + "|" + version, out byte[]? expected), $"{key} served version {version}, never sent");
            Assert.True(expected!.AsSpan().SequenceEqual(data), $"{key} version {version}: wrong bytes after kill -9");
            hits++;
        }
        Assert.True(hits > 0, "recovery kept some of the committed puts");
    }

    [Fact]
    public async Task ASecondTenantsGetsCompleteUnthrottledWhileAnotherFloodsPuts()
    {
        // A small device rate so the flooder is over its share at once: its puts are held back, the reader's are not.
        await using ServerProcess server = await ServerProcess.StartAsync(_files, 64 << 20, "--device-tokens", "2000");
        using var c = new FlashClients(server.Address, Path.Combine(_files.State, "keys", "admin"));
        TenantClient reader = await c.TenantAsync("reader", iops: 1000, p95Us: 3000);
        TenantClient flooder = await c.TenantAsync("flooder");
        byte[] small = RandomNumberGenerator.GetBytes(4096);
        await reader.PutAsync("hot", "\"1\"", small);

        using var stop = new CancellationTokenSource();
        var flood = Enumerable.Range(0, 8).Select(w => Task.Run(async () =>
        {
            byte[] big = RandomNumberGenerator.GetBytes(256 << 10);
            for (int i = 0; !stop.IsCancellationRequested; i++)
                await flooder.PutAsync($"f{w}-{i % 16}", "\"1\"", big);
        })).ToArray();
        await Eventually.TrueAsync(async () => (await flooder.StatsAsync()).Throttled > 0, "the flooder being throttled");

        for (int i = 0; i < 50; i++)
        {
            Assert.Equal(small, (await reader.GetAsync("hot", "\"1\"")).Data);
            await Task.Delay(5);   // pacing, not timing: keeps the reader well under its 1,000 IOPS SLO
        }

        TenantStats readerStats = await reader.StatsAsync();
        TenantStats flooderStats = await flooder.StatsAsync();
        await stop.CancelAsync();
        await Task.WhenAll(flood.Select(t => t.ContinueWith(_ => { })));
        Assert.Equal("LC", readerStats.Class);
        Assert.Equal(0, readerStats.Throttled);
        Assert.True(flooderStats.Throttled > 0);
    }
}
