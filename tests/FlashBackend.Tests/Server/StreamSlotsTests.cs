using System.Collections.Concurrent;
using FaaST.FlashBackend.Server;

namespace FaaST.FlashBackend.Tests.Server;

public sealed class StreamSlotsTests
{
    [Fact]
    public async Task Slots_are_taken_up_to_the_bound_and_a_waiter_resumes_once_one_is_given_back()
    {
        var slots = new StreamSlots(3);
        Assert.True(slots.TryTake());
        Assert.True(slots.TryTake());
        Assert.True(slots.TryTake());
        Assert.False(slots.TryTake());

        ValueTask waiting = slots.WaitAsync(CancellationToken.None);
        Assert.False(waiting.IsCompleted);
        slots.Release();
        await waiting;
        Assert.False(slots.TryTake());   // the waiter took the slot given back
    }

    [Fact]
    public void Giving_back_more_slots_than_there_are_fails_naming_the_bound()
    {
        var slots = new StreamSlots(2);
        var e = Assert.Throws<InvalidOperationException>(slots.Release);
        Assert.Contains("the 2 there are", e.Message);
    }

    [Fact]
    public async Task A_waiting_stream_ends_when_its_call_is_cancelled()
    {
        var slots = new StreamSlots(1);
        Assert.True(slots.TryTake());
        using var cts = new CancellationTokenSource();
        ValueTask waiting = slots.WaitAsync(cts.Token);
        cts.Cancel();
        await Assert.ThrowsAnyAsync<OperationCanceledException>(async () => await waiting);
    }

    [Fact]
    public async Task A_taker_and_a_giver_on_two_threads_never_lose_a_wake_up_and_every_slot_comes_back()
    {
        // The request loop takes, another thread (the ring's, in the server) gives back: 200,000 items through 4 slots
        // make the taker wait at the bound over and over, the race the fences in WaitAsync and Release close. A lost
        // wake-up would leave the taker waiting forever; the token only ends such a hang (it never fires otherwise).
        const int items = 200_000;
        var slots = new StreamSlots(4);
        var taken = new BlockingCollection<int>();
        using var guard = new CancellationTokenSource(TimeSpan.FromMinutes(5));
        int given = 0;
        Task giver = Task.Factory.StartNew(() =>
        {
            foreach (int _ in taken.GetConsumingEnumerable(guard.Token))
            {
                slots.Release();
                given++;
            }
        }, TaskCreationOptions.LongRunning);
        for (int i = 0; i < items; i++)
        {
            await slots.WaitAsync(guard.Token);
            taken.Add(i);
        }
        taken.CompleteAdding();
        await giver;
        Assert.Equal(items, given);
        // Every slot is back: all 4 can be taken, and no fifth.
        await slots.WaitAllAsync(guard.Token);
        Assert.False(slots.TryTake());
    }
}
