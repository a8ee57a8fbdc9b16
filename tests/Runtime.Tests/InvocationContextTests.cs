using FaaST.Runtime.Invocation;

namespace FaaST.Runtime.Tests;

/// <summary>What an invocation holds (cache pins) is released exactly once, however reads and the invocation's end interleave.</summary>
public sealed class InvocationContextTests
{
    [Fact]
    public async Task A_pin_taken_after_the_invocation_ended_is_released_at_once()
    {
        // Parallel input reads, one failing: the invocation ends (and is disposed) while a sibling read
        // is still running; when that read completes it holds its pin on the ended invocation.
        var invocation = new InvocationContext("f");
        var early = new Pin();
        invocation.Hold(early);
        await invocation.DisposeAsync();
        Assert.Equal(1, early.Releases);

        var late = new Pin();
        invocation.Hold(late);
        Assert.Equal(1, late.Releases);
        await invocation.DisposeAsync(); // a second dispose releases nothing twice
        Assert.Equal((1, 1), (early.Releases, late.Releases));
    }

    [Fact]
    public async Task Pins_held_by_parallel_reads_are_each_released_exactly_once()
    {
        const int Readers = 8, PinsEach = 20_000;
        var invocation = new InvocationContext("f");
        var pins = Enumerable.Range(0, Readers * PinsEach).Select(_ => new Pin()).ToArray();
        using var start = new Barrier(Readers);
        var readers = Enumerable.Range(0, Readers).Select(r => Task.Factory.StartNew(() =>
        {
            start.SignalAndWait();
            for (var i = 0; i < PinsEach; i++)
                invocation.Hold(pins[(r * PinsEach) + i]);
        }, CancellationToken.None, TaskCreationOptions.LongRunning, TaskScheduler.Default)).ToArray();
        await Task.WhenAll(readers);
        Assert.All(pins, p => Assert.Equal(0, p.Releases));

        await invocation.DisposeAsync();
        Assert.All(pins, p => Assert.Equal(1, p.Releases));
    }

    [Fact]
    public async Task Pins_held_while_the_invocation_ends_are_each_released_exactly_once()
    {
        const int Readers = 4, PinsEach = 20_000;
        for (var round = 0; round < 5; round++)
        {
            var invocation = new InvocationContext("f");
            var pins = Enumerable.Range(0, Readers * PinsEach).Select(_ => new Pin()).ToArray();
            using var start = new Barrier(Readers + 1);
            var readers = Enumerable.Range(0, Readers).Select(r => Task.Factory.StartNew(() =>
            {
                start.SignalAndWait();
                for (var i = 0; i < PinsEach; i++)
                    invocation.Hold(pins[(r * PinsEach) + i]);
            }, CancellationToken.None, TaskCreationOptions.LongRunning, TaskScheduler.Default)).ToArray();
            start.SignalAndWait();
            await invocation.DisposeAsync(); // amid the reads: some pins come before, some after
            await Task.WhenAll(readers);
            Assert.All(pins, p => Assert.Equal(1, p.Releases));
        }
    }

    /// <summary>A pin that counts its releases.</summary>
    private sealed class Pin : IDisposable
    {
        private int _releases;

        public int Releases => Volatile.Read(ref _releases);

        public void Dispose() => Interlocked.Increment(ref _releases);
    }
}
