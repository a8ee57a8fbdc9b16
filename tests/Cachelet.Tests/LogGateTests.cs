namespace FaaST.Cachelet.Tests;

/// <summary>The per-kind log rate limit, driven by explicit timestamps (no clock, no sleeps).</summary>
public class LogGateTests
{
    [Fact]
    public void The_first_line_passes_and_the_others_within_the_interval_are_held_back()
    {
        var gate = new LogGate(interval: 1000);
        Assert.True(gate.TryPass(5000, out var suppressed));
        Assert.Equal(0, suppressed);
        Assert.False(gate.TryPass(5001, out _));
        Assert.False(gate.TryPass(5999, out _));
    }

    [Fact]
    public void The_first_line_after_the_interval_passes_with_the_count_of_the_held_back_ones()
    {
        var gate = new LogGate(interval: 1000);
        Assert.True(gate.TryPass(5000, out _));
        for (var t = 5100; t < 6000; t += 100)
            Assert.False(gate.TryPass(t, out _));
        Assert.True(gate.TryPass(6000, out var suppressed));
        Assert.Equal(9, suppressed);
        Assert.False(gate.TryPass(6500, out _));
        Assert.True(gate.TryPass(7000, out suppressed));
        Assert.Equal(1, suppressed);
    }

    [Fact]
    public void Of_many_threads_at_once_exactly_one_line_passes_and_the_rest_are_counted()
    {
        var gate = new LogGate(interval: 1_000_000);
        var passed = 0;
        Parallel.For(0, 1000, i =>
        {
            if (gate.TryPass(10, out _))
                Interlocked.Increment(ref passed);
        });
        Assert.Equal(1, passed);
        Assert.True(gate.TryPass(2_000_000, out var suppressed));
        Assert.Equal(999, suppressed);
    }

    [Fact]
    public void A_zero_interval_is_refused()
    {
        Assert.Throws<ArgumentOutOfRangeException>(() => new LogGate(0));
    }
}
