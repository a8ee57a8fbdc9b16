using System.Text;
using FaaST.Runtime.Triggers;

namespace FaaST.Runtime.Tests;

/// <summary>A blob-triggered function that keeps failing, on the real host with a real worker and real Azurite.</summary>
[Collection("azurite")]
public sealed class BlobTriggerRetryTests(AzuriteFixture azurite)
{
    /// <summary>Fails for blobs whose content starts with "fail"; copies the others to flaky-out/{name}.</summary>
    private const string PyFlaky = """
        import azure.functions as func
        def main(blob: func.InputStream, out: func.Out[bytes]):
            data = blob.read()
            if data.startswith(b"fail"):
                raise ValueError("refusing " + blob.name)
            out.set(data)
        """;

    private const string FlakyJson = """
        { "bindings": [
          { "type": "blobTrigger", "direction": "in", "name": "blob", "path": "flaky-in/{name}" },
          { "type": "blob", "direction": "out", "name": "out", "path": "flaky-out/{name}" } ] }
        """;

    [Fact]
    public async Task A_blob_whose_function_always_fails_is_tried_maxDequeueCount_times_then_marked_poison_and_the_others_keep_flowing()
    {
        using var app = new TestApp("python", hostJson: """
            { "version": "2.0", "extensions": { "blobs": { "pollingInterval": "00:00:00.2", "maxDequeueCount": 2 } } }
            """, name: "flakyapp").Function("Flaky", FlakyJson, ("__init__.py", PyFlaky));
        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString);
        var store = host.Blobs!;
        await store.CreateContainerIfNotExistsAsync("flaky-in");
        var bad = "bad-" + Guid.NewGuid().ToString("N")[..8];
        var put = await store.UploadAsync("flaky-in", bad, Encoding.UTF8.GetBytes("fail please"));

        await Eventually.TrueAsync(() => Task.FromResult(host.Logs.All.Contains($"Poison blob: Flaky gave up on blob flaky-in/{bad}", StringComparison.Ordinal)),
            "the poison line", seconds: 60);
        var receipts = new BlobReceipts(store, "flakyapp", TimeSpan.FromSeconds(60), 2, Microsoft.Extensions.Logging.Abstractions.NullLogger.Instance);
        var receipt = await receipts.ReadAsync(receipts.NameOf("Flaky", put.ETag, "flaky-in", bad), default);
        Assert.Equal(ReceiptState.Poison, receipt!.Value.State);
        Assert.Equal(2, receipt.Value.Attempts);
        Assert.Contains($"Executed Flaky (", host.Logs.All, StringComparison.Ordinal);
        Assert.Contains($"for blob flaky-in/{bad} failed (attempt 1 of 2); it will be retried", host.Logs.All, StringComparison.Ordinal);
        Assert.Contains($"refusing flaky-in/{bad}", host.Logs.All, StringComparison.Ordinal);

        // The trigger keeps flowing: a good blob after it runs; by then scans have passed the poison blob many times.
        var good = "good-" + Guid.NewGuid().ToString("N")[..8];
        await store.UploadAsync("flaky-in", good, Encoding.UTF8.GetBytes("fine"));
        await Eventually.TrueAsync(async () => await store.GetPropertiesAsync("flaky-out", good) is not null, "flaky-out/" + good, seconds: 30);
        await Task.Delay(TimeSpan.FromSeconds(1)); // five more scans of the container
        var attempts = host.Logs.Lines.Count(l => l.Contains($"Executing Flaky (", StringComparison.Ordinal) && l.Contains($"flaky-in/{bad} ", StringComparison.Ordinal));
        Assert.Equal(2, attempts);
        Assert.Null(await store.GetPropertiesAsync("flaky-out", bad));
    }

    [Fact]
    public async Task A_blob_whose_receipt_name_would_be_too_long_is_logged_once_and_skipped_while_the_others_keep_flowing()
    {
        using var app = new TestApp("python", hostJson: """
            { "version": "2.0", "extensions": { "blobs": { "pollingInterval": "00:00:00.2" } } }
            """, name: "longnames").Function("Flaky", FlakyJson, ("__init__.py", PyFlaky));
        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString);
        var store = host.Blobs!;
        await store.CreateContainerIfNotExistsAsync("flaky-in");
        // A valid blob name (1,000 characters) whose receipt name (prefix, ETag and container added) passes 1,024.
        var tooLong = "long-" + new string('x', 995);
        await store.UploadAsync("flaky-in", tooLong, Encoding.UTF8.GetBytes("fine"));
        await Eventually.TrueAsync(() => Task.FromResult(host.Logs.All.Contains("Flaky cannot run for blob flaky-in/long-", StringComparison.Ordinal)),
            "the line saying the long blob is skipped", seconds: 30);

        var good = "good-" + Guid.NewGuid().ToString("N")[..8];
        await store.UploadAsync("flaky-in", good, Encoding.UTF8.GetBytes("fine"));
        await Eventually.TrueAsync(async () => await store.GetPropertiesAsync("flaky-out", good) is not null, "flaky-out/" + good, seconds: 30);
        await Task.Delay(TimeSpan.FromSeconds(1)); // five more scans of the container
        Assert.Single(host.Logs.Lines, l => l.Contains("Flaky cannot run for blob flaky-in/long-", StringComparison.Ordinal));
        Assert.DoesNotContain(host.Logs.Lines, l => l.Contains("Executing Flaky", StringComparison.Ordinal) && l.Contains("long-", StringComparison.Ordinal));
    }
}
