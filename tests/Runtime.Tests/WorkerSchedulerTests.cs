using FaaST.Runtime.Workers;

namespace FaaST.Runtime.Tests;

/// <summary>The default scheduling policy against fake workers.</summary>
public sealed class WorkerSchedulerTests
{
    private sealed record FakeWorker(bool IsReady, int InFlight) : IWorkerLoad;

    private static readonly FunctionDefinition Function = new() { Name = "F", Directory = "/app/F", ScriptFile = "/app/F/__init__.py", Bindings = [] };

    [Fact]
    public void The_default_scheduler_picks_the_ready_worker_with_the_fewest_invocations_in_flight()
    {
        var scheduler = new FewestInFlightScheduler();
        IWorkerLoad[] workers = [new FakeWorker(true, 3), new FakeWorker(true, 1), new FakeWorker(true, 2)];
        // Wherever the rotating start falls, the least busy one wins.
        for (var i = 0; i < workers.Length * 2; i++)
            Assert.Equal(1, scheduler.Pick(workers, Function));
    }

    [Fact]
    public void The_default_scheduler_never_picks_a_worker_that_is_not_ready()
    {
        var scheduler = new FewestInFlightScheduler();
        IWorkerLoad[] workers = [new FakeWorker(false, 0), new FakeWorker(true, 5), new FakeWorker(false, 0)];
        for (var i = 0; i < workers.Length * 2; i++)
            Assert.Equal(1, scheduler.Pick(workers, Function));
    }

    [Fact]
    public void The_default_scheduler_answers_none_when_no_worker_is_ready()
    {
        var scheduler = new FewestInFlightScheduler();
        Assert.Equal(-1, scheduler.Pick([new FakeWorker(false, 0), new FakeWorker(false, 0)], Function));
        Assert.Equal(-1, scheduler.Pick([], Function));
    }

    [Fact]
    public void The_default_scheduler_spreads_picks_over_equally_loaded_workers()
    {
        var scheduler = new FewestInFlightScheduler();
        IWorkerLoad[] workers = [new FakeWorker(true, 0), new FakeWorker(true, 0), new FakeWorker(true, 0)];
        var picked = Enumerable.Range(0, workers.Length).Select(_ => scheduler.Pick(workers, Function)).Order().ToArray();
        Assert.Equal([0, 1, 2], picked);
    }
}
