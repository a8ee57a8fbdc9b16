using FaaST.FlashBackend.Engine;

namespace FaaST.FlashBackend.Tests.Engine;

/// <summary>Format 2's layout: a payload that does not fit its header's block starts on the next block boundary (a
/// 4 KiB value is one 4 KiB device read), small values stay in the header's block, and format 1 logs still recover.</summary>
public sealed class RecordLayoutTests : IDisposable
{
    private readonly EngineFiles _files = new();

    public void Dispose() => _files.Dispose();

    private byte[] RawAt(long position, int length)
    {
        using var f = new FileStream(_files.LogPath, FileMode.Open, FileAccess.Read);
        f.Position = position;
        var bytes = new byte[length];
        f.ReadExactly(bytes);
        return bytes;
    }

    [Fact]
    public void A_4_KiB_value_starts_on_the_block_after_its_header_and_a_small_one_right_after_its_header()
    {
        byte[] big = EngineFiles.Value("big", 1, 4096), small = EngineFiles.Value("small", 1, 300), streamed = EngineFiles.Value("streamed", 1, 10_000);
        long bigAt, smallAt, streamedAt;
        using (FlashStore store = _files.Open())
        {
            store.Put("app-a", "big", "e", big);
            store.Put("app-a", "small", "e", small);
            using (FlashStore.PutStream put = store.BeginPut("app-a", "streamed", "e", streamed.Length))
            {
                put.Write(streamed.AsSpan(0, 777));
                put.Write(streamed.AsSpan(777));
                put.Commit();
            }
            var snapshot = store.Snapshot().ToDictionary(s => s.Key, s => s.Offset);
            (bigAt, smallAt, streamedAt) = (snapshot["big"], snapshot["small"], snapshot["streamed"]);
            Assert.Equal(2 * DirectFile.Alignment, smallAt - bigAt);   // header block + one payload block
        }

        Assert.Equal(big, RawAt(bigAt + DirectFile.Alignment, 4096));
        Assert.Equal(streamed, RawAt(streamedAt + DirectFile.Alignment, streamed.Length));
        int smallHeader = RecordFormat.HeaderSize(new RecordHeader("app-a", "small", "e", 0, 0, 0, false));
        Assert.Equal(small, RawAt(smallAt + smallHeader, small.Length));

        using FlashStore reopened = _files.Open();
        foreach ((string key, byte[] value) in new[] { ("big", big), ("small", small), ("streamed", streamed) })
        {
            var into = new byte[value.Length];
            Assert.Equal(ReadStatus.Hit, reopened.Read("app-a", key, "e", 0, into, out int n));
            Assert.Equal(value, into[..n]);
        }
    }

    [Fact]
    public void A_flipped_byte_of_a_block_aligned_payload_makes_the_whole_read_corrupt()
    {
        using FlashStore store = _files.Open();
        store.Put("app-a", "victim", "e", EngineFiles.Value("victim", 1, 4096));
        long at = store.Snapshot().Single().Offset + DirectFile.Alignment + 17;
        _files.FlipByte(at);

        Assert.Equal(ReadStatus.Corrupt, store.Read("app-a", "victim", "e", 0, new byte[4096], out _));
    }

    [Fact]
    public void A_log_written_in_format_1_is_recovered_and_served_whole_and_in_ranges()
    {
        using (FlashStore store = _files.Open())
            store.Put("app-a", "placeholder", "e", [1]);   // creates and sizes the file
        byte[] value = EngineFiles.Value("old", 1, 6000);
        var header = new RecordHeader("app-a", "old", "\"v1\"", 1, value.Length, RecordFormat.Crc32C(0, value), false);
        int headerSize = RecordFormat.HeaderSize(header);
        var record = new byte[RecordFormat.PaddedSize(headerSize, value.Length) + DirectFile.Alignment];   // + a zero block: the scan's end
        RecordFormat.WriteHeader(record, header, version: 1);
        value.CopyTo(record, headerSize);                  // format 1: the payload right after the header
        using (var f = new FileStream(_files.LogPath, FileMode.Open, FileAccess.ReadWrite))
        {
            f.Write(record);                               // segment 0, offset 0
            f.Flush(flushToDisk: true);
        }

        using FlashStore reopened = _files.Open();
        var whole = new byte[6000];
        Assert.Equal(ReadStatus.Hit, reopened.Read("app-a", "old", "\"v1\"", 0, whole, out _));
        Assert.Equal(value, whole);
        var range = new byte[100];
        Assert.Equal(ReadStatus.Hit, reopened.Read("app-a", "old", "\"v1\"", 4000, range, out _));
        Assert.Equal(value.AsSpan(4000, 100).ToArray(), range);
    }
}
