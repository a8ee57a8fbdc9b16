using FaaST.Cachelet.Index;
using FaaST.Policy;

namespace FaaST.Cachelet.Tests;

/// <summary>
/// PrefetchAsync and OwnerOf: a real cache in /dev/shm over real Azurite (and real peers on loopback
/// where ownership matters). A prefetch loads what this instance owns without counting an access or
/// holding a pin, and yields its storage reads to on-demand ones.
/// </summary>
[Collection("azurite")]
public sealed class PrefetchTests(AzuriteFixture azurite)
{
    private const string Container = "prefetch";
    private static readonly TimeSpan Generous = TimeSpan.FromSeconds(60);

    private static BlobCache NewCache(CachePolicy? policy = null) =>
        new($"prefetch-{Guid.NewGuid():N}"[..20], policy ?? new CachePolicy());

    private async Task<string> NewBlobAsync(int size = 10_000)
    {
        await azurite.Store.CreateContainerIfNotExistsAsync(Container);
        var name = $"p-{Guid.NewGuid():N}";
        await azurite.Store.UploadAsync(Container, name, new byte[size]);
        return name;
    }

    private BlobKey KeyOf(string name) => new(azurite.Store.Endpoint.AbsoluteUri, Container, name);

    private static long Reads(BlobCache cache) => Enum.GetValues<ReadPath>().Sum(cache.Metrics.Reads);

    [Fact]
    public async Task A_prefetch_loads_an_owned_blob_without_counting_an_access_or_leaving_a_pin()
    {
        await using var cache = NewCache();
        var name = await NewBlobAsync();

        Assert.Equal(PrefetchOutcome.Loaded, await cache.PrefetchAsync(azurite.Store, Container, name, ReadPriority.Background, default));

        Assert.Equal(1, cache.ObjectCount);
        Assert.Equal(0, cache.PinnedBytes);
        Assert.Equal(0, Reads(cache)); // no hit, miss or passthrough counted
        var stats = cache.Index.GetStats(KeyOf(name));
        Assert.Equal(0, stats.Accesses);
        Assert.Equal(0, stats.LocalMisses);
        Assert.Null(stats.LastAccess);
        using var read = await cache.ReadAsync(azurite.Store, Container, name, default) ?? throw new InvalidOperationException("not found");
        Assert.Equal(ReadPath.LocalHit, read.Path); // the invocation's first read is a hit
        Assert.Equal(1, cache.Index.GetStats(KeyOf(name)).LocalHits);
    }

    [Fact]
    public async Task A_prefetched_object_is_evicted_like_any_other_since_no_pin_holds_it()
    {
        await using var cache = NewCache();
        var name = await NewBlobAsync(100_000);
        Assert.Equal(PrefetchOutcome.Loaded, await cache.PrefetchAsync(azurite.Store, Container, name, ReadPriority.OnDemand, default));

        Assert.True(cache.Evict(long.MaxValue) >= 100_000);
        Assert.Equal(0, cache.ObjectCount);
    }

    [Fact]
    public async Task A_prefetch_of_a_cached_blob_fetches_nothing_and_counts_nothing()
    {
        await using var cache = NewCache(new CachePolicy { Consistency = ConsistencyPreset.LocalSyncLocal });
        var name = await NewBlobAsync();
        using (await cache.ReadAsync(azurite.Store, Container, name, default))
        {
        }
        var accesses = cache.Index.GetStats(KeyOf(name)).Accesses;

        Assert.Equal(PrefetchOutcome.AlreadyCached, await cache.PrefetchAsync(azurite.Store, Container, name, ReadPriority.Background, default));
        Assert.Equal(accesses, cache.Index.GetStats(KeyOf(name)).Accesses);
        Assert.Equal(1, Reads(cache));
    }

    [Fact]
    public async Task A_prefetch_says_what_it_could_not_load_and_why()
    {
        await using var cache = NewCache(new CachePolicy { DoNotCacheGlobs = BlobGlobSet.Create(["prefetch/skip-*"]) });
        await azurite.Store.CreateContainerIfNotExistsAsync(Container);
        await azurite.Store.UploadAsync(Container, "skip-me", new byte[10]);

        Assert.Equal(PrefetchOutcome.NotCacheable, await cache.PrefetchAsync(azurite.Store, Container, "skip-me", ReadPriority.Background, default));
        Assert.Equal(PrefetchOutcome.NotFound, await cache.PrefetchAsync(azurite.Store, Container, $"missing-{Guid.NewGuid():N}", ReadPriority.Background, default));
        Assert.Equal(0, cache.ObjectCount);
        Assert.Equal(0, Reads(cache));
    }

    [Fact]
    public async Task A_prefetch_of_a_key_another_instance_owns_is_refused_and_OwnerOf_names_that_owner()
    {
        await using var owner = await PeerNode.StartAsync("owner", azurite.Store);
        await using var other = await PeerNode.StartAsync("other", azurite.Store);
        var theirs = await NewBlobAsync();
        var mine = await NewBlobAsync();
        other.Owners.Remote[BlobCache.PlacementKey(KeyOf(theirs))] = owner.AsPeer;
        other.Cache.OnOwnershipChanged();

        Assert.Equal(owner.Id, other.Cache.OwnerOf(azurite.Store, Container, theirs)?.Id);
        Assert.Equal(owner.Address, other.Cache.OwnerOf(KeyOf(theirs))?.Address);
        Assert.Null(other.Cache.OwnerOf(azurite.Store, Container, mine)); // this instance's own
        Assert.Equal(PrefetchOutcome.NotOwned, await other.Cache.PrefetchAsync(azurite.Store, Container, theirs, ReadPriority.Background, default));
        Assert.Equal(0, other.Cache.ObjectCount);
        Assert.Equal(PrefetchOutcome.Loaded, await other.Cache.PrefetchAsync(azurite.Store, Container, mine, ReadPriority.Background, default));
        Assert.Equal(0, owner.Cache.ObjectCount); // nothing asked of the owner either
    }

    [Fact]
    public async Task Without_peers_this_instance_owns_every_key()
    {
        await using var cache = NewCache();
        Assert.Null(cache.OwnerOf(azurite.Store, Container, "any"));
        Assert.Null(cache.OwnerOf(KeyOf("other")));
    }

    [Fact]
    public async Task Background_prefetches_wait_while_an_on_demand_storage_read_runs_and_a_read_is_never_held_behind_them()
    {
        await using var cache = NewCache(new CachePolicy { Consistency = ConsistencyPreset.LocalSyncLocal });
        var names = new List<string>();
        for (var i = 0; i < 12; i++)
            names.Add(await NewBlobAsync());
        var wanted = await NewBlobAsync();

        var invocation = cache.StorageReads.EnterOnDemand(); // an invocation's storage read in progress
        var flood = names.Select(n => cache.PrefetchAsync(azurite.Store, Container, n, ReadPriority.Background, default).AsTask()).ToArray();
        await Eventually.TrueAsync(() => cache.StorageReads.BackgroundWaiting == flood.Length, "every prefetch waits for the on-demand read",
            () => $"{cache.StorageReads.BackgroundWaiting} waiting, {cache.StorageReads.BackgroundRunning} running");
        Assert.Equal(0, cache.ObjectCount); // none fetched while the on-demand read runs

        // Another invocation's miss goes ahead of all of them.
        using (var read = await cache.ReadAsync(azurite.Store, Container, wanted, default).AsTask().WaitAsync(Generous) ?? throw new InvalidOperationException("not found"))
            Assert.Equal(ReadPath.LocalMiss, read.Path);
        Assert.Equal(1, cache.ObjectCount);
        Assert.Equal(flood.Length, cache.StorageReads.BackgroundWaiting);

        invocation.Dispose();
        var outcomes = await Task.WhenAll(flood).WaitAsync(Generous);
        Assert.All(outcomes, o => Assert.Equal(PrefetchOutcome.Loaded, o));
        Assert.Equal(1 + names.Count, cache.ObjectCount);
        Assert.Equal(1, Reads(cache));
    }

    [Fact]
    public async Task A_reader_of_a_blob_whose_prefetch_is_waiting_promotes_it_and_gets_it_as_a_hit()
    {
        await using var cache = NewCache(new CachePolicy { Consistency = ConsistencyPreset.LocalSyncLocal });
        var name = await NewBlobAsync();
        using var invocation = cache.StorageReads.EnterOnDemand(); // held for the whole test: only promotion lets the prefetch go
        var prefetch = cache.PrefetchAsync(azurite.Store, Container, name, ReadPriority.Background, default).AsTask();
        await Eventually.TrueAsync(() => cache.StorageReads.BackgroundWaiting == 1, "the prefetch waits");

        using (var read = await cache.ReadAsync(azurite.Store, Container, name, default).AsTask().WaitAsync(Generous) ?? throw new InvalidOperationException("not found"))
        {
            Assert.Equal(ReadPath.LocalHit, read.Path); // served from what the (promoted) prefetch cached
            Assert.NotNull(read.Entry);
        }
        Assert.Equal(PrefetchOutcome.Loaded, await prefetch.WaitAsync(Generous));
        Assert.Equal(0, cache.PinnedBytes);
    }
}
