using FaaST.Cachelet.Index;

namespace FaaST.Cachelet.Tests;

public sealed class EvictionTests
{
    private static BlobKey Key(string blob) => IndexFixture.Key(blob);

    /// <summary>Evicts one object at a time and returns the blobs in the order they went.</summary>
    private static List<string> EvictionOrder(IndexFixture f)
    {
        var order = new List<string>();
        while (f.Index.Count > 0)
        {
            var before = f.Cached();
            var result = f.Index.Evict(1);
            Assert.Equal(1, result.Objects);
            order.Add(Assert.Single(before.Except(f.Cached())));
        }
        return order;
    }

    [Fact]
    public void Lru_evicts_non_owned_objects_least_recently_used_first_then_owned_ones()
    {
        using var f = new IndexFixture();
        f.Add("a", owned: true);
        f.Add("b", owned: false);
        f.Add("c", owned: true);
        f.Add("d", owned: false);
        f.Add("e", owned: false);
        f.Touch("b"); // b is now the most recently used non-owned object
        f.Touch("a");
        Assert.Equal(["d", "e", "b", "c", "a"], EvictionOrder(f));
    }

    [Fact]
    public void Size_aware_evicts_large_non_owned_then_small_non_owned_then_large_owned_then_small_owned()
    {
        using var f = new IndexFixture(new CacheIndexOptions { Policy = EvictionPolicies.SizeAware(12 * 1024) });
        f.Add("a", 100, owned: true);         // owned small
        f.Add("b", 20_000, owned: true);      // owned large
        f.Add("c", 100, owned: false);        // non-owned small
        f.Add("d", 20_000, owned: false);     // non-owned large
        f.Add("e", 12 * 1024, owned: false);  // exactly the threshold: small
        f.Add("g", 30_000, owned: false);     // non-owned large, newer than d
        f.Touch("d");                         // d now newer than g
        Assert.Equal(["g", "d", "c", "e", "b", "a"], EvictionOrder(f));
    }

    [Fact]
    public void Changing_ownership_moves_an_entry_to_its_new_tier()
    {
        using var f = new IndexFixture();
        var a = f.Add("a", owned: true);
        f.Add("b", owned: false);
        a.Owned = false; // a is older than b and no longer owned: it goes first
        Assert.False(a.Owned);
        Assert.Equal(["a", "b"], EvictionOrder(f));
    }

    [Fact]
    public void Eviction_stops_once_enough_bytes_are_freed()
    {
        using var f = new IndexFixture();
        f.Add("a", 1000);
        f.Add("b", 1000);
        f.Add("c", 1000);
        var result = f.Index.Evict(1500);
        Assert.Equal(new EvictionResult(2, 2000), result);
        Assert.True(f.Index.TryGet(Key("c"), out _));
        Assert.Equal(1000, f.Index.Bytes);
        Assert.Equal(1000, f.Arena.Allocated);
    }

    [Fact]
    public void Eviction_never_touches_pinned_entries_even_when_sampling_finds_only_them()
    {
        using var f = new IndexFixture();
        var pins = new List<PinHandle>();
        for (var i = 0; i < 200; i++)
        {
            var e = f.Add("k" + i, owned: i % 2 == 0);
            if (i != 137)
                pins.Add(f.Index.Pin(e));
        }
        var result = f.Index.Evict(long.MaxValue);
        Assert.Equal(new EvictionResult(1, 100), result);
        Assert.False(f.Index.TryGet(Key("k137"), out _));
        Assert.Equal(199, f.Index.Count);
        Assert.All(pins, p => Assert.False(p.Entry.IsRetired));
        Assert.Equal(new EvictionResult(0, 0), f.Index.Evict(long.MaxValue));
        foreach (var p in pins)
            p.Dispose();
        Assert.Equal(199, f.Index.Evict(long.MaxValue).Objects);
    }

    [Fact]
    public void Sampled_lru_in_a_large_tier_evicts_from_the_oldest_entries()
    {
        using var f = new IndexFixture(new CacheIndexOptions { RandomSeed = 7 });
        for (var i = 0; i < 2000; i++)
            f.Add("k" + i);
        var evicted = new List<int>();
        for (var round = 0; round < 200; round++)
            Assert.Equal(1, f.Index.Evict(1).Objects);
        for (var i = 0; i < 2000; i++)
        {
            if (!f.Index.TryGet(Key("k" + i), out _))
                evicted.Add(i);
        }
        Assert.Equal(200, evicted.Count);
        // Best of 16 random samples (a fixed seed: sampling is random, the test is not). A victim
        // from the newer half needs all 16 samples there: about 0.53^16 = 4e-5 per eviction.
        Assert.True(evicted.Max() < 1000, $"evicted k{evicted.Max()}, one of the newer half");
        Assert.True(evicted.Average() < 500, $"mean age rank of the victims {evicted.Average()}");
    }

    [Fact]
    public void Expired_entries_miss_and_go_before_any_tier()
    {
        using var f = new IndexFixture(new CacheIndexOptions
        {
            Policy = EvictionPolicies.WithTtl(EvictionPolicies.LruNonOwnedFirst, TimeSpan.FromMinutes(10)),
        });
        f.Add("a", owned: true);                      // T
        f.Clock.Advance(TimeSpan.FromSeconds(60));
        f.Add("b", owned: false);                     // T + 61 s
        f.Clock.Advance(TimeSpan.FromMinutes(8));
        f.Add("c", owned: true);                      // T + 9 min 2 s
        f.Touch("a");
        f.Clock.Advance(TimeSpan.FromSeconds(60));    // now T + 10 min 3 s: only a is 10 min old
        Assert.False(f.Index.TryGet(Key("a"), out _));    // expired: a miss, although just used
        Assert.True(f.Index.TryGet(Key("b"), out _));
        Assert.Equal(3, f.Index.Count);                    // still held until evicted

        Assert.Equal(new EvictionResult(1, 100), f.Index.Evict(1));
        Assert.Equal(1, f.Index.Expirations);
        Assert.Equal(0, f.Index.Evictions);
        Assert.Equal(1, f.Index.GetStats(Key("a")).Expirations);
        Assert.Equal(["b", "c"], EvictionOrder(f));
    }

    [Fact]
    public void A_pinned_expired_entry_is_evicted_once_unpinned()
    {
        using var f = new IndexFixture(new CacheIndexOptions
        {
            Policy = EvictionPolicies.WithTtl(EvictionPolicies.SizeAware(), TimeSpan.FromSeconds(30)),
        });
        var a = f.Add("a");
        var pin = f.Index.Pin(a);
        f.Add("b");
        f.Clock.Advance(TimeSpan.FromSeconds(31));
        Assert.Equal(1, f.Index.RemoveExpired().Objects); // b; a is pinned
        Assert.False(a.IsRetired);
        pin.Dispose();
        Assert.Equal(new EvictionResult(1, 100), f.Index.RemoveExpired());
        Assert.True(a.IsRetired);
        Assert.Equal(0, f.Arena.Allocated);
    }

    [Fact]
    public void Replacing_an_entry_restarts_its_ttl()
    {
        using var f = new IndexFixture(new CacheIndexOptions
        {
            Policy = EvictionPolicies.Create(sizeAware: false, ttl: TimeSpan.FromSeconds(30)),
        });
        f.Add("a", etag: "\"v1\"");
        f.Clock.Advance(TimeSpan.FromSeconds(25));
        f.Add("a", etag: "\"v2\"");
        f.Clock.Advance(TimeSpan.FromSeconds(25));
        Assert.True(f.Index.TryGet(Key("a"), out var e));
        Assert.Equal("\"v2\"", e.ETag);
        Assert.Equal(0, f.Index.RemoveExpired().Objects);
    }

    [Fact]
    public void Replacing_entries_under_a_ttl_does_not_grow_the_expiry_queue()
    {
        using var f = new IndexFixture(new CacheIndexOptions
        {
            Policy = EvictionPolicies.WithTtl(EvictionPolicies.LruNonOwnedFirst, TimeSpan.FromHours(1)),
        });
        for (var i = 0; i < 5000; i++)
            f.Add("k" + (i % 10), etag: "\"" + i + "\"");
        Assert.Equal(10, f.Index.Count);
        Assert.True(f.Index.InsertionQueueLength <= 2 * 10 + 65, $"{f.Index.InsertionQueueLength} entries queued for 10 cached");
    }

    [Fact]
    public void An_expired_pinned_entry_replaced_meanwhile_is_freed_once()
    {
        using var f = new IndexFixture(new CacheIndexOptions
        {
            Policy = EvictionPolicies.WithTtl(EvictionPolicies.LruNonOwnedFirst, TimeSpan.FromSeconds(30)),
        });
        var a = f.Add("a");
        var pin = f.Index.Pin(a);
        f.Clock.Advance(TimeSpan.FromSeconds(31));
        Assert.Equal(0, f.Index.RemoveExpired().Objects); // pinned: waits
        f.Add("a", etag: "\"v2\"");                      // replaced while waiting
        pin.Dispose();                                      // frees a's extent
        Assert.Equal(0, f.Index.RemoveExpired().Objects);   // must not free it again
        Assert.Equal(100, f.Arena.Allocated);
        Assert.True(f.Index.TryGet(Key("a"), out var current));
        Assert.Equal("\"v2\"", current.ETag);
    }
}
