using System.Net;
using System.Net.Http.Json;
using System.Text;
using System.Text.Json;

namespace FaaST.Runtime.Tests;

/// <summary>What a function that does not run shows (status, start-up list, its route) and what a failing blob trigger logs.</summary>
[Collection("azurite")]
public sealed class FunctionProblemTests(AzuriteFixture azurite)
{
    private const string CosmosJson = """
        { "bindings": [
          { "type": "httpTrigger", "direction": "in", "name": "req", "methods": ["get"], "route": "items/{id}" },
          { "type": "cosmosDB", "direction": "in", "name": "doc", "databaseName": "db", "collectionName": "items", "id": "{id}" },
          { "type": "http", "direction": "out", "name": "$return" } ] }
        """;

    [Fact]
    public async Task Functions_that_do_not_run_show_disabled_with_the_reason_in_the_status_and_the_start_up_list()
    {
        using var app = new TestApp("python", settings: new() { ["AzureWebJobs.BySetting.Disabled"] = "true" })
            .Function("Good", TestApp.HttpFunctionJson, ("__init__.py", "def main(req):\n    return 'ok'\n"))
            .Function("Broken", "{ \"bindings\": [ ", ("__init__.py", ""))
            .Function("Cosmos", CosmosJson, ("__init__.py", "def main(req, doc):\n    return 'never'\n"))
            .Function("Off", TestApp.HttpFunctionJson.Replace("{ \"bindings\"", "{ \"disabled\": true, \"bindings\"", StringComparison.Ordinal),
                ("__init__.py", "def main(req):\n    return 'off'\n"))
            .Function("BySetting", TestApp.HttpFunctionJson, ("__init__.py", "def main(req):\n    return 'off'\n"))
            .Function("Crash", TestApp.HttpFunctionJson, ("__init__.py", "def main(req):\n    return (\n"));
        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString);
        Assert.Equal("ok", await host.Http.GetStringAsync("/api/Good"));

        var status = await host.Http.GetHostStatusAsync();
        var byName = status.Functions.ToDictionary(f => f.Name);
        Assert.Equal((false, null, null), (byName["Good"].Disabled, byName["Good"].Error, byName["Good"].Reason));

        var broken = byName["Broken"];
        Assert.True(broken.Disabled);
        Assert.Contains(Path.Combine("Broken", "function.json") + ": not valid JSON", broken.Reason);
        Assert.Equal(broken.Error, broken.Reason);

        var cosmos = byName["Cosmos"];
        Assert.True(cosmos.Disabled);
        Assert.Equal("httpTrigger", cosmos.Trigger);
        Assert.Contains("bindings[1].type \"cosmosDB\" is not a supported binding (binding \"doc\"", cosmos.Reason);

        Assert.Equal((true, null), (byName["Off"].Disabled, byName["Off"].Error));
        Assert.Equal($"{Path.Combine(app.Directory, "Off", "function.json")}: \"disabled\" is true", byName["Off"].Reason);
        Assert.Equal((true, null, "the app setting AzureWebJobs.BySetting.Disabled is true"),
            (byName["BySetting"].Disabled, byName["BySetting"].Error, byName["BySetting"].Reason));

        // The worker's load error: known once a worker has loaded the app, which it has, having answered Good.
        var crash = byName["Crash"];
        Assert.True(crash.Disabled);
        Assert.NotNull(crash.Error);
        Assert.Equal(crash.Error, crash.Reason);

        // The same as raw JSON, as a client without the contract's records sees it.
        var raw = await host.Http.GetFromJsonAsync<JsonElement>("/admin/host/status");
        var rawBroken = raw.GetProperty("functions").EnumerateArray().Single(f => f.GetProperty("name").GetString() == "Broken");
        Assert.True(rawBroken.GetProperty("disabled").GetBoolean());
        Assert.Contains("not valid JSON", rawBroken.GetProperty("reason").GetString());

        var list = host.Logs.All;
        Assert.Contains($"  Broken (disabled: {Path.Combine(app.Directory, "Broken", "function.json")}: not valid JSON (line 1, position ", list);
        Assert.Contains($"  Cosmos (disabled: {Path.Combine(app.Directory, "Cosmos", "function.json")}: bindings[1].type \"cosmosDB\" is not a supported binding", list);
        Assert.Contains($"): [GET] {host.Host.BaseAddress}api/items/{{id}}", list);
        Assert.Contains("  Off (disabled: ", list);
        Assert.Contains("  Good: [", list);
        Assert.DoesNotContain("(error)", list);
    }

    [Fact]
    public async Task A_function_with_an_unsupported_binding_type_answers_500_naming_function_binding_and_type_on_its_own_route()
    {
        using var app = new TestApp("python").Function("Cosmos", CosmosJson, ("__init__.py", "def main(req, doc):\n    return 'never'\n"));
        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString);

        var response = await host.Http.GetAsync("/api/items/42");
        Assert.Equal(HttpStatusCode.InternalServerError, response.StatusCode);
        var body = await response.Content.ReadFromJsonAsync<JsonElement>();
        Assert.Equal("Cosmos", body.GetProperty("function").GetString());
        var error = body.GetProperty("error").GetString();
        Assert.StartsWith("function Cosmos cannot run: ", error);
        Assert.Contains("bindings[1].type \"cosmosDB\" is not a supported binding (binding \"doc\"; supported: ", error);
        // Its route is the one function.json gives; the folder name is no route.
        Assert.Equal(HttpStatusCode.NotFound, (await host.Http.GetAsync("/api/Cosmos")).StatusCode);
    }

    [Fact]
    public async Task A_failing_blob_trigger_logs_the_container_and_the_blob_of_each_attempt()
    {
        var container = "failing-" + Guid.NewGuid().ToString("N")[..8];
        using var app = new TestApp("python", hostJson: """
                { "version": "2.0", "extensions": { "blobs": { "pollingInterval": "00:00:00.2", "maxDequeueCount": 2 } } }
                """)
            .Function("Fail", $$"""
                { "bindings": [ { "type": "blobTrigger", "direction": "in", "name": "blob", "path": "{{container}}/{name}" } ] }
                """, ("__init__.py", "def main(blob):\n    raise ValueError('boom')\n"));
        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString);
        await host.Blobs!.CreateContainerIfNotExistsAsync(container);
        await host.Blobs.UploadAsync(container, "in/sub/x.txt", Encoding.UTF8.GetBytes("x"));

        await Eventually.TrueAsync(() => host.Logs.All.Contains("Poison blob: Fail", StringComparison.Ordinal), "the last attempt");
        var path = $"{container}/in/sub/x.txt";
        var lines = host.Logs.Lines.Where(l => l.Contains("blob " + path, StringComparison.Ordinal)).ToList();
        Assert.Contains(lines, l => l.Contains("Executed Fail (", StringComparison.Ordinal) &&
            l.Contains($"for blob {path} failed (attempt 1 of 2)", StringComparison.Ordinal));
        Assert.Contains(lines, l => l.Contains($"Poison blob: Fail gave up on blob {path}", StringComparison.Ordinal) &&
            l.Contains("after 2 attempts", StringComparison.Ordinal));
    }
}
