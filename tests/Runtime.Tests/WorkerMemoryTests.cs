using System.Globalization;

namespace FaaST.Runtime.Tests;

/// <summary>
/// What a worker keeps between invocations: mappings of the cache's files (until the host says a
/// file is gone) and the heap a function grew (until the worker has been idle for a while).
/// </summary>
[Collection("azurite")]
[System.Runtime.Versioning.UnsupportedOSPlatform("windows")]
public sealed class WorkerMemoryTests(AzuriteFixture azurite)
{
    private const string PyRead = """
        import azure.functions as func
        def main(req: func.HttpRequest, inblob: func.InputStream) -> func.HttpResponse:
            data = inblob.read()
            return func.HttpResponse(f"{len(data)} {data[:8].hex()}")
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
            outblob.set(req.get_body())
            return func.HttpResponse("ok")
        """;

    private const string PyGrow = """
        import azure.functions as func
        def main(req: func.HttpRequest) -> func.HttpResponse:
            data = b"\x01" * (256 << 20)  # grows the heap by 256 MiB (every page written) for one invocation
            return func.HttpResponse(str(len(data)))
        """;

    private static string Answer(byte[] data) => $"{data.Length} {Convert.ToHexStringLower(data.AsSpan(0, 8))}";

    /// <summary>Lines of /proc/PID/maps naming files in <paramref name="directory"/>.</summary>
    private static string[] MappedFrom(int pid, string directory) =>
        File.ReadAllLines($"/proc/{pid}/maps").Where(l => l.Contains(directory + "/", StringComparison.Ordinal)).ToArray();

    private static long RssAnonBytes(int pid)
    {
        foreach (var line in File.ReadLines($"/proc/{pid}/status"))
            if (line.StartsWith("RssAnon:", StringComparison.Ordinal))
                return long.Parse(line["RssAnon:".Length..].Trim().Split(' ')[0], CultureInfo.InvariantCulture) * 1024;
        throw new InvalidOperationException($"no RssAnon in /proc/{pid}/status");
    }

    [Fact]
    public async Task A_worker_keeps_a_large_object_mapped_and_unmaps_it_when_the_cache_deletes_it()
    {
        using var app = new TestApp("python")
            .Function("Read", TestApp.BlobReadJson("data"), ("__init__.py", PyRead))
            .Function("Write", WriteJson, ("__init__.py", PyWrite));
        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString);
        var directory = host.Host.Cache!.Directory;
        var pid = Assert.Single(host.Host.WorkerProcessIds);
        var name = $"big-{Guid.NewGuid():N}";
        var first = new byte[1 << 20];
        Random.Shared.NextBytes(first);
        await host.Blobs!.CreateContainerIfNotExistsAsync("data");
        await host.Blobs.UploadAsync("data", name, first);

        Assert.Equal(Answer(first), await host.Http.GetStringAsync($"/api/read/{name}"));
        Assert.Equal(Answer(first), await host.Http.GetStringAsync($"/api/read/{name}"));
        var kept = MappedFrom(pid, directory);
        Assert.Contains(kept, l => !l.EndsWith("(deleted)", StringComparison.Ordinal));

        // A new version replaces the cached object: its old file is deleted and the worker is told.
        var second = new byte[1 << 20];
        Random.Shared.NextBytes(second);
        using (var body = new ByteArrayContent(second))
            (await host.Http.PostAsync($"/api/write/{name}", body)).EnsureSuccessStatusCode();
        Assert.Equal(Answer(second), await host.Http.GetStringAsync($"/api/read/{name}"));
        await Eventually.TrueAsync(() => Task.FromResult(!MappedFrom(pid, directory).Any(l => l.EndsWith("(deleted)", StringComparison.Ordinal))),
            "the worker to unmap the deleted file: " + string.Join(" | ", MappedFrom(pid, directory)));
    }

    [Fact]
    public async Task A_python_worker_keeps_its_grown_heap_while_busy_and_returns_it_when_idle()
    {
        // The idle delay comes from the app's settings, so that each half is deterministic.
        foreach (var (idleSeconds, returned) in new[] { ("600", false), ("0.2", true) })
        {
            using var app = new TestApp("python", settings: new() { ["FAAST_WORKER_IDLE_TRIM_S"] = idleSeconds })
                .Function("Grow", TestApp.HttpFunctionJson, ("__init__.py", PyGrow));
            await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString);
            var pid = Assert.Single(host.Host.WorkerProcessIds);
            Assert.Equal((256 << 20).ToString(CultureInfo.InvariantCulture), await host.Http.GetStringAsync("/api/Grow"));
            if (!returned)
                Assert.True(RssAnonBytes(pid) > 200L << 20, $"the heap should stay grown while idle < {idleSeconds} s; RssAnon {RssAnonBytes(pid)}");
            else
                await Eventually.TrueAsync(() => Task.FromResult(RssAnonBytes(pid) < 100L << 20),
                    $"the idle worker to give its heap back (RssAnon {RssAnonBytes(pid)})");
        }
    }
}
