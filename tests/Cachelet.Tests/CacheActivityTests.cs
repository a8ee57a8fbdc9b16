using FaaST.Cachelet.Index;

namespace FaaST.Cachelet.Tests;

/// <summary>The per-interval activity the scale votes are made of (Faa$T §4's cache-size and bandwidth votes).</summary>
public sealed class CacheActivityTests
{
    private static BlobKey Key(string blob) => IndexFixture.Key(blob);

    [Fact]
    public void An_object_evicted_twice_since_the_previous_query_is_counted_once_among_all_evictions()
    {
        using var f = new IndexFixture();
        f.Add("a");
        f.Add("b");
        Assert.Equal(2, f.Index.Evict(200).Objects);
        f.Add("a");
        Assert.Equal(1, f.Index.Evict(100).Objects);

        var activity = f.Index.TakeActivity(largeObjectBytes: 1 << 20);

        Assert.Equal(3, activity.Evictions);
        Assert.Equal(1, activity.ObjectsEvictedTwice);
    }

    [Fact]
    public void A_query_counts_only_what_happened_since_the_previous_one()
    {
        using var f = new IndexFixture();
        f.Add("a");
        f.Index.Evict(100);
        f.Index.RecordLocalHit(Key("a"));
        f.Index.TakeActivity(largeObjectBytes: 1 << 20);
        f.Add("a");
        f.Index.Evict(100); // a second eviction of a, but the first was in the previous interval

        var activity = f.Index.TakeActivity(largeObjectBytes: 1 << 20);

        Assert.Equal(new CacheActivity(Evictions: 1, ObjectsEvictedTwice: 0, Accesses: 0, LargeObjectAccesses: 0), activity);
    }

    [Fact]
    public void Accesses_are_counted_and_those_to_large_cached_objects_separately()
    {
        using var f = new IndexFixture();
        f.Add("big", length: 4096);
        f.Add("small", length: 100);
        for (var i = 0; i < 3; i++)
            f.Index.RecordLocalHit(Key("big"));
        f.Index.RecordRemoteMiss(Key("small"));
        f.Index.RecordWrite(Key("small"));

        var activity = f.Index.TakeActivity(largeObjectBytes: 4096);

        Assert.Equal(5, activity.Accesses);
        Assert.Equal(3, activity.LargeObjectAccesses);
        Assert.Equal(0, f.Index.TakeActivity(largeObjectBytes: 4096).Accesses);
    }
}
