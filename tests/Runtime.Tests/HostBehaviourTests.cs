using System.Diagnostics;
using System.Net;
using System.Text;

namespace FaaST.Runtime.Tests;

/// <summary>Workers, concurrency, settings and lifecycle of the host.</summary>
[Collection("azurite")]
public sealed class HostBehaviourTests(AzuriteFixture azurite)
{
    private const string HttpFunction = TestApp.HttpFunctionJson;

    [Fact]
    public async Task Invocations_spread_over_several_worker_processes()
    {
        using var app = new TestApp("python", settings: new() { ["FUNCTIONS_WORKER_PROCESS_COUNT"] = "2" })
            .Function("Pid", HttpFunction, ("__init__.py", "import os\ndef main(req):\n    return str(os.getpid())\n"));
        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString);
        Assert.Equal(2, host.Host.WorkerProcessIds.Count);
        var pids = new HashSet<string>();
        for (var i = 0; i < 20; i++)
            pids.Add(await host.Http.GetStringAsync("/api/Pid"));
        Assert.Equal(host.Host.WorkerProcessIds.Select(p => p.ToString(System.Globalization.CultureInfo.InvariantCulture)).Order(), pids.Order());
    }

    [Theory]
    [InlineData("python", "__init__.py", """
        import asyncio
        waiting = 0
        async def main(req):
            global waiting
            waiting += 1
            for _ in range(500):
                if waiting >= 2:
                    break
                await asyncio.sleep(0.01)
            return str(waiting)
        """)]
    [InlineData("node", "index.js", """
        let waiting = 0;
        module.exports = async function (context, req) {
          waiting += 1;
          for (let i = 0; i < 500 && waiting < 2; i++) await new Promise(r => setTimeout(r, 10));
          return { body: String(waiting) };
        };
        """)]
    public async Task One_worker_runs_async_invocations_concurrently(string runtime, string file, string code)
    {
        using var app = new TestApp(runtime).Function("Meet", HttpFunction, (file, code));
        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString);
        var a = host.Http.GetStringAsync("/api/Meet");
        var b = host.Http.GetStringAsync("/api/Meet");
        // Each invocation sees the other one in flight: they overlapped on the single worker.
        Assert.Equal(["2", "2"], await Task.WhenAll(a, b));
    }

    [Fact]
    public async Task App_settings_reach_the_function_and_environment_overrides_them()
    {
        using var app = new TestApp("python", settings: new() { ["Greeting"] = "from-file", ["Other"] = "kept" })
            .Function("Env", HttpFunction, ("__init__.py", "import os\ndef main(req):\n    return os.environ['Greeting'] + ',' + os.environ['Other']\n"));
        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString, new() { ["Greeting"] = "from-env" });
        Assert.Equal("from-env,kept", await host.Http.GetStringAsync("/api/Env"));
    }

    [Fact]
    public async Task Route_parameters_query_and_route_prefix_are_honoured()
    {
        using var app = new TestApp("python", hostJson: """{ "version": "2.0", "extensions": { "http": { "routePrefix": "v1" } } }""")
            .Function("Item", """
                { "bindings": [
                  { "type": "httpTrigger", "direction": "in", "name": "req", "route": "items/{id:int}/{kind?}", "methods": ["get"] },
                  { "type": "http", "direction": "out", "name": "$return" } ] }
                """, ("__init__.py", """
                import azure.functions as func
                def main(req: func.HttpRequest) -> func.HttpResponse:
                    return func.HttpResponse(f"{req.route_params['id']}|{req.route_params.get('kind')}|{req.params.get('q')}", headers={"x-custom": "yes"})
                """));
        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString);
        var response = await host.Http.GetAsync("/v1/items/42/big?q=z");
        Assert.Equal("42|big|z", await response.Content.ReadAsStringAsync());
        Assert.Equal("yes", response.Headers.GetValues("x-custom").Single());
        Assert.Equal(HttpStatusCode.NotFound, (await host.Http.GetAsync("/v1/items/abc")).StatusCode);
        Assert.Equal(HttpStatusCode.NotFound, (await host.Http.GetAsync("/api/items/42")).StatusCode);
    }

    [Fact]
    public async Task Blob_output_path_can_use_rand_guid_and_json_body_values()
    {
        using var app = new TestApp("node").Function("Save", """
            { "bindings": [
              { "type": "httpTrigger", "direction": "in", "name": "req", "methods": ["post"] },
              { "type": "blob", "direction": "out", "name": "out", "path": "saved-{folder}/{rand-guid}.json" },
              { "type": "http", "direction": "out", "name": "res" } ] }
            """, ("index.js", "module.exports = async function (context, req) { context.bindings.out = req.body; context.res = { status: 201 }; };"));
        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString);
        var folder = "f" + Guid.NewGuid().ToString("N")[..8];
        var response = await host.Http.PostAsync("/api/Save", new StringContent($$"""{"folder":"{{folder}}","n":1}""", Encoding.UTF8, "application/json"));
        Assert.Equal(HttpStatusCode.Created, response.StatusCode);
        var items = new List<FaaST.Storage.BlobItem>();
        await foreach (var item in host.Blobs!.ListAsync("saved-" + folder))
            items.Add(item);
        var blob = Assert.Single(items);
        Assert.Matches("^[0-9a-f-]{36}\\.json$", blob.Name);
    }

    [Fact]
    public async Task Without_a_storage_setting_the_runtime_starts_its_own_azurite()
    {
        using var app = new TestApp("python").Function("Write", """
            { "bindings": [
              { "type": "httpTrigger", "direction": "in", "name": "req" },
              { "type": "blob", "direction": "out", "name": "out", "path": "own/x.txt" },
              { "type": "http", "direction": "out", "name": "$return" } ] }
            """, ("__init__.py", "def main(req, out):\n    out.set(b'own storage')\n    return 'done'\n"));
        await using var host = await HostUnderTest.StartAsync(app.Directory, storage: null);
        Assert.NotEqual(azurite.ConnectionString, host.Host.StorageConnectionString);
        Assert.Equal("done", await host.Http.GetStringAsync("/api/Write"));
        var blob = await host.Blobs!.DownloadAsync("own", "x.txt");
        Assert.Equal("own storage", Encoding.UTF8.GetString(blob!.Data));
    }

    [Fact]
    public async Task Runtime_started_azurite_keeps_blobs_in_the_data_folder_across_restarts()
    {
        using var app = new TestApp("python").Function("Write", """
            { "bindings": [
              { "type": "httpTrigger", "direction": "in", "name": "req" },
              { "type": "blob", "direction": "out", "name": "out", "path": "kept/x.txt" },
              { "type": "http", "direction": "out", "name": "$return" } ] }
            """, ("__init__.py", "def main(req, out):\n    out.set(b'persisted')\n    return 'done'\n"));
        var data = Path.Combine(app.Directory, ".faast", "azurite");
        await using (var first = await HostUnderTest.StartAsync(app.Directory, storage: null, configure: o => o with { AzuriteDataDirectory = data }))
            Assert.Equal("done", await first.Http.GetStringAsync("/api/Write"));
        await using var second = await HostUnderTest.StartAsync(app.Directory, storage: null, configure: o => o with { AzuriteDataDirectory = data });
        var blob = await second.Blobs!.DownloadAsync("kept", "x.txt");
        Assert.Equal("persisted", Encoding.UTF8.GetString(blob!.Data));
    }

    [Fact]
    public async Task Stopping_the_host_stops_its_workers()
    {
        using var app = new TestApp("node", settings: new() { ["FUNCTIONS_WORKER_PROCESS_COUNT"] = "2" })
            .Function("Ok", HttpFunction, ("index.js", "module.exports = async function () { return { body: 'ok' }; };"));
        var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString);
        var pids = host.Host.WorkerProcessIds.ToArray();
        Assert.Equal(2, pids.Length);
        await host.DisposeAsync();
        foreach (var pid in pids)
            Assert.False(IsAlive(pid), $"worker {pid} still runs after the host stopped");
    }

    private static bool IsAlive(int pid)
    {
        try
        {
            using var p = Process.GetProcessById(pid);
            return !p.HasExited;
        }
        catch (ArgumentException)
        {
            return false;
        }
    }
}
