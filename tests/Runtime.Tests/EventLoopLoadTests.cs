using FaaST.Protos.Worker;
using FaaST.Runtime.Scaling;
using FaaST.Runtime.Workers;

namespace FaaST.Runtime.Tests;

/// <summary>The compute vote's busy share of the workers' event loops (Node), from the totals they report.</summary>
public sealed class EventLoopLoadTests
{
    private readonly object _a = new();
    private readonly object _b = new();
    private IReadOnlyList<EventLoopReport> _reports = [];
    private long _now = 1000;

    private EventLoopLoad Load() => new(() => _reports, () => _now);

    private static EventLoopReport R(object worker, double active, double idle, bool stalled = false) =>
        new(worker, new EventLoopTotals(active, idle), stalled);

    [Fact]
    public void Without_reporting_workers_there_is_no_share_and_the_vote_falls_back_to_slots()
    {
        var load = Load();
        Assert.Null(load.TakeSample());
    }

    [Fact]
    public void A_worker_seen_first_counts_from_its_start_and_then_from_the_previous_sample()
    {
        var load = Load();
        _reports = [R(_a, 1000, 9000)];
        Assert.Equal(0.1, load.TakeSample()!.Value, 6);

        _reports = [R(_a, 1900, 9100)];

        Assert.Equal(0.9, load.TakeSample()!.Value, 6);
    }

    [Fact]
    public void Workers_are_weighted_by_the_time_each_reported_not_averaged_as_ratios()
    {
        var load = Load();
        _reports = [R(_a, 0, 0), R(_b, 0, 0)];
        load.TakeSample();

        // a: 900 of 1000 ms busy; b: 100 of 3000 ms busy (it reported more time) -> 1000 / 4000.
        _reports = [R(_a, 900, 100), R(_b, 100, 2900)];

        Assert.Equal(0.25, load.TakeSample()!.Value, 6);
    }

    [Fact]
    public void Without_a_report_since_the_previous_sample_the_previous_share_stands()
    {
        var load = Load();
        _reports = [R(_a, 0, 0)];
        load.TakeSample();
        _reports = [R(_a, 300, 700)];
        Assert.Equal(0.3, load.TakeSample()!.Value, 6);

        Assert.Equal(0.3, load.TakeSample()!.Value, 6);
    }

    [Fact]
    public void A_restarted_worker_counts_from_its_own_start_instead_of_a_negative_difference()
    {
        var load = Load();
        _reports = [R(_a, 5000, 5000)];
        load.TakeSample();
        _reports = [R(_a, 5500, 5500)];
        Assert.Equal(0.5, load.TakeSample()!.Value, 6);

        // The worker died; its successor reports from zero under another key.
        _reports = [R(_b, 10, 90)];
        Assert.Equal(0.1, load.TakeSample()!.Value, 6);
        _reports = [R(_b, 30, 170)];
        Assert.Equal(0.2, load.TakeSample()!.Value, 6);
    }

    [Fact]
    public void When_the_workers_stop_reporting_the_share_is_gone()
    {
        var load = Load();
        _reports = [R(_a, 0, 0)];
        load.TakeSample();
        _reports = [R(_a, 100, 100)];
        Assert.NotNull(load.TakeSample());

        _reports = [];

        Assert.Null(load.TakeSample());
    }

    [Fact]
    public void A_worker_report_that_shrinks_or_is_not_a_number_is_dropped_and_the_totals_stand()
    {
        var first = EventLoopTotals.After(null, new WorkerLoad { EventLoopActiveMs = 10, EventLoopIdleMs = 90 });
        Assert.Equal(new EventLoopTotals(10, 90), first);
        var grown = EventLoopTotals.After(first, new WorkerLoad { EventLoopActiveMs = 15, EventLoopIdleMs = 180 });
        Assert.Equal(new EventLoopTotals(15, 180), grown);

        Assert.Same(grown, EventLoopTotals.After(grown, new WorkerLoad { EventLoopActiveMs = 14, EventLoopIdleMs = 200 }));
        Assert.Same(grown, EventLoopTotals.After(grown, new WorkerLoad { EventLoopActiveMs = double.NaN, EventLoopIdleMs = 200 }));
        Assert.Same(grown, EventLoopTotals.After(grown, new WorkerLoad { EventLoopActiveMs = 20, EventLoopIdleMs = double.PositiveInfinity }));
        Assert.Null(EventLoopTotals.After(null, new WorkerLoad { EventLoopActiveMs = -1, EventLoopIdleMs = 5 }));
    }

    [Fact]
    public void A_worker_stalled_by_one_invocation_holding_its_loop_counts_as_busy_for_the_interval()
    {
        var load = Load();
        _reports = [R(_a, 100, 900), R(_b, 100, 900)];
        load.TakeSample();
        // a reported 1000 ms, all idle; b sent nothing (same totals) and has an invocation holding its loop.
        _now += 1000;
        _reports = [R(_a, 100, 1900), R(_b, 100, 900, stalled: true)];

        Assert.Equal(0.5, load.TakeSample()!.Value, 6);
    }

    [Fact]
    public void A_worker_without_a_new_report_that_is_not_stalled_adds_nothing()
    {
        var load = Load();
        _reports = [R(_a, 100, 900), R(_b, 100, 900)];
        load.TakeSample();
        _now += 1000;
        _reports = [R(_a, 100, 1900), R(_b, 100, 900)];

        Assert.Equal(0.0, load.TakeSample()!.Value, 6);
    }
}
