using System.Diagnostics;
using FaaST.Cachelet;
using FaaST.Cachelet.Index;
using FaaST.Policy;
using FaaST.Storage;

namespace FaaST.Bench;

/// <summary>
/// Part of ./faast bench cachelet: an invocation's local miss (1 MiB, in-process cachelet over the
/// scenario's Azurite) alone and under a flood of background prefetches (16 loops prefetching and
/// dropping 1 MiB objects without pause) and under the same flood at on-demand priority (what the
/// flood would cost without the storage-read scheduler), taking turns phase by phase. The scheduler
/// admits the miss at once and lets at most two background downloads share the link with it.
/// </summary>
public static class PrefetchFlood
{
    private const string Container = "bench-prefetch";
    private const int Size = 1 << 20;

    public static async Task RunAsync(BlobStore store, Report report, bool quick)
    {
        var reads = quick ? 20 : 60;
        await store.CreateContainerIfNotExistsAsync(Container);
        var bytes = new byte[Size];
        Random.Shared.NextBytes(bytes);
        for (var i = 0; i < 8; i++)
            await store.UploadAsync(Container, $"demand-{i}", bytes);
        for (var i = 0; i < 32; i++)
            await store.UploadAsync(Container, $"flood-{i}", bytes);

        await using var cache = new BlobCache($"bench-prefetch-{Environment.ProcessId}", new CachePolicy { Consistency = ConsistencyPreset.LocalSyncLocal });
        var alone = new List<double>();
        var flooded = new List<double>();
        var unprioritised = new List<double>();
        for (var round = 0; round < reads / 8; round++)
        {
            alone.AddRange(await MissesAsync(cache, store));
            flooded.AddRange(await UnderFloodAsync(cache, store, ReadPriority.Background));
            unprioritised.AddRange(await UnderFloodAsync(cache, store, ReadPriority.OnDemand));
        }
        var p50Alone = Median(alone);
        var p50Flooded = Median(flooded);
        report.Add("lm_1mb_inproc_p50_ms", p50Alone, "a local miss, in-process cachelet (phases alternating with the next row)");
        report.Add("lm_1mb_prefetch_flood_p50_ms", p50Flooded, "the same miss while 16 loops prefetch in the background");
        report.Add("lm_prefetch_flood_slowdown", p50Flooded / p50Alone, "flooded / alone (background reads yield, at most 2 run)");
        report.Add("lm_unprioritised_flood_slowdown", Median(unprioritised) / p50Alone, "the same flood at on-demand priority / alone (no yielding)");
    }

    private static async Task<List<double>> UnderFloodAsync(BlobCache cache, BlobStore store, ReadPriority priority)
    {
        using var stop = new CancellationTokenSource();
        var flood = Enumerable.Range(0, 16).Select(loop => FloodAsync(cache, store, loop, priority, stop.Token)).ToArray();
        await Task.Delay(50); // the flood is queued before the misses start
        var latencies = await MissesAsync(cache, store);
        await stop.CancelAsync();
        await Task.WhenAll(flood);
        return latencies;
    }

    /// <summary>Eight misses in a row (each key dropped first), their latencies in ms.</summary>
    private static async Task<List<double>> MissesAsync(BlobCache cache, BlobStore store)
    {
        var latencies = new List<double>();
        for (var i = 0; i < 8; i++)
        {
            cache.Index.Remove(new BlobKey(store.Endpoint.AbsoluteUri, Container, $"demand-{i}"));
            var started = Stopwatch.GetTimestamp();
            using (var read = await cache.ReadAsync(store, Container, $"demand-{i}", default))
            {
                if (read is not { Path: ReadPath.LocalMiss, Length: Size })
                    throw new InvalidOperationException($"demand-{i}: expected a 1 MiB local miss, got {read?.Path} of {read?.Length} bytes");
            }
            latencies.Add(Stopwatch.GetElapsedTime(started).TotalMilliseconds);
        }
        return latencies;
    }

    private static async Task FloodAsync(BlobCache cache, BlobStore store, int loop, ReadPriority priority, CancellationToken stop)
    {
        for (var n = loop; !stop.IsCancellationRequested; n += 16)
        {
            var name = $"flood-{n % 32}";
            try
            {
                await cache.PrefetchAsync(store, Container, name, priority, stop);
            }
            catch (OperationCanceledException) when (stop.IsCancellationRequested)
            {
                return;
            }
            cache.Index.Remove(new BlobKey(store.Endpoint.AbsoluteUri, Container, name));
        }
    }

    private static double Median(List<double> values)
    {
        values.Sort();
        return values[values.Count / 2];
    }
}
