using System.Net;
using System.Net.Http.Json;
using System.Text;
using System.Text.Json;

namespace FaaST.Runtime.Tests;

/// <summary>Binding expressions along property paths of a JSON body, with the real host, worker and Azurite.</summary>
[Collection("azurite")]
public sealed class NestedBindingHostTests(AzuriteFixture azurite)
{
    private static StringContent Json(string json) => new(json, Encoding.UTF8, "application/json");

    [Fact]
    public async Task Dotted_paths_into_a_json_body_name_output_and_input_blobs_case_insensitively_and_a_missing_segment_is_a_400()
    {
        using var app = new TestApp("python")
            .Function("Save", """
                { "bindings": [
                  { "type": "httpTrigger", "direction": "in", "name": "req", "methods": ["post"], "route": "save" },
                  { "type": "blob", "direction": "out", "name": "out", "path": "{bucket}/{location.country}/{Location.City}.txt" },
                  { "type": "http", "direction": "out", "name": "$return" } ] }
                """, ("__init__.py", "def main(req, out):\n    out.set(req.get_json()['text'])\n    return 'saved'\n"))
            .Function("Read", """
                { "bindings": [
                  { "type": "httpTrigger", "direction": "in", "name": "req", "methods": ["post"], "route": "read" },
                  { "type": "blob", "direction": "in", "name": "inblob", "path": "{bucket}/{place.country}/{place.city}.txt" },
                  { "type": "http", "direction": "out", "name": "$return" } ] }
                """, ("__init__.py", "def main(req, inblob):\n    return inblob.read().decode()\n"));
        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString);
        var bucket = "geo" + Guid.NewGuid().ToString("N")[..8];

        var saved = await host.Http.PostAsync("/api/save",
            Json($$"""{"bucket": "{{bucket}}", "location": {"country": "fr", "city": "paris", "zip": 75001}, "text": "bonjour"}"""));
        Assert.Equal("saved", await saved.Content.ReadAsStringAsync());
        var blob = await host.Blobs!.DownloadAsync(bucket, "fr/paris.txt");
        Assert.Equal("bonjour", Encoding.UTF8.GetString(blob!.Data));

        // Other casing at every level of the path, as Azure Functions matches names.
        var read = await host.Http.PostAsync("/api/read", Json($$"""{"BUCKET": "{{bucket}}", "Place": {"COUNTRY": "fr", "city": "paris"} }"""));
        Assert.Equal("bonjour", await read.Content.ReadAsStringAsync());

        var missing = await host.Http.PostAsync("/api/save", Json($$"""{"bucket": "{{bucket}}", "location": {"city": "paris"}, "text": "x"}"""));
        Assert.Equal(HttpStatusCode.BadRequest, missing.StatusCode);
        var error = (await missing.Content.ReadFromJsonAsync<JsonElement>()).GetProperty("error").GetString();
        Assert.Contains("binding \"out\"", error);
        Assert.Contains("needs a value for {location.country}: the JSON body's \"location\" has no property \"country\"", error);

        var array = await host.Http.PostAsync("/api/save", Json($$"""{"bucket": "{{bucket}}", "location": [{"country": "fr"}], "text": "x"}"""));
        Assert.Equal(HttpStatusCode.BadRequest, array.StatusCode);
        Assert.Contains("needs a value for {location.country}: the JSON body's \"location\" is an array; binding expressions name object properties, not array elements",
            (await array.Content.ReadFromJsonAsync<JsonElement>()).GetProperty("error").GetString());
    }
}
