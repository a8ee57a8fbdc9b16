using System.Net;
using System.Text;
using System.Text.Json;
using FaaST.Runtime.Hosting;
using FaaST.Storage;
using Xunit.Abstractions;

namespace FaaST.Runtime.Tests;

/// <summary>
/// Conditional blob outputs ("ifMatch": a blob input of the same function) and null blob paths, with real hosts,
/// real Python workers and a real Azurite, through the cache under each consistency preset, on one instance and on
/// two (InstanceGroup). A second writer is made to land between an invocation's read and its write without any
/// timing: the function itself calls the host (the same or another instance) before it returns, and that nested
/// invocation reads and writes the same blob first.
/// </summary>
[Collection("azurite")]
[System.Runtime.Versioning.UnsupportedOSPlatform("windows")]
public sealed class ConditionalOutputTests(AzuriteFixture azurite, ITestOutputHelper output)
{
    /// <summary>
    /// Save (POST save/{key}): reads BOX/{key} as "state", optionally has another invocation (the body's "inner": a URL
    /// and a body) write it first, then writes "text" (or, without one, the number read + 1) to the same blob
    /// If-Match what "state" read, and a note BOX/notes/{key}-{tag} unconditionally. Get (GET get/{key}) reads it.
    /// </summary>
    private const string SaveJson = """
        { "bindings": [
          { "type": "httpTrigger", "direction": "in", "name": "req", "authLevel": "anonymous", "methods": ["post"], "route": "save/{key}" },
          { "type": "blob", "direction": "in", "name": "state", "path": "%BOX%/{key}", "dataType": "binary" },
          { "type": "blob", "direction": "out", "name": "stateOut", "path": "%BOX%/{key}", "ifMatch": "state" },
          { "type": "blob", "direction": "out", "name": "note", "path": "%BOX%/notes/{key}-{tag}" },
          { "type": "http", "direction": "out", "name": "$return" } ] }
        """;

    private const string SavePy = """
        import json
        import urllib.request
        import azure.functions as func

        def main(req: func.HttpRequest, state: func.InputStream, stateOut: func.Out[str], note: func.Out[str]) -> func.HttpResponse:
            body = req.get_json()
            read = None if state is None else state.read().decode()
            inner = body.get("inner")
            if inner is not None:
                # Another writer of the same blob between this invocation's read and its write.
                opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
                request = urllib.request.Request(inner["url"], data=json.dumps(inner["body"]).encode(),
                                                 headers={"Content-Type": "application/json"}, method="POST")
                with opener.open(request, timeout=60) as answer:
                    answer.read()
            text = body.get("text")
            if text is None:
                text = str(int(read or "0") + 1)
            # "pad": outputs large enough to reach the host through shared-memory files.
            pad = "." * body.get("pad", 0)
            stateOut.set(text + pad)
            note.set(f"read {None if read is None else read[:20]}" + pad)
            return func.HttpResponse(json.dumps({"read": None if read is None else read[:20], "wrote": text}), mimetype="application/json")
        """;

    private const string GetJson = """
        { "bindings": [
          { "type": "httpTrigger", "direction": "in", "name": "req", "authLevel": "anonymous", "methods": ["get"], "route": "get/{key}" },
          { "type": "blob", "direction": "in", "name": "state", "path": "%BOX%/{key}", "dataType": "binary" },
          { "type": "http", "direction": "out", "name": "$return" } ] }
        """;

    private const string GetPy = """
        import azure.functions as func

        def main(req: func.HttpRequest, state: func.InputStream) -> func.HttpResponse:
            if state is None:
                return func.HttpResponse("none", status_code=404)
            return func.HttpResponse(state.read().decode())
        """;

    private static TestApp SaveApp(string box, string? preset, string name = "condapp")
    {
        var app = new TestApp("python", settings: new() { ["BOX"] = box }, name: name)
            .Function("Save", SaveJson, ("__init__.py", SavePy))
            .Function("Get", GetJson, ("__init__.py", GetPy));
        if (preset is not null)
            File.WriteAllText(Path.Combine(app.Directory, "faast.json"),
                preset == "off" ? """{ "cache": { "enabled": false } }""" : $$"""{ "cache": { "consistency": "{{preset}}" } }""");
        return app;
    }

    private static string Box() => "cond" + Guid.NewGuid().ToString("N")[..12];

    private static StringContent Json(string json) => new(json, Encoding.UTF8, "application/json");

    /// <summary>A Save body that has <paramref name="innerUrl"/> write <paramref name="innerText"/> before this one writes.</summary>
    private static string Nested(string text, string tag, Uri innerUrl, string innerText, string innerTag) =>
        JsonSerializer.Serialize(new { text, tag, inner = new { url = innerUrl.ToString(), body = new { text = innerText, tag = innerTag } } });

    private async Task PutAsync(string container, string blob, string text)
    {
        using var store = new BlobStore(azurite.ConnectionString);
        await store.CreateContainerIfNotExistsAsync(container);
        await store.UploadAsync(container, blob, Encoding.UTF8.GetBytes(text));
    }

    /// <summary>Waits until storage holds <paramref name="expected"/> (the async presets upload in the background).</summary>
    private async Task StoredEventuallyAsync(string container, string blob, string expected)
    {
        string? stored = null;
        await Eventually.TrueAsync(async () => (stored = await StoredAsync(container, blob)) == expected,
            $"{container}/{blob} holds \"{expected}\" (it holds \"{stored}\")");
    }

    private async Task<string?> StoredAsync(string container, string blob)
    {
        using var store = new BlobStore(azurite.ConnectionString);
        var content = await store.DownloadAsync(container, blob);
        return content is null ? null : Encoding.UTF8.GetString(content.Data);
    }

    /// <summary>Checks a 409's body: the conflict, the output, the blob, and a message naming both.</summary>
    private static async Task AssertConflictAsync(HttpResponseMessage response, string blob)
    {
        var text = await response.Content.ReadAsStringAsync();
        Assert.True(response.StatusCode == HttpStatusCode.Conflict, $"{(int)response.StatusCode}: {text}");
        using var body = JsonDocument.Parse(text);
        Assert.Equal("conflict", body.RootElement.GetProperty("error").GetString());
        Assert.Equal("stateOut", body.RootElement.GetProperty("binding").GetString());
        Assert.Equal(blob, body.RootElement.GetProperty("blob").GetString());
        var message = body.RootElement.GetProperty("message").GetString()!;
        Assert.Contains("blob output \"stateOut\" was not written", message, StringComparison.Ordinal);
        Assert.Contains(blob, message, StringComparison.Ordinal);
    }

    // ---- one instance -------------------------------------------------------------------------------------------

    [Theory]
    [InlineData(null)]
    [InlineData("owner/sync/owner")]
    [InlineData("owner/async/owner")]
    [InlineData("owner/sync/local")]
    [InlineData("local/sync/local")]
    [InlineData("local/async/local")]
    [InlineData("off")]
    public async Task A_writer_that_read_a_version_another_writer_replaced_first_gets_409_and_nothing_of_it_is_written(string? preset)
    {
        var box = Box();
        using var app = SaveApp(box, preset);
        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString);
        await PutAsync(box, "k", "v0");

        // Both read v0; the inner one writes first, so the outer one's If-Match v0 fails.
        using var outer = await host.Http.PostAsync("/api/save/k",
            Json(Nested("outer", "o", new Uri(host.Host.BaseAddress, "api/save/k"), "inner", "i")));
        await AssertConflictAsync(outer, $"{box}/k");
        Assert.Contains("is no longer the version", await outer.Content.ReadAsStringAsync(), StringComparison.Ordinal);

        await StoredEventuallyAsync(box, "k", "inner");
        await StoredEventuallyAsync(box, "notes/k-i", "read v0");
        // The outer invocation's unconditional output comes after its conditional one: never written.
        Assert.Null(await StoredAsync(box, "notes/k-o"));
        Assert.Equal("inner", await host.Http.GetStringAsync("/api/get/k"));

        // A writer that read the current version is not refused: the conflict left no stale copy behind.
        using var next = await host.Http.PostAsync("/api/save/k", Json("""{ "text": "next", "tag": "n" }"""));
        Assert.True(next.IsSuccessStatusCode, await next.Content.ReadAsStringAsync());
        await StoredEventuallyAsync(box, "k", "next");
    }

    [Theory]
    [InlineData(null)]
    [InlineData("local/async/local")]
    public async Task Large_outputs_of_an_invocation_that_conflicts_leave_no_shared_memory_file_behind(string? preset)
    {
        var box = Box();
        using var app = SaveApp(box, preset);
        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString);
        await PutAsync(box, "big", "v0");
        const int pad = 1 << 20; // far above the inline threshold: both outputs come as files the worker wrote
        var body = JsonSerializer.Serialize(new
        {
            text = "outer", tag = "o", pad,
            inner = new { url = new Uri(host.Host.BaseAddress, "api/save/big").ToString(), body = new { text = "inner", tag = "i", pad } },
        });
        using var outer = await host.Http.PostAsync("/api/save/big", Json(body));
        await AssertConflictAsync(outer, $"{box}/big");

        Assert.StartsWith("inner.", await StoredEventuallyStartsWithAsync(box, "big", "inner."), StringComparison.Ordinal);
        Assert.Null(await StoredAsync(box, "notes/big-o"));
        // The worker's files for the outer invocation's two outputs were deleted, not left until the worker exits.
        var directory = host.Host.Cache!.Directory;
        Assert.Empty(Directory.GetFiles(directory, "w*"));
    }

    private async Task<string> StoredEventuallyStartsWithAsync(string container, string blob, string prefix)
    {
        string? stored = null;
        await Eventually.TrueAsync(async () => (stored = await StoredAsync(container, blob)) is { } s && s.StartsWith(prefix, StringComparison.Ordinal),
            $"{container}/{blob} starts with \"{prefix}\"");
        return stored!;
    }

    [Theory]
    [InlineData(null)]
    [InlineData("owner/async/owner")]
    [InlineData("local/async/local")]
    public async Task A_blob_that_did_not_exist_is_created_once_and_a_second_creator_gets_409(string? preset)
    {
        var box = Box();
        using var app = SaveApp(box, preset);
        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString);

        // The container does not exist either: the first creator makes it.
        using var outer = await host.Http.PostAsync("/api/save/new",
            Json(Nested("outer", "o", new Uri(host.Host.BaseAddress, "api/save/new"), "inner", "i")));
        await AssertConflictAsync(outer, $"{box}/new");
        Assert.Contains("did not exist when input \\u0022state\\u0022 read it", await outer.Content.ReadAsStringAsync(), StringComparison.Ordinal);
        await StoredEventuallyAsync(box, "new", "inner");
        await StoredEventuallyAsync(box, "notes/new-i", "read None");
        Assert.Null(await StoredAsync(box, "notes/new-o"));
    }

    [Theory]
    [InlineData(null)]
    [InlineData("owner/async/owner")]
    [InlineData("local/async/local")]
    public async Task Concurrent_increments_on_one_instance_lose_no_update(string? preset)
    {
        var box = Box();
        using var app = SaveApp(box, preset);
        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString);
        await PutAsync(box, "n", "0");

        var (succeeded, conflicted) = await IncrementAsync([host.Host.BaseAddress], 3, 8);
        output.WriteLine($"{preset ?? "default"}: {succeeded} increments, {conflicted} conflicts");
        // Every increment that was answered 200 is in the counter, and only those: none was lost to a concurrent one.
        Assert.True(succeeded >= 3, $"{succeeded} increments succeeded");
        Assert.Equal(24, succeeded + conflicted);
        Assert.Equal(succeeded.ToString(System.Globalization.CultureInfo.InvariantCulture), await host.Http.GetStringAsync("/api/get/n"));
    }

    /// <summary>
    /// <paramref name="rounds"/> rounds of <paramref name="perRound"/> concurrent increments of BOX/n, spread over
    /// <paramref name="instances"/>; each is a 200 or a 409, nothing else.
    /// </summary>
    private static async Task<(int Succeeded, int Conflicted)> IncrementAsync(Uri[] instances, int rounds, int perRound)
    {
        using var http = new HttpClient { Timeout = TimeSpan.FromSeconds(60) };
        var (succeeded, conflicted) = (0, 0);
        for (var round = 0; round < rounds; round++)
        {
            var calls = Enumerable.Range(0, perRound).Select(async i =>
            {
                using var response = await http.PostAsync(new Uri(instances[i % instances.Length], "api/save/n"), Json($$"""{ "tag": "r{{round}}-{{i}}" }"""));
                var text = await response.Content.ReadAsStringAsync();
                Assert.True(response.StatusCode is HttpStatusCode.OK or HttpStatusCode.Conflict, $"{(int)response.StatusCode}: {text}");
                return response.StatusCode == HttpStatusCode.OK;
            }).ToArray();
            foreach (var ok in await Task.WhenAll(calls))
            {
                if (ok)
                    succeeded++;
                else
                    conflicted++;
            }
        }
        return (succeeded, conflicted);
    }

    /// <summary>Save as a Python v2 app: "ifMatch" through the decorators (if_match=), indexed by the worker.</summary>
    private const string SaveV2 = """
        import json
        import urllib.request
        import azure.functions as func

        app = func.FunctionApp(http_auth_level=func.AuthLevel.ANONYMOUS)


        @app.route(route="save/{key}", methods=["POST"])
        @app.blob_input(arg_name="state", path="%BOX%/{key}", connection="AzureWebJobsStorage", data_type="binary")
        @app.blob_output(arg_name="stateOut", path="%BOX%/{key}", connection="AzureWebJobsStorage", if_match="state")
        @app.blob_output(arg_name="note", path="%BOX%/notes/{key}-{tag}", connection="AzureWebJobsStorage")
        def save(req: func.HttpRequest, state: func.InputStream, stateOut: func.Out[str], note: func.Out[str]) -> func.HttpResponse:
            body = req.get_json()
            read = None if state is None else state.read().decode()
            inner = body.get("inner")
            if inner is not None:
                opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
                request = urllib.request.Request(inner["url"], data=json.dumps(inner["body"]).encode(),
                                                 headers={"Content-Type": "application/json"}, method="POST")
                with opener.open(request, timeout=60) as answer:
                    answer.read()
            stateOut.set(body["text"])
            note.set(f"read {read}")
            return func.HttpResponse("saved")


        @app.route(route="broken", methods=["POST"])
        @app.blob_output(arg_name="out", path="%BOX%/x", connection="AzureWebJobsStorage", if_match="nothing")
        def broken(req: func.HttpRequest, out: func.Out[str]) -> str:
            return "never"
        """;

    [Fact]
    public async Task A_python_v2_app_declares_ifMatch_in_its_decorators_and_a_wrong_one_disables_its_function_naming_it()
    {
        var box = Box();
        using var app = new TestApp("python", settings: new() { ["BOX"] = box }, name: "condv2");
        File.WriteAllText(Path.Combine(app.Directory, "function_app.py"), SaveV2);
        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString);
        await PutAsync(box, "k", "v0");

        using var outer = await host.Http.PostAsync("/api/save/k",
            Json(Nested("outer", "o", new Uri(host.Host.BaseAddress, "api/save/k"), "inner", "i")));
        await AssertConflictAsync(outer, $"{box}/k");
        await StoredEventuallyAsync(box, "k", "inner");
        Assert.Null(await StoredAsync(box, "notes/k-o"));

        var broken = Assert.Single((await host.Http.GetHostStatusAsync()).Functions, f => f.Name == "broken");
        Assert.Contains("function_app.py (function 'broken')", broken.Error, StringComparison.Ordinal);
        Assert.Contains("blob output \"out\": ifMatch \"nothing\" is not a binding of this function", broken.Error, StringComparison.Ordinal);
    }

    // ---- two instances --------------------------------------------------------------------------------------------

    private async Task<InstanceGroup> StartGroupAsync(TestApp app, int count) =>
        await InstanceGroup.StartAsync(new InstanceGroupOptions
        {
            AppDirectory = app.Directory,
            Count = count,
            StorageConnectionString = azurite.ConnectionString,
            Arguments = ["--workers", "1"],
            Environment = new Dictionary<string, string> { ["FAAST_PEER_SECRET"] = "conditional-output-tests" },
            LogDirectory = Path.Combine(Path.GetDirectoryName(app.Directory)!, "logs"),
        });

    [Theory]
    [InlineData(null)]
    [InlineData("owner/sync/owner")]
    [InlineData("owner/async/owner")]
    [InlineData("owner/sync/local")]
    [InlineData("local/sync/local")]
    public async Task A_writer_on_another_instance_that_committed_first_makes_the_second_get_409(string? preset)
    {
        var box = Box();
        using var app = SaveApp(box, preset);
        await using var group = await StartGroupAsync(app, 2);
        await PutAsync(box, "k", "v0");
        using var http = new HttpClient { Timeout = TimeSpan.FromSeconds(60) };
        // Both instances read the blob first (each caches v0, where its preset caches reads).
        foreach (var instance in group.Instances)
            Assert.Equal("v0", await http.GetStringAsync(new Uri(instance.BaseAddress, "api/get/k")));

        using var outer = await http.PostAsync(new Uri(group[0].BaseAddress, "api/save/k"),
            Json(Nested("outer", "o", new Uri(group[1].BaseAddress, "api/save/k"), "inner", "i")));
        await AssertConflictAsync(outer, $"{box}/k");
        await StoredEventuallyAsync(box, "k", "inner");
        Assert.Null(await StoredAsync(box, "notes/k-o"));

        // The first instance's copy of v0 is stale; the conflict dropped it, so under the presets that read locally it
        // is not served again (which would make every later write from there conflict too).
        using var next = await http.PostAsync(new Uri(group[0].BaseAddress, "api/save/k"), Json("""{ "text": "next", "tag": "n" }"""));
        var answer = await next.Content.ReadAsStringAsync();
        Assert.True(next.IsSuccessStatusCode, answer);
        Assert.Contains("\"read\": \"inner\"", answer, StringComparison.Ordinal);
        await StoredEventuallyAsync(box, "k", "next");
    }


    [Theory]
    [InlineData(null)]
    [InlineData("owner/async/owner")]
    public async Task Concurrent_increments_across_two_instances_lose_no_update(string? preset)
    {
        var box = Box();
        using var app = SaveApp(box, preset);
        await using var group = await StartGroupAsync(app, 2);
        await PutAsync(box, "n", "0");

        var (succeeded, conflicted) = await IncrementAsync(group.Instances.Select(i => i.BaseAddress).ToArray(), 3, 8);
        output.WriteLine($"{preset ?? "default"}: {succeeded} increments, {conflicted} conflicts");
        Assert.True(succeeded >= 3, $"{succeeded} increments succeeded");
        Assert.Equal(24, succeeded + conflicted);
        using var http = new HttpClient { Timeout = TimeSpan.FromSeconds(60) };
        foreach (var instance in group.Instances)
            Assert.Equal(succeeded.ToString(System.Globalization.CultureInfo.InvariantCulture), await http.GetStringAsync(new Uri(instance.BaseAddress, "api/get/n")));
    }
}
