using System.Net;
using System.Text;
using System.Text.Json;
using FaaST.Runtime.Http;
using FaaST.Runtime.Hosting;
using Microsoft.Extensions.Logging.Abstractions;

namespace FaaST.Runtime.Tests;

/// <summary>authLevel and access keys (x-functions-key / ?code=), from storage and from settings, and the admin API's master key.</summary>
[Collection("azurite")]
public sealed class FunctionKeyTests(AzuriteFixture azurite)
{
    private static string Http(string level, string route, string extra = "") => $$"""
        { {{extra}} "bindings": [
          { "type": "httpTrigger", "direction": "in", "name": "req", {{(level.Length == 0 ? "" : $"\"authLevel\": \"{level}\",")}} "route": "{{route}}" },
          { "type": "http", "direction": "out", "name": "$return" } ] }
        """;

    private const string Ok = "def main(req):\n    return 'ok'\n";

    /// <summary>An app under a unique name (its host id, so its keys do not meet another test's in the shared Azurite).</summary>
    private static TestApp KeysApp(out string hostId, Dictionary<string, string>? settings = null)
    {
        hostId = "keys-" + Guid.NewGuid().ToString("N")[..10];
        return new TestApp("python", settings: settings, name: hostId)
            .Function("Fn", Http("", "fn"), ("__init__.py", Ok)) // no authLevel: function, Azure's default
            .Function("Other", Http("function", "other"), ("__init__.py", Ok))
            .Function("Adm", Http("admin", "adm"), ("__init__.py", Ok))
            .Function("Sys", Http("system", "sys"), ("__init__.py", Ok))
            .Function("Open", Http("anonymous", "open"), ("__init__.py", Ok))
            .Function("Off", Http("function", "off", "\"disabled\": true,"), ("__init__.py", Ok));
    }

    private static readonly Dictionary<string, string> Enforce = new() { [HttpKeyCheck.EnforceSetting] = "true" };

    private static async Task<HttpStatusCode> Status(HttpClient http, string path, string? header = null)
    {
        using var request = new HttpRequestMessage(HttpMethod.Get, path);
        if (header is not null)
            request.Headers.Add("x-functions-key", header);
        using var response = await http.SendAsync(request);
        return response.StatusCode;
    }

    private static async Task<string> KeyAsync(HostUnderTest host, string blob, Func<JsonElement, JsonElement> pick)
    {
        var content = await host.Blobs!.DownloadAsync(FunctionKeys.SecretsContainer, blob);
        Assert.NotNull(content);
        using var doc = JsonDocument.Parse(content.Data);
        var key = pick(doc.RootElement);
        Assert.False(key.GetProperty("encrypted").GetBoolean());
        return key.GetProperty("value").GetString()!;
    }

    [Fact]
    public async Task On_loopback_keys_are_not_checked_unless_asked_as_Core_Tools_does_locally()
    {
        using var app = KeysApp(out _);
        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString);
        Assert.Equal(HttpStatusCode.OK, await Status(host.Http, "/api/fn"));
        Assert.Equal(HttpStatusCode.OK, await Status(host.Http, "/api/adm"));
        Assert.Equal(HttpStatusCode.OK, await Status(host.Http, "/admin/host/status"));
        Assert.Contains("HTTP keys are not checked", host.Logs.All, StringComparison.Ordinal);
    }

    [Fact]
    public async Task Keys_created_in_storage_open_what_their_level_allows_and_nothing_else()
    {
        using var app = KeysApp(out var hostId);
        string master, hostKey, fnKey;
        await using (var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString, Enforce))
        {
            // Created on first start, as the Azure host does: HOSTID/host.json and HOSTID/FUNCTION.json.
            master = await KeyAsync(host, $"{hostId}/host.json", r => r.GetProperty("masterKey"));
            hostKey = await KeyAsync(host, $"{hostId}/host.json", r => r.GetProperty("functionKeys")[0]);
            fnKey = await KeyAsync(host, $"{hostId}/fn.json", r => r.GetProperty("keys")[0]);
            var otherKey = await KeyAsync(host, $"{hostId}/other.json", r => r.GetProperty("keys")[0]);
            Assert.Equal(4, new[] { master, hostKey, fnKey, otherKey }.Distinct().Count());
            var http = host.Http;

            // No key, a wrong key, an empty key: 401 with the reason.
            using (var none = await http.GetAsync("/api/fn"))
            {
                Assert.Equal(HttpStatusCode.Unauthorized, none.StatusCode);
                Assert.Contains("function Fn needs a key (authLevel function)", await none.Content.ReadAsStringAsync(), StringComparison.Ordinal);
            }
            Assert.Equal(HttpStatusCode.Unauthorized, await Status(http, "/api/fn", "not-a-key-of-this-app-at-all"));
            Assert.Equal(HttpStatusCode.Unauthorized, await Status(http, "/api/fn?code="));
            // Header or ?code=; the header wins when both are sent (Azure's order).
            Assert.Equal(HttpStatusCode.OK, await Status(http, "/api/fn", hostKey));
            Assert.Equal(HttpStatusCode.OK, await Status(http, "/api/fn?code=" + Uri.EscapeDataString(hostKey)));
            Assert.Equal(HttpStatusCode.Unauthorized, await Status(http, "/api/fn?code=" + Uri.EscapeDataString(hostKey), "wrong-key-in-the-header-0123"));
            // A function key opens its function only; a host key every function-level one; the master key everything.
            Assert.Equal(HttpStatusCode.OK, await Status(http, "/api/fn", fnKey));
            Assert.Equal(HttpStatusCode.Unauthorized, await Status(http, "/api/other", fnKey));
            Assert.Equal(HttpStatusCode.OK, await Status(http, "/api/other", otherKey));
            Assert.Equal(HttpStatusCode.OK, await Status(http, "/api/other", master));
            // admin level: the master key only; system level: a system key or the master key.
            using (var adm = await http.SendAsync(new HttpRequestMessage(HttpMethod.Get, "/api/adm") { Headers = { { "x-functions-key", hostKey } } }))
            {
                Assert.Equal(HttpStatusCode.Unauthorized, adm.StatusCode);
                Assert.Contains("needs the master key", await adm.Content.ReadAsStringAsync(), StringComparison.Ordinal);
            }
            Assert.Equal(HttpStatusCode.OK, await Status(http, "/api/adm", master));
            Assert.Equal(HttpStatusCode.Unauthorized, await Status(http, "/api/sys", hostKey));
            Assert.Equal(HttpStatusCode.OK, await Status(http, "/api/sys", master));
            // anonymous: no key needed, a wrong one refused nothing.
            Assert.Equal(HttpStatusCode.OK, await Status(http, "/api/open"));
            Assert.Equal(HttpStatusCode.OK, await Status(http, "/api/open", "anything-at-all-here-0123"));
            // Disabled: 401 without a key (keys come first, as in Azure), 404 with one.
            Assert.Equal(HttpStatusCode.Unauthorized, await Status(http, "/api/off"));
            Assert.Equal(HttpStatusCode.NotFound, await Status(http, "/api/off", hostKey));
            // The admin API: the master key; the ping stays open (a health probe).
            Assert.Equal(HttpStatusCode.Unauthorized, await Status(http, "/admin/host/status"));
            Assert.Equal(HttpStatusCode.Unauthorized, await Status(http, "/admin/host/status", hostKey));
            Assert.Equal(HttpStatusCode.Unauthorized, await Status(http, "/admin/cache", fnKey));
            // Prewarm's view (what was pre-warmed, names of the app's blobs) is admin API too.
            Assert.Equal(HttpStatusCode.Unauthorized, await Status(http, "/admin/prewarm"));
            Assert.Equal(HttpStatusCode.Unauthorized, await Status(http, "/admin/prewarm", hostKey));
            Assert.Equal(HttpStatusCode.OK, await Status(http, "/admin/prewarm", master));
            Assert.Equal(HttpStatusCode.OK, await Status(http, "/admin/host/status", master));
            Assert.Equal(HttpStatusCode.OK, await Status(http, "/admin/cache?code=" + Uri.EscapeDataString(master)));
            Assert.Equal(HttpStatusCode.OK, await Status(http, "/admin/host/ping"));

            // No key value is ever logged (the refusals name the method, the path and the reason).
            var logs = host.Logs.All;
            Assert.Contains("refused with 401", logs, StringComparison.Ordinal);
            foreach (var key in new[] { master, hostKey, fnKey, otherKey, Uri.EscapeDataString(master) })
                Assert.DoesNotContain(key, logs, StringComparison.Ordinal);
        }

        // A restart reads the same keys back.
        await using var again = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString, Enforce);
        Assert.Equal(HttpStatusCode.OK, await Status(again.Http, "/api/fn", fnKey));
        Assert.Equal(HttpStatusCode.OK, await Status(again.Http, "/admin/host/status", master));
        Assert.DoesNotContain("Created azure-webjobs-secrets", again.Logs.All, StringComparison.Ordinal);
    }

    [Fact]
    public async Task Keys_an_Azure_host_wrote_to_storage_are_used_as_they_are()
    {
        using var app = KeysApp(out var hostId);
        using var store = new FaaST.Storage.BlobStore(azurite.ConnectionString);
        await store.CreateContainerIfNotExistsAsync(FunctionKeys.SecretsContainer);
        const string Master = "seeded-master-key-0123456789abcdef", Host = "seeded-host-key-0123456789abcdef", Fn = "seeded-fn-key-0123456789abcdef";
        await store.UploadAsync(FunctionKeys.SecretsContainer, $"{hostId}/host.json", Encoding.UTF8.GetBytes($$"""
            { "masterKey": { "name": "master", "value": "{{Master}}", "encrypted": false },
              "functionKeys": [ { "name": "default", "value": "{{Host}}", "encrypted": false } ],
              "systemKeys": [], "hostName": "x.azurewebsites.net", "instanceId": "0000", "source": "runtime", "decryptionKeyId": "" }
            """));
        await store.UploadAsync(FunctionKeys.SecretsContainer, $"{hostId}/fn.json", Encoding.UTF8.GetBytes($$"""
            { "keys": [ { "name": "default", "value": "{{Fn}}", "encrypted": false } ], "hostName": null, "instanceId": "0000", "source": "runtime", "decryptionKeyId": "" }
            """));
        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString, Enforce);
        Assert.Equal(HttpStatusCode.OK, await Status(host.Http, "/api/fn", Fn));
        Assert.Equal(HttpStatusCode.OK, await Status(host.Http, "/api/other", Host));
        Assert.Equal(HttpStatusCode.OK, await Status(host.Http, "/admin/host/status", Master));
        Assert.Equal(HttpStatusCode.Unauthorized, await Status(host.Http, "/api/other", Fn));
        Assert.DoesNotContain($"Created {FunctionKeys.SecretsContainer}/{hostId}/host.json", host.Logs.All, StringComparison.Ordinal);
        Assert.Contains($"Created {FunctionKeys.SecretsContainer}/{hostId}/other.json", host.Logs.All, StringComparison.Ordinal);
    }

    [Fact]
    public async Task An_encrypted_key_document_stops_the_start_naming_the_blob()
    {
        using var app = KeysApp(out var hostId);
        using var store = new FaaST.Storage.BlobStore(azurite.ConnectionString);
        await store.CreateContainerIfNotExistsAsync(FunctionKeys.SecretsContainer);
        await store.UploadAsync(FunctionKeys.SecretsContainer, $"{hostId}/host.json", Encoding.UTF8.GetBytes("""
            { "masterKey": { "name": "master", "value": "CfDJ8AAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "encrypted": true }, "functionKeys": [] }
            """));
        var e = await Assert.ThrowsAsync<AppConfigException>(() => HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString, Enforce));
        Assert.Contains($"azure-webjobs-secrets/{hostId}/host.json", e.Message, StringComparison.Ordinal);
        Assert.Contains("encrypted", e.Message, StringComparison.Ordinal);
    }

    [Fact]
    public async Task Keys_from_app_settings_and_the_environment_with_the_kubernetes_storage_type()
    {
        const string Master = "settings-master-key-0123456789", Host = "settings-host-key-0123456789", Fn = "environment-fn-key-0123456789";
        using var app = KeysApp(out var hostId, new()
        {
            [HttpKeyCheck.StorageTypeSetting] = "kubernetes",
            ["host.master"] = Master,
            ["host.function.default"] = Host,
        });
        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString,
            new() { [HttpKeyCheck.EnforceSetting] = "true", ["functions.fn.default"] = Fn });
        Assert.Equal(HttpStatusCode.OK, await Status(host.Http, "/api/fn", Fn));
        Assert.Equal(HttpStatusCode.Unauthorized, await Status(host.Http, "/api/other", Fn));
        Assert.Equal(HttpStatusCode.OK, await Status(host.Http, "/api/other", Host));
        Assert.Equal(HttpStatusCode.OK, await Status(host.Http, "/api/adm", Master));
        Assert.Equal(HttpStatusCode.Unauthorized, await Status(host.Http, "/admin/host/status", Host));
        Assert.Equal(HttpStatusCode.OK, await Status(host.Http, "/admin/host/status", Master));
        Assert.Contains("keys from app settings", host.Logs.All, StringComparison.Ordinal);
        // Nothing was written to storage for this app.
        Assert.Null(await host.Blobs!.GetPropertiesAsync(FunctionKeys.SecretsContainer, $"{hostId}/host.json"));
    }

    [Fact]
    public async Task Beyond_loopback_keys_are_checked_without_being_asked()
    {
        using var app = KeysApp(out var hostId);
        // Bound to the wildcard for a moment; the test dials loopback only.
        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString,
            configure: o => o with { ListenAddress = "0.0.0.0", Peers = false });
        using var http = new HttpClient { BaseAddress = new Uri($"http://127.0.0.1:{host.Host.BaseAddress.Port}") };
        Assert.Equal(HttpStatusCode.Unauthorized, await Status(http, "/api/fn"));
        Assert.Equal(HttpStatusCode.Unauthorized, await Status(http, "/admin/host/status"));
        Assert.Equal(HttpStatusCode.OK, await Status(http, "/api/open"));
        var master = await KeyAsync(host, $"{hostId}/host.json", r => r.GetProperty("masterKey"));
        Assert.Equal(HttpStatusCode.OK, await Status(http, "/admin/host/status", master));
        Assert.Contains("HTTP keys are checked (listening on 0.0.0.0)", host.Logs.All, StringComparison.Ordinal);
    }

    [Fact]
    public async Task An_instance_group_beyond_loopback_reads_its_instances_status_with_the_master_key()
    {
        using var app = KeysApp(out _);
        // Bound to the wildcard for a moment; the group and the test dial loopback only.
        await using var group = await InstanceGroup.StartAsync(new InstanceGroupOptions
        {
            AppDirectory = app.Directory,
            Count = 1,
            StorageConnectionString = azurite.ConnectionString,
            Arguments = ["--workers", "1", "--listen", "0.0.0.0", "--isolation", "off"],
            Environment = new Dictionary<string, string> { ["FAAST_PEER_SECRET"] = "keys-group-peer-secret-0123456789" },
            StartupTimeout = TimeSpan.FromSeconds(60),
            LogDirectory = Path.Combine(Path.GetDirectoryName(app.Directory)!, "logs"),
        });
        using var http = new HttpClient();
        Assert.Equal(HttpStatusCode.Unauthorized, await Status(http, new Uri(group[0].BaseAddress, "admin/host/status").ToString()));
        Assert.False(string.IsNullOrEmpty(group[0].Id));
    }

    private static HostOptions Resolve(TestApp app, string listen, Dictionary<string, string> environment)
    {
        var env = new System.Collections.Hashtable();
        foreach (var (k, v) in environment)
            env[k] = v;
        var options = new RuntimeHostOptions
        {
            AppDirectory = app.Directory, HomeDirectory = Repo.Root, Isolation = IsolationMode.Off,
            Environment = env, ListenAddress = listen, Peers = false,
        };
        return HostOptions.Resolve(options, FunctionApp.Load(app.Directory, env), NullLogger.Instance);
    }

    [Theory]
    [InlineData("127.0.0.1", "FAAST_ENFORCE_KEYS", "yes", "must be true or false (or 1 or 0)")]
    [InlineData("127.0.0.1", "FAAST_ENFORCE_KEYS", "2", "must be true or false (or 1 or 0)")]
    [InlineData("0.0.0.0", "FAAST_ENFORCE_KEYS", "0", "beyond loopback, where keys are always checked")]
    [InlineData("0.0.0.0", "FAAST_ENFORCE_KEYS", "false", "beyond loopback, where keys are always checked")]
    [InlineData("127.0.0.1", "AzureWebJobsSecretStorageType", "files", "FaaST keeps keys in blob storage")]
    public void A_bad_key_setting_is_an_error_naming_the_setting(string listen, string setting, string value, string reason)
    {
        using var app = KeysApp(out _);
        var e = Assert.Throws<AppConfigException>(() => Resolve(app, listen, new() { [setting] = value }));
        Assert.Contains("environment variable " + setting, e.Message, StringComparison.Ordinal);
        Assert.Contains(reason, e.Message, StringComparison.Ordinal);
    }

    // Issue 19, defect 8: the platform set FAAST_ENFORCE_KEYS=1, refused as "must be true or false", and no instance started.
    [Theory]
    [InlineData("127.0.0.1", "1", true)]
    [InlineData("127.0.0.1", "TRUE", true)]
    [InlineData("127.0.0.1", " true ", true)]
    [InlineData("127.0.0.1", "0", false)]
    [InlineData("127.0.0.1", "False", false)]
    [InlineData("0.0.0.0", "1", true)]
    public void FAAST_ENFORCE_KEYS_takes_true_false_1_or_0_in_any_case(string listen, string value, bool enforced)
    {
        using var app = KeysApp(out _);
        Assert.Equal(enforced, Resolve(app, listen, new() { [HttpKeyCheck.EnforceSetting] = value }).Serving.EnforceKeys);
    }

    [Fact]
    public void Keys_are_checked_beyond_loopback_or_when_asked_and_not_otherwise()
    {
        using var app = KeysApp(out _);
        Assert.False(Resolve(app, "127.0.0.1", []).Serving.EnforceKeys);
        Assert.False(Resolve(app, "::1", []).Serving.EnforceKeys);
        Assert.True(Resolve(app, "127.0.0.1", Enforce).Serving.EnforceKeys);
        Assert.True(Resolve(app, "0.0.0.0", []).Serving.EnforceKeys);
        Assert.True(Resolve(app, "0.0.0.0", Enforce).Serving.EnforceKeys);
    }

    [Theory]
    [InlineData("bogus", "is not an authorization level")]
    [InlineData("user", "needs App Service authentication")]
    public void An_unknown_auth_level_puts_the_function_in_error_naming_the_file_and_key(string level, string reason)
    {
        using var app = new TestApp("python").Function("Bad", Http(level, "bad"), ("__init__.py", Ok));
        var f = FunctionApp.Load(app.Directory, new System.Collections.Hashtable()).Functions.Single();
        Assert.NotNull(f.Error);
        Assert.Contains(Path.Combine("Bad", "function.json"), f.Error, StringComparison.Ordinal);
        Assert.Contains("bindings[0].authLevel", f.Error, StringComparison.Ordinal);
        Assert.Contains(reason, f.Error, StringComparison.Ordinal);
    }

    [Fact]
    public void A_key_grants_the_highest_level_it_holds_and_a_function_key_only_its_function()
    {
        var keys = new FunctionKeys("master-0123456789abcdef", [new("default", "host-0123456789abcdef")], [new("ext", "system-0123456789abcdef")],
            new() { ["Fn"] = [new("default", "fn-0123456789abcdef")] }, "test");
        Assert.Equal(AuthLevel.Admin, keys.LevelOf("master-0123456789abcdef", "Fn"));
        Assert.Equal(AuthLevel.System, keys.LevelOf("system-0123456789abcdef", null));
        Assert.Equal(AuthLevel.Function, keys.LevelOf("host-0123456789abcdef", "Other"));
        Assert.Equal(AuthLevel.Function, keys.LevelOf("fn-0123456789abcdef", "fn"));
        Assert.Null(keys.LevelOf("fn-0123456789abcdef", "Other"));
        Assert.Null(keys.LevelOf("fn-0123456789abcdef", null));
        Assert.Null(keys.LevelOf("master-0123456789abcdeF", "Fn"));
        Assert.Null(keys.LevelOf("master-0123456789abcde", "Fn"));
    }
}
