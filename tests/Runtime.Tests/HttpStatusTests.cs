using System.Net;
using System.Text;

namespace FaaST.Runtime.Tests;

/// <summary>The HTTP answers Azure Functions gives by default, on the real host with a real worker.</summary>
[Collection("azurite")]
public sealed class HttpStatusTests(AzuriteFixture azurite)
{
    private static string Http(string route, string? methods = null, string extra = "") => $$"""
        { {{extra}} "bindings": [
          { "type": "httpTrigger", "direction": "in", "name": "req", "authLevel": "anonymous", "route": "{{route}}"{{(methods is null ? "" : $", \"methods\": [{methods}]")}} },
          { "type": "http", "direction": "out", "name": "$return" } ] }
        """;

    private const string EchoMethod = "def main(req):\n    return req.method\n";

    [Fact]
    public async Task A_function_without_an_http_output_answers_200_with_an_empty_body()
    {
        var container = "status-" + Guid.NewGuid().ToString("N")[..8];
        using var app = new TestApp("python")
            .Function("Store", $$"""
                { "bindings": [
                  { "type": "httpTrigger", "direction": "in", "name": "req", "authLevel": "anonymous", "route": "store/{name}" },
                  { "type": "blob", "direction": "out", "name": "$return", "path": "{{container}}/{name}" } ] }
                """, ("__init__.py", "def main(req):\n    return 'stored'\n"))
            .Function("Nothing", Http("nothing"), ("__init__.py", "def main(req):\n    return None\n"));
        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString);

        var stored = await host.Http.PostAsync("/api/store/a.txt", new StringContent("x"));
        Assert.Equal(HttpStatusCode.OK, stored.StatusCode);
        Assert.Empty(await stored.Content.ReadAsByteArrayAsync());
        Assert.Equal(0, stored.Content.Headers.ContentLength);
        Assert.Equal("stored", Encoding.UTF8.GetString((await host.Blobs!.DownloadAsync(container, "a.txt"))!.Data));

        var nothing = await host.Http.GetAsync("/api/nothing");
        Assert.Equal(HttpStatusCode.OK, nothing.StatusCode);
        Assert.Empty(await nothing.Content.ReadAsByteArrayAsync());
    }

    [Fact]
    public async Task Methods_routes_and_disabled_functions_answer_as_in_Azure_Functions()
    {
        using var app = new TestApp("python", settings: new() { ["AzureWebJobs.OffBySetting.Disabled"] = "true" })
            .Function("Get", Http("Items/{id:int}", "\"get\""), ("__init__.py", EchoMethod))
            .Function("Any", Http("any"), ("__init__.py", EchoMethod))
            .Function("Off", Http("off", extra: "\"disabled\": true,"), ("__init__.py", EchoMethod))
            .Function("OffBySetting", Http("offbysetting"), ("__init__.py", EchoMethod));
        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString);

        // Routes match without regard to case, the prefix included.
        Assert.Equal("GET", await host.Http.GetStringAsync("/api/items/5"));
        Assert.Equal("GET", await host.Http.GetStringAsync("/API/ITEMS/5"));
        // A method the function does not list is a 404 (ASP.NET Core alone says 405), HEAD included.
        Assert.Equal(HttpStatusCode.NotFound, (await host.Http.DeleteAsync("/api/items/5")).StatusCode);
        Assert.Equal(HttpStatusCode.NotFound, (await host.Http.SendAsync(new HttpRequestMessage(HttpMethod.Head, "/api/items/5"))).StatusCode);
        // ...and a path its constraint refuses is a 404 whatever the method.
        Assert.Equal(HttpStatusCode.NotFound, (await host.Http.DeleteAsync("/api/items/abc")).StatusCode);
        // Without "methods", every method reaches the function: HEAD (headers, no body) and OPTIONS too.
        var head = await host.Http.SendAsync(new HttpRequestMessage(HttpMethod.Head, "/api/any"));
        Assert.Equal(HttpStatusCode.OK, head.StatusCode);
        Assert.Empty(await head.Content.ReadAsByteArrayAsync());
        var options = await host.Http.SendAsync(new HttpRequestMessage(HttpMethod.Options, "/api/any"));
        Assert.Equal("OPTIONS", await options.Content.ReadAsStringAsync());
        // Disabled in function.json or by AzureWebJobs.NAME.Disabled: 404.
        Assert.Equal(HttpStatusCode.NotFound, (await host.Http.GetAsync("/api/off")).StatusCode);
        Assert.Equal(HttpStatusCode.NotFound, (await host.Http.GetAsync("/api/offbysetting")).StatusCode);
        var status = await host.Http.GetHostStatusAsync();
        Assert.True(status.Functions.Single(f => f.Name == "Off").Disabled);
        Assert.True(status.Functions.Single(f => f.Name == "OffBySetting").Disabled);
    }

    [Fact]
    public async Task A_route_conflict_puts_the_later_function_in_error_naming_both_and_the_first_keeps_serving()
    {
        using var app = new TestApp("python")
            .Function("A1", Http("shared", "\"get\""), ("__init__.py", "def main(req):\n    return 'A1'\n"))
            .Function("A2", Http("/Shared/", "\"post\", \"GET\""), ("__init__.py", "def main(req):\n    return 'A2'\n"))
            .Function("B1", Http("split", "\"get\""), ("__init__.py", "def main(req):\n    return 'B1'\n"))
            .Function("B2", Http("split", "\"post\""), ("__init__.py", "def main(req):\n    return 'B2'\n"))
            .Function("Reserved", Http("admin/mine"), ("__init__.py", "def main(req):\n    return 'R'\n"));
        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString);

        Assert.Equal("A1", await host.Http.GetStringAsync("/api/shared"));
        // A2 is not served at all: its POST is not answered by A1 either.
        Assert.Equal(HttpStatusCode.NotFound, (await host.Http.PostAsync("/api/shared", new StringContent(""))).StatusCode);
        // Same route, different methods: no conflict.
        Assert.Equal("B1", await host.Http.GetStringAsync("/api/split"));
        Assert.Equal("B2", await (await host.Http.PostAsync("/api/split", new StringContent(""))).Content.ReadAsStringAsync());

        var status = await host.Http.GetHostStatusAsync();
        var a2 = status.Functions.Single(f => f.Name == "A2").Error;
        Assert.NotNull(a2);
        Assert.Contains("A2", a2, StringComparison.Ordinal);
        Assert.Contains("function A1", a2, StringComparison.Ordinal);
        Assert.Contains("\"Shared\"", a2, StringComparison.Ordinal);
        Assert.Null(status.Functions.Single(f => f.Name == "A1").Error);
        Assert.Null(status.Functions.Single(f => f.Name == "B2").Error);
        Assert.Contains("built-in routes", status.Functions.Single(f => f.Name == "Reserved").Error, StringComparison.Ordinal);
        Assert.Contains("Function A2 is disabled", host.Logs.All, StringComparison.Ordinal);
    }
}
