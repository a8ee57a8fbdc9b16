using FaaST.Simulator.Latency;
using FaaST.Simulator.Simulation;
using FaaST.Simulator.Trace;

namespace FaaST.Simulator.Tests;

/// <summary>
/// The simulation on small hand-made traces whose hits, misses and costs are known. Latencies are flat so every cost is
/// exact: a storage GET 10 ms, a PUT 20 ms, a local hit 1 ms, a cachelet put 0.5 ms (so a version check, a 1-byte GET, is
/// 10 ms).
/// </summary>
public sealed class SimulationTests
{
    private const long Kb = 1024, Mb = 1 << 20;
    private static readonly long T0 = DateTimeOffset.Parse("2020-07-01T00:00:00Z", System.Globalization.CultureInfo.InvariantCulture).ToUnixTimeMilliseconds();

    private static LatencyTable Flat() => new(new Dictionary<LatencyKind, IReadOnlyList<(long, double)>>
    {
        [LatencyKind.StorageRead] = [(1, 10.0), (1L << 40, 10.0)],
        [LatencyKind.StorageWrite] = [(1, 20.0), (1L << 40, 20.0)],
        [LatencyKind.LocalHitRead] = [(1, 1.0), (1L << 40, 1.0)],
        [LatencyKind.CacheWrite] = [(1, 0.5), (1L << 40, 0.5)],
    }, "flat test latencies");

    private static SimulationOptions Options(params long[] sizes) => new()
    {
        CacheSizes = sizes.Length == 0 ? [Mb] : sizes,
        UnloadPeriods = [TimeSpan.FromMinutes(1), TimeSpan.FromMinutes(10)],
        ThresholdSweep = [],
    };

    private static TraceAccess Read(long ms, string app, string invocation, string blob, long bytes = Kb, string etag = "e1") =>
        new(T0 + ms, app, invocation, blob, etag, bytes, Read: true, Write: false);

    private static TraceAccess Write(long ms, string app, string invocation, string blob, string etag, long bytes = Kb) =>
        new(T0 + ms, app, invocation, blob, etag, bytes, Read: false, Write: true);

    private static SimulationResult Run(SimulationOptions options, IEnumerable<TraceAccess> trace)
    {
        var simulator = new TraceSimulator(options, Flat());
        foreach (var a in trace)
            simulator.Add(a);
        return simulator.Finish();
    }

    [Fact]
    public void A_blob_read_three_times_in_one_invocation_is_one_miss_then_two_hits_under_every_model_and_costs_what_the_table_says()
    {
        var result = Run(Options(), [Read(0, "a", "i1", "model"), Read(10, "a", "i1", "model"), Read(20, "a", "i1", "model")]);

        Assert.Equal(1, result.Apps);
        Assert.All(result.Configs, c => Assert.Equal((2L, 1L), (c.Hits, c.Misses)));
        var never = result.Find(LoadModel.NeverUnloaded, Mb);
        // Storage only: 3 GETs = 30 ms. storage/sync/storage: a GET, then two hits each with a version check = 10 + 2 × 11 = 32 ms.
        // owner/sync/owner: 10 + 2 × 1 = 12 ms.
        Assert.Equal((30 - 32) / 30.0 * 100, never.ImprovementsPct.Single(), 9);
        Assert.Equal((30 - 12) / 30.0 * 100, never.OwnerImprovementsPct.Single(), 9);
    }

    [Fact]
    public void An_app_that_reads_each_blob_once_gains_nothing_and_loses_nothing()
    {
        var result = Run(Options(), Enumerable.Range(0, 20).Select(i => Read(i * 1000, "a", $"i{i}", $"input-{i}")));

        Assert.All(result.Configs, c =>
        {
            Assert.Equal(0, c.Hits);
            Assert.Equal(0, c.ImprovementsPct.Single(), 9);
        });
    }

    [Fact]
    public void Least_recently_used_objects_are_evicted_by_bytes_and_an_object_larger_than_the_cache_is_never_cached()
    {
        // A 3 KB cache: a, b, c (1 KB each) fill it; a is read again, so d evicts b (the least recently used); a hits again,
        // b misses and evicts c; the 4 KB blob never fits.
        var trace = new[]
        {
            Read(0, "a", "i", "a"), Read(1, "a", "i", "b"), Read(2, "a", "i", "c"), Read(3, "a", "i", "a"),
            Read(4, "a", "i", "d"), Read(5, "a", "i", "a"), Read(6, "a", "i", "b"),
            Read(7, "a", "i", "big", 4 * Kb), Read(8, "a", "i", "big", 4 * Kb),
        };

        var never = Run(Options(3 * Kb), trace).Find(LoadModel.NeverUnloaded, 3 * Kb);

        // Hits: a (at 3), a (at 5). Misses: a, b, c, d, b, big, big.
        Assert.Equal((2L, 7L), (never.Hits, never.Misses));
    }

    [Fact]
    public void A_fixed_unload_period_empties_the_cache_only_when_the_app_was_idle_longer_than_it()
    {
        // Two invocations 5 minutes apart, each reading the model: unloaded after 1 minute it misses again; after 10 it hits.
        var five = 5 * 60_000L;
        var result = Run(Options(), [Read(0, "a", "i1", "model"), Read(five, "a", "i2", "model")]);

        var one = result.Find(LoadModel.FixedUnload, Mb, TimeSpan.FromMinutes(1));
        var ten = result.Find(LoadModel.FixedUnload, Mb, TimeSpan.FromMinutes(10));
        Assert.Equal((0L, 2L, 1L), (one.Hits, one.Misses, one.ColdStarts));
        Assert.Equal((1L, 1L, 0L), (ten.Hits, ten.Misses, ten.ColdStarts));
    }

    [Fact]
    public void A_blob_written_by_the_app_is_a_hit_when_read_back_and_one_changed_in_storage_is_a_miss()
    {
        var trace = new[]
        {
            Write(0, "a", "i1", "out", "v1"),
            Read(10, "a", "i1", "out", etag: "v1"), // the app's own output: cached as it was written
            Read(20, "a", "i1", "shared", etag: "s1"),
            Read(30, "a", "i1", "shared", etag: "s2"), // someone else changed it in storage: the version check misses
            Read(40, "a", "i1", "shared", etag: "s2"),
        };

        var never = Run(Options(), trace).Find(LoadModel.NeverUnloaded, Mb);

        Assert.Equal((2L, 2L), (never.Hits, never.Misses));
    }

    [Fact]
    public void A_periodic_app_is_reloaded_ahead_of_each_invocation_once_the_histogram_has_learnt_and_prewarm_makes_its_model_a_hit()
    {
        // Every 30 minutes an invocation reads the model, then a fresh input a second later. The first five idle times are
        // too few to predict (minSamples 5): the app sits out the 10-minute keep-alive and each invocation is a cold start.
        // From the 7th invocation on the histogram (one bin: CV far above 2) unloads it a lead after each invocation and
        // loads it again before the next; with prewarm the model (read in more than one record) is loaded, the inputs
        // (read once, never hit) are not.
        var trace = new List<TraceAccess>();
        for (var i = 0; i < 10; i++)
        {
            var t = i * 30 * 60_000L;
            trace.Add(Read(t, "a", $"i{i}", "model", 5 * Kb));
            trace.Add(Read(t + 1000, "a", $"i{i}", $"input-{i}"));
        }

        var result = Run(Options(), trace);

        var prewarm = result.Find(LoadModel.Prewarm, Mb);
        var histogram = result.Find(LoadModel.Histogram, Mb);
        var ten = result.Find(LoadModel.FixedUnload, Mb, TimeSpan.FromMinutes(10));
        Assert.Equal((5L, 4L), (prewarm.ColdStarts, prewarm.Reloads));
        Assert.Equal((4L, 4L), (prewarm.Hits, prewarm.PrewarmHits));
        Assert.Equal((long)(4 * 5 * Kb), prewarm.PrewarmedBytes);
        Assert.Equal(0, prewarm.WastedPrewarmBytes);
        Assert.Equal((5L, 4L, 0L), (histogram.ColdStarts, histogram.Reloads, histogram.Hits));
        Assert.Equal((9L, 0L), (ten.ColdStarts, ten.Hits));
        // owner/sync/owner: 20 reads of 10 ms = 200 ms against 16 misses and 4 hits = 164 ms. (With storage/sync/storage a
        // hit's version check costs as much as these flat GETs, so there prewarm gains nothing here.)
        Assert.Equal((200 - 164) / 200.0 * 100, prewarm.OwnerImprovementsPct.Single(), 9);
        Assert.Equal(0, histogram.OwnerImprovementsPct.Single(), 9);
    }

    [Fact]
    public void Apps_are_simulated_apart_and_the_cdf_has_one_improvement_per_app()
    {
        var trace = new[]
        {
            Read(0, "reuser", "r1", "m"), Read(1, "oneoff", "o1", "x"), Read(2, "reuser", "r1", "m"), Read(3, "oneoff", "o1", "y"),
        };

        var result = Run(Options(), trace);

        var never = result.Find(LoadModel.NeverUnloaded, Mb);
        Assert.Equal(2, result.Apps);
        Assert.Equal(2, never.OwnerImprovementsPct.Length);
        // oneoff: 0 %; reuser: 20 ms against 10 + 1 = 11 ms.
        Assert.Equal([0, (20 - 11) / 20.0 * 100], never.OwnerImprovementsPct);
        Assert.Equal(50, never.ShareAtLeast(45, owner: true));
    }
}
