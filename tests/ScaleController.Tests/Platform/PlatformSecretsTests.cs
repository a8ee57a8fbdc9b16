using System.Collections.Concurrent;
using System.Diagnostics;
using System.Globalization;
using System.Text;
using System.Text.Json;
using FaaST.Peers;
using FaaST.ScaleController.Control;
using FaaST.ScaleController.Deploy;
using FaaST.ScaleController.Platform;

namespace FaaST.ScaleController.Tests.Platform;

/// <summary>
/// What each tenant holds (issue 19): its own peer secret, derived from the platform's master key, never the platform's
/// environment's; records in storage signed by the platform; packages without settings; extractions only the app's
/// user can read. A real platform process (as `./faast platform` runs it) with real Azurite and real instances.
/// </summary>
public sealed class PlatformSecretsTests : IDisposable
{
    private readonly TempDirectory _apps = new("faast-secrets-apps-");

    public void Dispose() => _apps.Dispose();

    private string CopySample(string name) => Repo.CopySample("python-app", Path.Combine(_apps.Path, name));

    /// <summary>`./faast deploy` as a user runs it (it finds the local platform's credential itself).</summary>
    private static async Task DeployAsync(string app, string url)
    {
        var output = new ConcurrentQueue<string>();
        using var process = PlatformCommand.Start(["deploy", app, "--platform", url], output, "UseDevelopmentStorage=true");
        using var timeout = new CancellationTokenSource(TimeSpan.FromSeconds(180));
        await process.WaitForExitAsync(timeout.Token);
        Assert.True(process.ExitCode == 0, string.Join('\n', output));
    }

    private static async Task<Process> StartPlatformAsync(string state, int port, string storage, ConcurrentQueue<string> output,
        IReadOnlyDictionary<string, string>? environment = null, params string[] more)
    {
        var platform = PlatformCommand.Start(["platform", "--port", port.ToString(CultureInfo.InvariantCulture), "--state", state, .. more], output, storage, environment);
        await Eventually.TrueAsync(() => output.Any(l => l.StartsWith("faast: platform at ", StringComparison.Ordinal)) || platform.HasExited,
            "the platform", () => string.Join('\n', output), seconds: 120);
        Assert.False(platform.HasExited, string.Join('\n', output));
        return platform;
    }

    /// <summary>The instance records of <paramref name="app"/> in the platform's storage.</summary>
    private static async Task<List<JsonElement>> RecordsAsync(string storage, string app)
    {
        using var store = new Storage.BlobStore(storage);
        var records = new List<JsonElement>();
        await foreach (var item in store.ListAsync(DeploymentStore.Container, $"{app}/instances/"))
        {
            var content = await store.DownloadAsync(DeploymentStore.Container, item.Name);
            if (content is not null)
                records.Add(JsonDocument.Parse(content.Data).RootElement.Clone());
        }
        return records;
    }

    private static string? EnvironmentOf(int pid, string name) =>
        File.ReadAllText($"/proc/{pid}/environ").Split('\0').FirstOrDefault(v => v.StartsWith(name + "=", StringComparison.Ordinal))?[(name.Length + 1)..];

    [Fact]
    public async Task Each_app_gets_its_own_peer_secret_and_the_platforms_environment_provides_none_so_one_apps_secret_signs_nothing_another_accepts()
    {
        await using var azurite = await Storage.AzuriteProcess.StartAsync(Repo.Root);
        using var state = new TempDirectory("faast-secrets-state-");
        var port = Ports.Free();
        var output = new ConcurrentQueue<string>();
        const string operators = "the-operators-own-secret-that-no-app-may-hold-0123456789";
        using var platform = await StartPlatformAsync(state.Path, port, azurite.ConnectionString, output,
            new Dictionary<string, string> { ["FAAST_PEER_SECRET"] = operators }, "--isolation", "off");
        try
        {
            await DeployAsync(CopySample("tenanta"), $"http://127.0.0.1:{port}");
            await DeployAsync(CopySample("tenantb"), $"http://127.0.0.1:{port}");
            var a = Assert.Single(await RecordsAsync(azurite.ConnectionString, "tenanta"));
            var b = Assert.Single(await RecordsAsync(azurite.ConnectionString, "tenantb"));
            var secretA = EnvironmentOf(a.GetProperty("processId").GetInt32(), "FAAST_PEER_SECRET");
            var secretB = EnvironmentOf(b.GetProperty("processId").GetInt32(), "FAAST_PEER_SECRET");
            Assert.NotNull(secretA);
            Assert.NotNull(secretB);
            Assert.NotEqual(secretA, secretB);
            Assert.NotEqual(operators, secretA);
            Assert.NotEqual(operators, secretB);
            // Derived from the master in the state folder: what a restarted platform derives again.
            var keys = PlatformKeys.LoadOrCreate(state.Path);
            Assert.Equal(keys.PeerSecretOf("tenanta"), secretA);
            Assert.Equal(keys.PeerSecretOf("tenantb"), secretB);

            // Tenant A holds its secret (its instance's environment); with it, it signs a vote query as app B.
            var peerB = new VoteEndpoint(b.GetProperty("id").GetString()!, new Uri(b.GetProperty("peerAddress").GetString()!));
            var query = new VoteQuery("tenantb", 1, 0);
            using (var forged = new GrpcVoteClient(new PeerAuth(Encoding.UTF8.GetBytes(secretA!), "tenantb"), TimeProvider.System))
            {
                var refused = await Assert.ThrowsAsync<Grpc.Core.RpcException>(() => forged.GetVoteAsync(peerB, query, CancellationToken.None));
                Assert.Equal(Grpc.Core.StatusCode.Unauthenticated, refused.StatusCode);
            }
            using var genuine = new GrpcVoteClient(new PeerAuth(Encoding.UTF8.GetBytes(secretB!), "tenantb"), TimeProvider.System);
            Assert.True((await genuine.GetVoteAsync(peerB, query, CancellationToken.None)).Answered);
        }
        finally
        {
            await PlatformCommand.StopAsync(platform);
        }
    }

    [IsolationFact]
    public async Task As_root_with_isolation_required_an_apps_settings_reach_its_functions_running_as_its_own_user_though_the_package_never_held_them()
    {
        await using var azurite = await Storage.AzuriteProcess.StartAsync(Repo.Root);
        using var state = new TempDirectory("faast-secrets-state-");
        var port = Ports.Free();
        var output = new ConcurrentQueue<string>();
        var app = CopySample("settled");
        var settings = Path.Combine(app, "local.settings.json");
        File.WriteAllText(settings, File.ReadAllText(settings).Replace("\"Values\": {", "\"Values\": { \"TENANT_SETTING\": \"kept-apart\",", StringComparison.Ordinal));
        Directory.CreateDirectory(Path.Combine(app, "Setting"));
        File.WriteAllText(Path.Combine(app, "Setting", "function.json"), """
            { "bindings": [
              { "type": "httpTrigger", "direction": "in", "name": "req", "authLevel": "anonymous", "methods": ["get"], "route": "setting" },
              { "type": "http", "direction": "out", "name": "$return" } ] }
            """);
        File.WriteAllText(Path.Combine(app, "Setting", "__init__.py"), """
            import os

            import azure.functions as func


            def main(req: func.HttpRequest) -> str:
                return f"{os.environ.get('TENANT_SETTING')} uid={os.getuid()}"
            """);
        using var platform = await StartPlatformAsync(state.Path, port, azurite.ConnectionString, output, null, "--isolation", "required");
        try
        {
            await DeployAsync(app, $"http://127.0.0.1:{port}");
            using var http = new HttpClient { Timeout = TimeSpan.FromSeconds(60) };
            var answer = await http.GetStringAsync($"http://127.0.0.1:{port}/settled/api/setting");
            var user = WorkerIdentity.Ensure(WorkerIdentity.UserNameFor("settled"));
            Assert.Equal($"kept-apart uid={user.UserId}", answer);

            using var store = new Storage.BlobStore(azurite.ConnectionString);
            var package = await store.DownloadAsync(DeploymentStore.Container, DeploymentStore.PackageBlob("settled", 1));
            using var zip = new System.IO.Compression.ZipArchive(new MemoryStream(package!.Data));
            Assert.DoesNotContain(zip.Entries, e => e.FullName == "local.settings.json");
        }
        finally
        {
            await PlatformCommand.StopAsync(platform);
        }
    }

    /// <summary>A process that looks like an instance to a naive check: `--instance-id ID` in its command line, and
    /// /admin/host/status answering as ID on <paramref name="port"/>.</summary>
    private static Process FakeInstance(string id, int port, string? user = null)
    {
        const string script = """
            import http.server, json, sys
            iid, port = sys.argv[2], int(sys.argv[3])
            class H(http.server.BaseHTTPRequestHandler):
                def do_GET(self):
                    body = json.dumps({"instance": {"id": iid}, "state": "Running"}).encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                def log_message(self, *a):
                    pass
            http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
            """;
        // A python3 every user can run (a pyenv shim under /root is not).
        var info = new ProcessStartInfo(File.Exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3") { UseShellExecute = false, WorkingDirectory = "/" };
        foreach (var a in new[] { "-c", script, "--instance-id", id, port.ToString(CultureInfo.InvariantCulture) })
            info.ArgumentList.Add(a);
        if (user is not null)
            info.UserName = user;
        return Process.Start(info)!;
    }

    [RootFact("runs a forged instance as another user")]
    public async Task Forged_instance_records_unsigned_or_pointing_at_another_users_process_are_not_adopted_and_their_processes_are_not_killed_at_a_restart()
    {
        await using var azurite = await Storage.AzuriteProcess.StartAsync(Repo.Root);
        using var state = new TempDirectory("faast-secrets-state-");
        var port = Ports.Free();
        var first = new ConcurrentQueue<string>();
        using (var platform = await StartPlatformAsync(state.Path, port, azurite.ConnectionString, first, null, "--isolation", "off"))
        {
            try
            {
                await DeployAsync(CopySample("victim"), $"http://127.0.0.1:{port}");
            }
            finally
            {
                await PlatformCommand.StopAsync(platform);
            }
        }

        // Two processes that answer as instances of an old version of the victim: the restart would stop them.
        var forger = WorkerIdentity.Ensure("faast-forger");
        var (unsignedPort, otherUserPort) = (Ports.Free(), Ports.Free());
        using var unsignedProcess = FakeInstance("victim-v0-1-forged01", unsignedPort);
        using var otherUsers = FakeInstance("victim-v0-2-forged02", otherUserPort, forger.UserName);
        try
        {
            using var store = new Storage.BlobStore(azurite.ConnectionString);
            var keys = PlatformKeys.LoadOrCreate(state.Path); // what a tenant cannot do: sign with the platform's key
            var unsignedRecord = new InstanceRecordJson("victim-v0-1-forged01", "victim", 0, new Uri($"http://127.0.0.1:{unsignedPort}/"), null,
                unsignedProcess.Id, DateTimeOffset.UtcNow, Environment.MachineName);
            var otherRecord = new InstanceRecordJson("victim-v0-2-forged02", "victim", 0, new Uri($"http://127.0.0.1:{otherUserPort}/"),
                new Uri($"http://127.0.0.1:{otherUserPort}/"), otherUsers.Id, DateTimeOffset.UtcNow, Environment.MachineName);
            await store.UploadAsync(DeploymentStore.Container, $"victim/instances/{unsignedRecord.Id}.json",
                JsonSerializer.SerializeToUtf8Bytes(unsignedRecord, RegistryJson.Default.InstanceRecordJson));
            await store.UploadAsync(DeploymentStore.Container, $"victim/instances/{otherRecord.Id}.json", InstanceRegistry.Signed(otherRecord, keys));
            using (var http = new HttpClient())
            {
                await Eventually.TrueAsync(async () =>
                {
                    try
                    {
                        return (await http.GetStringAsync($"http://127.0.0.1:{unsignedPort}/admin/host/status")).Contains("forged01", StringComparison.Ordinal)
                            && (await http.GetStringAsync($"http://127.0.0.1:{otherUserPort}/admin/host/status")).Contains("forged02", StringComparison.Ordinal);
                    }
                    catch (HttpRequestException)
                    {
                        return false;
                    }
                }, "the forged instances to answer");
            }

            var second = new ConcurrentQueue<string>();
            using var restarted = await StartPlatformAsync(state.Path, port, azurite.ConnectionString, second, null, "--isolation", "off");
            try
            {
                await Eventually.TrueAsync(() => second.Any(l => l.Contains("Loaded app victim", StringComparison.Ordinal)), "the victim loaded again",
                    () => string.Join('\n', second), seconds: 120);
                Assert.False(unsignedProcess.HasExited, "the restarted platform killed the process of an unsigned record");
                Assert.False(otherUsers.HasExited, "the restarted platform killed another user's process");
                Assert.Contains(second, l => l.Contains("refused the instance record", StringComparison.Ordinal) && l.Contains("forged01", StringComparison.Ordinal));
                Assert.Contains(second, l => l.Contains("not taken over", StringComparison.Ordinal) && l.Contains("forged02", StringComparison.Ordinal));
                using var http = new HttpClient { Timeout = TimeSpan.FromSeconds(60) };
                Assert.Equal("Hello, still!", await http.GetStringAsync($"http://127.0.0.1:{port}/victim/api/Hello?name=still"));
            }
            finally
            {
                await PlatformCommand.StopAsync(restarted);
            }
        }
        finally
        {
            unsignedProcess.Kill();
            otherUsers.Kill();
        }
    }
}
