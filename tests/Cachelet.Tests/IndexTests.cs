using FaaST.Cachelet.Index;
using FaaST.Cachelet.Memory;

namespace FaaST.Cachelet.Tests;

public sealed class IndexTests : IDisposable
{
    private readonly IndexFixture _f = new();

    public void Dispose() => _f.Dispose();

    private static BlobKey Key(string blob) => IndexFixture.Key(blob);

    [Fact]
    public void A_key_misses_until_added_then_hits()
    {
        Assert.False(_f.Index.TryGet(Key("a"), out _));
        var added = _f.Add("a", 1000, fill: 5);
        Assert.True(_f.Index.TryGet(Key("a"), out var found));
        Assert.Same(added, found);
        Assert.Equal("\"v1\"", found.ETag);
        Assert.Equal(1000, found.Length);
        Assert.All(found.Extent.Span.ToArray(), b => Assert.Equal(5, b));
        Assert.Equal(1, _f.Index.Count);
        Assert.Equal(1000, _f.Index.Bytes);
        Assert.False(_f.Index.TryGet(new BlobKey("devstoreaccount1", "c", "A"), out _)); // ordinal
        Assert.False(_f.Index.TryGet(new BlobKey("other", "c", "a"), out _));
    }

    [Fact]
    public void Keys_are_equal_by_ordinal_value_with_a_cached_hash()
    {
        var a = new BlobKey("acct", "c", "x/y.bin");
        var b = new BlobKey(new string("acct".AsSpan()), "c", "x/y.bin");
        Assert.Equal(a, b);
        Assert.Equal(a.GetHashCode(), b.GetHashCode());
        Assert.NotEqual(a, new BlobKey("acct", "c/x", "y.bin"));
        Assert.NotEqual(a, new BlobKey("acct", "C", "x/y.bin"));
        Assert.Equal("acct/c/x/y.bin", a.ToString());
    }

    [Fact]
    public void A_lookup_moves_the_last_access_time()
    {
        var e = _f.Add("a");
        var before = e.LastAccess;
        _f.Clock.Advance(TimeSpan.FromSeconds(5));
        Assert.True(_f.Index.TryGet(Key("a"), out _));
        Assert.Equal(_f.Clock.Now, e.LastAccess);
        Assert.True(e.LastAccess > before);
    }

    [Fact]
    public void TryAdd_keeps_an_existing_version_and_leaves_the_extent_to_the_caller()
    {
        var first = _f.Add("a", etag: "\"v1\"");
        Assert.True(_f.Arena.TryAllocate(100, out var extent));
        Assert.False(_f.Index.TryAdd(Key("a"), "\"v2\"", extent, owned: true, out _));
        Assert.True(_f.Index.TryGet(Key("a"), out var current));
        Assert.Same(first, current);
        _f.Arena.Free(extent); // still the caller's
        Assert.True(_f.Arena.TryAllocate(100, out var other));
        Assert.True(_f.Index.TryAdd(Key("b"), "\"v1\"", other, owned: false, out var b));
        Assert.False(b.Owned);
    }

    [Fact]
    public void A_new_version_replaces_the_old_one_and_frees_its_extent()
    {
        var old = _f.Add("a", 1000, etag: "\"v1\"");
        var allocated = _f.Arena.Allocated;
        var replacement = _f.Add("a", 3000, etag: "\"v2\"");
        Assert.True(old.IsRetired);
        Assert.True(_f.Index.TryGet(Key("a"), out var current));
        Assert.Same(replacement, current);
        Assert.Equal("\"v2\"", current.ETag);
        Assert.Equal(1, _f.Index.Count);
        Assert.Equal(3000, _f.Index.Bytes);
        Assert.Equal(allocated + 3000 - 1000, _f.Arena.Allocated);
        Assert.Same(old.Stats, replacement.Stats);
    }

    [Fact]
    public void A_pin_keeps_the_old_version_s_bytes_until_it_is_released_then_frees_them()
    {
        var old = _f.Add("a", 1000, fill: 0x11);
        Assert.True(_f.Index.TryGetPinned(Key("a"), out var pin));
        _f.Add("a", 1000, etag: "\"v2\"", fill: 0x22);
        Assert.True(old.IsRetired);
        Assert.False(pin.IsReleased);
        Assert.Equal(2000, _f.Arena.Allocated);
        Assert.Equal(1000, _f.Index.RetiredPinnedBytes);

        // Allocations of the same size class must not land on the pinned bytes.
        var others = new List<Extent>();
        for (var i = 0; i < 500; i++)
        {
            Assert.True(_f.Arena.TryAllocate(1000, out var e));
            e.Span.Fill(0x33);
            others.Add(e);
        }
        Assert.All(pin.Extent.Span.ToArray(), b => Assert.Equal(0x11, b));

        pin.Dispose();
        Assert.Equal(1000 + 500 * 1000, _f.Arena.Allocated);
        Assert.Equal(0, _f.Index.RetiredPinnedBytes);
        Assert.Equal(0, _f.Index.PinnedBytes);
        Assert.Throws<InvalidOperationException>(() => _f.Arena.Free(old.Extent)); // already freed
        foreach (var e in others)
            _f.Arena.Free(e);
    }

    [Fact]
    public void Disposing_a_pin_twice_unpins_once()
    {
        var e = _f.Add("a");
        var first = _f.Index.Pin(e);
        var second = _f.Index.Pin(e);
        Assert.Equal(2, e.Pins);
        Assert.Equal(100, _f.Index.PinnedBytes);
        first.Dispose();
        first.Dispose();
        Assert.Equal(1, e.Pins);
        second.Dispose();
        Assert.Equal(0, e.Pins);
        Assert.Equal(0, _f.Index.PinnedBytes);
    }

    [Fact]
    public void A_removed_entry_cannot_be_pinned_and_its_extent_is_freed()
    {
        var e = _f.Add("a");
        Assert.True(_f.Index.Remove(Key("a")));
        Assert.False(_f.Index.Remove(Key("a")));
        Assert.False(_f.Index.TryPin(e, out _));
        Assert.Throws<InvalidOperationException>(() => _f.Index.Pin(e));
        Assert.False(_f.Index.TryGetPinned(Key("a"), out _));
        Assert.Equal(0, _f.Arena.Allocated);
        Assert.Equal(0, _f.Index.Count);
        Assert.Equal(0, _f.Index.Bytes);
    }

    [Fact]
    public void Removing_a_stale_entry_leaves_the_current_version()
    {
        var old = _f.Add("a", etag: "\"v1\"");
        var current = _f.Add("a", etag: "\"v2\"");
        Assert.False(_f.Index.Remove(old));
        Assert.True(_f.Index.TryGet(Key("a"), out var found));
        Assert.Same(current, found);
        Assert.True(_f.Index.Remove(current));
        Assert.False(_f.Index.TryGet(Key("a"), out _));
    }

    [Fact]
    public void UpdateVersion_changes_the_etag_of_a_cached_entry()
    {
        var e = _f.Add("a", etag: "\"pending\"");
        Assert.True(_f.Index.UpdateVersion(e, "\"0x8D\""));
        Assert.True(_f.Index.TryGet(Key("a"), out var found));
        Assert.Equal("\"0x8D\"", found.ETag);
        _f.Index.Remove(e);
        Assert.False(_f.Index.UpdateVersion(e, "\"later\""));
    }

    [Fact]
    public void The_runtime_s_counters_accumulate_per_key()
    {
        var k = Key("a");
        _f.Index.RecordLocalMiss(k);
        _f.Add("a");
        _f.Index.RecordLocalHit(k);
        _f.Index.RecordLocalHit(k);
        _f.Index.RecordRemoteHit(k);
        _f.Index.RecordRemoteMiss(k);
        _f.Index.RecordWrite(k);
        var s = _f.Index.GetStats(k);
        Assert.Equal((2, 1, 1, 1, 1, 6), (s.LocalHits, s.RemoteHits, s.LocalMisses, s.RemoteMisses, s.Writes, s.Accesses));
        Assert.Equal(0, _f.Index.GetStats(Key("b")).Accesses);
    }

    [Fact]
    public void Mean_inter_arrival_is_the_mean_gap_between_accesses()
    {
        var k = Key("a");
        var s = _f.Index.GetStats(k);
        Assert.Equal(TimeSpan.Zero, s.MeanInterArrival);
        _f.Index.RecordLocalMiss(k);
        Assert.Equal(TimeSpan.Zero, s.MeanInterArrival);
        foreach (var gap in new[] { 1, 2, 6 })
        {
            _f.Clock.Advance(TimeSpan.FromSeconds(gap));
            _f.Index.RecordLocalHit(k);
        }
        Assert.Equal(3.0, s.MeanInterArrival.TotalSeconds, 6);
        Assert.Equal(_f.Clock.Now, s.LastAccess);
    }

    [Fact]
    public void Statistics_outlive_the_entry_and_count_its_evictions()
    {
        var k = Key("a");
        _f.Add("a");
        _f.Index.RecordLocalHit(k);
        var stats = _f.Index.GetStats(k);
        Assert.Equal(1, _f.Index.Evict(1).Objects);
        Assert.False(_f.Index.TryGet(k, out _));
        _f.Add("a");
        Assert.Equal(1, _f.Index.Evict(1).Objects);
        _f.Add("a");
        _f.Index.RecordLocalHit(k);
        Assert.True(_f.Index.TryGet(k, out var e));
        Assert.Same(stats, e.Stats);
        Assert.Equal(2, stats.Evictions);
        Assert.Equal(2, stats.LocalHits);
        Assert.Equal(2, _f.Index.Evictions);
    }

    [Fact]
    public void Statistics_of_uncached_keys_are_bounded_least_recently_accessed_first()
    {
        using var f = new IndexFixture(new CacheIndexOptions { MaxTrackedKeys = 100 });
        f.Add("cached");
        f.Index.GetStats(Key("cached"));
        for (var i = 0; i < 1000; i++)
        {
            f.Clock.Advance(TimeSpan.FromSeconds(1));
            f.Index.RecordLocalMiss(Key("k" + i));
        }
        Assert.InRange(f.Index.TrackedKeys, 75, 100);
        Assert.True(f.Index.TryGetStats(Key("cached"), out _), "a cached key keeps its statistics");
        Assert.True(f.Index.TryGetStats(Key("k999"), out _), "the newest survive");
        Assert.False(f.Index.TryGetStats(Key("k0"), out _), "the oldest go");
    }

    [Fact]
    public void A_key_cached_past_the_statistics_limit_keeps_its_record()
    {
        using var f = new IndexFixture(new CacheIndexOptions { MaxTrackedKeys = 10 });
        for (var i = 0; i < 10; i++)
            f.Index.RecordLocalMiss(Key("k" + i));
        var e = f.Add("new"); // the 11th key: a trim runs, and must spare the key being cached
        Assert.True(f.Index.TryGetStats(Key("new"), out var stats));
        Assert.Same(e.Stats, stats);
    }

    [Fact]
    public void TryAllocate_evicts_unpinned_entries_to_make_room()
    {
        using var f = new IndexFixture(capacity: 4L << 20);
        var pinned = f.Add("pinned", 300_000);
        using var pin = f.Index.Pin(pinned);
        for (var i = 0; i < 20; i++) // 4 MiB hold 13 of them
        {
            Assert.True(f.Index.TryAllocate(300_000, out var e), $"allocation {i}");
            f.Index.AddOrReplace(Key("k" + i), "\"v\"", e);
        }
        Assert.True(f.Index.Evictions > 0);
        Assert.True(f.Index.TryGet(Key("pinned"), out _));
        Assert.False(f.Index.TryAllocate(8L << 20, out _)); // larger than the whole arena
    }

    [Fact]
    public void Dispose_frees_unpinned_entries_and_pinned_ones_when_released()
    {
        using var f = new IndexFixture();
        f.Add("a");
        var pinned = f.Add("b");
        var pin = f.Index.Pin(pinned);
        f.Index.Dispose();
        Assert.Equal(100, f.Arena.Allocated);
        pin.Dispose();
        Assert.Equal(0, f.Arena.Allocated);
        Assert.Throws<ObjectDisposedException>(() => f.Add("c"));
    }

    [Fact]
    public async Task Concurrent_lookups_adds_pins_and_evictions_keep_the_books_consistent()
    {
        using var f = new IndexFixture(capacity: 32L << 20);
        var index = f.Index;
        var errors = 0;
        var stop = 0;
        var workers = Enumerable.Range(0, 6).Select(t => Task.Run(() =>
        {
            var random = new Random(t);
            for (var i = 0; i < 20_000; i++)
            {
                var key = Key("k" + random.Next(500));
                switch (random.Next(10))
                {
                    case < 5:
                        if (index.TryGetPinned(key, out var pin))
                        {
                            using (pin)
                            {
                                var span = pin.Extent.Span;
                                var tag = span.Length > 0 ? span[0] : (byte)0;
                                if (span.IndexOfAnyExcept(tag) >= 0)
                                    Interlocked.Increment(ref errors); // torn or reused bytes
                            }
                            index.RecordLocalHit(key);
                        }
                        else
                        {
                            index.RecordLocalMiss(key);
                        }
                        break;
                    case < 9:
                        var length = random.Next(10) == 0 ? random.Next(256 * 1024, 600_000) : random.Next(1, 20_000);
                        if (index.TryAllocate(length, out var e))
                        {
                            e.Span.Fill((byte)random.Next(256));
                            index.AddOrReplace(key, "\"" + i + "\"", e, owned: random.Next(2) == 0);
                        }
                        break;
                    default:
                        index.Remove(key);
                        break;
                }
            }
        })).ToList();
        workers.Add(Task.Run(() =>
        {
            while (Volatile.Read(ref stop) == 0)
                index.Evict(1 << 20);
        }));
        await Task.WhenAll(workers.Take(6));
        Volatile.Write(ref stop, 1);
        await workers[^1];

        Assert.Equal(0, errors);
        Assert.Equal(0, index.PinnedBytes);
        Assert.Equal(0, index.RetiredPinnedBytes);
        long bytes = 0;
        var count = 0;
        for (var k = 0; k < 500; k++)
        {
            if (index.TryGet(Key("k" + k), out var e))
            {
                bytes += e.Length;
                count++;
            }
        }
        Assert.Equal(count, index.Count);
        Assert.Equal(bytes, index.Bytes);
        Assert.Equal(bytes, f.Arena.Allocated);
        Assert.True(f.Arena.Reserved <= f.Arena.Capacity);
    }
}
