using FaaST.Prewarm.Records;
using FaaST.Prewarm.Selection;

namespace FaaST.Prewarm.Tests;

public sealed class ObjectSelectorTests
{
    private static readonly DateTimeOffset Now = new(2026, 11, 28, 6, 0, 0, TimeSpan.Zero);
    private static readonly SelectionRules Half = new(0.5);

    private static ObjectRecord Obj(string blob, long size = 100, string etag = "e1", long localHits = 0, long remoteHits = 0,
        long localMisses = 0, long remoteMisses = 0, long produced = 0) =>
        new("acct", "c", blob, size, etag, localHits, remoteHits, localMisses, remoteMisses, produced, TimeSpan.Zero);

    private static UnloadRecord At(TimeSpan before, params ObjectRecord[] objects) => new("app", "i", Now - before, objects);

    private static string[] Blobs(IReadOnlyList<SelectedObject> s) => [.. s.Select(o => o.Blob)];

    [Fact]
    public void An_object_whose_local_or_remote_hit_rate_exceeds_the_threshold_is_selected_and_one_at_or_below_it_is_not()
    {
        var history = new[] { At(TimeSpan.FromMinutes(5),
            Obj("local", localHits: 3, localMisses: 1),                  // local 0.75
            Obj("remote", remoteHits: 3, remoteMisses: 1),               // remote 0.75
            Obj("at", localHits: 1, remoteHits: 1, localMisses: 2),      // 0.25 each, 0.5 together: neither exceeds
            Obj("below", localHits: 1, localMisses: 3)) };               // 0.25
        Assert.Equal(["local", "remote"], Blobs(ObjectSelector.Select(history, Now, TimeSpan.FromHours(1), new SelectionRules(0.5))));
        Assert.Equal(["at", "below", "local", "remote"], Blobs(ObjectSelector.Select(history, Now, TimeSpan.FromHours(1), new SelectionRules(0.2))));
        Assert.Empty(ObjectSelector.Select(history, Now, TimeSpan.FromHours(1), new SelectionRules(0.75)));
    }

    [Fact]
    public void A_single_read_is_selected_by_its_hit_rate_alone()
    {
        // One access each: only the hit rate can select them.
        var history = new[] { At(TimeSpan.FromMinutes(5),
            Obj("local", localHits: 1), Obj("remote", remoteHits: 1), Obj("miss", localMisses: 1), Obj("remote-miss", remoteMisses: 1)) };
        Assert.Equal(["local", "remote"], Blobs(ObjectSelector.Select(history, Now, TimeSpan.FromHours(1), Half)));
        Assert.Empty(ObjectSelector.Select(history, Now, TimeSpan.FromHours(1), new SelectionRules(1.0)));
    }

    [Fact]
    public void An_object_accessed_once_in_each_of_two_records_is_selected_as_reused_across_periods()
    {
        var history = new[]
        {
            At(TimeSpan.FromMinutes(50), Obj("model", localMisses: 1), Obj("input-1", localMisses: 1)),
            At(TimeSpan.FromMinutes(10), Obj("model", remoteMisses: 1), Obj("input-2", localMisses: 1)),
        };
        Assert.Equal(["model"], Blobs(ObjectSelector.Select(history, Now, TimeSpan.FromHours(1), Half)));
    }

    [Fact]
    public void An_object_produced_in_one_period_and_read_in_the_next_is_reused_and_repeats_within_one_period_are_not()
    {
        var history = new[]
        {
            At(TimeSpan.FromMinutes(30), Obj("out", produced: 1), Obj("scratch", produced: 1, localMisses: 3)),
            At(TimeSpan.FromMinutes(10), Obj("out", localMisses: 1), Obj("listed", size: 5)),   // "listed": no access at all
            At(TimeSpan.FromMinutes(5), Obj("listed", size: 5)),
        };
        var selected = ObjectSelector.Select(history, Now, TimeSpan.FromHours(1), Half);
        var o = Assert.Single(selected);
        Assert.Equal(("out", 2L), (o.Blob, o.Accesses));
    }

    [Fact]
    public void An_excluded_object_is_never_selected_however_hot()
    {
        var history = new[] { At(TimeSpan.FromMinutes(5), Obj("secret", localHits: 100), Obj("model", localHits: 2)) };
        var rules = Half with { Excluded = (container, blob) => container == "c" && blob == "secret" };
        Assert.Equal(["model"], Blobs(ObjectSelector.Select(history, Now, TimeSpan.FromHours(1), rules)));
    }

    [Fact]
    public void Selection_is_ordered_by_accesses_then_size_then_key()
    {
        var history = new[] { At(TimeSpan.FromMinutes(5),
            Obj("b", size: 10, localHits: 2), Obj("a", size: 10, localHits: 2), Obj("small", size: 1, localHits: 2),
            Obj("top", size: 1000, localHits: 9)) };
        Assert.Equal(["top", "small", "a", "b"], Blobs(ObjectSelector.Select(history, Now, TimeSpan.FromHours(1), Half)));
    }

    [Fact]
    public void MaxBytes_skips_an_object_that_does_not_fit_and_keeps_smaller_ones_after_it()
    {
        var history = new[] { At(TimeSpan.FromMinutes(5),
            Obj("first", size: 60, localHits: 9), Obj("big", size: 50, localHits: 8), Obj("fits", size: 40, localHits: 7),
            Obj("over", size: 1, localHits: 6)) };
        var selected = ObjectSelector.Select(history, Now, TimeSpan.FromHours(1), Half with { MaxBytes = 100 });
        Assert.Equal(["first", "fits"], Blobs(selected));
        Assert.Empty(ObjectSelector.Select(history, Now, TimeSpan.FromHours(1), Half with { MaxBytes = 0 }));
    }

    [Fact]
    public void Only_records_unloaded_within_the_window_before_now_are_merged()
    {
        var history = new[]
        {
            At(TimeSpan.FromMinutes(61), Obj("old", localHits: 5)),
            At(TimeSpan.FromMinutes(60), Obj("edge", localHits: 5)),
            At(TimeSpan.FromMinutes(-1), Obj("future", localHits: 5)),
            At(TimeSpan.Zero, Obj("now", localHits: 5)),
        };
        Assert.Equal(["edge", "now"], Blobs(ObjectSelector.Select(history, Now, TimeSpan.FromHours(1), Half)));
    }

    [Fact]
    public void A_merged_object_takes_the_newest_records_version_and_the_sum_of_the_counts()
    {
        var history = new[]
        {
            At(TimeSpan.FromMinutes(10), Obj("m", size: 200, etag: "new", localHits: 1)),
            At(TimeSpan.FromMinutes(30), Obj("m", size: 100, etag: "old", localHits: 2, localMisses: 1)),
        };
        var m = Assert.Single(ObjectSelector.Select(history, Now, TimeSpan.FromHours(1), Half));
        Assert.Equal(("new", 200L, 4L), (m.ETag, m.Size, m.Accesses));
    }

    [Fact]
    public void WindowFor_is_eight_median_spacings_clamped_to_an_hour_and_maxAge()
    {
        var maxAge = TimeSpan.FromDays(7);
        UnloadRecord[] Every(TimeSpan spacing, int n) => [.. Enumerable.Range(0, n).Select(i => At(spacing * i))];
        Assert.Equal(TimeSpan.FromHours(16), ObjectSelector.WindowFor(Every(TimeSpan.FromHours(2), 5), maxAge));
        Assert.Equal(TimeSpan.FromHours(1), ObjectSelector.WindowFor(Every(TimeSpan.FromMinutes(1), 5), maxAge));
        Assert.Equal(maxAge, ObjectSelector.WindowFor(Every(TimeSpan.FromDays(2), 3), maxAge));
        // The median ignores one long pause: spacings 1 h, 1 h, 30 h.
        UnloadRecord[] uneven = [At(TimeSpan.Zero), At(TimeSpan.FromHours(1)), At(TimeSpan.FromHours(2)), At(TimeSpan.FromHours(32))];
        Assert.Equal(TimeSpan.FromHours(8), ObjectSelector.WindowFor(uneven, maxAge));
    }

    [Fact]
    public void WindowFor_is_maxAge_with_fewer_than_two_records()
    {
        Assert.Equal(TimeSpan.FromDays(3), ObjectSelector.WindowFor([], TimeSpan.FromDays(3)));
        Assert.Equal(TimeSpan.FromDays(3), ObjectSelector.WindowFor([At(TimeSpan.Zero)], TimeSpan.FromDays(3)));
    }
}
