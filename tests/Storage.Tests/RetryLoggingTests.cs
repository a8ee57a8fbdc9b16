using Microsoft.Extensions.Logging;

namespace FaaST.Storage.Tests;

/// <summary>Storage tries that the SDK retries are logged, against a loopback server that fails on purpose.</summary>
public class RetryLoggingTests
{
    private static BlobStoreOptions Fast(int retries) => new()
    {
        MaxRetries = retries,
        RetryBaseDelay = TimeSpan.FromMilliseconds(5),
        RetryMaxDelay = TimeSpan.FromMilliseconds(50),
    };

    [Fact]
    public async Task A_try_answered_500_is_logged_as_a_retry_naming_the_blob_the_try_and_the_status()
    {
        await using var server = new FaultServer((n, _) => n == 1
            ? FaultReply.Status(500, "InternalError")
            : FaultReply.Status(200, null, ("ETag", "\"0x1\""), ("Last-Modified", "Fri, 21 Nov 2025 10:00:00 GMT")));
        var logger = new ListLogger();
        using var store = new BlobStore(server.ConnectionString, Fast(retries: 2), logger);

        Assert.NotNull(await store.GetPropertiesAsync("data", "retried.txt"));

        var line = Assert.Single(logger.Entries);
        Assert.Equal((LogLevel.Debug, 1000), (line.Level, line.EventId));
        Assert.Contains("HEAD", line.Text, StringComparison.Ordinal);
        Assert.Contains("data/retried.txt", line.Text, StringComparison.Ordinal);
        Assert.Contains("try 1 of 3", line.Text, StringComparison.Ordinal);
        Assert.Contains("500", line.Text, StringComparison.Ordinal);
    }

    [Fact]
    public async Task The_last_failed_try_is_logged_as_a_warning_that_storage_gave_up()
    {
        await using var server = new FaultServer((_, _) => FaultReply.Status(503, "ServerBusy"));
        var logger = new ListLogger();
        using var store = new BlobStore(server.ConnectionString, Fast(retries: 1), logger);

        await Assert.ThrowsAsync<StorageUnavailableException>(() => store.GetPropertiesAsync("data", "down.txt"));

        Assert.Equal([(LogLevel.Debug, 1000), (LogLevel.Warning, 1001)], logger.Entries.Select(l => (l.Level, l.EventId)));
        Assert.Contains("giving up after 2 tries", logger.Entries.Last().Text, StringComparison.Ordinal);
        Assert.Contains("data/down.txt", logger.Entries.Last().Text, StringComparison.Ordinal);
    }

    [Fact]
    public async Task While_storage_is_down_one_give_up_a_second_is_logged_and_the_next_line_counts_those_held_back()
    {
        await using var server = new FaultServer((_, _) => FaultReply.Status(503, "ServerBusy"));
        var logger = new ListLogger();
        using var store = new BlobStore(server.ConnectionString, Fast(retries: 0), logger);

        for (var i = 0; i < 20; i++)
            await Assert.ThrowsAsync<StorageUnavailableException>(() => store.GetPropertiesAsync("data", $"down-{i}.txt"));
        // The gate opens again a second after the first line: the next give-up logs the count, then itself.
        await Task.Delay(TimeSpan.FromSeconds(1.1));
        await Assert.ThrowsAsync<StorageUnavailableException>(() => store.GetPropertiesAsync("data", "after.txt"));

        var warnings = logger.Entries.Where(e => e.Level == LogLevel.Warning).ToList();
        var held = 20 - warnings.Count(e => e.EventId == 1001 && !e.Text.Contains("after.txt", StringComparison.Ordinal));
        Assert.True(held > 0, "20 give-ups within well under a second were all logged: " + string.Join(" | ", warnings.Select(w => w.Text)));
        var count = Assert.Single(warnings, e => e.EventId == 1004);
        Assert.Contains($"{held} more requests gave up", count.Text, StringComparison.Ordinal);
        Assert.Contains("data/after.txt", warnings.Last().Text, StringComparison.Ordinal);
    }

    [Fact]
    public async Task A_body_that_breaks_mid_download_is_resumed_and_each_resume_is_logged_with_the_blob_the_offset_and_the_try()
    {
        var data = BlobStoreTests.RandomBytes(1000);
        await using var server = new FaultServer((n, r) => n switch
        {
            1 => FaultReply.Truncated(200, 1000, data[..400], ("ETag", "\"0x1\""), ("Last-Modified", LastModified)),
            2 => FaultReply.Truncated(206, 600, data[400..700], ("ETag", "\"0x1\""), ("Content-Range", "bytes 400-999/1000")),
            _ => FaultReply.Body(206, data[700..], ("ETag", "\"0x1\""), ("Content-Range", "bytes 700-999/1000")),
        });
        var logger = new ListLogger();
        using var store = new BlobStore(server.ConnectionString, Fast(retries: 2), logger);
        using var ms = new MemoryStream();

        await store.DownloadToAsync("data", "resumed.bin", ms);

        Assert.Equal(data, ms.ToArray());
        Assert.Equal(3, server.Requests.Count);
        Assert.Equal([(LogLevel.Debug, 1002), (LogLevel.Debug, 1002)], logger.Entries.Select(l => (l.Level, l.EventId)));
        Assert.Contains("data/resumed.bin", logger.Entries[0].Text, StringComparison.Ordinal);
        Assert.Contains("from byte 400 with If-Match \"0x1\" (resume 1)", logger.Entries[0].Text, StringComparison.Ordinal);
        Assert.Contains("from byte 700 with If-Match \"0x1\" (resume 2)", logger.Entries[1].Text, StringComparison.Ordinal);
    }

    [Fact]
    public async Task A_body_that_keeps_breaking_is_given_up_with_a_warning_naming_the_blob_and_the_bytes_received()
    {
        var data = BlobStoreTests.RandomBytes(1000);
        await using var server = new FaultServer((n, r) => n == 1
            ? FaultReply.Truncated(200, 1000, data[..100], ("ETag", "\"0x1\""), ("Last-Modified", LastModified))
            : FaultReply.Truncated(206, 900, data[100..101], ("ETag", "\"0x1\""), ("Content-Range", "bytes 100-999/1000")));
        var logger = new ListLogger(LogLevel.Information);
        using var store = new BlobStore(server.ConnectionString, Fast(retries: 2), logger);

        await Assert.ThrowsAsync<StorageUnavailableException>(() => store.DownloadToAsync("data", "broken.bin", Stream.Null));

        var line = Assert.Single(logger.Entries, l => l.EventId == 1003);
        Assert.Equal(LogLevel.Warning, line.Level);
        Assert.Contains("data/broken.bin", line.Text, StringComparison.Ordinal);
        Assert.Contains($"the body broke after {100 + server.Requests.Count - 1} bytes", line.Text, StringComparison.Ordinal);
        Assert.Contains($"({server.Requests.Count - 1} resume(s) tried)", line.Text, StringComparison.Ordinal);
        Assert.DoesNotContain(logger.Entries, l => l.Level == LogLevel.Debug);
    }

    private const string LastModified = "Fri, 21 Nov 2025 10:00:00 GMT";
}
