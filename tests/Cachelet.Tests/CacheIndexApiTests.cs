using FaaST.Cachelet.Index;
using FaaST.Policy;
using Microsoft.Extensions.Logging;

namespace FaaST.Cachelet.Tests;

/// <summary>
/// The index APIs and the demotion seam through <see cref="BlobCache"/>: a real cache in /dev/shm over
/// real Azurite, reads through the read chain, sinks given to the constructor.
/// </summary>
[Collection("azurite")]
public sealed class CacheIndexApiTests(AzuriteFixture azurite)
{
    private const string Container = "index-api";

    private static BlobCache NewCache(CachePolicy? policy = null, params RecordingSink[] sinks) =>
        new($"api-{Guid.NewGuid():N}"[..20], policy ?? new CachePolicy { Consistency = ConsistencyPreset.LocalSyncLocal }, evictionSinks: sinks);

    private async Task<(string Name, string ETag, byte[] Data)> NewBlobAsync(int length, byte fill)
    {
        await azurite.Store.CreateContainerIfNotExistsAsync(Container);
        var name = $"b-{Guid.NewGuid():N}";
        var data = Enumerable.Repeat(fill, length).ToArray();
        var written = await azurite.Store.UploadAsync(Container, name, data);
        return (name, written.ETag, data);
    }

    private async Task<ReadPath> ReadAsync(BlobCache cache, string name)
    {
        using var read = await cache.ReadAsync(azurite.Store, Container, name, default) ?? throw new InvalidOperationException($"{name} not found");
        return read.Path;
    }

    [Fact]
    public async Task The_caches_snapshot_shows_each_read_object_with_its_storage_etag_size_and_reads_by_path()
    {
        await using var cache = NewCache();
        var (name, etag, _) = await NewBlobAsync(12_345, 1);

        Assert.Equal(ReadPath.LocalMiss, await ReadAsync(cache, name));
        Assert.Equal(ReadPath.LocalHit, await ReadAsync(cache, name));
        Assert.Equal(ReadPath.LocalHit, await ReadAsync(cache, name));

        var entry = Assert.Single(cache.Snapshot());
        Assert.Equal((Container, name, 12_345L, etag), (entry.Key.Container, entry.Key.Blob, entry.Length, entry.ETag));
        Assert.Null(entry.Owner); // no membership: no owners
        Assert.Equal((1L, 2L, 0L), (entry.Accesses.LocalMisses, entry.Accesses.LocalHits, entry.Accesses.Writes));
        Assert.Equal(2, entry.InterArrival.Count);
    }

    [Fact]
    public async Task With_peers_the_snapshot_names_each_objects_owner_and_counts_remote_reads()
    {
        await using var owner = await PeerNode.StartAsync("owner", azurite.Store);
        await using var reader = await PeerNode.StartAsync("reader", azurite.Store);
        var mine = await NewBlobAsync(2_000, 4);
        var theirs = await NewBlobAsync(3_000, 5);
        reader.Owners.Remote[BlobCache.PlacementKey(new BlobKey(azurite.Store.Endpoint.AbsoluteUri, Container, theirs.Name))] = owner.AsPeer;

        Assert.Equal(ReadPath.LocalMiss, await ReadAsync(reader.Cache, mine.Name));
        Assert.Equal(ReadPath.RemoteMiss, await ReadAsync(reader.Cache, theirs.Name));

        var snapshot = reader.Cache.Snapshot().ToDictionary(e => e.Key.Blob);
        Assert.Equal(("reader", true, 1L), (snapshot[mine.Name].Owner, snapshot[mine.Name].Owned, snapshot[mine.Name].Accesses.LocalMisses));
        Assert.Equal(("owner", false, 1L, theirs.ETag), (snapshot[theirs.Name].Owner, snapshot[theirs.Name].Owned,
            snapshot[theirs.Name].Accesses.RemoteMisses, snapshot[theirs.Name].ETag));
    }

    [Fact]
    public async Task The_cache_remembers_evicted_objects_with_their_size_and_etag()
    {
        await using var cache = NewCache();
        var (name, etag, _) = await NewBlobAsync(5_000, 2);
        await ReadAsync(cache, name);

        Assert.Equal(5_000, cache.Evict(1));

        var evicted = Assert.Single(cache.RecentlyEvicted());
        Assert.Equal((name, 5_000L, etag, EvictionReason.Space), (evicted.Key.Blob, evicted.Length, evicted.ETag, evicted.Reason));
        Assert.Empty(cache.Snapshot());
    }

    [Fact]
    public async Task Every_sink_given_to_the_cache_receives_each_evicted_object_intact()
    {
        var first = new RecordingSink();
        var second = new RecordingSink();
        await using var cache = NewCache(null, first, second);
        var blobs = new List<(string Name, string ETag, byte[] Data)>();
        for (var i = 0; i < 3; i++)
        {
            var blob = await NewBlobAsync(300_000 + i, (byte)('x' + i)); // large: files of their own
            await ReadAsync(cache, blob.Name);
            blobs.Add(blob);
        }

        cache.Evict(long.MaxValue);
        await Eventually.TrueAsync(() => cache.Demotions.Demoted == 3, "three objects demoted", () => cache.Demotions.ToString());

        foreach (var sink in new[] { first, second })
        {
            Assert.Equal(blobs.Select(b => b.Name).Order(), sink.Blobs.Order());
            foreach (var got in sink.Received)
            {
                var blob = blobs.Single(b => b.Name == got.Evicted.Key.Blob);
                Assert.Equal(blob.ETag, got.Evicted.ETag);
                Assert.Equal(blob.Data, got.Bytes);
            }
        }
        Assert.Equal(0, cache.CachedBytes);
    }

    [Fact]
    public async Task A_sink_that_throws_is_logged_and_the_caches_other_sink_still_gets_the_object()
    {
        var logs = new ListLogger(LogLevel.Information);
        var failing = new RecordingSink { Throws = true };
        var working = new RecordingSink();
        await using var cache = new BlobCache($"api-{Guid.NewGuid():N}"[..20], new CachePolicy { Consistency = ConsistencyPreset.LocalSyncLocal }, logs,
            evictionSink: failing, evictionSinks: [working]);
        var (name, _, data) = await NewBlobAsync(1_500, 6);
        await ReadAsync(cache, name);

        cache.Evict(long.MaxValue);
        await Eventually.TrueAsync(() => cache.Demotions.Demoted == 1, "the object demoted");

        Assert.Equal(data, Assert.Single(working.Received).Bytes);
        Assert.Equal(1, cache.Demotions.SinkFailures);
        Assert.Contains(logs.Entries, e => e.EventId == 2001 && e.Level == LogLevel.Warning && e.Text.Contains(name, StringComparison.Ordinal));
        Assert.Equal(0, cache.CachedBytes);
    }

    [Fact]
    public async Task A_miss_on_a_full_cache_completes_while_a_sink_is_blocked()
    {
        using var gate = new ManualResetEventSlim();
        var slow = new RecordingSink { Gate = gate };
        await using var cache = NewCache(new CachePolicy { Consistency = ConsistencyPreset.LocalSyncLocal, CacheCapacity = 3L << 20 }, slow);
        var first = await NewBlobAsync(300_000, 0);
        await ReadAsync(cache, first.Name);
        cache.Evict(1); // the sink now holds the demotion pump
        Assert.True(slow.Entered.Wait(TimeSpan.FromMinutes(1)), "the sink was called");

        // Fill the cache past its capacity: each miss that needs room evicts on the read path.
        var evictionsBefore = cache.Index.Evictions;
        for (var i = 0; cache.Index.Evictions == evictionsBefore; i++)
        {
            Assert.True(i < 40, "3 MiB should be full after 40 objects of 300 KB");
            var blob = await NewBlobAsync(300_000, (byte)(i + 1));
            using var read = await cache.ReadAsync(azurite.Store, Container, blob.Name, default) ?? throw new InvalidOperationException("not found");
            Assert.Equal(blob.Data, read.Entry!.Extent.Span.ToArray()); // served, and cached
        }

        Assert.False(gate.IsSet);
        Assert.Empty(slow.Received);
        gate.Set();
        await Eventually.TrueAsync(() => slow.Received.Any(), "the blocked demotion finished");
        Assert.Equal(first.Data, slow.Received.First().Bytes);
    }

    [Fact]
    public async Task An_object_past_its_ttl_reaches_the_caches_sinks()
    {
        var sink = new RecordingSink();
        await using var cache = NewCache(new CachePolicy
        {
            Consistency = ConsistencyPreset.LocalSyncLocal,
            Eviction = new EvictionOptions { Ttl = TimeSpan.FromMilliseconds(1) },
        }, sink);
        var (name, etag, data) = await NewBlobAsync(4_000, 3);
        await ReadAsync(cache, name);

        // Evict sweeps expired objects first; the TTL is 1 ms, so wait until the one here is past it.
        await Eventually.TrueAsync(() => cache.Evict(0) > 0 || cache.ObjectCount == 0, "the object expired");
        await Eventually.TrueAsync(() => cache.Demotions.Demoted == 1, "the expired object demoted");

        var got = Assert.Single(sink.Received);
        Assert.Equal((name, etag, EvictionReason.Expired), (got.Evicted.Key.Blob, got.Evicted.ETag, got.Evicted.Reason));
        Assert.Equal(data, got.Bytes);
    }
}
