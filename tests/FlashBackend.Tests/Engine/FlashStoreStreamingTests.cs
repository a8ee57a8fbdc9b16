using FaaST.FlashBackend.Engine;

namespace FaaST.FlashBackend.Tests.Engine;

/// <summary>The server's engine calls: streamed puts (visible only after commit), chunked readers with the whole-value
/// checksum, the current version of a key, and the per-tenant delete.</summary>
public sealed class FlashStoreStreamingTests : IDisposable
{
    private readonly EngineFiles _files = new();

    public void Dispose() => _files.Dispose();

    private static void StreamIn(FlashStore.PutStream put, byte[] value, int chunk)
    {
        for (int o = 0; o < value.Length; o += chunk)
            put.Write(value.AsSpan(o, Math.Min(chunk, value.Length - o)));
    }

    private static byte[] ReadWhole(FlashStore store, string tenant, string key, string? etag, int chunk, out ReadStatus status)
    {
        status = ReadStatus.Miss;
        if (!store.TryOpenRead(tenant, key, etag, out FlashStore.ValueReader reader))
            return [];
        var all = new byte[reader.Length];
        var buf = new byte[chunk];
        int done = 0;
        status = ReadStatus.Hit;
        while (done < all.Length)
        {
            status = reader.Read(buf, out int n);
            if (status != ReadStatus.Hit)
                return [];
            buf.AsSpan(0, n).CopyTo(all.AsSpan(done));
            done += n;
        }
        return all;
    }

    [Theory]
    [InlineData(0, 7)]
    [InlineData(100, 7)]
    [InlineData(4000, 1000)]
    [InlineData(4096, 4096)]
    [InlineData((40 << 10) + 17, 3000)]
    public void AStreamedPutInChunksOfAnySizeReadsBackByteForByte(int size, int chunk)
    {
        using FlashStore store = _files.Open();
        byte[] value = EngineFiles.Value("big", 1, size);
        using (FlashStore.PutStream put = store.BeginPut("app-a", "big", "\"v1\"", size))
        {
            StreamIn(put, value, chunk);
            put.Commit();
        }

        Assert.Equal(value, EngineFiles.ReadAll(store, "app-a", "big", "\"v1\"", out ReadStatus status));
        Assert.Equal(ReadStatus.Hit, status);
        Assert.Equal(value, ReadWhole(store, "app-a", "big", null, 5000, out status));
        Assert.Equal(ReadStatus.Hit, status);
    }

    [Fact]
    public void AStreamedPutIsInvisibleUntilCommitAndABrokenOneLeavesNothing()
    {
        using FlashStore store = _files.Open();
        byte[] value = EngineFiles.Value("k", 1, 20_000);
        using (FlashStore.PutStream put = store.BeginPut("app-a", "k", "\"v1\"", value.Length))
        {
            put.Write(value.AsSpan(0, 15_000));
            Assert.False(store.TryGetLength("app-a", "k", "\"v1\"", out _));
        }   // disposed without commit: the stream broke

        Assert.False(store.TryOpenRead("app-a", "k", null, out _));
        Assert.Equal(0, store.GetStats().LiveObjects);
    }

    [Fact]
    public void AStreamedPutWithFewerOrMoreBytesThanDeclaredIsRefusedAndStoresNothing()
    {
        using FlashStore store = _files.Open();
        using (FlashStore.PutStream shortPut = store.BeginPut("app-a", "short", "\"v1\"", 10_000))
        {
            shortPut.Write(new byte[9_999]);
            var e = Assert.Throws<ArgumentException>(shortPut.Commit);
            Assert.Contains("9999 bytes arrived", e.Message);
        }
        using (FlashStore.PutStream longPut = store.BeginPut("app-a", "long", "\"v1\"", 10))
        {
            var e = Assert.Throws<ArgumentException>(() => longPut.Write(new byte[11]));
            Assert.Contains("'long'", e.Message);
        }

        Assert.Equal(0, store.GetStats().LiveObjects);
    }

    [Fact]
    public void RecoveryStepsOverAnAbandonedPutAndKeepsTheRecordsAfterIt()
    {
        byte[] after = EngineFiles.Value("after", 1, 3000);
        using (FlashStore store = _files.Open())
        {
            using (FlashStore.PutStream broken = store.BeginPut("app-a", "broken", "\"v1\"", 9000))
                broken.Write(new byte[100]);
            store.Put("app-a", "after", "\"v1\"", after);
        }

        using FlashStore reopened = _files.Open();

        Assert.False(reopened.TryOpenRead("app-a", "broken", null, out _));
        Assert.Equal(after, EngineFiles.ReadAll(reopened, "app-a", "after", "\"v1\"", out ReadStatus status));
        Assert.Equal(ReadStatus.Hit, status);
        Assert.Equal(0, reopened.GetStats().TornRecordsSkipped);
    }

    [Fact]
    public void AnyVersionReadNamesTheStoredEtagAndAnOtherEtagMisses()
    {
        using FlashStore store = _files.Open();
        store.Put("app-a", "k", "\"v1\"", EngineFiles.Value("k", 1, 100));
        store.Put("app-a", "k", "\"v2\"", EngineFiles.Value("k", 2, 200));

        Assert.True(store.TryOpenRead("app-a", "k", null, out FlashStore.ValueReader current));
        Assert.Equal("\"v2\"", current.Etag);
        Assert.Equal(200, current.Length);
        Assert.False(store.TryOpenRead("app-a", "k", "\"v1\"", out _));
        Assert.False(store.TryOpenRead("app-b", "k", null, out _));
    }

    [Fact]
    public void AReaderFromAnOffsetReturnsThatRangeOnly()
    {
        using FlashStore store = _files.Open();
        byte[] value = EngineFiles.Value("k", 1, 30_000);
        store.Put("app-a", "k", "\"v1\"", value);
        Assert.True(store.TryOpenRead("app-a", "k", "\"v1\"", out FlashStore.ValueReader reader));
        reader.Seek(12_345);
        var buf = new byte[1000];

        Assert.Equal(ReadStatus.Hit, reader.Read(buf, out int n));
        Assert.Equal(1000, n);
        Assert.Equal(value.AsSpan(12_345, 1000).ToArray(), buf);
    }

    [Fact]
    public void AWholeReadOfAFlippedPayloadIsCorruptAndDropsTheKey()
    {
        long offset;
        using (FlashStore store = _files.Open())
        {
            store.Put("app-a", "k", "\"v1\"", EngineFiles.Value("k", 1, 10_000));
            offset = store.Snapshot().Single().Offset;
        }
        using (var f = new FileStream(_files.LogPath, FileMode.Open, FileAccess.ReadWrite))
        {
            f.Position = offset + 4096 + 10;   // inside the payload, past the header block
            int b = f.ReadByte();
            f.Position--;
            f.WriteByte((byte)(b ^ 0xFF));
        }
        using FlashStore reopened = _files.Open(startup: StartupMode.Recover);
        // Recovery checks payloads too, so the flipped record is torn there; write a good one and flip it live instead.
        reopened.Put("app-a", "live", "\"v1\"", EngineFiles.Value("live", 1, 10_000));
        long live = reopened.Snapshot().Single(s => s.Key == "live").Offset;
        using (var f = new FileStream(_files.LogPath, FileMode.Open, FileAccess.ReadWrite, FileShare.ReadWrite))
        {
            f.Position = live + 4096 + 10;
            int b = f.ReadByte();
            f.Position--;
            f.WriteByte((byte)(b ^ 0xFF));
        }

        ReadWhole(reopened, "app-a", "live", null, 4096, out ReadStatus status);

        Assert.Equal(ReadStatus.Corrupt, status);
        Assert.False(reopened.TryOpenRead("app-a", "live", null, out _));
        Assert.False(reopened.TryOpenRead("app-a", "k", null, out _));
    }

    [Fact]
    public void DeleteTenantRemovesEveryObjectOfThatTenantOnlyAndSurvivesARestart()
    {
        using (FlashStore store = _files.Open())
        {
            for (int i = 0; i < 5; i++)
                store.Put("app-a", $"k{i}", "\"v1\"", EngineFiles.Value($"k{i}", 1, 500));
            store.Put("app-b", "k0", "\"v1\"", EngineFiles.Value("b", 1, 500));

            Assert.Equal(5, store.DeleteTenant("app-a"));
            Assert.Equal(1, store.GetStats().LiveObjects);
        }
        using FlashStore reopened = _files.Open();
        Assert.Equal(["app-b"], reopened.Snapshot().Select(s => s.Tenant).ToArray());
    }
}
