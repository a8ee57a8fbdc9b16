using System.Collections.Concurrent;
using System.Diagnostics;
using System.Globalization;
using System.Net;
using System.Net.Http.Headers;
using System.Net.Sockets;
using System.Security.Cryptography;
using System.Text;
using System.Text.Json;
using System.Text.RegularExpressions;
using FaaST.Cachelet.Peers;
using FaaST.Peers;
using FaaST.Runtime.Hosting;
using FaaST.Storage;

namespace FaaST.Runtime.Tests;

/// <summary>
/// The peer port and the Azurite the runtime starts, against someone who knows every public fact:
/// the emulator's account key, the app's name, the peer protocol, another app's credentials.
/// </summary>
[Collection("azurite")]
[System.Runtime.Versioning.UnsupportedOSPlatform("windows")]
public sealed partial class PeerSecurityTests(AzuriteFixture azurite)
{
    private static readonly byte[] PublicKey = Convert.FromBase64String(StorageConnectionString.DevelopmentAccountKey);

    private static TestApp HelloApp() => new TestApp("python").Function("Hello", TestApp.HttpFunctionJson,
        ("__init__.py", "import azure.functions as func\ndef main(req: func.HttpRequest) -> str:\n    return 'hi'\n"));

    /// <summary>A gRPC Stats call with a given authorization header; the grpc-status it got.</summary>
    private static async Task<int?> StatsStatusAsync(Uri peer, string authorization)
    {
        using var http = new HttpClient(new SocketsHttpHandler { UseCookies = false });
        using var request = new HttpRequestMessage(HttpMethod.Post, new Uri(peer, PeerClient.StatsPath))
        {
            Version = HttpVersion.Version20,
            VersionPolicy = HttpVersionPolicy.RequestVersionExact,
            Content = new ByteArrayContent([0, 0, 0, 0, 0]), // one empty StatsRequest
        };
        request.Content.Headers.ContentType = new MediaTypeHeaderValue("application/grpc");
        request.Headers.TE.ParseAdd("trailers");
        request.Headers.TryAddWithoutValidation(PeerAuth.HeaderName, authorization);
        using var response = await http.SendAsync(request);
        await response.Content.ReadAsByteArrayAsync();
        var headers = response.TrailingHeaders.Contains("grpc-status") ? (HttpHeaders)response.TrailingHeaders : response.Headers;
        return headers.TryGetValues("grpc-status", out var v) ? int.Parse(v.First(), CultureInfo.InvariantCulture) : null;
    }

    [Theory]
    [InlineData("the Azurite the runtime starts")]
    [InlineData("a configured emulator connection string")]
    public async Task A_peer_request_with_credentials_computed_from_the_public_development_key_is_refused(string storage)
    {
        using var app = HelloApp();
        await using var host = await HostUnderTest.StartAsync(app.Directory, storage.StartsWith("a configured", StringComparison.Ordinal) ? azurite.ConnectionString : null);
        var peer = host.Host.Self!.PeerAddress;
        var name = host.Host.App.Name;

        // What anyone could compute before: the static v1 token under HMAC(public key, "faast-peer-v1") ...
        var v1Secret = HMACSHA256.HashData(PublicKey, "faast-peer-v1"u8);
        var v1Token = "FaaST-Peer " + Convert.ToBase64String(HMACSHA256.HashData(v1Secret, Encoding.UTF8.GetBytes("faast-peer-v1:" + name)));
        Assert.Equal(16, await StatsStatusAsync(peer, v1Token)); // UNAUTHENTICATED
        // ... and today's protocol under any key derived from the public one.
        foreach (var purpose in new[] { "faast-peer-v1", "faast-peer-v2" })
        {
            var guess = new PeerAuth(HMACSHA256.HashData(PublicKey, Encoding.UTF8.GetBytes(purpose)), name);
            Assert.Equal(16, await StatsStatusAsync(peer, guess.SignCall(PeerClient.StatsPath)));
            using var client = new PeerClient(new PeerOptions { Credentials = guess, Timeout = TimeSpan.FromSeconds(30) });
            var e = await Assert.ThrowsAsync<PeerException>(() => client.GetAsync(peer,
                new FaaST.Protos.Peer.GetRequest { Blob = new FaaST.Protos.Peer.BlobRef { Account = "x", Container = "c", Blob = "b" }, Offset = 0, Length = 1 << 20 },
                _ => new MemoryStream(), default));
            Assert.Contains("credentials", e.Message, StringComparison.Ordinal);
        }
        Assert.Contains("Refused a peer Stats call", host.Logs.All, StringComparison.Ordinal);
        // The requester gives up as soon as the owner's proof does not match; the owner logs its refusal
        // when it then sees the connection end, which may be a moment after the client threw.
        await Eventually.TrueAsync(() => Task.FromResult(host.Logs.All.Contains("Refused a peer Get call (bulk connection)", StringComparison.Ordinal)),
            "the owner to log the refused bulk connection");
    }

    [Theory]
    [InlineData("0.0.0.0", null, "--listen 0.0.0.0")]
    [InlineData("127.0.0.1", "0.0.0.0", "--peer-listen 0.0.0.0")]
    public async Task Listening_beyond_loopback_with_development_storage_and_no_secret_is_a_start_up_error_naming_the_setting(
        string listen, string? peerListen, string named)
    {
        using var app = HelloApp();
        var e = await Assert.ThrowsAsync<AppConfigException>(() => HostUnderTest.StartAsync(app.Directory, null,
            configure: o => o with { ListenAddress = listen, PeerListenAddress = peerListen }));
        Assert.Contains("FAAST_PEER_SECRET", e.Message, StringComparison.Ordinal);
        Assert.Contains(named, e.Message, StringComparison.Ordinal);
        Assert.Contains(Path.Combine(app.Directory, "local.settings.json"), e.Message, StringComparison.Ordinal);

        // The emulator's public key, configured, is development storage too.
        e = await Assert.ThrowsAsync<AppConfigException>(() => HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString,
            configure: o => o with { ListenAddress = listen, PeerListenAddress = peerListen }));
        Assert.Contains("FAAST_PEER_SECRET", e.Message, StringComparison.Ordinal);
    }

    [Fact]
    public void The_advertised_peer_address_is_never_a_wildcard()
    {
        var interfaces = new[]
        {
            (IPAddress.Loopback, true), (IPAddress.Parse("fe80::1"), true), (IPAddress.Parse("10.1.2.3"), false),
            (IPAddress.Parse("2001:db8::7"), true), (IPAddress.Parse("192.0.2.10"), true),
        };
        Assert.Equal(IPAddress.Parse("192.0.2.10"), PeerSecret.Advertised(IPAddress.Any, interfaces));
        Assert.Equal(IPAddress.Parse("192.0.2.10"), PeerSecret.Advertised(IPAddress.IPv6Any, interfaces));
        Assert.Equal(IPAddress.Parse("2001:db8::7"), PeerSecret.Advertised(IPAddress.IPv6Any, interfaces.Where(i => i.Item1.AddressFamily == AddressFamily.InterNetworkV6)));
        Assert.Equal(IPAddress.Loopback, PeerSecret.Advertised(IPAddress.Any, [(IPAddress.Loopback, true)]));
        Assert.Equal(IPAddress.Parse("127.0.0.5"), PeerSecret.Advertised(IPAddress.Parse("127.0.0.5"), interfaces));
        // This machine's own interfaces.
        foreach (var wildcard in new[] { IPAddress.Any, IPAddress.IPv6Any })
        {
            var chosen = PeerSecret.Advertised(wildcard);
            Assert.False(chosen.Equals(IPAddress.Any) || chosen.Equals(IPAddress.IPv6Any), $"{wildcard} advertised as {chosen}");
        }
        Assert.Equal("http://[2001:db8::7]:7000/", PeerSecret.PeerUri(IPAddress.Parse("2001:db8::7"), 7000).ToString());
    }

    [Fact]
    public async Task A_host_listening_on_every_address_advertises_one_others_can_dial()
    {
        using var app = HelloApp();
        // Bound to the wildcard for a moment; nothing here dials anything but loopback.
        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString,
            new Dictionary<string, string> { ["FAAST_PEER_SECRET"] = "advertise-test-secret-0123456789" },
            o => o with { ListenAddress = "0.0.0.0" });
        var advertised = host.Host.Self!.PeerAddress;
        Assert.NotEqual("0.0.0.0", advertised.Host);
        Assert.True(IPAddress.TryParse(advertised.Host.Trim('[', ']'), out var address) && !address.Equals(IPAddress.Any) && !address.Equals(IPAddress.IPv6Any), advertised.ToString());
        Assert.Contains(advertised.ToString(), host.Logs.All, StringComparison.Ordinal);
    }

    [Fact]
    public async Task The_apps_azurite_has_its_own_account_and_another_apps_credentials_do_not_open_it()
    {
        using var appA = HelloApp();
        using var appB = HelloApp();
        await using var a = await HostUnderTest.StartAsync(appA.Directory, null);
        await using var b = await HostUnderTest.StartAsync(appB.Directory, null);
        var csA = StorageConnectionString.Parse(a.Host.StorageConnectionString!);
        var csB = StorageConnectionString.Parse(b.Host.StorageConnectionString!);
        Assert.False(csA.UsesPublicDevelopmentKey, "A's connection string has the emulator's public key");
        Assert.DoesNotContain(StorageConnectionString.DevelopmentAccountKey, a.Host.StorageConnectionString!, StringComparison.Ordinal);
        Assert.NotEqual(StorageConnectionString.DevelopmentAccountName, csA.AccountName);
        Assert.NotEqual(csA.AccountName, csB.AccountName);

        await a.Blobs!.CreateContainerIfNotExistsAsync("secrets");
        await a.Blobs.UploadAsync("secrets", "a.txt", "only for A"u8.ToArray());
        Assert.Equal("only for A"u8.ToArray(), (await a.Blobs.DownloadAsync("secrets", "a.txt"))!.Data);

        // B's workers get B's connection string; pointed at A's Azurite (A's account or B's) it opens nothing.
        var portA = a.Blobs.Endpoint.Port;
        var keyB = Regex.Match(b.Host.StorageConnectionString!, "AccountKey=([^;]+)").Groups[1].Value;
        foreach (var account in new[] { csA.AccountName!, csB.AccountName! })
        {
            using var stolen = new BlobStore($"DefaultEndpointsProtocol=http;AccountName={csB.AccountName};AccountKey={keyB};BlobEndpoint=http://127.0.0.1:{portA}/{account};",
                new BlobStoreOptions { MaxRetries = 0 });
            Assert.Null(await ReadOrNullAsync(stolen));
        }
        // Nor does the emulator's public account, which every Azurite used to serve.
        using var publicAccount = new BlobStore(StorageConnectionString.ForAzurite(portA), new BlobStoreOptions { MaxRetries = 0 });
        Assert.Null(await ReadOrNullAsync(publicAccount));
    }

    /// <summary>The blob's bytes, or null if the store refused (an error status) or found nothing.</summary>
    private static async Task<byte[]?> ReadOrNullAsync(BlobStore store)
    {
        try
        {
            return (await store.DownloadAsync("secrets", "a.txt"))?.Data;
        }
        catch (BlobStorageException)
        {
            return null;
        }
    }

    [Fact]
    public async Task Persisted_azurite_data_and_the_account_key_are_private_to_the_hosts_user()
    {
        using var app = HelloApp();
        var faast = Path.Combine(app.Directory, ".faast");
        var data = Path.Combine(faast, "azurite");
        // Data an older version left world-readable is tightened too.
        Directory.CreateDirectory(Path.Combine(data, "old"));
        File.WriteAllText(Path.Combine(data, "old", "blob"), "x");
        File.SetUnixFileMode(Path.Combine(data, "old", "blob"), (UnixFileMode)0b110_100_100);
        await using (var host = await HostUnderTest.StartAsync(app.Directory, null, configure: o => o with { AzuriteDataDirectory = data }))
        {
            await host.Blobs!.CreateContainerIfNotExistsAsync("kept");
            await host.Blobs.UploadAsync("kept", "a.bin", RandomNumberGenerator.GetBytes(100_000));
        }
        var entries = new DirectoryInfo(faast).EnumerateFileSystemInfos("*", SearchOption.AllDirectories).Where(e => e.LinkTarget is null).ToList();
        Assert.Contains(entries, e => e.Name == "azurite-account");
        Assert.Contains(entries, e => e is FileInfo && e.FullName.StartsWith(data, StringComparison.Ordinal) && !e.FullName.Contains("old", StringComparison.Ordinal));
        Assert.Equal((UnixFileMode)0b111_000_000, File.GetUnixFileMode(faast));
        foreach (var e in entries)
            Assert.True(File.GetUnixFileMode(e.FullName) == (e is DirectoryInfo ? (UnixFileMode)0b111_000_000 : (UnixFileMode)0b110_000_000),
                $"{e.FullName} is {Convert.ToString((int)File.GetUnixFileMode(e.FullName), 8)}");

        // The next start finds its data under the same account.
        await using var again = await HostUnderTest.StartAsync(app.Directory, null, configure: o => o with { AzuriteDataDirectory = data });
        Assert.NotNull(await again.Blobs!.GetPropertiesAsync("kept", "a.bin"));
    }

    [Fact]
    public async Task A_sigkilled_hosts_azurite_and_workers_end_and_the_port_is_free()
    {
        using var app = HelloApp();
        var output = new ConcurrentQueue<string>();
        var info = new ProcessStartInfo("dotnet") { RedirectStandardOutput = true, RedirectStandardError = true, UseShellExecute = false };
        foreach (var a in new[] { Path.Combine(AppContext.BaseDirectory, "FaaST.Runtime.dll"), app.Directory, "--port", "0", "--azurite-in-memory", "--isolation", "off" })
            info.ArgumentList.Add(a);
        info.Environment["FAAST_HOME"] = Repo.Root;
        info.Environment.Remove("AzureWebJobsStorage");
        using var process = Process.Start(info)!;
        var azuritePort = new TaskCompletionSource<int>(TaskCreationOptions.RunContinuationsAsynchronously);
        var http = new TaskCompletionSource<string>(TaskCreationOptions.RunContinuationsAsynchronously);
        void Line(string? line)
        {
            if (line is null)
                return;
            output.Enqueue(line);
            if (AzuriteAt().Match(line) is { Success: true } m)
                azuritePort.TrySetResult(int.Parse(m.Groups[1].Value, CultureInfo.InvariantCulture));
            if (ListeningOn().Match(line) is { Success: true } l)
                http.TrySetResult(l.Groups[1].Value);
        }
        process.OutputDataReceived += (_, e) => Line(e.Data);
        process.ErrorDataReceived += (_, e) => Line(e.Data);
        process.BeginOutputReadLine();
        process.BeginErrorReadLine();
        try
        {
            var up = await Task.WhenAny(http.Task, process.WaitForExitAsync(), Task.Delay(TimeSpan.FromSeconds(90)));
            Assert.True(up == http.Task, "the host did not start:\n" + string.Join("\n", output));
            var port = await azuritePort.Task;
            using var client = new HttpClient { BaseAddress = new Uri(await http.Task) };
            using var status = JsonDocument.Parse(await client.GetStringAsync("admin/host/status"));
            var workers = status.RootElement.GetProperty("workerProcessIds").EnumerateArray().Select(p => p.GetInt32()).ToArray();
            Assert.NotEmpty(workers);
            Assert.True(Listening(port), "Azurite is not up");

            process.Kill(); // SIGKILL: the host itself, no cleanup of its own, no process-tree kill
            await process.WaitForExitAsync();

            await Eventually.TrueAsync(() => Task.FromResult(!Listening(port)), $"Azurite's port {port} to be free after the host was killed");
            await Eventually.TrueAsync(() => Task.FromResult(workers.All(w => !Alive(w))), "the workers to end after the host was killed");
            // Nothing holds the port: it can be bound again.
            using var rebind = new TcpListener(IPAddress.Loopback, port);
            rebind.Start();
        }
        finally
        {
            if (!process.HasExited)
                process.Kill(entireProcessTree: true);
            // A killed host leaves its segment directory; the app's next start would remove it, and so
            // does the test (one empty directory was left in /dev/shm per test run).
            await process.WaitForExitAsync();
            FaaST.Cachelet.BlobCache.CleanStaleSegments(FunctionApp.NameOf(app.Directory));
        }
    }

    private static bool Listening(int port)
    {
        using var socket = new Socket(SocketType.Stream, ProtocolType.Tcp);
        try
        {
            socket.Connect(IPAddress.Loopback, port);
            return true;
        }
        catch (SocketException)
        {
            return false;
        }
    }

    private static bool Alive(int pid) =>
        File.Exists($"/proc/{pid}/status") && !File.ReadAllText($"/proc/{pid}/status").Contains("zombie", StringComparison.Ordinal);

    [GeneratedRegex(@"Azurite is listening at http://127\.0\.0\.1:(\d+)/")]
    private static partial Regex AzuriteAt();

    [GeneratedRegex(@"listening on (http://127\.0\.0\.1:\d+/?)")]
    private static partial Regex ListeningOn();
}
