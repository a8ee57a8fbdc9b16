using System.Collections.Concurrent;
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
        var logger = new RecordingLogger();
        using var store = new BlobStore(server.ConnectionString, Fast(retries: 2), logger);

        Assert.NotNull(await store.GetPropertiesAsync("data", "retried.txt"));

        var line = Assert.Single(logger.Lines);
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
        var logger = new RecordingLogger();
        using var store = new BlobStore(server.ConnectionString, Fast(retries: 1), logger);

        await Assert.ThrowsAsync<StorageUnavailableException>(() => store.GetPropertiesAsync("data", "down.txt"));

        Assert.Equal([(LogLevel.Debug, 1000), (LogLevel.Warning, 1001)], logger.Lines.Select(l => (l.Level, l.EventId)));
        Assert.Contains("giving up after 2 tries", logger.Lines.Last().Text, StringComparison.Ordinal);
        Assert.Contains("data/down.txt", logger.Lines.Last().Text, StringComparison.Ordinal);
    }

    private sealed class RecordingLogger : ILogger
    {
        private readonly ConcurrentQueue<(LogLevel Level, int EventId, string Text)> _lines = new();

        public IReadOnlyList<(LogLevel Level, int EventId, string Text)> Lines => [.. _lines];

        public IDisposable? BeginScope<TState>(TState state) where TState : notnull => null;

        public bool IsEnabled(LogLevel logLevel) => true;

        public void Log<TState>(LogLevel logLevel, EventId eventId, TState state, Exception? exception, Func<TState, Exception?, string> formatter) =>
            _lines.Enqueue((logLevel, eventId.Id, formatter(state, exception)));
    }
}
