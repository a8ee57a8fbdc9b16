using System.Net;
using System.Net.Http.Json;
using System.Text;
using System.Text.Json;

namespace FaaST.Runtime.Tests;

/// <summary>Route templates, request bodies, timeouts and logging in a real host (Kestrel, gRPC, Python workers).</summary>
[Collection("azurite")]
public sealed class HttpInputTests(AzuriteFixture azurite)
{
    private const string PyEchoRoute = """
        import azure.functions as func
        def main(req: func.HttpRequest) -> func.HttpResponse:
            return func.HttpResponse("id=" + req.route_params.get("id", ""))
        """;

    private static string RouteJson(string route) => $$"""
        { "bindings": [
          { "type": "httpTrigger", "direction": "in", "name": "req", "route": "{{route}}" },
          { "type": "http", "direction": "out", "name": "$return" } ] }
        """;

    [Fact]
    public async Task A_bad_route_constraint_disables_only_its_function_and_a_regex_constraint_works()
    {
        using var app = new TestApp("python")
            .Function("Words", RouteJson("words/{id:regex(^[a-z]+$)}"), ("__init__.py", PyEchoRoute))
            .Function("Numbers", RouteJson("numbers/{id:int:range(1,100)}"), ("__init__.py", PyEchoRoute))
            .Function("Broken", RouteJson("broken/{id:nosuch}"), ("__init__.py", PyEchoRoute));
        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString);

        Assert.Equal("id=abc", await host.Http.GetStringAsync("/api/words/abc"));
        Assert.Equal(HttpStatusCode.NotFound, (await host.Http.GetAsync("/api/words/ABC1")).StatusCode);
        Assert.Equal("id=42", await host.Http.GetStringAsync("/api/numbers/42"));
        Assert.Equal(HttpStatusCode.NotFound, (await host.Http.GetAsync("/api/numbers/101")).StatusCode);

        var status = await host.Http.GetFromJsonAsync<JsonElement>("/admin/host/status");
        var broken = status.GetProperty("functions").EnumerateArray().Single(f => f.GetProperty("name").GetString() == "Broken");
        var error = broken.GetProperty("error").GetString();
        Assert.Contains(Path.Combine("Broken", "function.json"), error);
        Assert.Contains("bindings[0].route", error);
        Assert.Contains("\"nosuch\"", error);
        // The workers connected (their gRPC channel goes through the same routing).
        Assert.Equal(1, host.Host.ReadyWorkers);
    }

    [Fact]
    public async Task Response_headers_and_statuses_HTTP_cannot_carry_are_dropped_and_the_client_still_gets_an_answer()
    {
        using var app = new TestApp("python")
            .Function("Headers", RouteJson("headers"), ("__init__.py", """
                import azure.functions as func
                def main(req: func.HttpRequest) -> func.HttpResponse:
                    return func.HttpResponse("body", headers={"x-good": "yes", "x-crlf": "a\r\nSet-Cookie: evil=1",
                                                              "x-latin": "caf\u00e9", "bad name": "v", "connection": "upgrade"})
                """))
            .Function("Status", RouteJson("status"), ("__init__.py", """
                import azure.functions as func
                def main(req: func.HttpRequest) -> func.HttpResponse:
                    return func.HttpResponse("odd", status_code=int(req.params.get("s", "1000")))
                """));
        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString);

        var response = await host.Http.GetAsync("/api/headers");
        Assert.Equal(HttpStatusCode.OK, response.StatusCode);
        Assert.Equal("body", await response.Content.ReadAsStringAsync());
        Assert.Equal("yes", response.Headers.GetValues("x-good").Single());
        Assert.False(response.Headers.Contains("x-crlf"));
        Assert.False(response.Headers.Contains("Set-Cookie"));
        Assert.False(response.Headers.Contains("x-latin"));

        var status = await host.Http.GetAsync("/api/status");
        Assert.Equal(HttpStatusCode.InternalServerError, status.StatusCode);
        Assert.Equal(HttpStatusCode.InternalServerError, (await host.Http.GetAsync("/api/status?s=101")).StatusCode);
        // Statuses that carry no body: the function's body is not sent (writing it threw inside Kestrel).
        var notModified = await host.Http.GetAsync("/api/status?s=304");
        Assert.Equal(HttpStatusCode.NotModified, notModified.StatusCode);
        Assert.Empty(await notModified.Content.ReadAsByteArrayAsync());
        var noContent = await host.Http.GetAsync("/api/status?s=204");
        Assert.Equal(HttpStatusCode.NoContent, noContent.StatusCode);
        Assert.Empty(await noContent.Content.ReadAsByteArrayAsync());
    }

    [Fact]
    public async Task Invalid_utf8_in_a_json_body_bound_from_a_route_is_a_400()
    {
        using var app = new TestApp("python").Function("Save", """
            { "bindings": [
              { "type": "httpTrigger", "direction": "in", "name": "req", "methods": ["post"], "route": "save" },
              { "type": "blob", "direction": "out", "name": "out", "path": "utf8test/{file}" },
              { "type": "http", "direction": "out", "name": "$return" } ] }
            """, ("__init__.py", "def main(req, out):\n    out.set('x')\n    return 'saved'\n"));
        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString);

        byte[] body = [.. "{\"file\": \"caf"u8, 0xE9, .. "\"}"u8];
        using var content = new ByteArrayContent(body);
        content.Headers.ContentType = new System.Net.Http.Headers.MediaTypeHeaderValue("application/json");
        var response = await host.Http.PostAsync("/api/save", content);
        Assert.Equal(HttpStatusCode.BadRequest, response.StatusCode);
        Assert.Contains("{file}", await response.Content.ReadAsStringAsync());

        // Valid JSON still binds.
        using var good = new StringContent("{\"file\": \"ok.txt\"}", Encoding.UTF8, "application/json");
        Assert.Equal("saved", await (await host.Http.PostAsync("/api/save", good)).Content.ReadAsStringAsync());
    }

    /// <summary>A body without Content-Length (chunked), which cannot be sized in advance.</summary>
    private sealed class ChunkedContent(byte[] bytes) : HttpContent
    {
        protected override async Task SerializeToStreamAsync(Stream stream, System.Net.TransportContext? context)
        {
            for (var i = 0; i < bytes.Length; i += 100_000)
                await stream.WriteAsync(bytes.AsMemory(i, Math.Min(100_000, bytes.Length - i)));
        }

        protected override bool TryComputeLength(out long length)
        {
            length = -1;
            return false;
        }
    }

    [Fact]
    public async Task Chunked_bodies_arrive_whole_and_one_over_the_limit_is_a_413()
    {
        const int limit = 3 * 1024 * 1024;
        using var app = new TestApp("python", settings: new() { ["FUNCTIONS_REQUEST_BODY_SIZE_LIMIT"] = limit.ToString(System.Globalization.CultureInfo.InvariantCulture) })
            .Function("Sum", TestApp.HttpFunctionJson, ("__init__.py", "def main(req):\n    b = req.get_body()\n    return f'{len(b)} {sum(b) % 1000003}'\n"));
        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString);
        foreach (var size in new[] { 10, 70_000, limit })
        {
            var bytes = new byte[size];
            new Random(size).NextBytes(bytes);
            var expected = $"{size} {bytes.Sum(b => (long)b) % 1000003}";
            var response = await host.Http.PostAsync("/api/Sum", new ChunkedContent(bytes));
            Assert.Equal(expected, await response.Content.ReadAsStringAsync());
        }
        var over = await host.Http.PostAsync("/api/Sum", new ChunkedContent(new byte[limit + 1]));
        Assert.Equal(HttpStatusCode.RequestEntityTooLarge, over.StatusCode);
    }

    [Fact]
    public async Task A_stalled_storage_read_ends_at_functionTimeout_with_a_504()
    {
        // Storage that accepts requests and never answers: the input read stalls.
        await using var storage = new FaultServer((_, _) => FaultReply.Hang);
        using var app = new TestApp("python", hostJson: """{ "version": "2.0", "functionTimeout": "00:00:02" }""")
            .Function("Read", TestApp.BlobReadJson("stalled"), ("__init__.py", "def main(req, inblob):\n    return 'read'\n"))
            .Function("Ok", TestApp.HttpFunctionJson, ("__init__.py", "def main(req):\n    return 'ok'\n"));
        await using var host = await HostUnderTest.StartAsync(app.Directory, storage.ConnectionString, configure: o => o with { Peers = false });
        // Without the fix the request ran for the storage's tries (5 x 30 s); the client gives up well before.
        using var client = new HttpClient { BaseAddress = host.Host.BaseAddress, Timeout = TimeSpan.FromSeconds(30) };

        var response = await client.GetAsync("/api/read/a.txt");
        Assert.Equal(HttpStatusCode.GatewayTimeout, response.StatusCode);
        var error = await response.Content.ReadFromJsonAsync<JsonElement>();
        Assert.Contains("functionTimeout", error.GetProperty("error").GetString());
        Assert.Equal("ok", await client.GetStringAsync("/api/Ok"));
        // Nothing stays pinned or reserved for the abandoned read.
        var cache = await client.GetFromJsonAsync<JsonElement>("/admin/cache");
        Assert.Equal(0, cache.GetProperty("pinnedBytes").GetInt64());
    }

    [Fact]
    public async Task A_carriage_return_from_the_request_path_is_escaped_in_the_log()
    {
        using var app = new TestApp("python")
            .Function("Read", TestApp.BlobReadJson("logtest"), ("__init__.py", "def main(req, inblob):\n    return 'read'\n"))
            .Function("Say", RouteJson("say/{id}"), ("__init__.py", """
                import logging
                def main(req):
                    logging.info("saying " + req.route_params["id"])
                    return "said"
                """));
        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString);

        // A blob name with a CR is refused (400), and the refusal is logged with the name in it.
        var refused = await host.Http.GetAsync("/api/read/x%0D12:00:00 Information FaaST.Host: forged");
        Assert.Equal(HttpStatusCode.BadRequest, refused.StatusCode);
        // A function logs a route value with a CR and an LF.
        Assert.Equal("said", await host.Http.GetStringAsync("/api/say/y%0D%0Aforged"));

        await Eventually.TrueAsync(() => Task.FromResult(host.Logs.All.Contains("saying y")), "the function's log line");
        var lines = host.Logs.Lines.ToArray();
        var rejection = Assert.Single(lines, l => l.Contains("rejected with 400", StringComparison.Ordinal));
        Assert.Contains("x\\r12:00:00", rejection);
        var said = Assert.Single(lines, l => l.Contains("saying y", StringComparison.Ordinal));
        Assert.Contains("saying y\\r\\nforged", said);
        Assert.DoesNotContain(lines, l => l.Contains('\r'));
    }
}
