using FaaST.Cachelet.Demotion;
using FaaST.Cachelet.Index;
using FaaST.Cachelet.Memory;

namespace FaaST.Cachelet.Tests;

/// <summary>
/// The demotion seam at the index: several eviction sinks behind a bounded queue and a background
/// pump, over a real arena in /dev/shm. Waits are on conditions (a sink entered, a count reached),
/// never on time.
/// </summary>
public sealed class DemotionTests
{
    private const int Large = 1 << 20; // a file of its own in the arena: its memory returns to the OS when freed

    [Fact]
    public async Task Several_sinks_each_receive_every_evicted_object_intact_while_its_memory_is_still_allocated()
    {
        var first = new RecordingSink();
        var second = new RecordingSink();
        using var f = new IndexFixture(new CacheIndexOptions { EvictionSinks = [first, second] });
        var data = new Dictionary<string, byte[]>();
        for (var i = 0; i < 3; i++)
        {
            var blob = $"o{i}";
            f.Add(blob, 10_000 + i, etag: $"\"v{i}\"", fill: (byte)('a' + i));
            data[blob] = Enumerable.Repeat((byte)('a' + i), 10_000 + i).ToArray();
        }

        Assert.Equal(3, f.Index.Evict(long.MaxValue).Objects);
        await Eventually.TrueAsync(() => f.Index.Demotions.Demoted == 3, "three objects demoted", () => f.Index.Demotions.ToString());

        foreach (var sink in new[] { first, second })
        {
            Assert.Equal(data.Keys.Order(), sink.Blobs.Order());
            foreach (var got in sink.Received)
            {
                Assert.Equal(data[got.Evicted.Key.Blob], got.Bytes);
                Assert.Equal(got.Bytes.Length, got.Evicted.Length);
                Assert.Equal($"\"v{got.Evicted.Key.Blob[1..]}\"", got.Evicted.ETag);
                Assert.Equal(EvictionReason.Space, got.Evicted.Reason);
            }
        }
        Assert.Equal(0, f.Arena.Allocated);
        Assert.Equal(new DemotionStats(0, 0, 3, 0, 0), f.Index.Demotions);
    }

    [Fact]
    public async Task An_objects_memory_is_freed_only_after_every_sink_returned_and_then_all_of_it_returns_to_the_arena()
    {
        using var scope = new ShmScope();
        using var arena = scope.NewArena(new ArenaOptions { Capacity = 64L << 20, SlabSegmentSize = 8L << 20 });
        var first = new RecordingSink(arena);
        var second = new RecordingSink(arena);
        using var index = new CacheIndex(arena, new CacheIndexOptions { EvictionSinks = [first, second] });
        for (var i = 0; i < 3; i++)
        {
            Assert.True(index.TryAllocate(Large, out var extent));
            extent.Span.Fill((byte)i);
            index.AddOrReplace(IndexFixture.Key($"o{i}"), "\"v\"", extent);
        }
        Assert.Equal(3L * Large, arena.Allocated);
        Assert.Equal(3, arena.LargeObjectCount);

        index.Evict(long.MaxValue);
        await Eventually.TrueAsync(() => index.Demotions.Demoted == 3, "three objects demoted");

        // During each call the object's bytes were still allocated: at least its own megabyte.
        Assert.All(first.Received.Concat(second.Received), d => Assert.True(d.AllocatedDuringCall >= Large, $"{d.AllocatedDuringCall} bytes allocated"));
        Assert.All(first.Received, d => Assert.Equal(Enumerable.Repeat((byte)int.Parse(d.Evicted.Key.Blob[1..]), Large), d.Bytes));
        Assert.Equal(0, arena.Allocated);
        Assert.Equal(0, arena.Reserved);
        Assert.Equal(0, arena.LargeObjectCount);
        Assert.Equal(0, index.Demotions.PendingBytes);
    }

    [Fact]
    public async Task A_miss_on_a_full_arena_gets_its_memory_while_a_sink_is_blocked_by_taking_back_a_queued_demotion()
    {
        using var gate = new ManualResetEventSlim();
        var slow = new RecordingSink { Gate = gate };
        using var f = new IndexFixture(new CacheIndexOptions { EvictionSinks = [slow], Demotion = new DemotionOptions { MaxBytes = 64L << 20, ReserveBytes = 0 } },
            capacity: 4L * Large);
        for (var i = 0; i < 4; i++)
            f.Add($"o{i}", Large, fill: (byte)i);
        Assert.False(f.Arena.TryAllocate(Large, out _)); // full

        f.Index.Evict(1); // o0 goes to the sink, which blocks
        Assert.True(slow.Entered.Wait(TimeSpan.FromMinutes(1)), "the sink was called");

        // A miss needs a megabyte: its victim o1 is queued, and since the arena is still full, taken back at once.
        Assert.True(f.Index.TryAllocate(Large, out var extent));
        Assert.False(gate.IsSet);
        Assert.Empty(slow.Received);
        Assert.Equal(1, f.Index.Demotions.Dropped);
        Assert.Equal(1, f.Index.Demotions.Pending); // o0, still with the sink
        f.Arena.Free(extent);

        gate.Set();
        await Eventually.TrueAsync(() => f.Index.Demotions.Demoted == 1, "o0 demoted");
        var got = Assert.Single(slow.Received);
        Assert.Equal("o0", got.Evicted.Key.Blob);
        Assert.Equal(new byte[Large], got.Bytes);
        Assert.Equal(2L * Large, f.Arena.Allocated); // o2 and o3
    }

    [Fact]
    public async Task A_workers_output_is_adopted_into_a_full_arena_while_a_sink_is_blocked()
    {
        using var gate = new ManualResetEventSlim();
        var slow = new RecordingSink { Gate = gate };
        using var f = new IndexFixture(new CacheIndexOptions { EvictionSinks = [slow], Demotion = new DemotionOptions { MaxBytes = 64L << 20, ReserveBytes = 0 } },
            capacity: 4L * Large);
        for (var i = 0; i < 4; i++)
            f.Add($"o{i}", Large);
        f.Index.Evict(1);
        Assert.True(slow.Entered.Wait(TimeSpan.FromMinutes(1)), "the sink was called");
        var output = Enumerable.Repeat((byte)'W', Large).ToArray();
        File.WriteAllBytes(Path.Combine(f.Arena.Directory, "w1-0"), output);
        using var file = f.Arena.OpenWorkerFile("w1-0", Large);

        Assert.True(f.Index.TryAdopt(file, out var extent));
        Assert.Equal(output, extent.Span.ToArray());
        Assert.False(gate.IsSet);
        Assert.Equal(1, f.Index.Demotions.Dropped);
        f.Arena.Free(extent);

        gate.Set();
        await Eventually.TrueAsync(() => f.Index.Demotions.Demoted == 1, "o0 demoted");
    }

    [Fact]
    public async Task Under_steady_misses_the_index_evicts_ahead_so_what_misses_push_out_is_demoted_not_dropped()
    {
        var sink = new RecordingSink();
        // 8 MiB, slots to 15/16 of it, 2 MiB kept for demotions: at most 5.5 MiB cached, so 5 objects of 1 MiB.
        using var f = new IndexFixture(new CacheIndexOptions { EvictionSinks = [sink], Demotion = new DemotionOptions { MaxBytes = 2L * Large } },
            capacity: 8L * Large);
        const long budget = 8L * Large * 15 / 16 - 2L * Large;
        for (var i = 0; i < 20; i++)
        {
            Assert.True(f.Index.TryAllocate(Large, out var extent)); // a miss
            extent.Span.Fill((byte)i);
            f.Clock.Advance(TimeSpan.FromSeconds(1)); // LRU order is insertion order
            f.Index.AddOrReplace(IndexFixture.Key($"o{i}"), $"\"v{i}\"", extent);
            await Eventually.TrueAsync(() => f.Index.Demotions.Pending == 0 && f.Arena.Used <= budget, $"room kept after miss {i}",
                () => $"{f.Index.Demotions}, {f.Arena.Used} bytes used");
        }

        Assert.Equal(0, f.Index.Demotions.Dropped);
        Assert.Equal(5, f.Index.Count);
        Assert.Equal(15, f.Index.Demotions.Demoted);
        Assert.Equal(Enumerable.Range(0, 15).Select(i => $"o{i}"), sink.Blobs); // least recently used first
        Assert.All(sink.Received, d => Assert.Equal(Enumerable.Repeat((byte)int.Parse(d.Evicted.Key.Blob[1..]), Large), d.Bytes));
        Assert.Equal(5L * Large, f.Arena.Allocated);
    }

    [Fact]
    public async Task When_the_queue_is_full_a_demotion_is_dropped_counted_and_its_memory_freed_at_once()
    {
        using var gate = new ManualResetEventSlim();
        var slow = new RecordingSink { Gate = gate };
        using var f = new IndexFixture(new CacheIndexOptions { EvictionSinks = [slow], Demotion = new DemotionOptions { Capacity = 2 } });
        foreach (var blob in new[] { "a", "b", "c", "d" })
            f.Add(blob, 1000);

        f.Index.Evict(1); // a: with the sink
        Assert.True(slow.Entered.Wait(TimeSpan.FromMinutes(1)), "the sink was called");
        f.Index.Evict(1); // b: queued (two pending: the queue is full)
        var allocated = f.Arena.Allocated;
        f.Index.Evict(1); // c: dropped

        Assert.Equal(allocated - 1000, f.Arena.Allocated);
        Assert.Equal(new DemotionStats(Pending: 2, PendingBytes: 2000, Demoted: 0, Dropped: 1, SinkFailures: 0), f.Index.Demotions);
        Assert.Equal(["c", "b", "a"], f.Index.RecentlyEvicted().Select(e => e.Key.Blob)); // still evicted, and remembered

        gate.Set();
        await Eventually.TrueAsync(() => f.Index.Demotions.Demoted == 2, "a and b demoted");
        Assert.Equal(["a", "b"], slow.Blobs);
        Assert.Equal(1000, f.Arena.Allocated); // d
    }

    [Fact]
    public async Task A_demotion_larger_than_the_queues_bytes_is_dropped_and_the_object_still_evicted()
    {
        var sink = new RecordingSink();
        using var f = new IndexFixture(new CacheIndexOptions { EvictionSinks = [sink], Demotion = new DemotionOptions { MaxBytes = 5000 } });
        f.Add("small", 4000);
        f.Add("big", 6000);

        Assert.Equal(2, f.Index.Evict(long.MaxValue).Objects);
        await Eventually.TrueAsync(() => f.Index.Demotions.Demoted == 1, "the small one demoted");

        Assert.Equal(["small"], sink.Blobs);
        Assert.Equal(1, f.Index.Demotions.Dropped);
        Assert.Equal(0, f.Arena.Allocated);
    }

    [Fact]
    public async Task An_object_dropped_at_its_ttl_reaches_the_sinks_as_expired()
    {
        var sink = new RecordingSink();
        using var f = new IndexFixture(new CacheIndexOptions
        {
            Policy = EvictionPolicies.WithTtl(EvictionPolicies.LruNonOwnedFirst, TimeSpan.FromSeconds(10)),
            EvictionSinks = [sink],
        });
        f.Add("a", 500, etag: "\"va\"", fill: 7);
        f.Clock.Advance(TimeSpan.FromSeconds(20));

        Assert.Equal(1, f.Index.RemoveExpired().Objects);
        await Eventually.TrueAsync(() => f.Index.Demotions.Demoted == 1, "the expired object demoted");

        var got = Assert.Single(sink.Received);
        Assert.Equal(("a", "\"va\"", EvictionReason.Expired), (got.Evicted.Key.Blob, got.Evicted.ETag, got.Evicted.Reason));
        Assert.Equal(Enumerable.Repeat((byte)7, 500), got.Bytes);
        Assert.Equal(1, f.Index.Expirations);
        Assert.Equal(0, f.Arena.Allocated);
    }

    [Fact]
    public async Task A_sink_that_throws_is_counted_and_the_other_sinks_and_the_freeing_go_on()
    {
        var failing = new RecordingSink { Throws = true };
        var working = new RecordingSink();
        using var f = new IndexFixture(new CacheIndexOptions { EvictionSinks = [failing, working] });
        f.Add("a", 300, fill: 1);
        f.Add("b", 300, fill: 2);

        Assert.Equal(2, f.Index.Evict(long.MaxValue).Objects);
        await Eventually.TrueAsync(() => f.Index.Demotions.Demoted == 2, "both demoted");

        Assert.Equal(["a", "b"], working.Blobs.Order());
        Assert.Equal(2, f.Index.Demotions.SinkFailures);
        Assert.Equal(0, f.Arena.Allocated);
    }

    [Fact]
    public void A_pinned_object_never_reaches_the_queue_so_a_pending_write_behind_is_never_dropped()
    {
        var sink = new RecordingSink();
        using var f = new IndexFixture(new CacheIndexOptions { EvictionSinks = [sink], Demotion = new DemotionOptions { Capacity = 1 } });
        var dirty = f.Add("dirty", 1000);
        using var pin = f.Index.Pin(dirty); // what a write-behind holds until storage has the bytes

        f.Index.Evict(long.MaxValue);

        Assert.False(dirty.IsRetired);
        Assert.Equal(new DemotionStats(0, 0, 0, 0, 0), f.Index.Demotions);
    }

    [Fact]
    public async Task Disposing_the_index_drops_queued_demotions_waits_for_the_one_with_a_sink_and_frees_everything()
    {
        using var gate = new ManualResetEventSlim();
        var slow = new RecordingSink { Gate = gate };
        using var f = new IndexFixture(new CacheIndexOptions { EvictionSinks = [slow] });
        f.Add("a", 1000);
        f.Add("b", 1000);
        f.Add("c", 1000);
        f.Index.Evict(1);
        Assert.True(slow.Entered.Wait(TimeSpan.FromMinutes(1)), "the sink was called");
        f.Index.Evict(1);

        var disposing = Task.Run(f.Index.Dispose);
        await Eventually.TrueAsync(() => f.Index.Demotions.Dropped == 1, "b dropped at shutdown");
        gate.Set(); // a was still with the sink: Dispose waits for it

        await disposing.WaitAsync(TimeSpan.FromMinutes(1));

        Assert.Equal(["a"], slow.Blobs);
        Assert.Equal(0, f.Arena.Allocated);
    }
}
