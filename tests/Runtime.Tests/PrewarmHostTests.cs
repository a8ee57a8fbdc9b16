using System.Net.Http.Json;
using FaaST.Prewarm.History;
using FaaST.Prewarm.Records;
using FaaST.Runtime.Prewarm;

namespace FaaST.Runtime.Tests;

/// <summary>
/// Prewarm in real host processes on real Azurite (Faa$T §3.3, issue 21): a host that is stopped leaves a record of
/// its cache; the next host of the app loads the objects the record selects, so their first read is a local hit;
/// and the load yields to an invocation that arrives while it runs.
/// </summary>
[Collection("azurite")]
[System.Runtime.Versioning.UnsupportedOSPlatform("windows")]
public sealed class PrewarmHostTests(AzuriteFixture azurite)
{
    private const string PyRead = """
        import azure.functions as func
        def main(req: func.HttpRequest, inblob: func.InputStream) -> func.HttpResponse:
            if inblob is None:
                return func.HttpResponse("missing", status_code=404)
            return func.HttpResponse(str(len(inblob.read())))
        """;

    private const string WriteJson = """
        { "bindings": [
          { "type": "httpTrigger", "direction": "in", "name": "req", "methods": ["post"], "route": "write/{name}" },
          { "type": "blob", "direction": "out", "name": "outblob", "path": "data/{name}" },
          { "type": "http", "direction": "out", "name": "$return" } ] }
        """;

    private const string PyWrite = """
        import azure.functions as func
        def main(req: func.HttpRequest, outblob: func.Out[bytes]) -> func.HttpResponse:
            body = req.get_body()
            outblob.set(body)
            return func.HttpResponse(str(len(body)))
        """;

    // Holds its invocation until the test creates the file it names (at most a minute).
    private const string PyWait = """
        import os, time
        import azure.functions as func
        def main(req: func.HttpRequest) -> func.HttpResponse:
            path = req.params.get("until")
            deadline = time.time() + 60
            while not os.path.exists(path) and time.time() < deadline:
                time.sleep(0.01)
            return func.HttpResponse("released")
        """;

    private static TestApp App() => new TestApp("python")
        .Function("Read", TestApp.BlobReadJson("data"), ("__init__.py", PyRead))
        .Function("Write", WriteJson, ("__init__.py", PyWrite))
        .Function("Wait", TestApp.HttpFunctionJson, ("__init__.py", PyWait));

    private static async Task<PrewarmStatus> Prewarm(HostProcess host) =>
        await host.Http.GetFromJsonAsync("/admin/prewarm", PrewarmJsonContext.Default.PrewarmStatus)
            ?? throw new InvalidOperationException("/admin/prewarm answered null");

    private async Task<List<UnloadRecord>> RecordsOf(string app)
    {
        var records = new List<UnloadRecord>();
        await foreach (var item in azurite.Store.ListAsync(PrewarmHistory.Container, app + "/"))
            records.Add(UnloadRecordFormat.Read((await azurite.Store.DownloadAsync(PrewarmHistory.Container, item.Name))!.Data, item.Name));
        return records;
    }

    [Fact]
    public async Task A_stopped_host_leaves_a_record_and_the_next_host_prewarms_the_hot_object_so_its_first_read_is_a_local_hit()
    {
        using var app = App();
        var appName = FunctionApp.NameOf(app.Directory);
        await azurite.Store.CreateContainerIfNotExistsAsync("data");
        var model = $"model-{Guid.NewGuid():N}";
        var once = $"once-{Guid.NewGuid():N}";
        var output = $"out-{Guid.NewGuid():N}";
        var modelBytes = new byte[300_000];
        Random.Shared.NextBytes(modelBytes);
        await azurite.Store.UploadAsync("data", model, modelBytes);
        await azurite.Store.UploadAsync("data", once, new byte[1000]);

        await using (var first = await HostProcess.StartAsync(app.Directory, azurite.ConnectionString, ["--no-peers"]))
        {
            for (var i = 0; i < 3; i++) // a miss, then two local hits: a local hit rate of 2/3
                Assert.Equal("300000", await first.Http.GetStringAsync($"/api/read/{model}"));
            Assert.Equal("1000", await first.Http.GetStringAsync($"/api/read/{once}"));
            (await first.Http.PostAsync($"/api/write/{output}", new ByteArrayContent(new byte[500]))).EnsureSuccessStatusCode();
            await first.StopAsync();
        }

        var record = Assert.Single(await RecordsOf(appName));
        Assert.Equal(appName, record.App);
        var byBlob = record.Objects.ToDictionary(o => o.Blob);
        Assert.Equal((300_000L, 2L, 1L, 0L), (byBlob[model].Size, byBlob[model].LocalHits, byBlob[model].LocalMisses, byBlob[model].Produced));
        Assert.Equal((0L, 1L), (byBlob[once].LocalHits, byBlob[once].LocalMisses));
        Assert.Equal((1L, 0L), (byBlob[output].Produced, byBlob[output].Reads));
        Assert.Equal(azurite.Store.Endpoint.AbsoluteUri, byBlob[model].Account);

        await using var second = await HostProcess.StartAsync(app.Directory, azurite.ConnectionString, ["--no-peers"]);
        await Eventually.TrueAsync(async () => (await Prewarm(second)).Done, "the second host's prewarm finished");
        var loaded = await Prewarm(second);
        // Only the hot object: "once" was read once (hit rate 0), the output never read, each in one record only.
        Assert.Equal((1L, 300_000L, 0L), (loaded.Objects, loaded.Bytes, loaded.Hits));
        var before = await second.Http.GetCacheStatusAsync();
        Assert.Equal((1L, 0L, 0L), (before.Objects, before.Reads["local_hit"], before.Reads["local_miss"]));

        Assert.Equal("300000", await second.Http.GetStringAsync($"/api/read/{model}"));

        var after = await second.Http.GetCacheStatusAsync();
        Assert.Equal((1L, 0L), (after.Reads["local_hit"], after.Reads["local_miss"]));
        var used = await Prewarm(second);
        Assert.Equal((1L, 0L), (used.Hits, used.WastedBytes));
    }

    [Fact]
    public async Task An_invocation_arriving_while_prewarm_loads_is_served_and_the_load_pauses_until_it_ends()
    {
        using var app = App();
        var appName = FunctionApp.NameOf(app.Directory);
        await azurite.Store.CreateContainerIfNotExistsAsync("data");
        // Enough objects that the load is still running when the first invocation arrives; each in two records, so
        // each is selected as reused across periods.
        const int count = 400;
        var names = Enumerable.Range(0, count).Select(i => $"obj-{i:D4}-{Guid.NewGuid():N}").ToArray();
        await Parallel.ForEachAsync(names, new ParallelOptions { MaxDegreeOfParallelism = 16 },
            async (name, ct) => await azurite.Store.UploadAsync("data", name, new byte[2048], ct: ct));
        var account = azurite.Store.Endpoint.AbsoluteUri;
        var history = new PrewarmHistory(azurite.Store, new ListLogger());
        foreach (var minutes in new[] { 20, 10 })
        {
            await history.WriteAsync(new UnloadRecord(appName, "earlier", DateTimeOffset.UtcNow.AddMinutes(-minutes),
                [.. names.Select(n => new ObjectRecord(account, "data", n, 2048, "\"old\"", 0, 0, 1, 0, 0, TimeSpan.Zero))]));
        }
        var release = Path.Combine(app.Directory, "release-" + Guid.NewGuid().ToString("N"));

        await using var host = await HostProcess.StartAsync(app.Directory, azurite.ConnectionString, ["--no-peers"]);
        var waiting = host.Http.GetStringAsync($"/api/Wait?until={Uri.EscapeDataString(release)}");
        await Eventually.TrueAsync(async () => (await Prewarm(host)).Pauses >= 1, "prewarm paused for the running invocation");
        var paused = await Prewarm(host);
        Assert.False(paused.Done, "prewarm finished while an invocation ran");

        await File.WriteAllTextAsync(release, "go");
        Assert.Equal("released", await waiting);
        await Eventually.TrueAsync(async () => (await Prewarm(host)).Done, "prewarm finished after the invocation");
        var done = await Prewarm(host);
        Assert.Equal((count, count * 2048L, 0L), (done.Objects, done.Bytes, done.Skipped));
    }

    [Fact]
    public async Task With_prewarm_disabled_a_stopped_host_leaves_no_record_and_the_next_loads_nothing()
    {
        using var app = App();
        File.WriteAllText(Path.Combine(app.Directory, "faast.json"), """{ "prewarm": { "enabled": false } }""");
        var appName = FunctionApp.NameOf(app.Directory);
        await azurite.Store.CreateContainerIfNotExistsAsync("data");
        var model = $"model-{Guid.NewGuid():N}";
        await azurite.Store.UploadAsync("data", model, new byte[5000]);

        await using (var first = await HostProcess.StartAsync(app.Directory, azurite.ConnectionString, ["--no-peers"]))
        {
            for (var i = 0; i < 3; i++)
                Assert.Equal("5000", await first.Http.GetStringAsync($"/api/read/{model}"));
            await first.StopAsync();
        }
        Assert.Empty(await RecordsOf(appName));

        await using var second = await HostProcess.StartAsync(app.Directory, azurite.ConnectionString, ["--no-peers"]);
        var status = await Prewarm(second);
        Assert.Equal((false, true, 0L), (status.Enabled, status.Done, status.Objects));
        Assert.Equal(0L, (await second.Http.GetCacheStatusAsync()).Objects);
    }
}
