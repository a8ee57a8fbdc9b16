using FaaST.FlashBackend.Engine;

namespace FaaST.FlashBackend.Tests.Engine;

/// <summary>Small reads through io_uring (FlashStore.BeginRead) on a real O_DIRECT file: the same bytes and the same
/// checks as the pread path, many reads in flight at once, and nothing lost when the store closes under them.</summary>
public sealed class IoUringReadTests : IDisposable
{
    private readonly EngineFiles _files = new();

    public void Dispose() => _files.Dispose();

    private sealed class Probe : PendingRead
    {
        private readonly TaskCompletionSource<(ReadStatus Status, byte[] Bytes, string? Error)> _done = new(TaskCreationOptions.RunContinuationsAsynchronously);

        public Task<(ReadStatus Status, byte[] Bytes, string? Error)> Done => _done.Task;

        /// <summary>DeviceDone calls in all, and how many had come when ReadDone ran.</summary>
        public int DeviceDoneCalls, DeviceDoneBeforeReadDone = -1;

        protected override void DeviceDone() => DeviceDoneCalls++;

        protected override void ReadDone(ReadStatus status, ReadOnlySpan<byte> bytes, string? error)
        {
            DeviceDoneBeforeReadDone = DeviceDoneCalls;
            _done.SetResult((status, bytes.ToArray(), error));
        }
    }

    private static Probe Begin(FlashStore store, string key, string etag, long offset = 0, int count = -1)
    {
        Assert.True(store.TryOpenRead("app-a", key, etag, out FlashStore.ValueReader reader), $"{key} is not held");
        var probe = new Probe();
        store.BeginRead(in reader, offset, count < 0 ? (int)reader.Length : count, probe);
        return probe;
    }

    private FlashStore OpenWithRing()
    {
        FlashStore store = _files.Open();
        Assert.True(store.UsesIoUring, $"io_uring unavailable here: {store.IoUringUnavailable}");
        return store;
    }

    [Fact]
    public async Task Hundreds_of_reads_in_flight_at_once_each_return_exactly_their_objects_bytes()
    {
        using FlashStore store = OpenWithRing();
        int[] sizes = [1, 100, 4000, 4096, 4196, 9000, store.MaxAsyncRead];
        for (int i = 0; i < 40; i++)
            store.Put("app-a", $"k{i}", $"v{i}", EngineFiles.Value($"k{i}", i, sizes[i % sizes.Length]));

        // 600 reads, more than the ring holds (255): the rest wait in its queue; whole values and ranges mixed.
        var rnd = new Random(7);
        var reads = Enumerable.Range(0, 600).Select(n =>
        {
            int i = rnd.Next(40);
            int length = sizes[i % sizes.Length];
            long offset = n % 3 == 0 && length > 1 ? rnd.Next(length - 1) : 0;
            int count = offset == 0 ? length : rnd.Next(1, length - (int)offset + 1);
            return (i, offset, count, Probe: Begin(store, $"k{i}", $"v{i}", offset, count));
        }).ToList();

        foreach (var (i, offset, count, probe) in reads)
        {
            var (status, bytes, error) = await probe.Done.WaitAsync(TimeSpan.FromMinutes(2));
            Assert.Null(error);
            Assert.Equal(ReadStatus.Hit, status);
            byte[] expected = EngineFiles.Value($"k{i}", i, sizes[i % sizes.Length]);
            Assert.Equal(expected.AsSpan((int)offset, count).ToArray(), bytes);
        }
    }

    [Fact]
    public async Task A_flipped_payload_byte_makes_a_whole_read_corrupt_and_drops_the_key()
    {
        using FlashStore store = OpenWithRing();
        store.Put("app-a", "victim", "e", EngineFiles.Value("victim", 1, 4096));
        _files.FlipByte(store.Snapshot().Single().Offset + DirectFile.Alignment + 1000);   // in the payload's block

        var (status, _, error) = await Begin(store, "victim", "e").Done.WaitAsync(TimeSpan.FromMinutes(2));

        Assert.Null(error);
        Assert.Equal(ReadStatus.Corrupt, status);
        Assert.False(store.TryOpenRead("app-a", "victim", "e", out _));
    }

    [Fact]
    public async Task A_flipped_header_byte_makes_a_whole_read_corrupt()
    {
        using FlashStore store = OpenWithRing();
        store.Put("app-a", "victim", "e", EngineFiles.Value("victim", 1, 2000));
        _files.FlipByte(store.Snapshot().Single().Offset + 10);   // the sequence number, under the header CRC

        var (status, _, _) = await Begin(store, "victim", "e").Done.WaitAsync(TimeSpan.FromMinutes(2));

        Assert.Equal(ReadStatus.Corrupt, status);
    }

    [Fact]
    public async Task A_read_of_a_record_whose_segment_was_reclaimed_since_the_lookup_is_a_miss_not_other_bytes()
    {
        using FlashStore store = OpenWithRing();
        store.Put("app-a", "old", "e", EngineFiles.Value("old", 1, 3000));
        Assert.True(store.TryOpenRead("app-a", "old", "e", out FlashStore.ValueReader stale));
        // Wrap the log (8 segments of 64 KiB) so the segment holding "old" is reclaimed and rewritten.
        for (int i = 0; i < 200; i++)
            store.Put("app-a", $"filler{i}", "e", EngineFiles.Value("filler", i, 6000));
        Assert.False(store.TryOpenRead("app-a", "old", "e", out _));

        var probe = new Probe();
        store.BeginRead(in stale, 0, 3000, probe);
        var (status, bytes, error) = await probe.Done.WaitAsync(TimeSpan.FromMinutes(2));

        Assert.Null(error);
        Assert.Equal(ReadStatus.Miss, status);
        Assert.Empty(bytes);
    }

    [Fact]
    public async Task Closing_the_store_with_reads_queued_and_in_flight_ends_every_one_of_them()
    {
        FlashStore store = OpenWithRing();
        for (int i = 0; i < 20; i++)
            store.Put("app-a", $"k{i}", "e", EngineFiles.Value($"k{i}", i, 4096));
        var probes = Enumerable.Range(0, 1000).Select(n => Begin(store, $"k{n % 20}", "e")).ToList();

        store.Dispose();

        foreach (Probe p in probes)
        {
            var (status, bytes, error) = await p.Done.WaitAsync(TimeSpan.FromMinutes(2));
            // Read before the close (its bytes) or cancelled by it (an error naming it): never silence.
            Assert.True(status == ReadStatus.Hit ? bytes.Length == 4096 : error is not null, $"{status} with {bytes.Length} bytes, error {error}");
        }
    }

    [Fact]
    public async Task Every_read_hands_back_its_device_share_once_and_before_its_answer_also_when_the_store_closes_under_it()
    {
        // The ring tells a read's op that the device is done (DeviceDone: GetMany gives its scheduler unit back there,
        // so the reads that frees are submitted before the batch's checks run) before it checks and answers it.
        FlashStore store = OpenWithRing();
        for (int i = 0; i < 20; i++)
            store.Put("app-a", $"k{i}", "e", EngineFiles.Value($"k{i}", i, 4096));
        var read = Enumerable.Range(0, 600).Select(n => Begin(store, $"k{n % 20}", "e")).ToList();
        foreach (Probe p in read)
            Assert.Equal(ReadStatus.Hit, (await p.Done.WaitAsync(TimeSpan.FromMinutes(2))).Status);

        var cancelled = Enumerable.Range(0, 1000).Select(n => Begin(store, $"k{n % 20}", "e")).ToList();
        store.Dispose();
        foreach (Probe p in cancelled)
            await p.Done.WaitAsync(TimeSpan.FromMinutes(2));

        foreach (Probe p in read.Concat(cancelled))
        {
            Assert.Equal(1, p.DeviceDoneCalls);
            Assert.Equal(1, p.DeviceDoneBeforeReadDone);
        }
    }

    [Fact]
    public void On_a_kernel_from_5_19_on_the_ring_posts_completions_without_interrupting_its_thread()
    {
        using FlashStore store = OpenWithRing();
        // COOP_TASKRUN is Linux 5.19's; an older kernel refuses it and the ring runs as before ("default").
        Assert.Equal(Environment.OSVersion.Version >= new Version(5, 19) ? "coop" : "default", store.IoUringTaskRun);
    }

    [Fact]
    public void A_store_told_not_to_use_io_uring_refuses_begin_read_naming_why()
    {
        using FlashStore store = FlashStore.Open(_files.Options() with { UseIoUring = false });
        store.Put("app-a", "k", "e", [1, 2, 3]);
        Assert.True(store.TryOpenRead("app-a", "k", "e", out FlashStore.ValueReader reader));

        var e = Assert.Throws<InvalidOperationException>(() => store.BeginRead(in reader, 0, 3, new Probe()));
        Assert.Contains("UseIoUring", e.Message);
    }
}
