using FaaST.Cachelet.Daemon;

namespace FaaST.Cachelet.Tests;

public class MemoryDaemonTests
{
    private static readonly int Self = Environment.ProcessId;

    [Fact]
    public void Reads_the_anonymous_resident_memory_of_a_live_process()
    {
        var rss = MemoryDaemon.ReadAnonymousRss(Self);
        Assert.True(rss > 1024 * 1024, $"RssAnon of this test process was {rss}");
        Assert.Equal(0, MemoryDaemon.ReadAnonymousRss(int.MaxValue));
    }

    [Fact]
    public void Evicts_what_heap_plus_cache_exceeds_below_the_headroom()
    {
        var heap = MemoryDaemon.ReadAnonymousRss(Self);
        long cached = 200L * 1024 * 1024;
        var asked = new List<long>();
        // Limit such that heap + cache is over the 90% threshold by roughly 100 MiB.
        var limit = (long)((heap + cached - 100L * 1024 * 1024) / 0.9);
        var daemon = new MemoryDaemon(() => [Self], limit, 0.10, () => cached, bytes =>
        {
            asked.Add(bytes);
            cached -= bytes;
            return bytes;
        });
        var freed = daemon.Check();
        Assert.Single(asked);
        Assert.InRange(freed, 50L * 1024 * 1024, 150L * 1024 * 1024);
        Assert.True(daemon.LastHeapBytes > 0);
    }

    [Fact]
    public void Leaves_the_cache_alone_under_the_threshold()
    {
        var daemon = new MemoryDaemon(() => [Self], 64L * 1024 * 1024 * 1024, 0.10, () => 1024, _ => throw new InvalidOperationException("must not evict"));
        Assert.Equal(0, daemon.Check());
    }

    [Fact]
    public void A_growing_heap_pushes_the_cache_out()
    {
        long cached = 64L * 1024 * 1024;
        var heapBefore = MemoryDaemon.ReadAnonymousRss(Self);
        var limit = (long)((heapBefore + cached + 32L * 1024 * 1024) / 0.9); // 32 MiB of room
        var daemon = new MemoryDaemon(() => [Self], limit, 0.10, () => cached, bytes =>
        {
            var freed = Math.Min(bytes, cached);
            cached -= freed;
            return freed;
        });
        Assert.Equal(0, daemon.Check());
        var grown = new byte[96 * 1024 * 1024];
        Array.Fill(grown, (byte)1); // touch it: resident
        Assert.True(daemon.Check() > 0);
        Assert.True(cached < 64L * 1024 * 1024);
        GC.KeepAlive(grown);
    }

    [Fact]
    public void Headroom_must_be_a_fraction()
    {
        Assert.Throws<ArgumentOutOfRangeException>(() => new MemoryDaemon(() => [], 1, 1.5, () => 0, _ => 0));
    }
}
