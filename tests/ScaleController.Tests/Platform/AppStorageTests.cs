using System.Collections.Concurrent;
using System.Globalization;
using System.Text;
using System.Text.Json;

namespace FaaST.ScaleController.Tests.Platform;

/// <summary>
/// Each app's development storage through the platform as users run it (issue 19): `./faast start` and `./faast platform`
/// as real processes, real instances and workers, real Azurites. An app whose bindings name their own connection setting
/// (tests/apps/named-storage: MyStorageConnectionString = UseDevelopmentStorage=true) runs unchanged — blob trigger, queue
/// trigger and output, HTTP upload to a blob output — on an Azurite of its own with an account of its own; no app's key
/// opens another app's data, and no instance holds the platform's (or the operator's) storage key.
/// </summary>
public sealed class AppStorageTests : IDisposable
{
    private readonly TempDirectory _apps = new("faast-appstorage-");

    public void Dispose() => _apps.Dispose();

    /// <summary>A copy of tests/apps/<paramref name="source"/> in a folder named <paramref name="name"/> (the app's name).</summary>
    private string CopyTestApp(string name, string source = "named-storage")
    {
        var from = Path.Combine(Repo.Root, "tests", "apps", source);
        var target = Path.Combine(_apps.Path, name);
        foreach (var file in Directory.EnumerateFiles(from, "*", SearchOption.AllDirectories))
        {
            var relative = Path.GetRelativePath(from, file);
            if (relative.StartsWith(".faast", StringComparison.Ordinal) || relative.Contains("__pycache__", StringComparison.Ordinal))
                continue;
            Directory.CreateDirectory(Path.GetDirectoryName(Path.Combine(target, relative))!);
            File.Copy(file, Path.Combine(target, relative), overwrite: true);
        }
        return target;
    }

    /// <summary>A connection string's parts (AccountName, AccountKey, BlobEndpoint, ...).</summary>
    private static Dictionary<string, string> Parts(string connectionString) =>
        connectionString.Split(';', StringSplitOptions.RemoveEmptyEntries)
            .Select(p => p.Split('=', 2))
            .ToDictionary(p => p[0], p => p.Length > 1 ? p[1] : "", StringComparer.OrdinalIgnoreCase);

    private static async Task<string?> ReadAsync(string connectionString, string container, string name)
    {
        using var store = new Storage.BlobStore(connectionString);
        try
        {
            var blob = await store.DownloadAsync(container, name);
            return blob is null ? null : Encoding.UTF8.GetString(blob.Data);
        }
        catch (Storage.BlobStorageException e) when (e.Status == 404)
        {
            return null;
        }
    }

    private static async Task<Dictionary<string, string>> EnvironmentOfAsync(HttpClient http, string path)
    {
        using var json = JsonDocument.Parse(await http.GetStringAsync(path));
        return json.RootElement.EnumerateObject().ToDictionary(p => p.Name, p => p.Value.GetString() ?? "", StringComparer.Ordinal);
    }

    /// <summary>
    /// Regression (issue 19, "apps that run on the bare host fail through the platform"): before, the platform handed its
    /// Azurite (without a queue service) to the instance as AzureWebJobsStorage only, so the named connection went to
    /// 127.0.0.1:10000: the blob trigger never fired, the upload answered 503 and no queue binding could work.
    /// </summary>
    [Fact]
    public async Task Start_runs_an_app_whose_bindings_name_their_own_development_storage_setting_with_blob_and_queue_triggers_and_outputs()
    {
        var app = CopyTestApp("namedstore");
        var port = Ports.Free();
        var output = new ConcurrentQueue<string>();
        using var process = PlatformCommand.Start(["start", app, "--port", port.ToString(CultureInfo.InvariantCulture), "--isolation", "off"], output);
        try
        {
            await Eventually.TrueAsync(() => output.Any(l => l.Contains("is served at", StringComparison.Ordinal)) || process.HasExited,
                "the platform to serve the app", () => string.Join('\n', output), seconds: 120);
            Assert.False(process.HasExited, string.Join('\n', output));
            // The app's Azurite keeps its data and account in APP/.faast, as the bare host's did, and is published there.
            var published = DevelopmentStorageFile.Read(app, out var problem);
            Assert.True(published is not null, problem);
            Assert.True(File.Exists(Path.Combine(app, ".faast", "azurite-account")));
            Assert.True(Directory.Exists(Path.Combine(app, ".faast", "azurite")));
            var parts = Parts(published);
            Assert.True(parts.ContainsKey("QueueEndpoint"), "the app's Azurite serves queues");
            using var http = new HttpClient { BaseAddress = new Uri($"http://127.0.0.1:{port}/"), Timeout = TimeSpan.FromSeconds(60) };

            // Blob trigger and blob output on the named connection: a blob put as `./faast blob put` does.
            using (var store = new Storage.BlobStore(published))
            {
                await store.CreateContainerIfNotExistsAsync("uploads");
                await store.UploadAsync("uploads", "a.txt", Encoding.UTF8.GetBytes("named and triggered"));
            }
            string? processed = null;
            await Eventually.TrueAsync(async () => (processed = await ReadAsync(published, "processed", "a.txt")) is not null,
                "processed/a.txt in the app's Azurite");
            Assert.Equal("NAMED AND TRIGGERED", processed);

            // Queue output and queue trigger on the same named connection.
            using (var queued = await http.PostAsync("api/enqueue", new StringContent("""{"name": "q1", "text": "through the queue"}""")))
                Assert.True(queued.IsSuccessStatusCode, $"{queued.StatusCode}: {await queued.Content.ReadAsStringAsync()}\n{string.Join('\n', output.TakeLast(40))}");
            string? done = null;
            await Eventually.TrueAsync(async () => (done = await ReadAsync(published, "done", "q1")) is not null, "done/q1 in the app's Azurite");
            Assert.Equal("THROUGH THE QUEUE", done);

            // An HTTP upload to a blob output on the named connection.
            using (var uploaded = await http.PostAsync("api/upload/h1.txt", new StringContent("uploaded over http")))
                Assert.True(uploaded.IsSuccessStatusCode, $"{uploaded.StatusCode}: {await uploaded.Content.ReadAsStringAsync()}");
            Assert.Equal("uploaded over http", await ReadAsync(published, "uploads-http", "h1.txt"));

            // The workers see the app's Azurite in every development-storage setting, not the literal value.
            var environment = await EnvironmentOfAsync(http, "api/Env");
            Assert.Equal(published, environment["AzureWebJobsStorage"]);
            Assert.Equal(published, environment["MyStorageConnectionString"]);
        }
        finally
        {
            await PlatformCommand.StopAsync(process);
        }
        Assert.False(File.Exists(DevelopmentStorageFile.PathOf(app)), "the published connection is removed at stop");
    }

    /// <summary>
    /// Regression (issue 19, defect 3): before, every app on development storage got the platform's own storage (its
    /// faast-deployments, every other app's data) and every instance inherited the platform's environment, with the
    /// operator's AzureWebJobsStorage in it.
    /// </summary>
    [Fact]
    public async Task Two_apps_on_one_platform_get_accounts_of_their_own_and_hold_no_key_of_the_other_nor_of_the_platforms_storage()
    {
        var operatorAccount = Storage.AzuriteAccount.Generate();
        await using var operatorStorage = await Storage.AzuriteProcess.StartAsync(Repo.Root, account: operatorAccount);
        using var state = new TempDirectory("faast-appstorage-platform-");
        var port = Ports.Free();
        var url = $"http://127.0.0.1:{port}";
        var output = new ConcurrentQueue<string>();
        using var platform = PlatformCommand.Start(["platform", "--port", port.ToString(CultureInfo.InvariantCulture), "--state", state.Path,
            "--azurite-in-memory", "--isolation", "off"], output, operatorStorage.ConnectionString);
        try
        {
            await Eventually.TrueAsync(() => output.Any(l => l.StartsWith("faast: platform at ", StringComparison.Ordinal)) || platform.HasExited,
                "the platform", () => string.Join('\n', output), seconds: 120);
            Assert.False(platform.HasExited, string.Join('\n', output));
            foreach (var name in (string[])["tenanta", "tenantb"])
            {
                var deployed = await PlatformCommand.RunAsync("deploy", CopyTestApp(name), "--platform", url);
                Assert.True(deployed.Code == 0, deployed.Output + "\n" + string.Join('\n', output.TakeLast(40)));
            }
            using var http = new HttpClient { BaseAddress = new Uri(url + "/"), Timeout = TimeSpan.FromSeconds(60) };
            var a = await EnvironmentOfAsync(http, "tenanta/api/Env");
            var b = await EnvironmentOfAsync(http, "tenantb/api/Env");
            var aStorage = Parts(a["MyStorageConnectionString"]);
            var bStorage = Parts(b["MyStorageConnectionString"]);
            Assert.Equal(a["MyStorageConnectionString"], a["AzureWebJobsStorage"]);
            Assert.NotEqual(aStorage["AccountName"], bStorage["AccountName"]);
            Assert.NotEqual(aStorage["AccountKey"], bStorage["AccountKey"]);
            Assert.NotEqual(aStorage["BlobEndpoint"], bStorage["BlobEndpoint"]);

            // B's data, and A's key against B's Azurite (as B's account, and as A's own): refused.
            using (var store = new Storage.BlobStore(b["MyStorageConnectionString"]))
            {
                await store.CreateContainerIfNotExistsAsync("secrets");
                await store.UploadAsync("secrets", "b.txt", Encoding.UTF8.GetBytes("only b"));
            }
            Assert.Equal("only b", await ReadAsync(b["MyStorageConnectionString"], "secrets", "b.txt"));
            var bEndpoint = new Uri(bStorage["BlobEndpoint"]);
            foreach (var (account, endpoint) in new[] { (bStorage["AccountName"], bEndpoint), (aStorage["AccountName"], new Uri(bEndpoint, "/" + aStorage["AccountName"])) })
            {
                var forged = $"DefaultEndpointsProtocol=http;AccountName={account};AccountKey={aStorage["AccountKey"]};BlobEndpoint={endpoint}";
                string? read = null;
                var refused = await Record.ExceptionAsync(async () => read = await ReadAsync(forged, "secrets", "b.txt"));
                Assert.True(read is null, $"A's key read B's blob as {account}: {read}");
                if (account == bStorage["AccountName"])
                    Assert.True(refused is Storage.BlobStorageException { Status: 403 }, $"B's Azurite answered A's key with {refused}");
            }

            // No function's environment holds the platform's storage (the operator's account) in any form.
            foreach (var environment in new[] { a, b })
            {
                Assert.DoesNotContain(environment, e => e.Value.Contains(operatorAccount.Key, StringComparison.Ordinal));
                Assert.DoesNotContain(environment, e => e.Value.Contains(operatorStorage.BlobEndpoint.Authority, StringComparison.Ordinal));
            }
        }
        finally
        {
            await PlatformCommand.StopAsync(platform);
        }
    }

    /// <summary>
    /// Regression: a platform given AzureWebJobsStorage of its own read each app's settings with that variable on top, so
    /// an app whose only development-storage setting is AzureWebJobsStorage looked like one with an account: the platform
    /// started no Azurite for it, and its instance (which never gets the platform's variable) started one inside the
    /// version's folder, whose data went when the version was pruned two deploys later.
    /// </summary>
    [Fact]
    public async Task A_platform_with_storage_of_its_own_still_gives_an_app_on_development_storage_an_Azurite_of_its_own()
    {
        var operatorAccount = Storage.AzuriteAccount.Generate();
        await using var operatorStorage = await Storage.AzuriteProcess.StartAsync(Repo.Root, account: operatorAccount);
        using var state = new TempDirectory("faast-appstorage-own-");
        var app = CopyTestApp("plainstore");
        // The queue functions go: the account given below serves blobs only.
        Directory.Delete(Path.Combine(app, "Enqueue"), recursive: true);
        Directory.Delete(Path.Combine(app, "Worker"), recursive: true);
        // Only AzureWebJobsStorage on development storage; the named connection is an account the app was given.
        File.WriteAllText(Path.Combine(app, "local.settings.json"), JsonSerializer.Serialize(new
        {
            IsEncrypted = false,
            Values = new Dictionary<string, string>
            {
                ["FUNCTIONS_WORKER_RUNTIME"] = "python",
                ["AzureWebJobsStorage"] = "UseDevelopmentStorage=true",
                ["MyStorageConnectionString"] = operatorStorage.ConnectionString,
            },
        }));
        var port = Ports.Free();
        var url = $"http://127.0.0.1:{port}";
        var output = new ConcurrentQueue<string>();
        using var platform = PlatformCommand.Start(["platform", "--port", port.ToString(CultureInfo.InvariantCulture), "--state", state.Path,
            "--isolation", "off"], output, operatorStorage.ConnectionString);
        try
        {
            await Eventually.TrueAsync(() => output.Any(l => l.StartsWith("faast: platform at ", StringComparison.Ordinal)) || platform.HasExited,
                "the platform", () => string.Join('\n', output), seconds: 120);
            Assert.False(platform.HasExited, string.Join('\n', output));
            var deployed = await PlatformCommand.RunAsync("deploy", app, "--platform", url);
            Assert.True(deployed.Code == 0, deployed.Output + "\n" + string.Join('\n', output.TakeLast(40)));
            var started = output.FirstOrDefault(l => l.Contains("App plainstore: its own Azurite", StringComparison.Ordinal));
            Assert.True(started is not null, "the platform started no Azurite for the app:\n" + string.Join('\n', output.TakeLast(40)));

            using var http = new HttpClient { BaseAddress = new Uri(url + "/"), Timeout = TimeSpan.FromSeconds(60) };
            var environment = await EnvironmentOfAsync(http, "plainstore/api/Env");
            var storage = Parts(environment["AzureWebJobsStorage"]);
            // The Azurite the platform started (its data under the state folder, kept across versions), not the operator's.
            Assert.Contains($"http://{new Uri(storage["BlobEndpoint"]).Authority}/", started, StringComparison.Ordinal);
            Assert.Contains(Path.Combine(state.Path, "storage", "plainstore"), started, StringComparison.Ordinal);
            Assert.NotEqual(operatorAccount.Key, storage["AccountKey"]);
        }
        finally
        {
            await PlatformCommand.StopAsync(platform);
        }
    }

    /// <summary>
    /// Regression: an app's own Azurite that could not start while a restarted platform loaded its apps again either
    /// stopped the whole platform (Azurite exited: an InvalidOperationException nothing caught) or left the app out with a
    /// generic line and a 404 saying no such app was deployed (its data folder unusable: an IOException). Now the platform
    /// serves its other apps, says which app's storage failed and why, answers the app's requests with a 503 naming that
    /// storage, and the app's next deploy starts its Azurite again. Each way of breaking it fails the same on every run:
    /// a regular file where the data folder was (tests run as root, so a 000 mode would not stop Azurite), or a folder
    /// where Azurite's blob database file was (Azurite exits with EISDIR before it listens).
    /// </summary>
    [Theory]
    [InlineData("data folder replaced by a file")]
    [InlineData("database replaced by a folder")]
    public async Task An_app_whose_storage_cannot_start_when_the_platform_restarts_gets_503_naming_its_storage_while_the_others_serve_and_its_next_deploy_retries_it(
        string fault)
    {
        // No AzureWebJobsStorage: the platform keeps its deployments in an Azurite of its own under the state folder, so
        // the restarted platform finds both apps there, as `./faast platform` does for a user.
        using var state = new TempDirectory("faast-appstorage-reload-");
        var port = Ports.Free();
        var url = $"http://127.0.0.1:{port}";
        var first = new ConcurrentQueue<string>();
        var arguments = (string[])["platform", "--port", port.ToString(CultureInfo.InvariantCulture), "--state", state.Path, "--isolation", "off"];
        using (var platform = PlatformCommand.Start(arguments, first))
        {
            try
            {
                await Eventually.TrueAsync(() => first.Any(l => l.StartsWith("faast: platform at ", StringComparison.Ordinal)) || platform.HasExited,
                    "the platform", () => string.Join('\n', first), seconds: 120);
                Assert.False(platform.HasExited, string.Join('\n', first));
                foreach (var name in (string[])["healthy", "broken"])
                {
                    var deployed = await PlatformCommand.RunAsync("deploy", Repo.CopySample("python-app", Path.Combine(_apps.Path, name)), "--platform", url);
                    Assert.True(deployed.Code == 0, deployed.Output + "\n" + string.Join('\n', first.TakeLast(40)));
                }
            }
            finally
            {
                await PlatformCommand.StopAsync(platform);
            }
        }

        // Where the platform keeps the broken app's Azurite (STATE/storage/APP/azurite), broken while no platform runs.
        var data = Path.Combine(state.Path, "storage", "broken", "azurite");
        Assert.True(File.Exists(Path.Combine(data, "__azurite_db_blob__.json")), $"the app's Azurite kept no data in {data}: " +
            string.Join('\n', first.TakeLast(40)));
        string cause;
        if (fault == "data folder replaced by a file")
        {
            Directory.Delete(data, recursive: true);
            File.WriteAllText(data, "not a folder");
            cause = "already exists"; // .NET's IOException for a folder whose path is a file
        }
        else
        {
            var database = Path.Combine(data, "__azurite_db_blob__.json");
            File.Delete(database);
            Directory.CreateDirectory(database);
            cause = "EISDIR";
        }

        var restartedPort = Ports.Free();
        var restartedUrl = $"http://127.0.0.1:{restartedPort}";
        var second = new ConcurrentQueue<string>();
        arguments[2] = restartedPort.ToString(CultureInfo.InvariantCulture);
        using var restarted = PlatformCommand.Start(arguments, second);
        try
        {
            await Eventually.TrueAsync(() => second.Any(l => l.StartsWith("faast: platform at ", StringComparison.Ordinal)) || restarted.HasExited,
                "the restarted platform", () => string.Join('\n', second), seconds: 180);
            Assert.False(restarted.HasExited, "the restarted platform stopped: " + string.Join('\n', second));

            using var http = new HttpClient { BaseAddress = new Uri(restartedUrl + "/"), Timeout = TimeSpan.FromSeconds(60) };
            Assert.Equal("Hello, still!", await http.GetStringAsync("healthy/api/Hello?name=still"));
            using (var refused = await http.GetAsync("broken/api/Hello?name=anyone"))
            {
                var body = await refused.Content.ReadAsStringAsync();
                Assert.True(refused.StatusCode == System.Net.HttpStatusCode.ServiceUnavailable, $"{(int)refused.StatusCode}: {body}");
                using var answer = JsonDocument.Parse(body);
                var error = answer.RootElement.GetProperty("error").GetString()!;
                Assert.Contains("\"broken\"", error, StringComparison.Ordinal);
                Assert.Contains(data, error, StringComparison.Ordinal);
                Assert.Contains("next deploy", error, StringComparison.Ordinal);
            }
            var logged = second.Where(l => l.Contains("FaaST.Platform[8246]", StringComparison.Ordinal)).ToList();
            var line = Assert.Single(logged);
            Assert.Contains("App broken v1 is unavailable", line, StringComparison.Ordinal);
            Assert.Contains(data, line, StringComparison.Ordinal);
            Assert.Contains(cause, line, StringComparison.Ordinal);
            Assert.DoesNotContain(second, l => l.Contains("FaaST.Platform[8246]", StringComparison.Ordinal) && l.Contains("App healthy ", StringComparison.Ordinal));

            using (var admin = AdminKey.Client(new Uri(restartedUrl + "/"), AdminKey.Published(restartedUrl)))
            using (var status = JsonDocument.Parse(await admin.GetStringAsync("admin/platform")))
            {
                Assert.Equal(new[] { "healthy" }, status.RootElement.GetProperty("apps").EnumerateArray().Select(a => a.GetProperty("app").GetString()));
                var unavailable = Assert.Single(status.RootElement.GetProperty("unavailable").EnumerateArray());
                Assert.Equal("broken", unavailable.GetProperty("app").GetString());
                Assert.Contains(data, unavailable.GetProperty("reason").GetString()!, StringComparison.Ordinal);
            }

            // Deployed again while still broken: the deploy tries its Azurite again, is refused with 503 naming it, and the
            // app stays unavailable (its requests still say why).
            var stillBroken = await PlatformCommand.RunAsync("deploy", Path.Combine(_apps.Path, "broken"), "--platform", restartedUrl);
            Assert.True(stillBroken.Code == 5, stillBroken.Output);
            Assert.Contains("(503)", stillBroken.Output, StringComparison.Ordinal);
            Assert.Contains(data, stillBroken.Output, StringComparison.Ordinal);
            using (var again = await http.GetAsync("broken/api/Hello?name=anyone"))
                Assert.Equal(System.Net.HttpStatusCode.ServiceUnavailable, again.StatusCode);

            // Repaired, and deployed again: the deploy starts its Azurite again (on fresh data) and the app serves.
            if (File.Exists(data))
                File.Delete(data);
            else
                Directory.Delete(data, recursive: true);
            var redeployed = await PlatformCommand.RunAsync("deploy", Path.Combine(_apps.Path, "broken"), "--platform", restartedUrl);
            Assert.True(redeployed.Code == 0, redeployed.Output + "\n" + string.Join('\n', second.TakeLast(40)));
            Assert.Equal("Hello, again!", await http.GetStringAsync("broken/api/Hello?name=again"));
        }
        finally
        {
            await PlatformCommand.StopAsync(restarted);
        }
    }
}
