using FaaST.FlashBackend.Engine;

namespace FaaST.FlashBackend.Tests.Engine;

public sealed class FlashStoreReclaimRecoveryTests : IDisposable
{
    private readonly EngineFiles _files = new();

    public void Dispose() => _files.Dispose();

    [Fact]
    public void AFullLogReclaimsTheOldestSegmentAndNeverReturnsAnotherObjectsBytes()
    {
        using FlashStore store = _files.Open(segments: 4);   // 256 KiB of log for ~1.2 MiB of puts
        var rnd = new Random(11);
        var sizes = new Dictionary<int, int>();
        for (int i = 0; i < 120; i++)
        {
            sizes[i] = rnd.Next(1, 20000);
            store.Put("app-a", $"k{i}", "e", EngineFiles.Value($"k{i}", 1, sizes[i]));
            for (int j = 0; j <= i; j++)
            {
                byte[] back = EngineFiles.ReadAll(store, "app-a", $"k{j}", "e", out ReadStatus status);
                Assert.True(status is ReadStatus.Hit or ReadStatus.Miss, $"k{j}: {status}");
                if (status == ReadStatus.Hit)
                    Assert.Equal(EngineFiles.Value($"k{j}", 1, sizes[j]), back);
            }
        }
        FlashStoreStats stats = store.GetStats();

        Assert.True(stats.ReclaimedSegments > 0);
        Assert.True(stats.EvictedObjects > 0);
        Assert.Equal(120 - stats.EvictedObjects, stats.LiveObjects);
        Assert.Equal(ReadStatus.Hit, store.Read("app-a", "k119", "e", 0, new byte[sizes[119]], out _));   // the newest stays
        Assert.Equal(ReadStatus.Miss, store.Read("app-a", "k0", "e", 0, new byte[sizes[0]], out _));      // the oldest went
    }

    [Fact]
    public async Task ReadersRacingAWrappingWriterGetTheRightBytesOrAMissNeverOthers()
    {
        using FlashStore store = _files.Open(segments: 3, segmentSize: 32 << 10);
        const int Keys = 24, Rounds = 1200;
        var latest = new int[Keys];   // the round that last wrote each key: readers chase the live, soon-reclaimed versions
        int wrong = 0;
        using var writerDone = new ManualResetEventSlim();
        var writer = Task.Run(() =>
        {
            for (int r = 0; r < Rounds; r++)
            {
                store.Put("app-a", $"k{r % Keys}", $"v{r}", EngineFiles.Value($"k{r % Keys}", r, 3000 + (r % 7 * 1000)));
                Volatile.Write(ref latest[r % Keys], r);
            }
            writerDone.Set();
        });
        var readers = Enumerable.Range(0, 2).Select(seed => Task.Run(() =>
        {
            var rnd = new Random(seed);
            var buffer = new byte[16 << 10];
            while (!writerDone.IsSet)
            {
                int r = Volatile.Read(ref latest[rnd.Next(Keys)]);
                int length = 3000 + (r % 7 * 1000);
                byte[] expected = EngineFiles.Value($"k{r % Keys}", r, length);
                // Whole reads (header and CRC checked) and ranges (only the generation guards them); a reclaim that
                // races either must be a miss: a corrupt answer is as wrong as foreign bytes.
                int offset = rnd.Next(2) == 0 ? 0 : 1 + rnd.Next(length - 1);
                ReadStatus status = store.Read("app-a", $"k{r % Keys}", $"v{r}", offset, buffer.AsSpan(0, length - offset), out int read);
                if (status == ReadStatus.Corrupt
                    || (status == ReadStatus.Hit && (read != length - offset || !buffer.AsSpan(0, read).SequenceEqual(expected.AsSpan(offset)))))
                    Interlocked.Increment(ref wrong);
            }
        })).ToArray();

        await Task.WhenAll([writer, .. readers]);

        Assert.Equal(0, wrong);
        Assert.True(store.GetStats().ReclaimedSegments > 0);
    }

    [Fact]
    public void RestartRecoveryRebuildsTheSameIndexAfterOverwritesDeletesAndWraps()
    {
        (string, string, string, long, long, long)[] before;
        using (FlashStore store = _files.Open(segments: 4))
        {
            var rnd = new Random(5);
            for (int i = 0; i < 90; i++)
            {
                int k = rnd.Next(30);
                if (i % 9 == 8)
                    store.Delete(i % 2 == 0 ? "app-a" : "app-b", $"k{k}");
                else
                    store.Put(i % 2 == 0 ? "app-a" : "app-b", $"k{k}", $"v{i}", EngineFiles.Value($"k{k}", i, rnd.Next(0, 15000)));
            }
            Assert.True(store.GetStats().ReclaimedSegments > 0);
            before = [.. store.Snapshot().OrderBy(r => r.Tenant).ThenBy(r => r.Key)];
        }

        using FlashStore reopened = _files.Open(segments: 4);
        var after = reopened.Snapshot().OrderBy(r => r.Tenant).ThenBy(r => r.Key).ToArray();

        Assert.NotEmpty(before);
        Assert.Equal(before, after);
        Assert.Equal(0, reopened.GetStats().TornRecordsSkipped);
        foreach ((string tenant, string key, string etag, long length, _, _) in after)
        {
            int version = int.Parse(etag[1..], System.Globalization.CultureInfo.InvariantCulture);
            Assert.Equal(EngineFiles.Value(key, version, (int)length), EngineFiles.ReadAll(reopened, tenant, key, etag, out _));
        }
    }

    [Fact]
    public void WritesAfterARestartContinueTheLogWithoutLosingWhatWasRecovered()
    {
        using (FlashStore store = _files.Open())
            store.Put("app-a", "first", "e", EngineFiles.Value("first", 1, 9000));
        using (FlashStore store = _files.Open())
            store.Put("app-a", "second", "e", EngineFiles.Value("second", 1, 9000));

        using FlashStore reopened = _files.Open();

        Assert.Equal(EngineFiles.Value("first", 1, 9000), EngineFiles.ReadAll(reopened, "app-a", "first", "e", out _));
        Assert.Equal(EngineFiles.Value("second", 1, 9000), EngineFiles.ReadAll(reopened, "app-a", "second", "e", out _));
    }

    [Fact]
    public void AnEphemeralStartServesNothingFromAnEarlierRun()
    {
        using (FlashStore store = _files.Open())
            store.Put("app-a", "old", "e", new byte[100]);

        using FlashStore fresh = _files.Open(startup: StartupMode.Ephemeral);

        Assert.Equal(ReadStatus.Miss, fresh.Read("app-a", "old", "e", 0, new byte[100], out _));
        Assert.Equal(0, fresh.GetStats().LiveObjects);
    }

    [Fact]
    public void ARecordTruncatedMidWriteIsDetectedOnRecoveryAndNeverServed()
    {
        long tornOffset;
        using (FlashStore store = _files.Open())
        {
            store.Put("app-a", "whole", "e", EngineFiles.Value("whole", 1, 10000));
            store.Put("app-a", "torn", "e", EngineFiles.Value("torn", 1, 30000));
            tornOffset = store.Snapshot().Single(r => r.Key == "torn").Offset;
        }
        using (var f = new FileStream(_files.LogPath, FileMode.Open))
            f.SetLength(tornOffset + 12288);   // the crash: only the first 12 KiB of the 30 KiB record reached the disk

        using FlashStore reopened = _files.Open();   // preallocation zero-fills the rest

        Assert.Equal(ReadStatus.Miss, reopened.Read("app-a", "torn", "e", 0, new byte[30000], out _));
        Assert.Equal(1, reopened.GetStats().TornRecordsSkipped);
        Assert.Equal(EngineFiles.Value("whole", 1, 10000), EngineFiles.ReadAll(reopened, "app-a", "whole", "e", out _));
    }

    [Fact]
    public void AFlippedPayloadByteIsCaughtByTheChecksumAfterARestart()
    {
        long offset;
        using (FlashStore store = _files.Open())
        {
            store.Put("app-a", "victim", "e", EngineFiles.Value("victim", 1, 8000));
            store.Put("app-a", "after", "e", EngineFiles.Value("after", 1, 8000));
            offset = store.Snapshot().Single(r => r.Key == "victim").Offset;
        }
        _files.FlipByte(offset + 5000);

        using FlashStore reopened = _files.Open();

        Assert.Equal(ReadStatus.Miss, reopened.Read("app-a", "victim", "e", 0, new byte[8000], out _));
        Assert.Equal(1, reopened.GetStats().TornRecordsSkipped);
        Assert.Equal(EngineFiles.Value("after", 1, 8000), EngineFiles.ReadAll(reopened, "app-a", "after", "e", out _));   // the header held: the scan went on
    }

    [Fact]
    public void AFlippedPayloadByteWhileRunningMakesTheWholeReadCorruptAndDropsTheKey()
    {
        using FlashStore store = _files.Open();
        store.Put("app-a", "victim", "e", EngineFiles.Value("victim", 1, 8000));
        _files.FlipByte(store.Snapshot().Single().Offset + 6000);

        ReadStatus first = store.Read("app-a", "victim", "e", 0, new byte[8000], out _);
        ReadStatus second = store.Read("app-a", "victim", "e", 0, new byte[8000], out _);

        Assert.Equal(ReadStatus.Corrupt, first);
        Assert.Equal(ReadStatus.Miss, second);
    }

    [Fact]
    public void AFlippedHeaderByteEndsTheSegmentScanAndNothingOfThatRecordIsServed()
    {
        long offset;
        using (FlashStore store = _files.Open())
        {
            store.Put("app-a", "victim", "e", EngineFiles.Value("victim", 1, 100));
            offset = store.Snapshot().Single().Offset;
        }
        _files.FlipByte(offset + 10);   // inside the sequence number, covered by the header CRC

        using FlashStore reopened = _files.Open();

        Assert.Equal(ReadStatus.Miss, reopened.Read("app-a", "victim", "e", 0, new byte[100], out _));
        Assert.Equal(0, reopened.GetStats().LiveObjects);
    }
}
