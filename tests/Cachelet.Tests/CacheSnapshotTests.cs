using FaaST.Cachelet.Index;

namespace FaaST.Cachelet.Tests;

/// <summary>The index's snapshot of entries with their statistics, the inter-arrival histogram, and the recently evicted ring (real /dev/shm arena, a manual clock).</summary>
public sealed class CacheSnapshotTests
{
    private static BlobKey Key(string blob) => IndexFixture.Key(blob);

    [Fact]
    public void A_snapshot_lists_each_cached_object_with_its_size_etag_ownership_and_accesses_by_kind()
    {
        using var f = new IndexFixture();
        f.Add("a", 100, etag: "\"va\"");
        f.Add("b", 2000, owned: false, etag: "\"vb\"");
        f.Index.RecordLocalMiss(Key("a"));
        f.Index.RecordLocalHit(Key("a"));
        f.Index.RecordLocalHit(Key("a"));
        f.Index.RecordWrite(Key("a"));
        f.Index.RecordRemoteMiss(Key("b"));
        f.Index.RecordRemoteHit(Key("b"));
        f.Index.RecordRemoteHit(Key("b"));

        var snapshot = f.Index.Snapshot().ToDictionary(e => e.Key.Blob);

        Assert.Equal(["a", "b"], snapshot.Keys.Order());
        var a = snapshot["a"];
        Assert.Equal((100L, "\"va\"", true, (string?)null), (a.Length, a.ETag, a.Owned, a.Owner));
        Assert.Equal(new AccessCounts(LocalHits: 2, RemoteHits: 0, LocalMisses: 1, RemoteMisses: 0, Writes: 1, Evictions: 0, Expirations: 0), a.Accesses);
        Assert.Equal(3, a.Accesses.Reads);
        var b = snapshot["b"];
        Assert.Equal((2000L, "\"vb\"", false), (b.Length, b.ETag, b.Owned));
        Assert.Equal(new AccessCounts(0, 2, 0, 1, 0, 0, 0), b.Accesses);
    }

    [Fact]
    public void The_inter_arrival_summary_counts_each_gap_in_its_log_scale_bucket_with_mean_min_and_max()
    {
        using var f = new IndexFixture();
        f.Add("a");
        var key = Key("a");
        f.Index.RecordLocalMiss(key);
        f.Index.RecordLocalHit(key);                           // 0 ms: bucket 0
        f.Clock.Advance(TimeSpan.FromMilliseconds(2));
        f.Index.RecordLocalHit(key);                           // 2 ms: [1, 4) ms, bucket 1
        f.Clock.Advance(TimeSpan.FromMilliseconds(10));
        f.Index.RecordRemoteHit(key);                          // 10 ms: [4, 16) ms, bucket 2
        f.Clock.Advance(TimeSpan.FromSeconds(5));
        f.Index.RecordWrite(key);                              // 5 s: [4.096, 16.384) s, bucket 7
        f.Clock.Advance(TimeSpan.FromHours(2));
        f.Index.RecordLocalHit(key);                           // 2 h: the last bucket, from 4^11 ms ≈ 70 min

        var summary = Assert.Single(f.Index.Snapshot()).InterArrival;

        Assert.Equal(5, summary.Count);
        Assert.Equal([1, 1, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1], summary.Buckets);
        Assert.Equal(TimeSpan.Zero, summary.Min);
        Assert.Equal(TimeSpan.FromHours(2), summary.Max);
        Assert.Equal((TimeSpan.FromHours(2) + TimeSpan.FromMilliseconds(5012)) / 5, summary.Mean);
        for (var i = 0; i < InterArrival.BucketCount; i++)
            Assert.True(InterArrival.LowerBound(i) < InterArrival.UpperBound(i), $"bucket {i}");
        Assert.Equal(TimeSpan.FromMilliseconds(4096), InterArrival.LowerBound(7));
        Assert.Equal(TimeSpan.MaxValue, InterArrival.UpperBound(InterArrival.BucketCount - 1));
    }

    [Fact]
    public void A_snapshot_is_a_copy_that_later_accesses_pins_and_evictions_do_not_change()
    {
        using var f = new IndexFixture();
        f.Add("a", 300);
        f.Add("b", 400);
        using (f.Index.Pin(f.Entries["a"]))
        {
            var during = f.Index.Snapshot().ToDictionary(e => e.Key.Blob);
            Assert.Equal(1, during["a"].Pins);
            Assert.Equal(0, during["b"].Pins);
        }
        var before = f.Index.Snapshot();

        f.Index.RecordLocalHit(Key("a"));
        f.Index.Evict(long.MaxValue);

        Assert.Equal(0, f.Index.Count);
        Assert.Equal(["a", "b"], before.Select(e => e.Key.Blob).Order());
        Assert.All(before, e => Assert.Equal(0, e.Accesses.LocalHits + e.Accesses.Evictions));
        Assert.Empty(f.Index.Snapshot());
    }

    [Fact]
    public void Age_and_idle_time_follow_the_index_clock()
    {
        using var f = new IndexFixture();
        f.Add("a");
        f.Clock.Advance(TimeSpan.FromSeconds(30));
        f.Touch("a"); // one more second, then a lookup
        f.Clock.Advance(TimeSpan.FromSeconds(5));

        var a = Assert.Single(f.Index.Snapshot());
        Assert.Equal(TimeSpan.FromSeconds(36), a.Age);
        Assert.Equal(TimeSpan.FromSeconds(5), a.Idle);
    }

    [Fact]
    public void Recently_evicted_lists_newest_first_each_object_with_its_size_etag_and_why_it_left()
    {
        using var f = new IndexFixture(new CacheIndexOptions { Policy = EvictionPolicies.WithTtl(EvictionPolicies.LruNonOwnedFirst, TimeSpan.FromMinutes(1)) });
        f.Add("space", 100, etag: "\"v-space\"");
        f.Add("stale", 200, etag: "\"v-stale\"");
        f.Index.Evict(1); // the least recently used: "space"
        f.Index.Remove(Key("stale"));
        f.Add("old", 300, etag: "\"v-old\"");
        f.Clock.Advance(TimeSpan.FromMinutes(2));
        f.Index.RemoveExpired();

        var evicted = f.Index.RecentlyEvicted();

        Assert.Equal(
            [("old", 300L, "\"v-old\"", EvictionReason.Expired), ("stale", 200L, "\"v-stale\"", EvictionReason.Invalidated),
             ("space", 100L, "\"v-space\"", EvictionReason.Space)],
            evicted.Select(e => (e.Key.Blob, e.Length, e.ETag, e.Reason)));
    }

    [Fact]
    public void Recently_evicted_keeps_only_the_last_objects_it_is_sized_for_and_a_replaced_version_is_not_one()
    {
        using var f = new IndexFixture(new CacheIndexOptions { RecentlyEvictedCapacity = 2 });
        f.Add("a");
        f.Add("a", etag: "\"v2\""); // replaced: the key is still cached
        f.Add("b");
        f.Add("c");
        Assert.Empty(f.Index.RecentlyEvicted());

        f.Index.Evict(long.MaxValue);

        Assert.Equal(3, f.Index.Evictions);
        Assert.Equal(["c", "b"], f.Index.RecentlyEvicted().Select(e => e.Key.Blob));
    }

    [Fact]
    public void Without_a_ring_recently_evicted_is_empty_and_eviction_still_works()
    {
        using var f = new IndexFixture(new CacheIndexOptions { RecentlyEvictedCapacity = 0 });
        f.Add("a");
        Assert.Equal(1, f.Index.Evict(1).Objects);
        Assert.Empty(f.Index.RecentlyEvicted());
        Assert.Equal(0, f.Arena.Allocated);
    }
}
