using System.IO.MemoryMappedFiles;
using System.Runtime.InteropServices;
using System.Security.Cryptography;
using FaaST.Policy;
using FaaST.Storage;

namespace FaaST.Cachelet.Tests;

/// <summary>
/// Streamed large inputs (cache.streamThreshold): a miss handed to its reader while storage's bytes still arrive,
/// through the cache's real seams: real Azurite behind an <see cref="IBlobStore"/> whose download this test holds
/// at a gate after a number of bytes (or fails there), a real cache in /dev/shm.
/// </summary>
[Collection("azurite")]
public sealed partial class StreamedReadTests(AzuriteFixture azurite)
{
    private const string Container = "streamed-reads";
    private const int Large = 4 << 20;
    private const int HeldAfter = 1 << 20;

    /// <summary>Storage whose downloads stop after <see cref="HeldAfter"/> bytes until <see cref="Gate"/> opens, then go on or fail.</summary>
    private sealed class GatedStore(IBlobStore inner) : DelegatingStore(inner)
    {
        public TaskCompletionSource Gate { get; } = new(TaskCreationOptions.RunContinuationsAsynchronously);
        public TaskCompletionSource Held { get; } = new(TaskCreationOptions.RunContinuationsAsynchronously);
        public bool FailAtGate { get; init; }
        public int Downloads => _downloads;
        private int _downloads;

        public override Task<BlobProperties?> DownloadToAsync(string container, string blob, Func<BlobProperties, Stream> destinationFactory,
            string? ifMatch = null, CancellationToken ct = default)
        {
            Interlocked.Increment(ref _downloads);
            return base.DownloadToAsync(container, blob, props => new GateStream(this, destinationFactory(props)), ifMatch, ct);
        }

        private sealed class GateStream(GatedStore store, Stream inner) : Stream
        {
            private long _written;

            public override async ValueTask WriteAsync(ReadOnlyMemory<byte> buffer, CancellationToken ct = default)
            {
                while (buffer.Length > 0)
                {
                    if (_written >= HeldAfter)
                    {
                        store.Held.TrySetResult();
                        await store.Gate.Task.WaitAsync(ct);
                        if (store.FailAtGate)
                            throw new IOException("the storage connection was reset (test)");
                    }
                    var n = (int)Math.Min(buffer.Length, _written < HeldAfter ? HeldAfter - _written : buffer.Length);
                    await inner.WriteAsync(buffer[..n], ct);
                    _written += n;
                    buffer = buffer[n..];
                }
            }

            public override void Write(byte[] buffer, int offset, int count) => WriteAsync(buffer.AsMemory(offset, count)).AsTask().GetAwaiter().GetResult();
            public override bool CanRead => false;
            public override bool CanSeek => false;
            public override bool CanWrite => true;
            public override long Length => _written;
            public override long Position { get => _written; set => throw new NotSupportedException(); }
            public override void Flush() => inner.Flush();
            public override int Read(byte[] buffer, int offset, int count) => throw new NotSupportedException();
            public override long Seek(long offset, SeekOrigin origin) => throw new NotSupportedException();
            public override void SetLength(long value) => throw new NotSupportedException();
        }
    }

    private static BlobCache NewCache() =>
        new($"stream-{Guid.NewGuid():N}"[..20], new CachePolicy { CacheCapacity = 64L << 20, StreamThreshold = 2 << 20 });

    private async Task<(string Name, byte[] Data, string ETag)> NewBlobAsync(int length)
    {
        await azurite.Store.CreateContainerIfNotExistsAsync(Container);
        var data = new byte[length];
        new Random(length).NextBytes(data);
        var name = $"b-{Guid.NewGuid():N}";
        var written = await azurite.Store.UploadAsync(Container, name, data);
        return (name, data, written.ETag);
    }

    [Fact]
    public async Task A_large_miss_reaches_its_reader_while_downloading_and_is_cached_once_complete()
    {
        await using var cache = NewCache();
        var (name, data, etag) = await NewBlobAsync(Large);
        var store = new GatedStore(azurite.Store);

        // Storage cannot finish before the gate opens: this read returning at all proves it did not wait for the whole object.
        var read = await cache.ReadStreamingAsync(store, Container, name, default) ?? throw new InvalidOperationException("not found");
        var fill = read.Fill ?? throw new InvalidOperationException("a large miss was not streamed");
        await store.Held.Task;
        Assert.Equal(StreamingFill.Filling, fill.State);
        Assert.Equal(etag, fill.Version);
        Assert.Equal(Large, fill.Length);
        Assert.True(File.Exists(Path.Combine(cache.Directory, fill.ProgressFile)), fill.ProgressFile);
        var filled = fill.Filled;
        Assert.InRange(filled, 1, HeldAfter);
        Assert.Equal(data.AsSpan(0, (int)filled).ToArray(), fill.Extent.GetSpan(0, (int)filled).ToArray());
        Assert.Equal(0, cache.ObjectCount); // not an entry before it is complete

        store.Gate.SetResult();
        await fill.Completion;
        Assert.Equal(StreamingFill.Complete, fill.State);
        Assert.Equal(Large, fill.Filled);
        Assert.Equal(SHA256.HashData(data), SHA256.HashData(fill.Extent.Span));
        read.Dispose();
        Assert.False(File.Exists(Path.Combine(cache.Directory, fill.ProgressFile)), "the progress record outlived its reader");

        using var again = await cache.ReadStreamingAsync(store, Container, name, default) ?? throw new InvalidOperationException("not found");
        Assert.Equal(ReadPath.LocalHit, again.Path);
        Assert.Null(again.Fill);
        Assert.Equal(SHA256.HashData(data), SHA256.HashData(again.Entry!.Extent.Span));
        Assert.Equal(1, store.Downloads);
    }

    [Fact]
    public async Task A_download_that_fails_midway_fails_the_fill_naming_the_blob_and_caches_nothing()
    {
        await using var cache = NewCache();
        var (name, data, _) = await NewBlobAsync(Large);
        var store = new GatedStore(azurite.Store) { FailAtGate = true };

        var read = await cache.ReadStreamingAsync(store, Container, name, default) ?? throw new InvalidOperationException("not found");
        var fill = read.Fill ?? throw new InvalidOperationException("a large miss was not streamed");
        await store.Held.Task;
        store.Gate.SetResult();
        var failure = await Assert.ThrowsAsync<IOException>(() => fill.Completion);
        Assert.Contains($"{Container}/{name}", failure.Message, StringComparison.Ordinal);
        Assert.Equal(StreamingFill.Failed, fill.State);
        Assert.Equal(0, cache.ObjectCount);
        // The worker may still be reading: the extent stays allocated until the reader lets go.
        Assert.True(cache.CachedBytes >= Large, $"{cache.CachedBytes} bytes allocated while the reader still holds the failed fill");
        read.Dispose();
        Assert.Equal(0, cache.CachedBytes);
        // The failed flight leaves the single-flight table just after the fill is marked failed: a reader that joins
        // it before then gets its failure, as any joiner of a failing fetch does.
        await Eventually.TrueAsync(() => cache.FetchesInFlight == 0, "the failed fetch is forgotten");

        using var retry = await cache.ReadStreamingAsync(azurite.Store, Container, name, default) ?? throw new InvalidOperationException("not found");
        Assert.NotEqual(ReadPath.LocalHit, retry.Path);
        var fresh = retry.Fill is { } f ? await f.Completion.ContinueWith(_ => f.Extent.Span.ToArray()) : retry.Entry!.Extent.Span.ToArray();
        Assert.Equal(SHA256.HashData(data), SHA256.HashData(fresh));
    }

    [Fact]
    public async Task A_second_reader_of_a_streamed_miss_shares_its_one_download_and_gets_the_whole_object()
    {
        await using var cache = NewCache();
        var (name, data, _) = await NewBlobAsync(Large);
        var store = new GatedStore(azurite.Store);

        using var first = await cache.ReadStreamingAsync(store, Container, name, default) ?? throw new InvalidOperationException("not found");
        Assert.NotNull(first.Fill);
        var second = cache.ReadStreamingAsync(store, Container, name, default).AsTask();
        await store.Held.Task;
        Assert.False(second.IsCompleted, "the joining reader was answered before the object was complete");

        store.Gate.SetResult();
        using var joined = await second ?? throw new InvalidOperationException("not found");
        Assert.Null(joined.Fill);
        Assert.Equal(SHA256.HashData(data), SHA256.HashData(joined.Entry!.Extent.Span));
        Assert.Equal(1, store.Downloads);
    }

    [Fact]
    public async Task A_reader_that_lets_go_mid_download_leaves_the_object_cached_and_unpinned()
    {
        await using var cache = NewCache();
        var (name, data, _) = await NewBlobAsync(Large);
        var store = new GatedStore(azurite.Store);

        var read = await cache.ReadStreamingAsync(store, Container, name, default) ?? throw new InvalidOperationException("not found");
        var fill = read.Fill ?? throw new InvalidOperationException("a large miss was not streamed");
        await store.Held.Task;
        read.Dispose(); // the worker died, or the invocation ended, before the download did

        store.Gate.SetResult();
        await fill.Completion;
        await Eventually.TrueAsync(() => cache.PinnedBytes == 0, "the entry's pin is released once the fill completes");
        Assert.Equal(1, cache.ObjectCount);
        using var hit = await cache.ReadAsync(store, Container, name, default) ?? throw new InvalidOperationException("not found");
        Assert.Equal(ReadPath.LocalHit, hit.Path);
        Assert.Equal(SHA256.HashData(data), SHA256.HashData(hit.Entry!.Extent.Span));
    }

    [Theory]
    [InlineData(false)]
    [InlineData(true)]
    public async Task A_worker_asleep_on_the_progress_records_wake_word_in_its_own_mapping_is_woken_when_the_fill_goes_on(bool failing)
    {
        Assert.True(OperatingSystem.IsLinux() && RuntimeInformation.ProcessArchitecture == Architecture.X64, "futex numbers here are x86-64's");
        await using var cache = NewCache();
        var (name, _, _) = await NewBlobAsync(Large);
        var store = new GatedStore(azurite.Store) { FailAtGate = failing };
        var read = await cache.ReadStreamingAsync(store, Container, name, default) ?? throw new InvalidOperationException("not found");
        var fill = read.Fill ?? throw new InvalidOperationException("a large miss was not streamed");
        await store.Held.Task;

        // The worker's side: the record mapped read-only by path, a second mapping of the same file as the host's.
        using var map = MemoryMappedFile.CreateFromFile(Path.Combine(cache.Directory, fill.ProgressFile), FileMode.Open, null, 0, MemoryMappedFileAccess.Read);
        using var view = map.CreateViewAccessor(0, 16, MemoryMappedFileAccess.Read);
        var word = AcquireWord(view);
        try
        {
            var before = ReadWord(word);
            Assert.NotEqual(0, before); // this host wakes: a worker need not poll
            Assert.Equal(StreamingFill.Filling, fill.State); // held at the gate: the word cannot change until it opens

            var tid = new TaskCompletionSource<int>(TaskCreationOptions.RunContinuationsAsynchronously);
            var woken = Task.Factory.StartNew(() =>
            {
                tid.SetResult(GetTid());
                while (ReadWord(word) == before) // a wait with no timeout: only a wake (or a signal) ends it
                    FutexWait(word, before);
            }, TaskCreationOptions.LongRunning);
            var waiter = await tid.Task;
            await Eventually.TrueAsync(() => File.ReadAllText($"/proc/self/task/{waiter}/wchan").Contains("futex", StringComparison.Ordinal),
                "the waiter is asleep on the futex before the gate opens");

            store.Gate.SetResult();
            if (failing)
                await Assert.ThrowsAsync<IOException>(() => fill.Completion);
            else
                await fill.Completion;
            await woken.WaitAsync(TimeSpan.FromMinutes(2)); // never returns without a FUTEX_WAKE from the host
            Assert.NotEqual(before, ReadWord(word));
            Assert.Equal(failing ? StreamingFill.Failed : StreamingFill.Complete, fill.State);
        }
        finally
        {
            view.SafeMemoryMappedViewHandle.ReleasePointer();
            read.Dispose();
        }
    }

    [Fact]
    public void The_host_wakes_a_reader_after_64_KiB_then_each_quarter_of_what_had_arrived_at_most_8_MiB_apart()
    {
        Assert.Equal(64 << 10, StreamingFill.WakeStep(0));
        Assert.Equal(64 << 10, StreamingFill.WakeStep(128 << 10)); // a quarter is 32 KiB: the floor
        Assert.Equal(1 << 20, StreamingFill.WakeStep(4 << 20));
        Assert.Equal(8 << 20, StreamingFill.WakeStep(256L << 20)); // the cap
        long at = 0;
        var wakes = 0;
        while (at < 256L << 20)
        {
            at += StreamingFill.WakeStep(at);
            wakes++;
        }
        Assert.InRange(wakes, 40, 80); // a 256 MiB fill wakes a reader that keeps pace tens of times, not thousands
    }

    private static unsafe nint AcquireWord(MemoryMappedViewAccessor view)
    {
        byte* pointer = null;
        view.SafeMemoryMappedViewHandle.AcquirePointer(ref pointer);
        return (nint)(pointer + view.PointerOffset + StreamingFill.WakeOffset);
    }

    private static unsafe int ReadWord(nint word) => Volatile.Read(ref *(int*)word);

    private static void FutexWait(nint word, int value) => _ = Syscall(202, word, 0 /* FUTEX_WAIT */, value, 0, 0, 0);

    [LibraryImport("libc", EntryPoint = "syscall")]
    private static partial long Syscall(long number, nint address, int op, int value, nint timeout, nint address2, int value3);

    [LibraryImport("libc", EntryPoint = "gettid")]
    private static partial int GetTid();

    [Fact]
    public async Task A_miss_under_the_threshold_is_read_whole_as_before()
    {
        await using var cache = NewCache();
        var (name, data, _) = await NewBlobAsync(1 << 20);

        using var read = await cache.ReadStreamingAsync(azurite.Store, Container, name, default) ?? throw new InvalidOperationException("not found");

        Assert.Null(read.Fill);
        Assert.Equal(ReadPath.LocalMiss, read.Path);
        Assert.Equal(data, read.Entry!.Extent.Span.ToArray());
    }
}
