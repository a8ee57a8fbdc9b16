using System.Text;
using FaaST.Prewarm.History;
using FaaST.Prewarm.Records;
using Microsoft.Extensions.Logging;
using Microsoft.Extensions.Time.Testing;

namespace FaaST.Prewarm.Tests;

/// <summary>The history of unload records against a real Azurite; each test has an app of its own.</summary>
[Collection(AzuriteCollection.Name)]
public sealed class PrewarmHistoryTests(AzuriteFixture azurite)
{
    private static readonly DateTimeOffset Now = new(2026, 11, 28, 6, 0, 0, TimeSpan.Zero);
    private readonly FakeTimeProvider _time = new(Now);
    private readonly ListLogger _log = new(LogLevel.Debug);
    private readonly string _app = "app" + Guid.NewGuid().ToString("N")[..12];

    private PrewarmHistory History() => new(azurite.Store, _log, _time);

    private UnloadRecord Record(TimeSpan before, string instance = "i1", string blob = "m.bin") =>
        new(_app, instance, Now - before, [new ObjectRecord("devstoreaccount1", "models", blob, 10, "\"e\"", 1, 0, 1, 0, 0, TimeSpan.FromSeconds(2))]);

    [Fact]
    public async Task A_written_record_is_read_back_under_its_zero_padded_name()
    {
        var record = Record(TimeSpan.FromMinutes(5));
        var blob = await History().WriteAsync(record);

        Assert.Equal($"{_app}/{(Now - TimeSpan.FromMinutes(5)).UtcTicks:D19}-i1.json", blob);
        var back = Assert.Single(await History().ReadAsync(_app, TimeSpan.FromDays(7), 64));
        Assert.Equal((record.App, record.Instance, record.UnloadedAt), (back.App, back.Instance, back.UnloadedAt));
        Assert.Equal(record.Objects, back.Objects);
    }

    [Fact]
    public async Task Reading_returns_the_newest_records_within_maxAge_newest_first()
    {
        var history = History();
        foreach (var minutes in new[] { 30, 10, 50, 20, 60 * 24 * 8 })
            await history.WriteAsync(Record(TimeSpan.FromMinutes(minutes)));

        var all = await history.ReadAsync(_app, TimeSpan.FromDays(7), 64);
        Assert.Equal([10, 20, 30, 50], all.Select(r => (int)(Now - r.UnloadedAt).TotalMinutes));
        var newest = await history.ReadAsync(_app, TimeSpan.FromDays(7), 2);
        Assert.Equal([10, 20], newest.Select(r => (int)(Now - r.UnloadedAt).TotalMinutes));
        var recent = await history.ReadAsync(_app, TimeSpan.FromMinutes(25), 64);
        Assert.Equal([10, 20], recent.Select(r => (int)(Now - r.UnloadedAt).TotalMinutes));
    }

    [Fact]
    public async Task A_corrupt_or_other_format_record_is_skipped_with_a_warning_naming_it_and_the_rest_are_read()
    {
        var history = History();
        await history.WriteAsync(Record(TimeSpan.FromMinutes(10)));
        var corrupt = PrewarmHistory.BlobName(_app, "bad", Now - TimeSpan.FromMinutes(5));
        var newer = PrewarmHistory.BlobName(_app, "future", Now - TimeSpan.FromMinutes(4));
        var other = PrewarmHistory.BlobName("someone-else", "x", Now - TimeSpan.FromMinutes(3));
        await azurite.Store.UploadAsync(PrewarmHistory.Container, corrupt, Encoding.UTF8.GetBytes("{\"format\":1,\"app\""));
        await azurite.Store.UploadAsync(PrewarmHistory.Container, newer, Encoding.UTF8.GetBytes("{\"format\":2,\"anything\":[]}"));
        await azurite.Store.UploadAsync(PrewarmHistory.Container, $"{_app}/notes.txt", Encoding.UTF8.GetBytes("hello"));
        var foreign = Record(TimeSpan.FromMinutes(3)) with { App = "someone-else" };
        await azurite.Store.UploadAsync(PrewarmHistory.Container, $"{_app}/{(Now - TimeSpan.FromMinutes(3)).UtcTicks:D19}-x.json", UnloadRecordFormat.Write(foreign));

        var read = Assert.Single(await history.ReadAsync(_app, TimeSpan.FromDays(7), 64));
        Assert.Equal("i1", read.Instance);
        var warnings = _log.Entries.Where(e => e.Level == LogLevel.Warning).Select(e => (e.EventId, e.Text)).ToArray();
        Assert.Contains(warnings, w => w.EventId == 8700 && w.Text.Contains(corrupt, StringComparison.Ordinal) && w.Text.Contains("not valid JSON", StringComparison.Ordinal));
        Assert.Contains(warnings, w => w.EventId == 8700 && w.Text.Contains(newer, StringComparison.Ordinal) && w.Text.Contains("format: 2 is newer", StringComparison.Ordinal));
        Assert.Contains(warnings, w => w.EventId == 8700 && w.Text.Contains($"{_app}/notes.txt", StringComparison.Ordinal));
        Assert.Contains(warnings, w => w.EventId == 8700 && w.Text.Contains("app \"someone-else\"'s", StringComparison.Ordinal));
        Assert.DoesNotContain(warnings, w => w.Text.Contains(other, StringComparison.Ordinal));
    }

    [Fact]
    public async Task An_app_with_no_records_has_an_empty_history()
    {
        Assert.Empty(await History().ReadAsync(_app, TimeSpan.FromDays(7), 64));
        Assert.Equal(0, await History().TrimAsync(_app, TimeSpan.FromDays(7), 64));
    }

    [Fact]
    public async Task Trimming_deletes_records_older_than_maxAge_and_beyond_maxRecords_and_keeps_the_newest()
    {
        var history = History();
        foreach (var minutes in new[] { 1, 2, 3, 4, 60 * 24 * 8 })
            await history.WriteAsync(Record(TimeSpan.FromMinutes(minutes)));
        await azurite.Store.UploadAsync(PrewarmHistory.Container, $"{_app}/notes.txt", Encoding.UTF8.GetBytes("hello"));

        Assert.Equal(3, await history.TrimAsync(_app, TimeSpan.FromDays(7), 2));

        var left = new List<string>();
        await foreach (var item in azurite.Store.ListAsync(PrewarmHistory.Container, _app + "/"))
            left.Add(item.Name);
        Assert.Equal([PrewarmHistory.BlobName(_app, "i1", Now - TimeSpan.FromMinutes(2)),
            PrewarmHistory.BlobName(_app, "i1", Now - TimeSpan.FromMinutes(1)), $"{_app}/notes.txt"], left.Order(StringComparer.Ordinal));
    }
}
