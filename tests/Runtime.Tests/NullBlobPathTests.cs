using System.Net;
using System.Net.Http.Json;
using System.Text;
using System.Text.Json;
using FaaST.Storage;

namespace FaaST.Runtime.Tests;

/// <summary>
/// Blob paths whose {expression} holds a JSON null (a FaaST extension; Azure fails such an invocation), and the load-time
/// checks of "ifMatch", with the real host, a real Python worker and Azurite.
/// </summary>
[Collection("azurite")]
public sealed class NullBlobPathTests(AzuriteFixture azurite)
{
    private static StringContent Json(string json) => new(json, Encoding.UTF8, "application/json");

    /// <summary>Pick (POST pick): input BOX/{name}; answers "none" or the blob's text.</summary>
    private const string PickJson = """
        { "bindings": [
          { "type": "httpTrigger", "direction": "in", "name": "req", "authLevel": "anonymous", "methods": ["post"], "route": "pick" },
          { "type": "blob", "direction": "in", "name": "data", "path": "%BOX%/in/{name}", "dataType": "binary" },
          { "type": "http", "direction": "out", "name": "$return" } ] }
        """;

    private const string PickPy = """
        import azure.functions as func

        def main(req: func.HttpRequest, data: func.InputStream) -> func.HttpResponse:
            return func.HttpResponse("none" if data is None else data.read().decode())
        """;

    /// <summary>Put (POST put): output BOX/out/{name}, set when the body says "set".</summary>
    private const string PutJson = """
        { "bindings": [
          { "type": "httpTrigger", "direction": "in", "name": "req", "authLevel": "anonymous", "methods": ["post"], "route": "put" },
          { "type": "blob", "direction": "out", "name": "result", "path": "%BOX%/out/{name}" },
          { "type": "http", "direction": "out", "name": "$return" } ] }
        """;

    private const string PutPy = """
        import azure.functions as func

        def main(req: func.HttpRequest, result: func.Out[str]) -> func.HttpResponse:
            if req.get_json().get("set"):
                result.set("written")
            return func.HttpResponse("done")
        """;

    private static TestApp App(string box) => new TestApp("python", settings: new() { ["BOX"] = box })
        .Function("Pick", PickJson, ("__init__.py", PickPy))
        .Function("Put", PutJson, ("__init__.py", PutPy));

    [Fact]
    public async Task A_blob_input_whose_path_holds_a_json_null_binds_None_without_a_read_and_an_absent_property_is_still_a_400()
    {
        var box = "nulls" + Guid.NewGuid().ToString("N")[..10];
        using var app = App(box);
        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString);
        using (var store = new BlobStore(azurite.ConnectionString))
        {
            await store.CreateContainerIfNotExistsAsync(box);
            await store.UploadAsync(box, "in/a", Encoding.UTF8.GetBytes("alpha"));
        }

        using (var none = await host.Http.PostAsync("/api/pick", Json("""{ "name": null }""")))
            Assert.Equal("none", await none.Content.ReadAsStringAsync());
        // Neither the cache nor storage was asked: no read of any kind was counted.
        var reads = (await host.Http.GetCacheStatusAsync()).Reads;
        Assert.All(reads, r => Assert.Equal(0, r.Value));

        using (var alpha = await host.Http.PostAsync("/api/pick", Json("""{ "name": "a" }""")))
            Assert.Equal("alpha", await alpha.Content.ReadAsStringAsync());
        using var absent = await host.Http.PostAsync("/api/pick", Json("""{ "other": 1 }"""));
        Assert.Equal(HttpStatusCode.BadRequest, absent.StatusCode);
        Assert.Contains("needs a value for {name}", (await absent.Content.ReadFromJsonAsync<JsonElement>()).GetProperty("error").GetString(), StringComparison.Ordinal);
    }

    [Fact]
    public async Task A_blob_output_whose_path_holds_a_json_null_is_not_written_and_setting_it_fails_naming_the_binding()
    {
        var box = "nullo" + Guid.NewGuid().ToString("N")[..10];
        using var app = App(box);
        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString);
        using var store = new BlobStore(azurite.ConnectionString);
        await store.CreateContainerIfNotExistsAsync(box);

        using (var unset = await host.Http.PostAsync("/api/put", Json("""{ "name": null }""")))
        {
            Assert.Equal(HttpStatusCode.OK, unset.StatusCode);
            Assert.Equal("done", await unset.Content.ReadAsStringAsync());
        }
        using (var set = await host.Http.PostAsync("/api/put", Json("""{ "name": null, "set": true }""")))
        {
            Assert.Equal(HttpStatusCode.InternalServerError, set.StatusCode);
            var error = (await set.Content.ReadFromJsonAsync<JsonElement>()).GetProperty("error").GetString();
            Assert.Contains("blob output \"result\" was set, but its path", error, StringComparison.Ordinal);
            Assert.Contains("holds a null value", error, StringComparison.Ordinal);
        }
        Assert.Empty(await store.ListAsync(box).ToListAsync());
    }

    // ---- "ifMatch" at load ------------------------------------------------------------------------------------------

    private static string SaveJson(string ifMatchOn, string named) => $$"""
        { "bindings": [
          { "type": "httpTrigger", "direction": "in", "name": "req", "authLevel": "anonymous", "methods": ["post"] },
          { "type": "blob", "direction": "in", "name": "state", "path": "box/s"{{(ifMatchOn == "state" ? $", \"ifMatch\": \"{named}\"" : "")}} },
          { "type": "blob", "direction": "out", "name": "stateOut", "path": "box/s"{{(ifMatchOn == "stateOut" ? $", \"ifMatch\": \"{named}\"" : "")}} },
          { "type": "queue", "direction": "out", "name": "jobs", "queueName": "jobs"{{(ifMatchOn == "jobs" ? $", \"ifMatch\": \"{named}\"" : "")}} },
          { "type": "http", "direction": "out", "name": "$return" } ] }
        """;

    [Theory]
    [InlineData("stateOut", "nope", "blob output \"stateOut\": ifMatch \"nope\" is not a binding of this function")]
    [InlineData("stateOut", "jobs", "blob output \"stateOut\": ifMatch \"jobs\" is a queue binding with direction \"out\"; it must name a blob input")]
    [InlineData("stateOut", "stateOut", "ifMatch \"stateOut\" is a blob binding with direction \"out\"; it must name a blob input")]
    [InlineData("stateOut", "req", "ifMatch \"req\" is a httpTrigger binding")]
    [InlineData("state", "state", "binding \"state\": ifMatch is for a blob output")]
    [InlineData("jobs", "state", "binding \"jobs\": ifMatch is for a blob output")]
    public void An_ifMatch_that_names_no_blob_input_or_sits_on_no_blob_output_disables_the_function_naming_the_file_the_function_and_the_binding(
        string on, string named, string expected)
    {
        using var app = new TestApp("python").Function("Save", SaveJson(on, named), ("__init__.py", "def main(req, state):\n    return 'x'\n"));
        var loaded = FunctionApp.Load(app.Directory);
        var error = Assert.Single(loaded.Functions).Error;
        Assert.NotNull(error);
        Assert.StartsWith(Path.Combine(app.Directory, "Save", "function.json"), error, StringComparison.Ordinal);
        Assert.Contains("function 'Save'", error, StringComparison.Ordinal);
        Assert.Contains(expected, error, StringComparison.Ordinal);
    }

    [Fact]
    public void A_valid_ifMatch_loads_and_names_its_input()
    {
        using var app = new TestApp("python").Function("Save", SaveJson("stateOut", "STATE"), ("__init__.py", "def main(req, state):\n    return 'x'\n"));
        var function = Assert.Single(FunctionApp.Load(app.Directory).Functions);
        Assert.Null(function.Error);
        Assert.Equal("STATE", Assert.Single(function.Bindings, b => b.Name == "stateOut").IfMatch);
        Assert.Null(Assert.Single(function.Bindings, b => b.Name == "state").IfMatch);
    }
}
