using System.Diagnostics;
using System.Net;
using System.Text;
using FaaST.Storage;

namespace FaaST.Runtime.Tests;

/// <summary>The integration tests' Azurite with its queue service (for queue triggers and outputs).</summary>
[CollectionDefinition("azurite-queues")]
public sealed class QueueAzuriteCollection : ICollectionFixture<QueueAzuriteFixture>;

/// <summary>Queue triggers and queue outputs: real host, real workers, real Azurite (blobs and queues).</summary>
[Collection("azurite-queues")]
public sealed class QueueTriggerTests(QueueAzuriteFixture azurite)
{
    private static string Unique(string prefix) => prefix + Guid.NewGuid().ToString("N")[..12];

    private static string B64(string text) => Convert.ToBase64String(Encoding.UTF8.GetBytes(text));

    /// <summary>Stage 1 (blobTrigger qin-X/{name}) sends {"name", "text"} to queue %WORK%; stage 2 (queueTrigger) writes qout/{name}.</summary>
    private static TestApp PipelineApp(string runtime, string inContainer, string queue)
    {
        var app = new TestApp(runtime, settings: new() { ["WORK"] = queue, ["IN"] = inContainer });
        var split = """
            { "bindings": [
              { "type": "blobTrigger", "direction": "in", "name": "blob", "path": "%IN%/{name}" },
              { "type": "queue", "direction": "out", "name": "$return", "queueName": "%WORK%" } ] }
            """;
        var upper = """
            { "bindings": [
              { "type": "queueTrigger", "direction": "in", "name": "msg", "queueName": "%WORK%" },
              { "type": "blob", "direction": "out", "name": "out", "path": "qout/{name}" } ] }
            """;
        if (runtime == "python")
        {
            app.Function("Split", split, ("__init__.py", """
                import json
                import azure.functions as func
                def main(blob: func.InputStream) -> str:
                    return json.dumps({"name": blob.name.split("/", 1)[1], "text": blob.read().decode()})
                """));
            app.Function("Upper", upper, ("__init__.py", """
                import azure.functions as func
                def main(msg: func.QueueMessage, out: func.Out[str]) -> None:
                    out.set(f"{msg.get_json()['text'].upper()}|{msg.dequeue_count}|{bool(msg.id)}")
                """));
        }
        else
        {
            app.Function("Split", split, ("index.js", """
                module.exports = async function (context, blob) {
                  return { name: context.bindingData.name, text: blob.toString() };
                };
                """));
            app.Function("Upper", upper, ("index.js", """
                module.exports = async function (context, msg) {
                  context.bindings.out = `${msg.text.toUpperCase()}|${context.bindingData.dequeueCount}|${context.bindingData.id ? "True" : "False"}`;
                };
                """));
        }
        return app;
    }

    private static async Task<string?> ReadAsync(BlobStore blobs, string container, string name)
    {
        var blob = await blobs.DownloadAsync(container, name);
        return blob is null ? null : Encoding.UTF8.GetString(blob.Data);
    }

    [Theory]
    [InlineData("python")]
    [InlineData("node")]
    public async Task A_blob_to_queue_to_blob_pipeline_runs_both_stages_through_the_queue(string runtime)
    {
        var queue = Unique("work-");
        var inContainer = Unique("qin-");
        using var app = PipelineApp(runtime, inContainer, queue);
        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString);
        var name = Unique("doc-") + ".txt";
        await host.Blobs!.CreateContainerIfNotExistsAsync(inContainer);
        await host.Blobs.UploadAsync(inContainer, name, Encoding.UTF8.GetBytes("hello queues"));
        string? result = null;
        await Eventually.TrueAsync(async () => (result = await ReadAsync(host.Blobs, "qout", name)) is not null, "qout/" + name);
        Assert.Equal("HELLO QUEUES|1|True", result);
        // Taken from the queue and deleted: nothing left for another instance to run.
        Assert.Empty(await azurite.CreateQueueStore().PeekAsync(queue, 32));
    }

    [Fact]
    public async Task Bad_messages_go_to_the_poison_queue_after_maxDequeueCount_while_good_ones_flow()
    {
        var queue = Unique("jobs-");
        var hostJson = """{ "version": "2.0", "extensions": { "queues": { "maxDequeueCount": 2, "maxPollingInterval": "00:00:00.2" } } }""";
        using var app = new TestApp("python", hostJson, new() { ["JOBS"] = queue });
        app.Function("Bound", """
            { "bindings": [
              { "type": "queueTrigger", "direction": "in", "name": "msg", "queueName": "%JOBS%" },
              { "type": "blob", "direction": "out", "name": "$return", "path": "done/{name}" } ] }
            """, ("__init__.py", """
            import azure.functions as func
            def main(msg: func.QueueMessage) -> str:
                return msg.get_body().decode()
            """));
        var queues = azurite.CreateQueueStore();
        await queues.CreateQueueIfNotExistsAsync(queue);
        await queues.SendAsync(queue, "this is not base64!");
        await queues.SendAsync(queue, B64("""{"other": 1}"""));
        var good = Unique("ok-");
        await queues.SendAsync(queue, B64($$"""{"name": "{{good}}"}"""));
        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString);
        await Eventually.TrueAsync(async () => await ReadAsync(host.Blobs!, "done", good) is not null, "done/" + good);
        IReadOnlyList<string> poisoned = [];
        await Eventually.TrueAsync(async () =>
        {
            try
            {
                poisoned = await queues.PeekAsync(queue + "-poison", 32);
            }
            catch (QueueStorageException e) when (e.Status == 404)
            {
                return false;
            }
            return poisoned.Count == 2;
        }, queue + "-poison to hold both bad messages");
        // Moved as they were (still encoded), and gone from the work queue.
        Assert.Equal(new[] { "this is not base64!", B64("""{"other": 1}""") }.Order(), poisoned.Order());
        await Eventually.TrueAsync(async () => (await queues.PeekAsync(queue, 32)).Count == 0, queue + " to be empty");
        var logs = host.Logs.All;
        Assert.Contains("is not valid base64, which extensions.queues.messageEncoding \"base64\" (the default) expects", logs, StringComparison.Ordinal);
        Assert.Contains("needs a value for {name}", logs, StringComparison.Ordinal);
        Assert.Contains("dequeue count 1 of maxDequeueCount 2", logs, StringComparison.Ordinal);
        Assert.Contains($"moved to queue {queue}-poison", logs, StringComparison.Ordinal);
    }

    [Fact]
    public async Task MessageEncoding_none_reads_and_writes_plain_text_and_a_list_writes_one_message_per_item()
    {
        var input = Unique("plain-in-");
        var output = Unique("plain-out-");
        var hostJson = """{ "version": "2.0", "extensions": { "queues": { "messageEncoding": "none", "maxPollingInterval": "00:00:00.2", "batchSize": 1 } } }""";
        using var app = new TestApp("node", hostJson, new() { ["IN"] = input, ["OUT"] = output });
        app.Function("Echo", """
            { "bindings": [
              { "type": "queueTrigger", "direction": "in", "name": "msg", "queueName": "%IN%" },
              { "type": "queue", "direction": "out", "name": "copies", "queueName": "%OUT%" } ] }
            """, ("index.js", """
            module.exports = async function (context, msg) {
              context.bindings.copies = [msg + '!', { said: msg }];
            };
            """));
        var queues = azurite.CreateQueueStore();
        await queues.CreateQueueIfNotExistsAsync(input);
        await queues.SendAsync(input, "plain text");
        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString);
        IReadOnlyList<string> copies = [];
        await Eventually.TrueAsync(async () =>
        {
            try
            {
                copies = await queues.PeekAsync(output, 32);
            }
            catch (QueueStorageException e) when (e.Status == 404)
            {
                return false;
            }
            return copies.Count == 2;
        }, output + " to hold two messages");
        Assert.Equal(["plain text!", """{"said":"plain text"}"""], copies);
        Assert.Contains("batchSize 1", host.Logs.All, StringComparison.Ordinal);
        Assert.Contains("messageEncoding none", host.Logs.All, StringComparison.Ordinal);
    }

    [Fact]
    public async Task A_message_a_function_writes_runs_at_once_although_the_poller_has_backed_off()
    {
        var queue = Unique("fast-");
        // Five minutes between polls at most: only the wake-up on the host's own write can make this quick.
        var hostJson = """{ "version": "2.0", "extensions": { "queues": { "maxPollingInterval": "00:05:00" } } }""";
        using var app = new TestApp("python", hostJson, new() { ["FAST"] = queue });
        app.Function("Send", """
            { "bindings": [
              { "type": "httpTrigger", "direction": "in", "name": "req", "authLevel": "anonymous" },
              { "type": "queue", "direction": "out", "name": "msg", "queueName": "%FAST%" },
              { "type": "http", "direction": "out", "name": "$return" } ] }
            """, ("__init__.py", """
            import azure.functions as func
            def main(req: func.HttpRequest, msg: func.Out[str]) -> str:
                msg.set(req.params["v"])
                return "sent"
            """));
        app.Function("Take", """
            { "bindings": [
              { "type": "queueTrigger", "direction": "in", "name": "msg", "queueName": "%FAST%" },
              { "type": "blob", "direction": "out", "name": "$return", "path": "fastout/{QueueTrigger}" } ] }
            """, ("__init__.py", """
            def main(msg: str) -> str:
                return "taken " + msg
            """));
        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString);
        await Eventually.TrueAsync(() => Task.FromResult(host.Logs.All.Contains($"listens on queue {queue}", StringComparison.Ordinal)), "the listener");
        // Empty polls double the wait from 100 ms: after 7 s the poller sleeps until about 12.7 s.
        await Task.Delay(TimeSpan.FromSeconds(7));
        var value = Unique("v");
        var clock = Stopwatch.StartNew();
        Assert.Equal(HttpStatusCode.OK, (await host.Http.GetAsync($"/api/Send?v={value}")).StatusCode);
        string? taken = null;
        await Eventually.TrueAsync(async () => (taken = await ReadAsync(host.Blobs!, "fastout", value)) is not null, "fastout/" + value, seconds: 4);
        Assert.Equal("taken " + value, taken);
        Assert.True(clock.Elapsed < TimeSpan.FromSeconds(4), $"took {clock.Elapsed}");
        Assert.Empty(await azurite.CreateQueueStore().PeekAsync(queue, 32));
    }

    [Fact]
    public async Task Stopping_the_host_takes_no_new_messages_and_waits_for_the_invocation_in_flight()
    {
        var queue = Unique("drain-");
        var hostJson = """{ "version": "2.0", "extensions": { "queues": { "maxPollingInterval": "00:00:00.2", "batchSize": 1, "newBatchThreshold": 0 } } }""";
        using var app = new TestApp("python", hostJson, new() { ["DRAIN"] = queue });
        app.Function("Busy", """
            { "bindings": [
              { "type": "queueTrigger", "direction": "in", "name": "msg", "queueName": "%DRAIN%" },
              { "type": "blob", "direction": "out", "name": "$return", "path": "drained/{QueueTrigger}" } ] }
            """, ("__init__.py", """
            import logging
            import time
            def main(msg: str) -> str:
                logging.warning("busy-started %s", msg)
                time.sleep(3)
                return "finished"
            """));
        var queues = azurite.CreateQueueStore();
        await queues.CreateQueueIfNotExistsAsync(queue);
        var first = Unique("a");
        await queues.SendAsync(queue, B64(first));
        var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString);
        await Eventually.TrueAsync(() => Task.FromResult(host.Logs.All.Contains("busy-started " + first, StringComparison.Ordinal)), "the first invocation");
        var second = Unique("b");
        await queues.SendAsync(queue, B64(second));
        await host.DisposeAsync();
        // The invocation in flight finished and its message is gone; the one that arrived meanwhile was not taken.
        using var blobs = new BlobStore(azurite.ConnectionString);
        Assert.Equal("finished", await ReadAsync(blobs, "drained", first));
        Assert.Null(await ReadAsync(blobs, "drained", second));
        Assert.Equal([B64(second)], await queues.PeekAsync(queue, 32));
        Assert.Contains("stopped taking messages from " + queue, host.Logs.All, StringComparison.Ordinal);
    }

    [Fact]
    public async Task A_message_in_flight_when_the_host_is_killed_runs_again_on_the_next_host_after_its_lease()
    {
        var queue = Unique("slow-");
        var hostJson = """{ "version": "2.0", "extensions": { "queues": { "maxPollingInterval": "00:00:00.5" } } }""";
        using var app = new TestApp("python", hostJson, new() { ["SLOW"] = queue, ["FAAST_QUEUE_MESSAGE_LEASE"] = "00:00:04" });
        app.Function("Slow", """
            { "bindings": [
              { "type": "queueTrigger", "direction": "in", "name": "msg", "queueName": "%SLOW%" },
              { "type": "blob", "direction": "out", "name": "$return", "path": "slowdone/{QueueTrigger}" } ] }
            """, ("__init__.py", """
            import logging
            import time
            import azure.functions as func
            def main(msg: func.QueueMessage) -> str:
                logging.warning("slow-started %s attempt %s", msg.get_body().decode(), msg.dequeue_count)
                if msg.dequeue_count == 1:
                    time.sleep(300)
                return str(msg.dequeue_count)
            """));
        var queues = azurite.CreateQueueStore();
        await queues.CreateQueueIfNotExistsAsync(queue);
        var value = Unique("m");
        await queues.SendAsync(queue, B64(value));
        var first = await HostProcess.StartAsync(app.Directory, azurite.ConnectionString, ["--no-peers"]);
        try
        {
            await Eventually.TrueAsync(() => Task.FromResult(first.Output.Any(l => l.Contains($"slow-started {value} attempt 1", StringComparison.Ordinal))),
                "the first attempt to start", seconds: 60);
            using var process = Process.GetProcessById(first.ProcessId);
            process.Kill(entireProcessTree: true);
            await process.WaitForExitAsync();
        }
        finally
        {
            await first.DisposeAsync();
        }
        await using var second = await HostProcess.StartAsync(app.Directory, azurite.ConnectionString, ["--no-peers"]);
        using var blobs = new BlobStore(azurite.ConnectionString);
        string? done = null;
        await Eventually.TrueAsync(async () => (done = await ReadAsync(blobs, "slowdone", value)) is not null, "slowdone/" + value, seconds: 60);
        Assert.Equal("2", done);
        await Eventually.TrueAsync(async () => (await queues.PeekAsync(queue, 32)).Count == 0, queue + " to be empty");
    }
}
