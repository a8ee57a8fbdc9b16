using System.Net;
using System.Text.Json;
using FaaST.Storage;

namespace FaaST.Runtime.Tests;

/// <summary>Bad input and faults: each gets a clear error and nothing else breaks.</summary>
[Collection("azurite")]
public sealed class FaultTests(AzuriteFixture azurite)
{
    private const string HttpFunction = TestApp.HttpFunctionJson;

    private const string PyOk = """
        import azure.functions as func
        def main(req: func.HttpRequest) -> func.HttpResponse:
            return func.HttpResponse("ok")
        """;

    private static async Task<JsonElement> ErrorOf(HttpResponseMessage response)
    {
        using var doc = JsonDocument.Parse(await response.Content.ReadAsStringAsync());
        return doc.RootElement.Clone();
    }

    [Fact]
    public async Task An_exception_in_a_python_function_is_a_500_with_the_invocation_id_and_the_trace_in_the_log()
    {
        using var app = new TestApp("python").Function("Boom", HttpFunction, ("__init__.py", """
            def main(req):
                raise ValueError("bad things")
            """));
        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString);
        var response = await host.Http.GetAsync("/api/Boom");
        Assert.Equal(HttpStatusCode.InternalServerError, response.StatusCode);
        var error = await ErrorOf(response);
        var id = error.GetProperty("invocationId").GetString()!;
        Assert.True(Guid.TryParse(id, out _));
        Assert.Contains("bad things", error.GetProperty("error").GetString());
        await Eventually.TrueAsync(() => Task.FromResult(host.Logs.All.Contains(id) && host.Logs.All.Contains("Traceback")), "the stack trace in the log");
    }

    [Fact]
    public async Task An_exception_in_a_node_function_is_a_500()
    {
        using var app = new TestApp("node").Function("Boom", HttpFunction, ("index.js", """
            module.exports = async function (context, req) { throw new Error('node went wrong'); };
            """));
        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString);
        var response = await host.Http.GetAsync("/api/Boom");
        Assert.Equal(HttpStatusCode.InternalServerError, response.StatusCode);
        Assert.Contains("node went wrong", (await ErrorOf(response)).GetProperty("error").GetString());
    }

    [Fact]
    public async Task Broken_functions_are_reported_while_the_others_run()
    {
        using var app = new TestApp("python")
            .Function("Good", HttpFunction, ("__init__.py", PyOk))
            .Function("BadJson", "{ not json", ("__init__.py", PyOk))
            .Function("Queue", """{ "bindings": [ { "type": "serviceBusTrigger", "direction": "in", "name": "m" } ] }""", ("__init__.py", PyOk))
            .Function("NoScript", HttpFunction)
            .Function("NoEntry", HttpFunction.Replace("{ \"bindings\"", "{ \"entryPoint\": \"handler\", \"bindings\"", StringComparison.Ordinal), ("__init__.py", PyOk))
            .Function("Syntax", HttpFunction, ("__init__.py", "def main(req:\n"));
        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString);

        Assert.Equal("ok", await host.Http.GetStringAsync("/api/Good"));

        var status = await host.Http.GetHostStatusAsync();
        var errors = status.Functions.ToDictionary(f => f.Name, f => f.Error);
        Assert.Null(errors["Good"]);
        Assert.Contains("not valid JSON", errors["BadJson"]);
        Assert.Contains("serviceBusTrigger", errors["Queue"]);
        Assert.Contains("__init__.py", errors["NoScript"]);
        Assert.Contains("handler", errors["NoEntry"]);
        Assert.Contains("__init__.py", errors["Syntax"]);

        var noEntry = await host.Http.GetAsync("/api/NoEntry");
        Assert.Equal(HttpStatusCode.InternalServerError, noEntry.StatusCode);
        Assert.Contains("handler", (await ErrorOf(noEntry)).GetProperty("error").GetString());
        var noScript = await host.Http.GetAsync("/api/NoScript");
        Assert.Equal(HttpStatusCode.InternalServerError, noScript.StatusCode);
        Assert.Contains("does not exist", (await ErrorOf(noScript)).GetProperty("error").GetString());
        Assert.Contains(host.Logs.Lines, l => l.Contains("Queue", StringComparison.Ordinal) && l.Contains("serviceBusTrigger", StringComparison.Ordinal));
    }

    [Fact]
    public async Task An_unresolvable_binding_expression_is_a_400_naming_the_parameter()
    {
        using var app = new TestApp("python").Function("Read", """
            { "bindings": [
              { "type": "httpTrigger", "direction": "in", "name": "req" },
              { "type": "blob", "direction": "in", "name": "doc", "path": "docs/{file}" },
              { "type": "http", "direction": "out", "name": "$return" } ] }
            """, ("__init__.py", "def main(req, doc):\n    return 'never'\n"));
        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString);
        var response = await host.Http.GetAsync("/api/Read");
        Assert.Equal(HttpStatusCode.BadRequest, response.StatusCode);
        var message = (await ErrorOf(response)).GetProperty("error").GetString();
        Assert.Contains("{file}", message);
        Assert.Contains("doc", message);
    }

    [Fact]
    public async Task A_crashing_worker_fails_its_invocation_and_is_restarted()
    {
        using var app = new TestApp("python")
            .Function("Crash", HttpFunction, ("__init__.py", "import os\ndef main(req):\n    os._exit(3)\n"))
            .Function("Ok", HttpFunction, ("__init__.py", PyOk));
        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString);
        var before = host.Host.WorkerProcessIds.Single();
        var crash = await host.Http.GetAsync("/api/Crash");
        Assert.Equal(HttpStatusCode.ServiceUnavailable, crash.StatusCode);
        Assert.Contains("worker", (await ErrorOf(crash)).GetProperty("error").GetString());
        Assert.Equal("ok", await host.Http.GetStringAsync("/api/Ok"));
        Assert.NotEqual(before, host.Host.WorkerProcessIds.Single());
    }

    [Fact]
    public async Task A_crashing_node_worker_is_restarted()
    {
        using var app = new TestApp("node")
            .Function("Crash", HttpFunction, ("index.js", "module.exports = async function () { process.exit(5); };"))
            .Function("Ok", HttpFunction, ("index.js", "module.exports = async function () { return { body: 'ok' }; };"));
        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString);
        Assert.Equal(HttpStatusCode.ServiceUnavailable, (await host.Http.GetAsync("/api/Crash")).StatusCode);
        Assert.Equal("ok", await host.Http.GetStringAsync("/api/Ok"));
    }

    [Fact]
    public async Task A_hung_invocation_times_out_and_its_worker_is_replaced()
    {
        using var app = new TestApp("python", hostJson: """{ "version": "2.0", "functionTimeout": "00:00:02" }""")
            .Function("Hang", HttpFunction, ("__init__.py", "import time\ndef main(req):\n    time.sleep(3600)\n"))
            .Function("Ok", HttpFunction, ("__init__.py", PyOk));
        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString);
        var before = host.Host.WorkerProcessIds.Single();
        var hang = await host.Http.GetAsync("/api/Hang");
        Assert.Equal(HttpStatusCode.GatewayTimeout, hang.StatusCode);
        Assert.Contains("functionTimeout", (await ErrorOf(hang)).GetProperty("error").GetString());
        Assert.Equal("ok", await host.Http.GetStringAsync("/api/Ok"));
        Assert.NotEqual(before, host.Host.WorkerProcessIds.Single());
    }

    [Fact]
    public async Task Unreachable_storage_is_a_503_after_retries()
    {
        using var app = new TestApp("python").Function("Write", """
            { "bindings": [
              { "type": "httpTrigger", "direction": "in", "name": "req" },
              { "type": "blob", "direction": "out", "name": "out", "path": "cnt/x.txt" },
              { "type": "http", "direction": "out", "name": "$return" } ] }
            """, ("__init__.py", "def main(req, out):\n    out.set('x')\n    return 'written'\n"));
        var closedPort = Ports.Free();
        var dead = $"DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;BlobEndpoint=http://127.0.0.1:{closedPort}/devstoreaccount1;";
        await using var host = await HostUnderTest.StartAsync(app.Directory, dead, configure: o => o with
        {
            StorageOptions = new BlobStoreOptions { MaxRetries = 2, RetryBaseDelay = TimeSpan.FromMilliseconds(10) },
        });
        var response = await host.Http.GetAsync("/api/Write");
        Assert.Equal(HttpStatusCode.ServiceUnavailable, response.StatusCode);
        var message = (await ErrorOf(response)).GetProperty("error").GetString();
        Assert.Contains("x.txt", message);
    }

    [Fact]
    public async Task An_oversized_body_is_a_413()
    {
        using var app = new TestApp("python", settings: new() { ["FUNCTIONS_REQUEST_BODY_SIZE_LIMIT"] = "1000" })
            .Function("Echo", HttpFunction, ("__init__.py", "def main(req):\n    return str(len(req.get_body()))\n"));
        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString);
        Assert.Equal("1000", await (await host.Http.PostAsync("/api/Echo", new ByteArrayContent(new byte[1000]))).Content.ReadAsStringAsync());
        var big = await host.Http.PostAsync("/api/Echo", new ByteArrayContent(new byte[1001]));
        Assert.Equal(HttpStatusCode.RequestEntityTooLarge, big.StatusCode);
        Assert.Contains("1000", (await ErrorOf(big)).GetProperty("error").GetString());
    }
}
