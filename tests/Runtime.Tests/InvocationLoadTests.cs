using System.Diagnostics;
using FaaST.Runtime.Scaling;

namespace FaaST.Runtime.Tests;

/// <summary>The compute vote's measurements, driven with explicit Stopwatch timestamps (no clock runs).</summary>
public sealed class InvocationLoadTests
{
    private const long T0 = 1_000_000;

    private static long At(double seconds) => T0 + (long)(seconds * Stopwatch.Frequency);

    [Fact]
    public void Two_invocations_running_through_a_whole_interval_make_two_busy_slots()
    {
        var load = new InvocationLoad(T0);
        load.Started(At(0));
        load.Started(At(0));

        var sample = load.TakeSample(At(1));

        Assert.Equal(2.0, sample.BusySlots, 6);
        Assert.Equal(2, sample.InFlight);
        Assert.Equal(0, sample.Completed);
    }

    [Fact]
    public void An_invocation_counts_only_the_part_of_its_run_inside_the_interval()
    {
        var load = new InvocationLoad(T0);
        load.Started(At(0.5));
        load.TakeSample(At(1));        // [0, 1): busy 0.5 s
        load.Finished(At(0.5), At(1.25));

        var sample = load.TakeSample(At(2)); // [1, 2): busy 0.25 s of it

        Assert.Equal(0.25, sample.BusySlots, 6);
        Assert.Equal(1, sample.Completed);
        Assert.Equal(0, sample.InFlight);
        Assert.Equal(1.0, sample.InvocationsPerSecond, 6);
    }

    [Fact]
    public void The_median_latency_is_the_middle_invocations_to_within_its_bucket()
    {
        var load = new InvocationLoad(T0);
        double[] milliseconds = [1, 2, 2.1, 2.2, 50];
        foreach (var ms in milliseconds)
        {
            load.Started(At(0));
            load.Finished(At(0), At(ms / 1000));
        }

        var p50 = load.TakeSample(At(1)).LatencyP50Ms;

        Assert.InRange(p50, 2.1 * 0.88, 2.1 * 1.12);
    }

    [Fact]
    public void An_interval_without_invocations_reports_no_latency_rate_or_busy_slots()
    {
        var load = new InvocationLoad(T0);
        load.Started(At(0));
        load.Finished(At(0), At(0.01));
        load.TakeSample(At(1));

        var sample = load.TakeSample(At(3));

        Assert.Equal(new LoadSample(2, 0, 0, 0, 0), sample);
    }

    [Theory]
    [InlineData(0.000_004)]
    [InlineData(0.000_5)]
    [InlineData(0.02)]
    [InlineData(3.7)]
    [InlineData(1000)]
    public void A_duration_falls_in_a_bucket_whose_bounds_hold_it(double seconds)
    {
        var ticks = (long)(seconds * Stopwatch.Frequency);
        var bucket = InvocationLoad.Bucket(ticks);
        var us = seconds * 1e6;

        Assert.InRange(us, InvocationLoad.LowerMicroseconds(bucket) * 0.999, InvocationLoad.LowerMicroseconds(bucket + 1) * 1.001);
    }
}
