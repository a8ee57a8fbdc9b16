using System.Text;
using FaaST.Runtime.Hosting;
using FaaST.Storage.Tests;

namespace FaaST.Runtime.Tests;

/// <summary>Identity-based storage connections (CONN__serviceUri, __accountName, __credential, __clientId) as Azure Functions defines them.</summary>
public class IdentityConnectionSettingsTests
{
    private static readonly System.Collections.Hashtable NoEnvironment = new();

    /// <summary>A process environment with a token endpoint (what App Service sets).</summary>
    private static string? WithEndpoint(string name) => name switch
    {
        "IDENTITY_ENDPOINT" => "http://127.0.0.1:1/msi/token",
        "IDENTITY_HEADER" => "secret",
        _ => null,
    };

    private static AppSettings Settings(params (string Name, string Value)[] values) =>
        new(values.ToDictionary(v => v.Name, v => v.Value));

    [Fact]
    public void A_service_uri_with_a_managed_identity_is_a_valid_connection_that_needs_no_azurite()
    {
        var settings = Settings(("AzureWebJobsStorage__serviceUri", "https://acct.blob.core.windows.net"),
            ("AzureWebJobsStorage__credential", "managedidentity"), ("AzureWebJobsStorage__clientId", "c0ffee00-0000-0000-0000-000000000001"));
        Assert.Null(StorageAccounts.ConnectionProblem(settings, "AzureWebJobsStorage", WithEndpoint));
        Assert.True(StorageAccounts.IsIdentityBased(settings, "AzureWebJobsStorage"));
        Assert.False(StorageAccounts.NeedsDevelopmentStorage(settings));
        using var accounts = new StorageAccounts(settings, developmentConnectionString: null, environment: WithEndpoint);
        Assert.Equal(new Uri("https://acct.blob.core.windows.net"), accounts.Get("AzureWebJobsStorage").Endpoint);
        Assert.Null(accounts.ConnectionString("AzureWebJobsStorage"));
        Assert.Equal("identity:https://acct.blob.core.windows.net/|c0ffee00-0000-0000-0000-000000000001", accounts.AccountOf("AzureWebJobsStorage"));
    }

    [Theory]
    [InlineData("blobServiceUri", "https://one.blob.core.windows.net/", "https://one.blob.core.windows.net")]
    [InlineData("accountName", "myaccount", "https://myaccount.blob.core.windows.net")]
    public void The_blob_endpoint_comes_from_blobServiceUri_or_accountName_and_the_credential_defaults_to_managed_identity(
        string key, string value, string endpoint)
    {
        var settings = Settings(("Archive__" + key, value), ("Archive__queueServiceUri", "https://one.queue.core.windows.net"));
        Assert.Null(StorageAccounts.ConnectionProblem(settings, "Archive", WithEndpoint));
        using var accounts = new StorageAccounts(settings, null, environment: WithEndpoint);
        Assert.Equal(new Uri(endpoint), accounts.Get("Archive").Endpoint);
    }

    [Fact]
    public void The_colon_spelling_of_json_configuration_works_like_the_double_underscore()
    {
        var settings = Settings(("AzureWebJobsStorage:serviceUri", "https://acct.blob.core.windows.net"));
        Assert.Null(StorageAccounts.ConnectionProblem(settings, "AzureWebJobsStorage", WithEndpoint));
    }

    [Theory]
    [InlineData("AzureWebJobsStorage__credential", "managedidentity", "AzureWebJobsStorage__serviceUri")]
    [InlineData("AzureWebJobsStorage__queueServiceUri", "https://a.queue.core.windows.net", "does not name the blob service")]
    [InlineData("AzureWebJobsStorage__serviceUri", "http://acct.blob.core.windows.net", "not an https URI")]
    [InlineData("AzureWebJobsStorage__serviceUri", "https://acct.blob.core.windows.net/?sv=1&sig=secret", "without query")]
    [InlineData("AzureWebJobsStorage__serviceUri", "not a uri", "not an https URI")]
    [InlineData("AzureWebJobsStorage__accountName", "Bad_Name", "not a storage account name")]
    [InlineData("AzureWebJobsStorage__clientSecret", "s3cret-value", "supports only a managed identity")]
    public void An_identity_set_that_is_incomplete_or_wrong_names_the_setting_and_what_is_missing(string name, string value, string expected)
    {
        var settings = Settings((name, value));
        var problem = StorageAccounts.ConnectionProblem(settings, "AzureWebJobsStorage", WithEndpoint);
        Assert.NotNull(problem);
        Assert.Contains(expected, problem, StringComparison.Ordinal);
        Assert.Contains("AzureWebJobsStorage__", problem, StringComparison.Ordinal);
        Assert.DoesNotContain("s3cret-value", problem, StringComparison.Ordinal);
        Assert.DoesNotContain("sig=secret", problem, StringComparison.Ordinal);
    }

    [Fact]
    public void A_credential_other_than_managedidentity_is_refused_by_name()
    {
        var settings = Settings(("AzureWebJobsStorage__serviceUri", "https://acct.blob.core.windows.net"), ("AzureWebJobsStorage__credential", "azurecli"));
        var problem = StorageAccounts.ConnectionProblem(settings, "AzureWebJobsStorage", WithEndpoint);
        Assert.Contains("Values.AzureWebJobsStorage__credential is \"azurecli\"", problem, StringComparison.Ordinal);
        Assert.Contains("\"managedidentity\"", problem, StringComparison.Ordinal);
    }

    [Fact]
    public void Without_a_token_endpoint_in_the_environment_a_managed_identity_is_a_startup_error_not_a_metadata_probe()
    {
        var settings = Settings(("AzureWebJobsStorage__serviceUri", "https://acct.blob.core.windows.net"));
        var problem = StorageAccounts.ConnectionProblem(settings, "AzureWebJobsStorage", _ => null);
        Assert.NotNull(problem);
        Assert.Contains("identity-based connection AzureWebJobsStorage", problem, StringComparison.Ordinal);
        Assert.Contains("IDENTITY_ENDPOINT", problem, StringComparison.Ordinal);
        using var accounts = new StorageAccounts(settings, null, environment: _ => null);
        var e = Assert.Throws<AppConfigException>(() => accounts.Get("AzureWebJobsStorage"));
        Assert.Contains("IDENTITY_ENDPOINT", e.Message, StringComparison.Ordinal);
    }

    [Fact]
    public void A_binding_connection_that_is_neither_a_connection_string_nor_an_identity_set_is_a_startup_error()
    {
        var problem = StorageAccounts.ConnectionProblem(Settings(), "Archive", WithEndpoint);
        Assert.NotNull(problem);
        Assert.Contains("\"Archive\"", problem, StringComparison.Ordinal);
        Assert.Contains("Archive__serviceUri", problem, StringComparison.Ordinal);
        Assert.Null(StorageAccounts.ConnectionProblem(Settings(), "AzureWebJobsStorage", WithEndpoint)); // the runtime's Azurite
    }

    [Fact]
    public void Identity_settings_given_only_as_environment_variables_are_read_and_named_as_such()
    {
        using var app = new TestApp("python").Function("F", TestApp.HttpFunctionJson, ("__init__.py", ""));
        var env = new System.Collections.Hashtable
        {
            ["Archive__serviceUri"] = "http://archive.blob.core.windows.net",
            ["AzureWebJobsStorage__accountName"] = "acct",
            ["UNRELATED__thing"] = "x",
        };
        var settings = AppSettings.Load(app.Directory, env);
        Assert.Equal("acct", settings["AzureWebJobsStorage__accountName"]);
        Assert.Null(settings["UNRELATED__thing"]);
        Assert.False(StorageAccounts.NeedsDevelopmentStorage(settings));
        var problem = StorageAccounts.ConnectionProblem(settings, "Archive", WithEndpoint);
        Assert.Contains("environment variable Archive__serviceUri", problem, StringComparison.Ordinal);
    }

    [Fact]
    public void An_incomplete_identity_based_AzureWebJobsStorage_stops_the_app_from_loading()
    {
        using var app = new TestApp("python", settings: new() { ["AzureWebJobsStorage__credential"] = "managedidentity" })
            .Function("F", TestApp.HttpFunctionJson, ("__init__.py", ""));
        var e = Assert.Throws<AppConfigException>(() => FunctionApp.Load(app.Directory, NoEnvironment));
        Assert.Contains("AzureWebJobsStorage__serviceUri", e.Message, StringComparison.Ordinal);
        Assert.Contains("missing", e.Message, StringComparison.Ordinal);
    }

    [Fact]
    public void The_cooperative_cache_over_an_identity_based_connection_needs_FAAST_PEER_SECRET()
    {
        using var app = new TestApp("python", settings: new() { ["AzureWebJobsStorage__accountName"] = "acct" });
        var loaded = new FunctionApp
        {
            Directory = app.Directory, Host = HostConfig.Load(app.Directory), WorkerRuntime = "python", Functions = [], Warnings = [],
            Settings = Settings(("AzureWebJobsStorage__accountName", "acct")),
        };
        var e = Assert.Throws<AppConfigException>(() => PeerSecret.Resolve(loaded, connectionString: null));
        Assert.Contains("FAAST_PEER_SECRET", e.Message, StringComparison.Ordinal);
        Assert.Contains("identity-based", e.Message, StringComparison.Ordinal);
        Assert.False(File.Exists(PeerSecret.LocalSecretFile(loaded)), "no local random secret may stand in for a shared one");
    }
}

/// <summary>
/// A real host whose AzureWebJobsStorage is identity-based: HTTPS Azurite with --oauth basic, a token endpoint on
/// loopback. Azure.Identity reads IDENTITY_ENDPOINT from this process's environment, so these tests run alone.
/// </summary>
[Collection(IdentityHostCollection.Name)]
public class IdentityConnectionHostTests
{
    [Fact]
    public async Task A_host_with_an_identity_based_AzureWebJobsStorage_reads_and_writes_blobs_through_a_function()
    {
        await using var env = await IdentityTestEnvironment.StartAsync(Repo.Root);
        using var scope = new EnvironmentScope(env.IdentityVariables.ToDictionary(p => p.Key, p => (string?)p.Value));
        using var shared = env.SharedKeyStore();
        await shared.CreateContainerIfNotExistsAsync("docs");
        await shared.UploadAsync("docs", "a.txt", "hello identity"u8.ToArray());

        var clientId = Guid.NewGuid().ToString();
        using var app = new TestApp("python", settings: new()
        {
            ["AzureWebJobsStorage__serviceUri"] = env.ServiceUri.ToString(),
            ["AzureWebJobsStorage__credential"] = "managedidentity",
            ["AzureWebJobsStorage__clientId"] = clientId,
            ["FAAST_PEER_SECRET"] = Convert.ToBase64String(System.Security.Cryptography.RandomNumberGenerator.GetBytes(32)),
        }).Function("Copy", """
            { "bindings": [
              { "type": "httpTrigger", "direction": "in", "name": "req", "route": "copy/{name}" },
              { "type": "blob", "direction": "in", "name": "inblob", "path": "docs/{name}", "dataType": "binary" },
              { "type": "blob", "direction": "out", "name": "outblob", "path": "copies/{name}" },
              { "type": "http", "direction": "out", "name": "$return" } ] }
            """, ("__init__.py", "def main(req, inblob, outblob):\n    if inblob is None:\n        return 'missing'\n    data = inblob.read()\n    outblob.set(data.upper())\n    return str(len(data))\n"));
        await using var host = await HostUnderTest.StartAsync(app.Directory, storage: null,
            configure: o => o with { StorageOptions = env.Options() });
        Assert.Null(host.Host.StorageConnectionString); // no Azurite of its own, no key anywhere

        Assert.Equal("14", await host.Http.GetStringAsync("/api/copy/a.txt"));
        var copy = await shared.DownloadAsync("copies", "a.txt");
        Assert.Equal("HELLO IDENTITY", Encoding.UTF8.GetString(copy!.Data));
        Assert.True(env.Tokens.Issued >= 1);
        Assert.All(env.Tokens.Requests, r => Assert.Contains("client_id=" + clientId, r, StringComparison.Ordinal));
        Assert.All(env.Tokens.Requests, r => Assert.EndsWith("header-ok", r, StringComparison.Ordinal));

        // A missing blob is no blob (None), as with any connection, not an authentication failure.
        Assert.Equal("missing", await host.Http.GetStringAsync("/api/copy/none.txt"));
    }

    [Fact]
    public async Task A_host_whose_identity_based_storage_has_no_token_endpoint_refuses_to_start_naming_the_setting()
    {
        using var scope = new EnvironmentScope(new Dictionary<string, string?>
        {
            ["IDENTITY_ENDPOINT"] = null, ["IDENTITY_HEADER"] = null, ["MSI_ENDPOINT"] = null,
        });
        using var app = new TestApp("python", settings: new() { ["AzureWebJobsStorage__accountName"] = "acct" })
            .Function("F", TestApp.HttpFunctionJson, ("__init__.py", "def main(req):\n    return 'x'\n"));
        var e = await Assert.ThrowsAsync<AppConfigException>(() => HostUnderTest.StartAsync(app.Directory, storage: null));
        Assert.Contains("AzureWebJobsStorage", e.Message, StringComparison.Ordinal);
        Assert.Contains("IDENTITY_ENDPOINT", e.Message, StringComparison.Ordinal);
    }
}

[CollectionDefinition(Name, DisableParallelization = true)]
public sealed class IdentityHostCollection
{
    public const string Name = "Identity host (process environment)";
}
