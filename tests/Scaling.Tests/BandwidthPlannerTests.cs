namespace FaaST.Scaling.Tests;

public sealed class BandwidthPlannerTests
{
    // The paper's VMs (§6.5): 90 MB/s to storage, 750 MB/s between instances; a 2 s instance start.
    private static readonly BandwidthSnapshot Paper = new(2.0, 90e6, 750e6);

    [Fact]
    public void A_small_object_never_scales_out()
    {
        Assert.Equal(1, BandwidthPlanner.PlanInstances(400_000, running: 1, Paper, maxInstances: 8));
    }

    [Fact]
    public void A_small_object_stays_on_one_instance_even_when_starting_one_is_instant()
    {
        // 400 KB: a second instance saves about 2 ms, far less than even a 50 ms start costs.
        var quickStart = Paper with { LoadSeconds = 0.05 };
        Assert.Equal(1, BandwidthPlanner.PlanInstances(400_000, running: 1, quickStart, maxInstances: 8));
    }

    [Fact]
    public void A_large_object_adds_instances_until_the_next_one_saves_less_than_ten_percent()
    {
        const long size = 800_000_000;
        var n = BandwidthPlanner.PlanInstances(size, running: 1, Paper, maxInstances: 64);
        Assert.True(n > 1, $"800 MB chose {n}");
        var chosen = BandwidthPlanner.DownloadSeconds(size, n, 1, Paper);
        var previous = BandwidthPlanner.DownloadSeconds(size, n - 1, 1, Paper);
        var next = BandwidthPlanner.DownloadSeconds(size, n + 1, 1, Paper);
        Assert.True(previous - chosen >= BandwidthPlanner.MinImprovement * previous, "the last instance added saved at least 10 %");
        Assert.True(chosen - next < BandwidthPlanner.MinImprovement * chosen, "one more would have saved less than 10 %");
    }

    [Fact]
    public void The_cap_bounds_the_plan()
    {
        Assert.Equal(3, BandwidthPlanner.PlanInstances(800_000_000, running: 1, Paper, maxInstances: 3));
    }

    [Fact]
    public void A_rising_download_time_stops_the_iteration_at_the_running_count()
    {
        // A start so slow that T_DR(running + 1) is above T_DR(running): the running instances are all it uses.
        var slowStart = Paper with { LoadSeconds = 1000 };
        Assert.Equal(4, BandwidthPlanner.PlanInstances(800_000_000, running: 4, slowStart, maxInstances: 16));
    }

    [Fact]
    public void Running_instances_cost_no_load_time()
    {
        var withLoad = BandwidthPlanner.DownloadSeconds(800_000_000, 4, running: 1, Paper);
        var running = BandwidthPlanner.DownloadSeconds(800_000_000, 4, running: 4, Paper);
        Assert.Equal(Paper.LoadSeconds, withLoad - running, 9);
    }

    [Fact]
    public void The_formula_is_the_papers()
    {
        // S/N from storage, the rest from the instances: 200 MB / 90 MB/s + 600 MB / 750 MB/s.
        Assert.Equal(200e6 / 90e6 + 600e6 / 750e6, BandwidthPlanner.DownloadSeconds(800_000_000, 4, 4, Paper), 9);
    }

    [Fact]
    public void Slower_links_between_instances_choose_fewer_instances()
    {
        var fast = BandwidthPlanner.PlanInstances(800_000_000, 1, Paper, 64);
        var slow = BandwidthPlanner.PlanInstances(800_000_000, 1, Paper with { InstanceBytesPerSecond = 120e6 }, 64);
        Assert.True(slow < fast, $"slow links chose {slow}, fast ones {fast}");
    }
}

public sealed class ProfiledBandwidthTests
{
    [Fact]
    public void An_unmeasured_profile_holds_the_documented_defaults()
    {
        var profile = new ProfiledBandwidth();
        var defaults = new ProfiledBandwidthDefaults();
        Assert.Equal(new BandwidthSnapshot(defaults.LoadSeconds, defaults.StorageBytesPerSecond, defaults.InstanceBytesPerSecond), profile.Snapshot());
    }

    [Fact]
    public void The_first_measurement_replaces_the_default()
    {
        var profile = new ProfiledBandwidth();
        profile.ObserveStorageTransfer(50_000_000, TimeSpan.FromSeconds(1));
        Assert.Equal(50e6, profile.StorageBytesPerSecond, 3);
    }

    [Fact]
    public void Later_measurements_are_averaged_with_their_weight()
    {
        var profile = new ProfiledBandwidth(weight: 0.5);
        profile.ObserveInstanceTransfer(100_000_000, TimeSpan.FromSeconds(1));
        profile.ObserveInstanceTransfer(300_000_000, TimeSpan.FromSeconds(1));
        Assert.Equal(200e6, profile.InstanceBytesPerSecond, 3);
    }

    [Fact]
    public void Observed_load_times_update_the_load_time()
    {
        var profile = new ProfiledBandwidth(weight: 0.5);
        profile.ObserveLoad(TimeSpan.FromSeconds(4));
        profile.ObserveLoad(TimeSpan.FromSeconds(2));
        Assert.Equal(3.0, profile.LoadSeconds, 9);
        Assert.Equal((2L, 0L, 0L), profile.Observations);
    }

    [Fact]
    public void Empty_transfers_are_not_measurements()
    {
        var profile = new ProfiledBandwidth();
        profile.ObserveStorageTransfer(0, TimeSpan.FromSeconds(1));
        profile.ObserveStorageTransfer(1000, TimeSpan.Zero);
        Assert.Equal(new ProfiledBandwidthDefaults().StorageBytesPerSecond, profile.StorageBytesPerSecond);
    }

    [Fact]
    public void A_zero_bandwidth_default_is_refused_with_its_name()
    {
        var e = Assert.Throws<ArgumentOutOfRangeException>(() => new ProfiledBandwidth(new ProfiledBandwidthDefaults { StorageBytesPerSecond = 0 }));
        Assert.Contains("StorageBytesPerSecond", e.Message, StringComparison.Ordinal);
    }
}
