using System.Collections.Concurrent;
using FaaST.Cachelet.Index;
using FaaST.Cachelet.Memory;
using FaaST.Policy;
using FaaST.Cachelet.Sources;

namespace FaaST.Cachelet.Tests;

/// <summary>
/// The read path as a chain of sources (local index, owner, added tiers, storage), its one fetch per
/// key, and the eviction sink: a real cache in /dev/shm over real Azurite, with an in-memory tier
/// written for the test (what a flash tier would plug in as, without editing the core).
/// </summary>
[Collection("azurite")]
public sealed class ReadChainTests(AzuriteFixture azurite)
{
    private const string Container = "read-chain";

    /// <summary>A tier holding objects in memory; counts what it was asked; can hold a fetch at a gate.</summary>
    private sealed class MemoryTier : IBlobSource
    {
        public ConcurrentDictionary<string, (string Version, byte[] Bytes)> Objects { get; } = new();
        public ConcurrentQueue<string> Asked { get; } = new();
        public TaskCompletionSource? Gate { get; set; }
        public TaskCompletionSource Entered { get; } = new(TaskCreationOptions.RunContinuationsAsynchronously);

        /// <summary>Answer as a tier that checked its copy with storage during the fetch (the flash tier's HEAD).</summary>
        public bool ClaimsValidated { get; init; }

        public string Name => "memory";

        public async ValueTask<SourceResult> FetchAsync(SourceRequest request, IFetchTarget target, CancellationToken ct)
        {
            Asked.Enqueue(request.Key.Blob);
            Entered.TrySetResult();
            if (Gate is { } gate)
                await gate.Task.WaitAsync(ct); // honours the fetch's token, as a real tier's I/O would
            if (!Objects.TryGetValue(request.Key.Blob, out var found))
                return SourceResult.Unavailable;
            await using (var sink = target.Open(found.Bytes.Length))
                await sink.WriteAsync(found.Bytes, ct);
            return new SourceResult(SourceOutcome.Found, found.Version, found.Bytes.Length, ReadPath.LocalMiss, Validated: ClaimsValidated);
        }
    }

    private sealed class RecordingSink : IEvictionSink
    {
        public ConcurrentQueue<(string Blob, string Version, byte[] Bytes)> Evicted { get; } = new();

        public void OnEvicted(in BlobKey key, string version, in Extent bytes) =>
            Evicted.Enqueue((key.Blob, version, bytes.Span.ToArray()));
    }

    private static BlobCache NewCache(CachePolicy policy, MemoryTier? tier = null, IEvictionSink? sink = null) =>
        new($"chain-{Guid.NewGuid():N}"[..20], policy, tiers: tier is null ? null : [tier], evictionSink: sink);

    private async Task<(string Name, string ETag)> NewBlobAsync(byte[] data)
    {
        await azurite.Store.CreateContainerIfNotExistsAsync(Container);
        var name = $"b-{Guid.NewGuid():N}";
        var written = await azurite.Store.UploadAsync(Container, name, data);
        return (name, written.ETag);
    }

    private static byte[] Bytes(CachedRead read) => read.Entry is { } e ? e.Extent.Span.ToArray() : read.Bytes.ToArray();

    [Fact]
    public async Task A_tier_between_the_owner_and_storage_is_asked_on_a_miss_and_its_object_is_cached()
    {
        var tier = new MemoryTier();
        await using var cache = NewCache(new CachePolicy { Consistency = ConsistencyPreset.LocalSyncLocal }, tier);
        var (name, etag) = await NewBlobAsync("in storage"u8.ToArray());
        tier.Objects[name] = (etag, "in the tier"u8.ToArray()); // different bytes: shows where they came from

        Assert.Equal(["owner", "memory", "storage"], cache.Sources.Select(s => s.Name));
        using (var first = await cache.ReadAsync(azurite.Store, Container, name, default) ?? throw new InvalidOperationException("not found"))
        {
            Assert.Equal("in the tier"u8.ToArray(), Bytes(first));
            Assert.Equal(etag, first.ETag);
            Assert.NotNull(first.Entry); // cached in the arena
        }
        using (var second = await cache.ReadAsync(azurite.Store, Container, name, default) ?? throw new InvalidOperationException("not found"))
            Assert.Equal(ReadPath.LocalHit, second.Path);
        Assert.Equal([name], tier.Asked);
    }

    [Fact]
    public async Task A_tier_that_does_not_hold_the_object_passes_the_miss_on_to_storage()
    {
        var tier = new MemoryTier();
        await using var cache = NewCache(new CachePolicy { Consistency = ConsistencyPreset.LocalSyncLocal }, tier);
        var (name, _) = await NewBlobAsync("in storage"u8.ToArray());

        using var read = await cache.ReadAsync(azurite.Store, Container, name, default) ?? throw new InvalidOperationException("not found");
        Assert.Equal("in storage"u8.ToArray(), Bytes(read));
        Assert.Equal(ReadPath.LocalMiss, read.Path);
        Assert.Equal([name], tier.Asked);
    }

    [Fact]
    public async Task Under_the_checking_preset_a_tier_copy_storage_no_longer_holds_is_dropped_and_storage_read()
    {
        var tier = new MemoryTier();
        await using var cache = NewCache(new CachePolicy { Consistency = ConsistencyPreset.StorageSyncStorage }, tier);
        var (name, _) = await NewBlobAsync("current"u8.ToArray());
        tier.Objects[name] = ("\"0xstale\"", "stale"u8.ToArray());

        using var read = await cache.ReadAsync(azurite.Store, Container, name, default) ?? throw new InvalidOperationException("not found");
        Assert.Equal("current"u8.ToArray(), Bytes(read));
        Assert.Equal(1, cache.ObjectCount); // the stale copy left the index again
    }

    [Fact]
    public async Task Under_the_checking_preset_a_tier_copy_storage_vouched_for_during_its_fetch_is_not_checked_again()
    {
        // The tier claims its (here stale) copy was checked with storage while it fetched: the chain takes its word and
        // does not repeat the HEAD (one storage round trip per flash hit). The stale bytes show that no second check ran;
        // the tier that makes the claim (FlashSource) serves only at the ETag its own HEAD returned.
        var tier = new MemoryTier { ClaimsValidated = true };
        await using var cache = NewCache(new CachePolicy { Consistency = ConsistencyPreset.StorageSyncStorage }, tier);
        var (name, _) = await NewBlobAsync("current"u8.ToArray());
        tier.Objects[name] = ("\"0xclaimed\"", "claimed"u8.ToArray());

        using var read = await cache.ReadAsync(azurite.Store, Container, name, default) ?? throw new InvalidOperationException("not found");
        Assert.Equal("claimed"u8.ToArray(), Bytes(read));
        Assert.Equal("\"0xclaimed\"", read.ETag);
    }

    [Fact]
    public async Task When_the_first_of_two_readers_of_one_miss_gives_up_the_second_still_gets_the_object()
    {
        var tier = new MemoryTier { Gate = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously) };
        await using var cache = NewCache(new CachePolicy { Consistency = ConsistencyPreset.LocalSyncLocal }, tier);
        var (name, _) = await NewBlobAsync("the object"u8.ToArray());

        using var gaveUp = new CancellationTokenSource();
        var first = cache.ReadAsync(azurite.Store, Container, name, gaveUp.Token).AsTask();
        await tier.Entered.Task.WaitAsync(TimeSpan.FromSeconds(30)); // the shared fetch is running
        var second = cache.ReadAsync(azurite.Store, Container, name, default).AsTask();
        await gaveUp.CancelAsync();
        await Assert.ThrowsAnyAsync<OperationCanceledException>(() => first);
        tier.Gate.SetResult(); // the fetch goes on (to storage: the tier does not hold it)

        using var read = await second.WaitAsync(TimeSpan.FromSeconds(30)) ?? throw new InvalidOperationException("not found");
        Assert.Equal("the object"u8.ToArray(), Bytes(read));
        Assert.Equal([name], tier.Asked); // one fetch for both readers
    }

    [Fact]
    public async Task The_eviction_sink_receives_each_evicted_object_with_its_version_and_bytes()
    {
        var sink = new RecordingSink();
        await using var cache = NewCache(new CachePolicy { Consistency = ConsistencyPreset.LocalSyncLocal }, sink: sink);
        var blobs = new List<(string Name, string ETag, byte[] Data)>();
        for (var i = 0; i < 3; i++)
        {
            var data = Enumerable.Repeat((byte)('a' + i), 10_000).ToArray();
            var (name, etag) = await NewBlobAsync(data);
            (await cache.ReadAsync(azurite.Store, Container, name, default))?.Dispose();
            blobs.Add((name, etag, data));
        }

        Assert.True(cache.Evict(long.MaxValue) >= 30_000);
        Assert.Equal(0, cache.ObjectCount);
        // Sinks are called on the demotion pump, after eviction returned.
        await Eventually.TrueAsync(() => sink.Evicted.Count == blobs.Count, "the sink received every evicted object");
        Assert.Equal(blobs.Select(b => b.Name).Order(), sink.Evicted.Select(e => e.Blob).Order());
        foreach (var (blobName, version, bytes) in sink.Evicted)
        {
            var blob = blobs.Single(b => b.Name == blobName);
            Assert.Equal(blob.ETag, version);
            Assert.Equal(blob.Data, bytes);
        }
    }

    [Fact]
    public async Task A_pinned_object_is_not_handed_to_the_eviction_sink()
    {
        var sink = new RecordingSink();
        await using var cache = NewCache(new CachePolicy { Consistency = ConsistencyPreset.LocalSyncLocal }, sink: sink);
        var (name, _) = await NewBlobAsync(new byte[5_000]);
        using var held = await cache.ReadAsync(azurite.Store, Container, name, default);

        cache.Evict(long.MaxValue);
        Assert.Empty(sink.Evicted);
        Assert.Equal(1, cache.ObjectCount);
    }
}
