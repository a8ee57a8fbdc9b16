using System.Text;
using FaaST.Prewarm.Records;

namespace FaaST.Prewarm.Tests;

public sealed class RecordFormatTests
{
    private const string Source = "faast-prewarm/shop/0000000000000000001-shop-1.json";

    private static UnloadRecord Sample() => new("shop", "shop-1", new DateTimeOffset(2026, 11, 28, 6, 0, 0, 123, TimeSpan.Zero),
    [
        new ObjectRecord("devstoreaccount1", "models", "m/ü.bin", 35_000_000, "\"0x8DC1\"", 3, 1, 1, 0, 0, TimeSpan.FromMilliseconds(1250.5)),
        new ObjectRecord("devstoreaccount1", "out", "r.json", 12, "\"0x8DC2\"", 0, 0, 0, 0, 2, TimeSpan.Zero),
    ]);

    [Fact]
    public void A_record_read_back_equals_the_one_written()
    {
        var record = Sample();
        var back = UnloadRecordFormat.Read(UnloadRecordFormat.Write(record), Source);
        Assert.Equal(record.App, back.App);
        Assert.Equal(record.Instance, back.Instance);
        Assert.Equal(record.UnloadedAt, back.UnloadedAt);
        Assert.Equal(record.Objects, back.Objects);
    }

    [Fact]
    public void The_stored_form_carries_its_format_version()
    {
        var json = Encoding.UTF8.GetString(UnloadRecordFormat.Write(Sample()));
        Assert.StartsWith("{\"format\":1,", json, StringComparison.Ordinal);
    }

    [Theory]
    [InlineData("{\"format\":1,\"app\":", "not valid JSON (line 1")]
    [InlineData("", "not valid JSON")]
    [InlineData("[1]", "expected a JSON object, found an array")]
    [InlineData("{\"app\":\"shop\"}", "format: missing")]
    [InlineData("{\"format\":\"1\"}", "format: expected an integer, found a string")]
    [InlineData("{\"format\":0,\"app\":\"shop\"}", "format: 0 is older than the only one this version reads (1)")]
    [InlineData("{\"format\":2,\"app\":\"shop\",\"whatever\":[]}", "format: 2 is newer than the only one this version reads (1)")]
    [InlineData("{\"format\":1,\"instance\":\"i\",\"unloadedAt\":\"2026-11-28T06:00:00.0000000+00:00\",\"objects\":[]}", "app: missing")]
    [InlineData("{\"format\":1,\"app\":\"a\",\"instance\":\"i\",\"unloadedAt\":\"yesterday\",\"objects\":[]}", "unloadedAt: \"yesterday\" is not a round-trip (ISO 8601) time")]
    [InlineData("{\"format\":1,\"app\":\"a\",\"instance\":\"i\",\"unloadedAt\":\"2026-11-28T06:00:00.0000000+00:00\",\"objects\":{}}", "objects: expected an array, found an object")]
    [InlineData("{\"format\":1,\"app\":\"a\",\"instance\":\"i\",\"unloadedAt\":\"2026-11-28T06:00:00.0000000+00:00\",\"objects\":[{\"account\":\"x\",\"container\":\"c\",\"blob\":\"b\",\"size\":-1,\"etag\":\"e\",\"localHits\":0,\"remoteHits\":0,\"localMisses\":0,\"remoteMisses\":0,\"produced\":0,\"meanInterArrivalMs\":0}]}", "objects[0].size: expected a whole number ≥ 0, found a number -1")]
    [InlineData("{\"format\":1,\"app\":\"a\",\"instance\":\"i\",\"unloadedAt\":\"2026-11-28T06:00:00.0000000+00:00\",\"objects\":[{\"account\":\"x\",\"container\":\"c\",\"blob\":\"b\",\"size\":1,\"etag\":\"e\",\"localHits\":0,\"remoteHits\":0,\"localMisses\":0,\"remoteMisses\":0,\"produced\":0}]}", "objects[0].meanInterArrivalMs: missing")]
    public void A_record_that_cannot_be_used_is_an_error_naming_the_source_and_the_reason(string json, string reason)
    {
        var e = Assert.Throws<PrewarmRecordException>(() => UnloadRecordFormat.Read(Encoding.UTF8.GetBytes(json), Source));
        Assert.Equal(Source, e.RecordSource);
        Assert.StartsWith(Source + ": ", e.Message, StringComparison.Ordinal);
        Assert.Contains(reason, e.Reason, StringComparison.Ordinal);
    }

    [Fact]
    public void A_record_that_is_not_utf8_is_an_error_naming_the_source()
    {
        byte[] bytes = [.. "{\"format\":1,\"app\":\""u8, 0xFF, .. "\"}"u8];
        var e = Assert.Throws<PrewarmRecordException>(() => UnloadRecordFormat.Read(bytes, Source));
        Assert.Equal($"{Source}: not UTF-8 (line 1, position 20): byte 0xFF is not UTF-8", e.Message);
    }
}
