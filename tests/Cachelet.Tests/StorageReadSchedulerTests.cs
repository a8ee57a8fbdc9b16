using FaaST.Cachelet.Reads;

namespace FaaST.Cachelet.Tests;

/// <summary>
/// Storage reads by priority: the admission logic on its own, checked by what is admitted and what
/// waits (never by how long anything took).
/// </summary>
public sealed class StorageReadSchedulerTests
{
    private static readonly TimeSpan Generous = TimeSpan.FromSeconds(30);

    [Fact]
    public async Task An_on_demand_read_is_admitted_at_once_with_every_background_slot_taken_and_a_flood_waiting()
    {
        var scheduler = new StorageReadScheduler(maxBackground: 2);
        var running = new[] { await scheduler.AdmitAsync(ReadPriority.Background, null, default), await scheduler.AdmitAsync(ReadPriority.Background, null, default) };
        var flood = Enumerable.Range(0, 50).Select(_ => scheduler.AdmitAsync(ReadPriority.Background, null, default).AsTask()).ToArray();

        var onDemand = scheduler.AdmitAsync(ReadPriority.OnDemand, null, default);

        Assert.True(onDemand.IsCompletedSuccessfully); // admitted synchronously: it never waits for background reads
        Assert.Equal(1, scheduler.OnDemandRunning);
        Assert.Equal(2, scheduler.BackgroundRunning);
        Assert.Equal(50, scheduler.BackgroundWaiting);
        Assert.All(flood, f => Assert.False(f.IsCompleted));
        (await onDemand).Dispose();
        foreach (var r in running)
            r.Dispose();
        foreach (var f in flood)
            (await f.WaitAsync(Generous)).Dispose(); // each gets a slot once the one before it ends
        Assert.Equal(0, scheduler.BackgroundRunning);
        Assert.Equal(0, scheduler.BackgroundWaiting);
    }

    [Fact]
    public async Task A_background_read_waits_while_on_demand_reads_run_and_starts_when_the_last_of_them_ends()
    {
        var scheduler = new StorageReadScheduler();
        var first = scheduler.EnterOnDemand();
        var second = scheduler.EnterOnDemand();

        var background = scheduler.AdmitAsync(ReadPriority.Background, null, default).AsTask();
        await Eventually.TrueAsync(() => scheduler.BackgroundWaiting == 1, "the background read waits");
        first.Dispose();
        Assert.False(background.IsCompleted); // one on-demand read still runs: it still yields
        Assert.Equal(0, scheduler.BackgroundRunning);
        second.Dispose();

        using var admitted = await background.WaitAsync(Generous);
        Assert.Equal(ReadPriority.Background, admitted.Priority);
        Assert.Equal(1, scheduler.BackgroundRunning);
    }

    [Fact]
    public async Task No_more_background_reads_run_at_once_than_the_scheduler_allows()
    {
        var scheduler = new StorageReadScheduler(maxBackground: 3);
        var all = Enumerable.Range(0, 10).Select(_ => scheduler.AdmitAsync(ReadPriority.Background, null, default).AsTask()).ToList();
        await Eventually.TrueAsync(() => all.Count(t => t.IsCompleted) == 3 && scheduler.BackgroundWaiting == 7, "three admitted, seven waiting");
        var done = 0;
        while (all.Count > 0)
        {
            var admitted = all.Where(t => t.IsCompleted).ToList();
            Assert.InRange(admitted.Count, 1, 3);
            Assert.InRange(scheduler.BackgroundRunning, 1, 3);
            var next = admitted[0];
            all.Remove(next);
            (await next).Dispose();
            done++;
            if (all.Count > 0)
                await Eventually.TrueAsync(() => all.Count(t => t.IsCompleted) == Math.Min(3, all.Count), "the freed slot is taken");
        }
        Assert.Equal(10, done);
        Assert.Equal(0, scheduler.BackgroundRunning);
    }

    [Fact]
    public async Task A_background_read_an_invocation_now_waits_for_stops_yielding()
    {
        var scheduler = new StorageReadScheduler();
        using var onDemand = scheduler.EnterOnDemand();
        var promote = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        var background = scheduler.AdmitAsync(ReadPriority.Background, promote.Task, default).AsTask();
        await Eventually.TrueAsync(() => scheduler.BackgroundWaiting == 1, "the background read waits");

        promote.SetResult(); // a reader joined this fetch

        using var admitted = await background.WaitAsync(Generous);
        Assert.Equal(1, scheduler.OnDemandRunning); // admitted although an on-demand read still runs
    }

    [Fact]
    public async Task A_waiting_background_read_whose_caller_gives_up_leaves_no_slot_taken()
    {
        var scheduler = new StorageReadScheduler(maxBackground: 1);
        var onDemand = scheduler.EnterOnDemand();
        using var gaveUp = new CancellationTokenSource();
        var waiting = scheduler.AdmitAsync(ReadPriority.Background, null, gaveUp.Token).AsTask();
        await Eventually.TrueAsync(() => scheduler.BackgroundWaiting == 1, "the background read waits");

        await gaveUp.CancelAsync();
        await Assert.ThrowsAnyAsync<OperationCanceledException>(() => waiting.WaitAsync(Generous));
        onDemand.Dispose();

        using var next = await scheduler.AdmitAsync(ReadPriority.Background, null, default).AsTask().WaitAsync(Generous); // the one slot is free
        Assert.Equal(0, scheduler.BackgroundWaiting);
    }
}
