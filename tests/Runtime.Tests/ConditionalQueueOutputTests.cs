using System.Text;
using System.Text.Json;
using FaaST.Storage;

namespace FaaST.Runtime.Tests;

/// <summary>
/// A conditional blob output of a queue-triggered function: a conflict fails the invocation like any failure, and the
/// message's retry reads the new version and commits (real host, Python worker, Azurite's blobs and queues).
/// </summary>
[Collection("azurite-queues")]
public sealed class ConditionalQueueOutputTests(QueueAzuriteFixture azurite)
{
    [Fact]
    public async Task A_queue_triggered_invocation_that_conflicts_fails_and_its_retry_reads_the_new_version_and_commits()
    {
        var box = "condq" + Guid.NewGuid().ToString("N")[..10];
        var queue = "condq" + Guid.NewGuid().ToString("N")[..10];
        var hostJson = """{ "version": "2.0", "extensions": { "queues": { "maxDequeueCount": 3, "maxPollingInterval": "00:00:00.2" } } }""";
        using var app = new TestApp("python", hostJson, new() { ["BOX"] = box, ["WORK"] = queue })
            .Function("Bump", """
                { "bindings": [
                  { "type": "queueTrigger", "direction": "in", "name": "msg", "queueName": "%WORK%" },
                  { "type": "blob", "direction": "in", "name": "state", "path": "%BOX%/{key}", "dataType": "binary" },
                  { "type": "blob", "direction": "out", "name": "stateOut", "path": "%BOX%/{key}", "ifMatch": "state" } ] }
                """, ("__init__.py", """
                import json
                import urllib.request
                import azure.functions as func

                def main(msg: func.QueueMessage, state: func.InputStream, stateOut: func.Out[str]) -> None:
                    body = msg.get_json()
                    read = state.read().decode()
                    if msg.dequeue_count == 1:
                        # Another writer commits between this attempt's read and its write; the retry will not do this.
                        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
                        request = urllib.request.Request(body["url"], data=b"from http", method="POST")
                        with opener.open(request, timeout=60) as answer:
                            answer.read()
                    stateOut.set(f"{read} + queued (attempt {msg.dequeue_count})")
                """))
            .Function("Put", """
                { "bindings": [
                  { "type": "httpTrigger", "direction": "in", "name": "req", "authLevel": "anonymous", "methods": ["post"], "route": "put/{key}" },
                  { "type": "blob", "direction": "out", "name": "out", "path": "%BOX%/{key}" },
                  { "type": "http", "direction": "out", "name": "$return" } ] }
                """, ("__init__.py", "def main(req, out):\n    out.set(req.get_body().decode())\n    return 'put'\n"));
        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString);
        using var store = new BlobStore(azurite.ConnectionString);
        await store.CreateContainerIfNotExistsAsync(box);
        await store.UploadAsync(box, "k", Encoding.UTF8.GetBytes("v0"));

        var queues = azurite.CreateQueueStore();
        await queues.CreateQueueIfNotExistsAsync(queue);
        var message = JsonSerializer.Serialize(new { key = "k", url = new Uri(host.Host.BaseAddress, "api/put/k").ToString() });
        await queues.SendAsync(queue, Convert.ToBase64String(Encoding.UTF8.GetBytes(message)));

        string? stored = null;
        await Eventually.TrueAsync(async () =>
            (stored = (await store.DownloadAsync(box, "k")) is { } blob ? Encoding.UTF8.GetString(blob.Data) : null) == "from http + queued (attempt 2)",
            "the retry read what the HTTP writer committed and wrote on top of it");
        Assert.Contains("conditional blob output \"stateOut\" not written", host.Logs.All, StringComparison.Ordinal);
    }
}
