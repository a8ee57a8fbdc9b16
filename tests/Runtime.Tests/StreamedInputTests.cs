using System.Security.Cryptography;
using System.Text.Json;

namespace FaaST.Runtime.Tests;

/// <summary>
/// Streamed large inputs end to end (cache.streamThreshold): a real host, a real Python worker, real /dev/shm and
/// real Azurite behind a proxy that holds the download part-way until the test releases it.
/// </summary>
[Collection("azurite")]
public sealed class StreamedInputTests(AzuriteFixture azurite)
{
    private const int FirstRead = 1 << 20;

    private static string PyStreamRead(string marker) => $$"""
        import hashlib, json, pathlib
        import azure.functions as func
        def main(req: func.HttpRequest, inblob: func.InputStream) -> func.HttpResponse:
            first = inblob.read({{FirstRead}})
            filled, state = inblob._fill.state() if inblob._fill is not None else (-1, -1)
            pathlib.Path({{JsonSerializer.Serialize(marker)}}).write_text("started")
            h = hashlib.sha256(first)
            while True:
                chunk = inblob.read1(1 << 20)
                if not chunk:
                    break
                h.update(chunk)
            return func.HttpResponse(json.dumps({"sha256": h.hexdigest(), "state": state}))
        """;

    [Fact]
    public async Task A_python_function_reads_a_large_miss_while_it_downloads_and_gets_every_byte()
    {
        var marker = Path.Combine(Path.GetTempPath(), $"faast-streamed-{Guid.NewGuid():N}");
        using var app = new TestApp("python").Function("Read", TestApp.BlobReadJson("data"), ("__init__.py", PyStreamRead(marker)));
        await using var proxy = new GatedProxy(azurite.Azurite.Port, holdAfter: 4 << 20);
        var storage = azurite.ConnectionString.Replace($":{azurite.Azurite.Port}/", $":{proxy.Port}/", StringComparison.Ordinal);
        await using var host = await HostUnderTest.StartAsync(app.Directory, storage);
        var data = new byte[24 << 20];
        Random.Shared.NextBytes(data);
        var name = $"streamed-{Guid.NewGuid():N}";
        await azurite.Store.CreateContainerIfNotExistsAsync("data");
        await azurite.Store.UploadAsync("data", name, data); // straight to Azurite: only the host's reads pass the proxy

        try
        {
            var answer = host.Http.GetStringAsync($"/api/read/{name}");
            // The function has read its first MiB while the proxy still holds the rest of the download.
            await proxy.Holding.Task.WaitAsync(TimeSpan.FromMinutes(2));
            await Eventually.TrueAsync(() => File.Exists(marker) || answer.IsCompleted, "the function's first read");
            if (!File.Exists(marker))
                Assert.Fail($"the function answered without starting its read while the download was held: {await answer}");
            proxy.Release();

            using var result = JsonDocument.Parse(await answer);
            Assert.Equal(Convert.ToHexStringLower(SHA256.HashData(data)), result.RootElement.GetProperty("sha256").GetString());
            Assert.Equal(0, result.RootElement.GetProperty("state").GetInt32()); // filling, at its first read
            Assert.Equal(1, (await host.Http.GetCacheStatusAsync()).Reads["local_miss"]);
        }
        finally
        {
            File.Delete(marker);
        }
    }

    [Fact]
    public async Task A_node_function_which_cannot_stream_gets_a_large_miss_whole()
    {
        const string nodeRead = """
            const crypto = require('crypto');
            module.exports = async function (context, req) {
              const b = context.bindings.inblob;
              return { body: `${b.length} ${crypto.createHash('sha256').update(b).digest('hex')}` };
            };
            """;
        using var app = new TestApp("node").Function("Read", TestApp.BlobReadJson("data"), ("index.js", nodeRead));
        await using var proxy = new GatedProxy(azurite.Azurite.Port, holdAfter: 4 << 20);
        var storage = azurite.ConnectionString.Replace($":{azurite.Azurite.Port}/", $":{proxy.Port}/", StringComparison.Ordinal);
        await using var host = await HostUnderTest.StartAsync(app.Directory, storage);
        var data = new byte[24 << 20];
        Random.Shared.NextBytes(data);
        var name = $"whole-{Guid.NewGuid():N}";
        await azurite.Store.CreateContainerIfNotExistsAsync("data");
        await azurite.Store.UploadAsync("data", name, data);

        var answer = host.Http.GetStringAsync($"/api/read/{name}");
        await proxy.Holding.Task.WaitAsync(TimeSpan.FromMinutes(2));
        proxy.Release(); // the host held the invocation until the fill completed: the worker never sees a partial object

        Assert.Equal($"{data.Length} {Convert.ToHexStringLower(SHA256.HashData(data))}", await answer);
    }
}
