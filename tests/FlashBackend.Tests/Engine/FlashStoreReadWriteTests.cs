using FaaST.FlashBackend.Engine;

namespace FaaST.FlashBackend.Tests.Engine;

public sealed class FlashStoreReadWriteTests : IDisposable
{
    private readonly EngineFiles _files = new();

    public void Dispose() => _files.Dispose();

    [Fact]
    public void TheLogFileIsOpenedWithODirectInTheKernel()
    {
        using FlashStore store = _files.Open();
        Assert.True(store.UsesDirectIO, $"{_files.LogPath}: /proc/self/fdinfo shows no O_DIRECT");
    }

    [Theory]
    [InlineData(0)]
    [InlineData(1)]
    [InlineData(100)]
    [InlineData(4096 - 60)]
    [InlineData(4096)]
    [InlineData(16 << 10)]
    [InlineData((48 << 10) + 123)]
    public void ValuesOfEverySizeUpToASegmentRoundTripByteForByte(int size)
    {
        using FlashStore store = _files.Open();
        byte[] value = EngineFiles.Value("obj", 1, size);
        store.Put("app-a", "obj", "\"v1\"", value);

        byte[] back = EngineFiles.ReadAll(store, "app-a", "obj", "\"v1\"", out ReadStatus status);

        Assert.Equal(ReadStatus.Hit, status);
        Assert.Equal(value, back);
    }

    [Fact]
    public async Task StreamingAWholeLargeValueWritesExactlyItsBytes()
    {
        using FlashStore store = _files.Open(segments: 4, segmentSize: 1 << 20);
        byte[] value = EngineFiles.Value("big", 1, (1 << 20) - 4096);   // the largest a 1 MiB segment takes: 64 buffers
        store.Put("app-a", "big", "e1", value);
        using var sink = new MemoryStream();

        ReadStatus status = await store.CopyToAsync("app-a", "big", "e1", 0, null, sink);

        Assert.Equal(ReadStatus.Hit, status);
        Assert.Equal(value, sink.ToArray());
    }

    [Theory]
    [InlineData(0, 1)]
    [InlineData(1, 4095)]
    [InlineData(4000, 200)]
    [InlineData(16 << 10, 16 << 10)]
    [InlineData(5, 39995)]
    [InlineData(39999, 1)]
    [InlineData(40000, 0)]
    public async Task ByteRangesReturnExactlyTheRequestedBytes(int offset, int count)
    {
        using FlashStore store = _files.Open();
        byte[] value = EngineFiles.Value("ranged", 3, 40000);
        store.Put("app-a", "ranged", "e3", value);

        var span = new byte[count];
        ReadStatus status = store.Read("app-a", "ranged", "e3", offset, span, out int read);
        using var sink = new MemoryStream();
        ReadStatus streamed = await store.CopyToAsync("app-a", "ranged", "e3", offset, count, sink);

        Assert.Equal(ReadStatus.Hit, status);
        Assert.Equal(count, read);
        Assert.Equal(value.AsSpan(offset, count).ToArray(), span);
        Assert.Equal(ReadStatus.Hit, streamed);
        Assert.Equal(value.AsSpan(offset, count).ToArray(), sink.ToArray());
    }

    [Fact]
    public void ARangePastTheEndOfTheValueIsRefusedNamingTheKey()
    {
        using FlashStore store = _files.Open();
        store.Put("app-a", "short", "e", new byte[10]);

        var ex = Assert.Throws<ArgumentOutOfRangeException>(() => store.Read("app-a", "short", "e", 11, new byte[1], out _));

        Assert.Contains("'short'", ex.Message, StringComparison.Ordinal);
    }

    [Fact]
    public void AnOverwriteWithANewVersionServesOnlyTheNewVersion()
    {
        using FlashStore store = _files.Open();
        store.Put("app-a", "k", "v1", EngineFiles.Value("k", 1, 5000));
        store.Put("app-a", "k", "v2", EngineFiles.Value("k", 2, 7000));

        byte[] current = EngineFiles.ReadAll(store, "app-a", "k", "v2", out ReadStatus hit);
        EngineFiles.ReadAll(store, "app-a", "k", "v1", out ReadStatus old);

        Assert.Equal(ReadStatus.Hit, hit);
        Assert.Equal(EngineFiles.Value("k", 2, 7000), current);
        Assert.Equal(ReadStatus.Miss, old);
        Assert.False(store.TryGetLength("app-a", "k", "v1", out _));
    }

    [Fact]
    public void AnotherTenantsKeyIsInvisibleAndCannotBeOverwrittenOrDeleted()
    {
        using FlashStore store = _files.Open();
        byte[] mine = EngineFiles.Value("shared-name", 1, 3000);
        store.Put("app-a", "shared-name", "e", mine);

        EngineFiles.ReadAll(store, "app-b", "shared-name", "e", out ReadStatus seenByB);
        bool deletedByB = store.Delete("app-b", "shared-name");
        store.Put("app-b", "shared-name", "e", EngineFiles.Value("shared-name", 2, 3000));
        byte[] stillMine = EngineFiles.ReadAll(store, "app-a", "shared-name", "e", out ReadStatus seenByA);
        byte[] theirs = EngineFiles.ReadAll(store, "app-b", "shared-name", "e", out _);

        Assert.Equal(ReadStatus.Miss, seenByB);
        Assert.False(deletedByB);
        Assert.Equal(ReadStatus.Hit, seenByA);
        Assert.Equal(mine, stillMine);
        Assert.Equal(EngineFiles.Value("shared-name", 2, 3000), theirs);
    }

    [Fact]
    public void DeleteRemovesOnlyThatKeyAndRecoveryDoesNotBringItBack()
    {
        using (FlashStore store = _files.Open())
        {
            store.Put("app-a", "gone", "e", EngineFiles.Value("gone", 1, 100));
            store.Put("app-a", "kept", "e", EngineFiles.Value("kept", 1, 100));
            Assert.True(store.Delete("app-a", "gone"));
            Assert.False(store.Delete("app-a", "gone"));
        }
        using FlashStore reopened = _files.Open();

        EngineFiles.ReadAll(reopened, "app-a", "gone", "e", out ReadStatus gone);
        byte[] kept = EngineFiles.ReadAll(reopened, "app-a", "kept", "e", out ReadStatus keptStatus);

        Assert.Equal(ReadStatus.Miss, gone);
        Assert.Equal(ReadStatus.Hit, keptStatus);
        Assert.Equal(EngineFiles.Value("kept", 1, 100), kept);
    }

    [Fact]
    public void AValueLargerThanASegmentIsRefusedWithAnErrorNamingTheKeyAndTheLimit()
    {
        using FlashStore store = _files.Open();

        var ex = Assert.Throws<ArgumentException>(() => store.Put("app-a", "huge", "e", new byte[64 << 10]));

        Assert.Contains("'huge'", ex.Message, StringComparison.Ordinal);
        Assert.Contains(store.MaxValueSize.ToString(System.Globalization.CultureInfo.InvariantCulture), ex.Message, StringComparison.Ordinal);
    }

    [Fact]
    public void EveryRecordStartsOnA4KiBBoundaryAndUnalignedIOIsRefusedBeforeTheDisk()
    {
        using (FlashStore store = _files.Open())
        {
            var rnd = new Random(7);
            for (int i = 0; i < 60; i++)
                store.Put("app-a", $"k{i}", "e", EngineFiles.Value($"k{i}", 1, rnd.Next(0, 20000)));
            Assert.All(store.Snapshot(), r => Assert.Equal(0, r.Offset % DirectFile.Alignment));
        }
        using DirectFile file = DirectFile.Open(_files.LogPath, 8L * (64 << 10));
        using var pool = new AlignedBufferPool(8192);
        using AlignedBufferPool.Lease lease = pool.Rent();

        Assert.Throws<ArgumentException>(() => file.Write(lease.Span[..4096], 512));
        Assert.Throws<ArgumentException>(() => file.Write(lease.Span[..1000], 0));
        Assert.Throws<ArgumentException>(() => file.Write(lease.Span[1..4097], 0));
        file.Write(lease.Span[..4096], 4096);   // the aligned write the guard lets through, on an O_DIRECT fd
        Assert.True(file.KernelHasODirect());
    }
}
