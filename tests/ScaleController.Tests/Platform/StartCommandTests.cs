using System.Collections.Concurrent;
using System.Diagnostics;
using System.Globalization;
using System.Net;
using System.Net.Sockets;
using System.Text.Json;

namespace FaaST.ScaleController.Tests.Platform;

/// <summary>
/// `./faast start APPDIR` as a user runs it: the platform process (FaaST.ScaleController.dll start) with its own
/// Azurite, the frontend on the app's port and the instance behind it, the same URLs and admin endpoints as one
/// host before, and a clean stop on SIGTERM.
/// </summary>
public sealed class StartCommandTests : IDisposable
{
    private readonly TempDirectory _apps = new("faast-start-");

    public void Dispose() => _apps.Dispose();

    private string CopySample(string name) => Repo.CopySample("python-app", Path.Combine(_apps.Path, name));

    [Fact]
    public async Task Start_serves_the_app_on_its_port_with_the_same_urls_and_admin_endpoints_and_stops_cleanly_on_sigterm()
    {
        var app = CopySample("startapp");
        var port = Ports.Free();
        var output = new ConcurrentQueue<string>();
        using var process = PlatformCommand.Start(["start", app, "--port", port.ToString(CultureInfo.InvariantCulture), "--azurite-in-memory", "--isolation", "off"], output);
        try
        {
            await Eventually.TrueAsync(() => output.Any(l => l.Contains("is served at", StringComparison.Ordinal)) || process.HasExited,
                "the platform to serve the app", () => string.Join('\n', output), seconds: 120);
            Assert.False(process.HasExited, string.Join('\n', output));
            var url = $"http://127.0.0.1:{port}";
            using var http = AdminKey.Client(new Uri(url + "/"), AdminKey.Published(url), TimeSpan.FromSeconds(30));

            Assert.Equal("Hello, World!", await http.GetStringAsync("api/Hello?name=World"));
            using var status = JsonDocument.Parse(await http.GetStringAsync("admin/host/status"));
            Assert.Equal("Running", status.RootElement.GetProperty("state").GetString());
            Assert.Contains(status.RootElement.GetProperty("functions").EnumerateArray(), f => f.GetProperty("name").GetString() == "WordCount");
            using var cache = JsonDocument.Parse(await http.GetStringAsync("admin/cache"));
            Assert.True(cache.RootElement.GetProperty("enabled").GetBoolean());
            using var platform = JsonDocument.Parse(await http.GetStringAsync("admin/platform"));
            var only = Assert.Single(platform.RootElement.GetProperty("apps").EnumerateArray());
            Assert.Equal("startapp", only.GetProperty("app").GetString());
            var instancePid = Assert.Single(only.GetProperty("instances").EnumerateArray()).GetProperty("processId").GetInt32();
            Assert.True(File.Exists(Path.Combine(app, ".faast", "azurite-connection")), "`./faast blob` finds the platform's Azurite");

            Process.Start("kill", ["-TERM", process.Id.ToString(CultureInfo.InvariantCulture)])!.WaitForExit();
            using var timeout = new CancellationTokenSource(TimeSpan.FromSeconds(60));
            await process.WaitForExitAsync(timeout.Token);
            Assert.Equal(0, process.ExitCode);
            Assert.False(Directory.Exists($"/proc/{instancePid}") && !File.ReadAllText($"/proc/{instancePid}/stat").Contains(") Z ", StringComparison.Ordinal),
                "the instance outlived the platform");
        }
        finally
        {
            if (!process.HasExited)
                process.Kill(entireProcessTree: true);
        }
    }

    [Fact]
    public async Task Start_stopped_by_sigterm_stops_its_instance_and_its_persistent_azurite_which_keeps_what_was_written()
    {
        // The persistent Azurite (APP/.faast/azurite) is the one stopped with SIGTERM (its data is flushed); until
        // issue 19 it then hung on its lifeline and was killed 10 s later, which kept the platform from exiting.
        var app = CopySample("sigtermapp");
        var port = Ports.Free().ToString(CultureInfo.InvariantCulture);
        var output = new ConcurrentQueue<string>();
        using var process = PlatformCommand.Start(["start", app, "--port", port, "--isolation", "off"], output);
        string connection;
        int instancePid;
        try
        {
            await Eventually.TrueAsync(() => output.Any(l => l.Contains("is served at", StringComparison.Ordinal)) || process.HasExited,
                "the platform to serve the app", () => string.Join('\n', output), seconds: 120);
            Assert.False(process.HasExited, string.Join('\n', output));
            using var http = AdminKey.Client(new Uri($"http://127.0.0.1:{port}/"), AdminKey.Published($"http://127.0.0.1:{port}"), TimeSpan.FromSeconds(30));
            using var platform = JsonDocument.Parse(await http.GetStringAsync("admin/platform"));
            instancePid = Assert.Single(Assert.Single(platform.RootElement.GetProperty("apps").EnumerateArray()).GetProperty("instances").EnumerateArray())
                .GetProperty("processId").GetInt32();
            connection = DevelopmentStorageFile.Read(app, out var problem) ?? throw new InvalidOperationException(problem);
            using (var store = new Storage.BlobStore(connection))
            {
                await store.CreateContainerIfNotExistsAsync("kept");
                await store.UploadAsync("kept", "last-write", "written just before SIGTERM"u8.ToArray());
            }

            Process.Start("kill", ["-TERM", process.Id.ToString(CultureInfo.InvariantCulture)])!.WaitForExit();
            using var timeout = new CancellationTokenSource(TimeSpan.FromSeconds(120));
            await process.WaitForExitAsync(timeout.Token);
        }
        finally
        {
            if (!process.HasExited)
                process.Kill(entireProcessTree: true);
        }

        Assert.Equal(0, process.ExitCode);
        Assert.Contains(output, l => l.Contains("drained and stopped", StringComparison.Ordinal));
        Assert.False(Directory.Exists($"/proc/{instancePid}") && !File.ReadAllText($"/proc/{instancePid}/stat").Contains(") Z ", StringComparison.Ordinal),
            "the instance outlived the platform");
        var blob = new Uri(connection.Split(';').Single(p => p.StartsWith("BlobEndpoint=", StringComparison.Ordinal))["BlobEndpoint=".Length..]);
        using (var probe = new TcpClient())
            await Assert.ThrowsAnyAsync<SocketException>(() => probe.ConnectAsync(blob.Host, blob.Port)); // its Azurite is gone too

        // What was written before the stop is still there for the next start.
        var again = new ConcurrentQueue<string>();
        using var second = PlatformCommand.Start(["start", app, "--port", port, "--isolation", "off"], again);
        try
        {
            await Eventually.TrueAsync(() => again.Any(l => l.Contains("is served at", StringComparison.Ordinal)) || second.HasExited,
                "the platform to serve the app again", () => string.Join('\n', again), seconds: 120);
            var reopened = DevelopmentStorageFile.Read(app, out var problem) ?? throw new InvalidOperationException(problem);
            using var store = new Storage.BlobStore(reopened);
            var kept = await store.DownloadAsync("kept", "last-write");
            Assert.Equal("written just before SIGTERM", System.Text.Encoding.UTF8.GetString(kept!.Data));
        }
        finally
        {
            Process.Start("kill", ["-TERM", second.Id.ToString(CultureInfo.InvariantCulture)])!.WaitForExit();
            using var timeout = new CancellationTokenSource(TimeSpan.FromSeconds(120));
            await second.WaitForExitAsync(timeout.Token);
        }
    }

    [Fact]
    public async Task Start_with_a_bad_policy_is_one_line_naming_the_file_and_key_and_exit_3()
    {
        var app = CopySample("badpolicy");
        File.WriteAllText(Path.Combine(app, "faast.json"), """{ "scale": { "maxInstances": 0 } }""");
        var output = new ConcurrentQueue<string>();
        using var process = PlatformCommand.Start(["start", app, "--port", "0"], output);
        using var timeout = new CancellationTokenSource(TimeSpan.FromSeconds(60));
        await process.WaitForExitAsync(timeout.Token);
        Assert.Equal(3, process.ExitCode);
        var line = Assert.Single(output);
        Assert.StartsWith("faast: the app cannot start: ", line, StringComparison.Ordinal);
        Assert.Contains("faast.json", line, StringComparison.Ordinal);
        Assert.Contains("scale.maxInstances", line, StringComparison.Ordinal);
    }

    /// <summary>Regression: an app whose own Azurite could not start ended `./faast start` with an unhandled exception's
    /// stack trace. A regular file where its data folder goes fails the same on every run, as root too.</summary>
    [Fact]
    public async Task Start_whose_app_storage_cannot_start_is_one_line_naming_its_data_folder_and_exit_3()
    {
        var app = CopySample("brokenstore");
        var data = Path.Combine(app, ".faast", "azurite");
        Directory.CreateDirectory(Path.GetDirectoryName(data)!);
        File.WriteAllText(data, "not a folder");
        var output = new ConcurrentQueue<string>();
        using var process = PlatformCommand.Start(["start", app, "--port", Ports.Free().ToString(CultureInfo.InvariantCulture), "--isolation", "off"], output);
        await PlatformCommand.WaitForExitAsync(process);
        Assert.True(process.ExitCode == 3, $"exit {process.ExitCode}: {string.Join('\n', output)}");
        var line = Assert.Single(output, l => l.StartsWith("faast: the app cannot start: ", StringComparison.Ordinal));
        Assert.Contains("\"brokenstore\"", line, StringComparison.Ordinal);
        Assert.Contains(data, line, StringComparison.Ordinal);
        Assert.DoesNotContain(output, l => l.Contains("Unhandled exception", StringComparison.Ordinal));
    }

    /// <summary>Regression: a platform whose storage did not answer at start ended with an unhandled exception's stack trace
    /// (exit 134), after publishing its admin credential, which stayed behind. Nothing listens on a free port just picked.</summary>
    [Fact]
    public async Task Platform_whose_storage_does_not_answer_is_one_line_naming_it_and_exit_5_leaving_no_credential()
    {
        using var state = new TempDirectory("faast-nostorage-");
        var dead = Ports.Free();
        var port = Ports.Free();
        var storage = $"DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey={Storage.AzuriteAccount.Generate().Key};" +
            $"BlobEndpoint=http://127.0.0.1:{dead}/devstoreaccount1;QueueEndpoint=http://127.0.0.1:{dead}/devstoreaccount1;";
        var output = new ConcurrentQueue<string>();
        using var process = PlatformCommand.Start(["platform", "--port", port.ToString(CultureInfo.InvariantCulture), "--state", state.Path,
            "--isolation", "off"], output, storage);
        await PlatformCommand.WaitForExitAsync(process);
        Assert.True(process.ExitCode == 5, $"exit {process.ExitCode}: {string.Join('\n', output)}");
        var line = Assert.Single(output, l => l.StartsWith("faast: the platform cannot start: its storage", StringComparison.Ordinal));
        Assert.Contains($"127.0.0.1:{dead}", line, StringComparison.Ordinal);
        Assert.DoesNotContain(output, l => l.Contains("Unhandled exception", StringComparison.Ordinal));
        Assert.False(File.Exists(ScaleController.Platform.LocalCredentials.PathFor(Repo.Root, new Uri($"http://127.0.0.1:{port}/"))), "the admin credential was left behind");
    }

    [Fact]
    public async Task Start_on_a_taken_port_is_one_line_and_exit_4_before_azurite_starts()
    {
        var app = CopySample("takenport");
        using var taken = new TcpListener(IPAddress.Loopback, 0);
        taken.Start();
        var port = ((IPEndPoint)taken.LocalEndpoint).Port;
        var output = new ConcurrentQueue<string>();
        using var process = PlatformCommand.Start(["start", app, "--port", port.ToString(CultureInfo.InvariantCulture)], output);
        using var timeout = new CancellationTokenSource(TimeSpan.FromSeconds(60));
        await process.WaitForExitAsync(timeout.Token);
        Assert.Equal(4, process.ExitCode);
        Assert.StartsWith($"faast: port {port} on 127.0.0.1", Assert.Single(output), StringComparison.Ordinal);
        Assert.False(Directory.Exists(Path.Combine(app, ".faast", "azurite")));
    }

    [Fact]
    public async Task A_platform_that_crashed_is_restarted_and_takes_over_the_running_instance_instead_of_starting_another()
    {
        await using var azurite = await Storage.AzuriteProcess.StartAsync(Repo.Root);
        using var state = new TempDirectory("faast-platform-crash-");
        var port = Ports.Free();
        string[] args = ["platform", "--port", port.ToString(CultureInfo.InvariantCulture), "--state", state.Path, "--isolation", "off"];
        try
        {
            await CrashAndTakeOverAsync(azurite, args, port);
        }
        finally
        {
            // Whatever failed: no instance of this test outlives it (a crashed platform's instances run on by design).
            KillProcessesMentioning(state.Path);
        }
    }

    private async Task CrashAndTakeOverAsync(Storage.AzuriteProcess azurite, string[] args, int port)
    {
        var first = new ConcurrentQueue<string>();
        using var crashing = PlatformCommand.Start(args, first, azurite.ConnectionString);
        int pid;
        string id;
        // The admin key is the state folder's: the restarted platform has the same.
        using var http = AdminKey.Client(new Uri($"http://127.0.0.1:{port}/"), await AdminKeyOfStateAsync(args));
        try
        {
            await Eventually.TrueAsync(() => first.Any(l => l.StartsWith("faast: platform at ", StringComparison.Ordinal)) || crashing.HasExited,
                "the first platform", () => string.Join('\n', first), seconds: 120);
            using var zip = new MemoryStream();
            // An app with a storage account of its own: its instances may outlive a crashed platform (an app on development
            // storage has its Azurite in the platform, so its instances end with it).
            var survivor = CopySample("survivor");
            File.WriteAllText(Path.Combine(survivor, "local.settings.json"), JsonSerializer.Serialize(new
            {
                Values = new Dictionary<string, string> { ["FUNCTIONS_WORKER_RUNTIME"] = "python", ["AzureWebJobsStorage"] = azurite.ConnectionString },
            }));
            FaaST.ScaleController.Deploy.Packager.Zip(survivor, zip, includeSettings: true);
            zip.Position = 0;
            using (var deployed = await http.PutAsync("admin/platform/apps/survivor", new StreamContent(zip)))
                Assert.True(deployed.IsSuccessStatusCode, await deployed.Content.ReadAsStringAsync());
            (id, pid) = await OnlyInstanceAsync(http);
        }
        finally
        {
            crashing.Kill(); // SIGKILL: the platform crashes, its instance is left running
            await crashing.WaitForExitAsync();
        }
        using (var direct = new HttpClient())
            Assert.Equal("Hello, orphan!", await direct.GetStringAsync(new Uri(new Uri(await InstanceAddressAsync(azurite.ConnectionString, id)), "api/Hello?name=orphan")));

        var second = new ConcurrentQueue<string>();
        using var restarted = PlatformCommand.Start(args, second, azurite.ConnectionString);
        try
        {
            await Eventually.TrueAsync(() => second.Any(l => l.StartsWith("faast: platform at ", StringComparison.Ordinal)) || restarted.HasExited,
                "the restarted platform", () => string.Join('\n', second), seconds: 120);
            Assert.Equal("Hello, again!", await http.GetStringAsync("survivor/api/Hello?name=again"));
            Assert.Equal((id, pid), await OnlyInstanceAsync(http));

            Process.Start("kill", ["-TERM", restarted.Id.ToString(CultureInfo.InvariantCulture)])!.WaitForExit();
            using var timeout = new CancellationTokenSource(TimeSpan.FromSeconds(60));
            await restarted.WaitForExitAsync(timeout.Token);
            Assert.Equal(0, restarted.ExitCode);
            await Eventually.TrueAsync(() => !Directory.Exists($"/proc/{pid}") || File.ReadAllText($"/proc/{pid}/stat").Contains(") Z ", StringComparison.Ordinal),
                "the adopted instance to stop with the platform", seconds: 30);
        }
        finally
        {
            if (!restarted.HasExited)
                restarted.Kill(entireProcessTree: true);
        }
    }

    /// <summary>The admin key in the --state folder of <paramref name="args"/>, made now as the platform would (it reads the same).</summary>
    private static Task<string> AdminKeyOfStateAsync(string[] args)
    {
        var state = args[Array.IndexOf(args, "--state") + 1];
        return Task.FromResult(FaaST.ScaleController.Platform.PlatformKeys.LoadOrCreate(state).AdminKey);
    }

    private static void KillProcessesMentioning(string path)
    {
        foreach (var dir in Directory.EnumerateDirectories("/proc").Where(d => int.TryParse(Path.GetFileName(d), out _)))
        {
            try
            {
                if (File.ReadAllText(Path.Combine(dir, "cmdline")).Contains(path, StringComparison.Ordinal))
                    Process.GetProcessById(int.Parse(Path.GetFileName(dir), CultureInfo.InvariantCulture)).Kill(entireProcessTree: true);
            }
            catch (Exception e) when (e is IOException or UnauthorizedAccessException or ArgumentException or InvalidOperationException)
            {
                // ended meanwhile
            }
        }
    }

    private static async Task<(string Id, int Pid)> OnlyInstanceAsync(HttpClient http)
    {
        using var platform = JsonDocument.Parse(await http.GetStringAsync("admin/platform"));
        var instance = Assert.Single(Assert.Single(platform.RootElement.GetProperty("apps").EnumerateArray()).GetProperty("instances").EnumerateArray());
        return (instance.GetProperty("id").GetString()!, instance.GetProperty("processId").GetInt32());
    }

    /// <summary>Where the instance listens, from the record the platform keeps in storage.</summary>
    private static async Task<string> InstanceAddressAsync(string storage, string id)
    {
        using var store = new Storage.BlobStore(storage);
        var record = await store.DownloadAsync("faast-deployments", $"survivor/instances/{id}.json");
        Assert.NotNull(record);
        using var json = JsonDocument.Parse(record.Data);
        return json.RootElement.GetProperty("baseAddress").GetString()!;
    }

    [Fact]
    public async Task Deploy_and_status_commands_talk_to_a_running_platform_and_a_bad_app_is_refused_naming_the_file_and_key()
    {
        using var state = new TempDirectory("faast-platform-cli-");
        var port = Ports.Free();
        var url = $"http://127.0.0.1:{port}";
        var output = new ConcurrentQueue<string>();
        using var platform = PlatformCommand.Start(["platform", "--port", port.ToString(CultureInfo.InvariantCulture), "--state", state.Path,
            "--azurite-in-memory", "--isolation", "off"], output);
        try
        {
            // "faast: Azurite for the platform at ..." comes first and also contains "platform at": wait for the platform's own line.
            await Eventually.TrueAsync(() => output.Any(l => l.StartsWith("faast: platform at ", StringComparison.Ordinal)) || platform.HasExited,
                "the platform", () => string.Join('\n', output), seconds: 120);
            Assert.False(platform.HasExited, string.Join('\n', output));
            var app = CopySample("cliapp");

            var deployed = await PlatformCommand.RunAsync("deploy", app, "--platform", url);
            Assert.True(deployed.Code == 0, deployed.Output);
            Assert.StartsWith("deployed cliapp v1 (", deployed.Output, StringComparison.Ordinal);
            using (var http = new HttpClient())
                Assert.Equal("Hello, cli!", await http.GetStringAsync($"{url}/cliapp/api/Hello?name=cli"));

            var status = await PlatformCommand.RunAsync("status", "--platform", url);
            Assert.Equal(0, status.Code);
            Assert.Contains("cliapp v1: 1 instance(s)", status.Output, StringComparison.Ordinal);
            Assert.Contains(" ready ", status.Output, StringComparison.Ordinal);

            File.WriteAllText(Path.Combine(app, "Hello", "function.json"), """{ "bindings": [ { "type": "nosuchTrigger", "direction": "in", "name": "req" } ] }""");
            var refused = await PlatformCommand.RunAsync("deploy", app, "--platform", url);
            Assert.Equal(3, refused.Code);
            Assert.StartsWith("faast: deploy refused: ", refused.Output, StringComparison.Ordinal);
            Assert.Contains("Hello/function.json", refused.Output, StringComparison.Ordinal);
            Assert.Contains("v1:", (await PlatformCommand.RunAsync("status", "--platform", url)).Output, StringComparison.Ordinal);

            var unreachable = await PlatformCommand.RunAsync("status", "--platform", $"http://127.0.0.1:{Ports.Free()}");
            Assert.Equal(5, unreachable.Code);
            Assert.StartsWith("faast: cannot reach the platform at ", unreachable.Output, StringComparison.Ordinal);
        }
        finally
        {
            await PlatformCommand.StopAsync(platform);
        }
    }

    [Fact]
    public async Task Start_on_development_storage_leaves_no_instance_behind_when_the_platform_is_killed()
    {
        // The platform's Azurite dies with it (its guard), so an instance left running could only fail: it ends too.
        var app = CopySample("tiedapp");
        var port = Ports.Free();
        var output = new ConcurrentQueue<string>();
        using var process = PlatformCommand.Start(["start", app, "--port", port.ToString(CultureInfo.InvariantCulture), "--azurite-in-memory", "--isolation", "off"], output);
        int pid;
        try
        {
            await Eventually.TrueAsync(() => output.Any(l => l.Contains("is served at", StringComparison.Ordinal)) || process.HasExited,
                "the platform to serve the app", () => string.Join('\n', output), seconds: 120);
            var url = $"http://127.0.0.1:{port}";
            using var http = AdminKey.Client(new Uri(url + "/"), AdminKey.Published(url));
            (_, pid) = await OnlyInstanceAsync(http);
        }
        finally
        {
            process.Kill(); // SIGKILL: no cleanup of the platform's own runs
            await process.WaitForExitAsync();
        }
        await Eventually.TrueAsync(() => !Directory.Exists($"/proc/{pid}") || File.ReadAllText($"/proc/{pid}/stat").Contains(") Z ", StringComparison.Ordinal),
            "the instance to end with its platform", seconds: 60);
    }
}
