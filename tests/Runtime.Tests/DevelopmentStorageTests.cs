using System.Text;
using System.Text.Json;
using FaaST.Runtime.Hosting;

namespace FaaST.Runtime.Tests;

/// <summary>
/// FAAST_DEVELOPMENT_STORAGE, the app's own Azurite as the platform gives it to an instance (issue 19): the host starts
/// no Azurite of its own, and every development-storage setting — AzureWebJobsStorage unset, and a binding's named
/// connection set to UseDevelopmentStorage=true — reaches it, for bindings, triggers and the workers' environment.
/// </summary>
public sealed class DevelopmentStorageSettingsTests
{
    private const string Named = "MyStorageConnectionString";

    private static AppSettings Settings(Dictionary<string, string> values, System.Collections.IDictionary? environment = null)
    {
        var dir = Directory.CreateTempSubdirectory("faast-devstorage-");
        File.WriteAllText(Path.Combine(dir.FullName, "local.settings.json"), JsonSerializer.Serialize(new { Values = values }));
        try
        {
            return AppSettings.Load(dir.FullName, environment ?? new System.Collections.Hashtable());
        }
        finally
        {
            dir.Delete(recursive: true);
        }
    }

    [Fact]
    public void Every_setting_on_development_storage_resolves_to_the_given_Azurite_and_the_others_keep_their_own()
    {
        const string given = "DefaultEndpointsProtocol=http;AccountName=appone;AccountKey=a2V5;BlobEndpoint=http://127.0.0.1:1/appone;QueueEndpoint=http://127.0.0.1:2/appone";
        const string own = "DefaultEndpointsProtocol=https;AccountName=other;AccountKey=b3RoZXI=;EndpointSuffix=core.windows.net";
        var settings = Settings(new() { [Named] = "UseDevelopmentStorage=true", ["Elsewhere"] = own, ["WORK"] = "jobs" });
        Assert.True(StorageAccounts.UsesDevelopmentStorage(settings));
        using var accounts = new StorageAccounts(settings, given);
        Assert.Equal(given, accounts.ConnectionString("AzureWebJobsStorage"));
        Assert.Equal(given, accounts.ConnectionString(Named));
        Assert.Equal(own, accounts.ConnectionString("Elsewhere"));
        var workers = StorageAccounts.DevelopmentSettings(settings, given);
        Assert.Equal(new Dictionary<string, string> { ["AzureWebJobsStorage"] = given, [Named] = given }, workers);
    }

    [Fact]
    public void A_named_connection_on_development_storage_needs_an_Azurite_even_when_AzureWebJobsStorage_is_a_real_account()
    {
        var settings = Settings(new()
        {
            ["AzureWebJobsStorage"] = "DefaultEndpointsProtocol=https;AccountName=real;AccountKey=cmVhbA==;EndpointSuffix=core.windows.net",
            [Named] = "UseDevelopmentStorage=true",
        });
        Assert.False(StorageAccounts.NeedsDevelopmentStorage(settings));
        Assert.True(StorageAccounts.UsesDevelopmentStorage(settings));
        Assert.Equal(new[] { Named }, StorageAccounts.DevelopmentSettings(settings, "x").Keys);
    }

    [Fact]
    public void An_identity_based_AzureWebJobsStorage_is_not_redirected_to_the_given_Azurite()
    {
        var settings = Settings(new() { ["AzureWebJobsStorage__accountName"] = "realaccount", [Named] = "UseDevelopmentStorage=true" });
        using var accounts = new StorageAccounts(settings, "AccountName=a;AccountKey=a2V5;BlobEndpoint=http://127.0.0.1:1/a");
        Assert.Null(accounts.ConnectionString("AzureWebJobsStorage"));
        Assert.DoesNotContain("AzureWebJobsStorage", StorageAccounts.DevelopmentSettings(settings, "x").Keys);
    }

    [Theory]
    [InlineData("UseDevelopmentStorage=true", "not UseDevelopmentStorage=true")]
    [InlineData("AccountName=x;AccountKey=!!secret!!", "is not a usable storage connection string")]
    public void A_given_development_storage_that_is_not_an_Azurites_connection_string_is_refused_naming_the_variable_not_its_value(string value, string why)
    {
        var e = Assert.Throws<ArgumentException>(() => StorageHostOptions.GivenDevelopmentStorage(
            new System.Collections.Hashtable { [StorageAccounts.DevelopmentStorageVariable] = value }));
        Assert.Contains(StorageAccounts.DevelopmentStorageVariable, e.Message, StringComparison.Ordinal);
        Assert.Contains(why, e.Message, StringComparison.Ordinal);
        Assert.DoesNotContain("!!secret!!", e.Message, StringComparison.Ordinal);
    }

}

/// <summary>The same through a real host, real workers and a real Azurite (the one the platform would have started for the app).</summary>
[Collection("azurite-queues")]
public sealed class DevelopmentStorageTests(QueueAzuriteFixture azurite)
{
    private const string Named = "MyStorageConnectionString";

    private static string Unique(string prefix) => prefix + Guid.NewGuid().ToString("N")[..12];

    /// <summary>
    /// Regression (issue 19: "connection settings other than AzureWebJobsStorage are not redirected"): before, the host
    /// started an Azurite of its own and the named connection went to 127.0.0.1:10000, so a blob put into the platform's
    /// Azurite for the app never fired the trigger.
    /// </summary>
    [Fact]
    public async Task A_host_given_its_apps_Azurite_starts_none_and_named_connection_triggers_outputs_and_workers_all_reach_it()
    {
        var input = Unique("devin-");
        var queue = Unique("devq-");
        var output = Unique("devout-");
        using var app = new TestApp("python", """{ "version": "2.0", "extensions": { "queues": { "maxPollingInterval": "00:00:00.2" } } }""",
            new() { [Named] = "UseDevelopmentStorage=true", ["IN"] = input, ["WORK"] = queue, ["OUT"] = output });
        app.Function("Split", $$"""
            { "bindings": [
              { "type": "blobTrigger", "direction": "in", "name": "blob", "path": "%IN%/{name}", "connection": "{{Named}}" },
              { "type": "queue", "direction": "out", "name": "$return", "queueName": "%WORK%", "connection": "{{Named}}" } ] }
            """, ("__init__.py", """
            import json
            import azure.functions as func
            def main(blob: func.InputStream) -> str:
                return json.dumps({"name": blob.name.split("/", 1)[1], "text": blob.read().decode()})
            """));
        app.Function("Upper", $$"""
            { "bindings": [
              { "type": "queueTrigger", "direction": "in", "name": "msg", "queueName": "%WORK%", "connection": "{{Named}}" },
              { "type": "blob", "direction": "out", "name": "out", "path": "%OUT%/{name}", "connection": "{{Named}}" } ] }
            """, ("__init__.py", """
            import azure.functions as func
            def main(msg: func.QueueMessage, out: func.Out[str]) -> None:
                out.set(msg.get_json()['text'].upper())
            """));
        app.Function("Env", TestApp.HttpFunctionJson, ("__init__.py", """
            import json, os
            import azure.functions as func
            def main(req: func.HttpRequest) -> str:
                return json.dumps({k: os.environ.get(k) for k in ["AzureWebJobsStorage", "MyStorageConnectionString"]})
            """));

        await using var host = await HostUnderTest.StartAsync(app.Directory, storage: null,
            new() { [StorageAccounts.DevelopmentStorageVariable] = azurite.ConnectionString });
        Assert.DoesNotContain("Azurite is listening", host.Logs.All, StringComparison.Ordinal);
        Assert.Equal(azurite.ConnectionString, host.Host.StorageConnectionString);

        using var env = JsonDocument.Parse(await host.Http.GetStringAsync("api/Env"));
        Assert.Equal(azurite.ConnectionString, env.RootElement.GetProperty("AzureWebJobsStorage").GetString());
        Assert.Equal(azurite.ConnectionString, env.RootElement.GetProperty(Named).GetString());

        var name = Unique("doc-") + ".txt";
        await azurite.Store.CreateContainerIfNotExistsAsync(input);
        await azurite.Store.UploadAsync(input, name, Encoding.UTF8.GetBytes("named connections"));
        string? result = null;
        await Eventually.TrueAsync(async () =>
        {
            var blob = await azurite.Store.DownloadAsync(output, name);
            result = blob is null ? null : Encoding.UTF8.GetString(blob.Data);
            return result is not null;
        }, $"{output}/{name} in the given Azurite (host log:\n{host.Logs.All})");
        Assert.Equal("NAMED CONNECTIONS", result);
    }
}
