using FaaST.Hosting;

namespace FaaST.Runtime.Tests;

/// <summary>The ordered lifecycle on its own: stages, stop order, failed starts, states.</summary>
public sealed class LifecycleTests
{
    /// <summary>Records what happens, in order.</summary>
    private sealed class Journal
    {
        private readonly List<string> _entries = [];

        public IReadOnlyList<string> Entries
        {
            get
            {
                lock (_entries)
                    return _entries.ToArray();
            }
        }

        public void Add(string entry)
        {
            lock (_entries)
                _entries.Add(entry);
        }

        public ILifecycleObserver Observer(string name, Exception? failStart = null) => new LifecycleObserver(
            _ =>
            {
                Add("start " + name);
                return failStart is null ? Task.CompletedTask : Task.FromException(failStart);
            },
            _ =>
            {
                Add("stop " + name);
                return Task.CompletedTask;
            });

        public void Watch(IHostLifecycle lifecycle) => lifecycle.OnState((state, _) =>
        {
            Add("state " + state);
            return Task.CompletedTask;
        });
    }

    [Fact]
    public async Task Stages_start_in_ascending_order_and_stop_in_descending_order_whatever_order_they_subscribed_in()
    {
        var journal = new Journal();
        var lifecycle = new HostLifecycle();
        lifecycle.Subscribe("workers", ServiceLifecycleStage.Workers, journal.Observer("workers"));
        lifecycle.Subscribe("storage", ServiceLifecycleStage.Storage, journal.Observer("storage"));
        lifecycle.Subscribe("active", ServiceLifecycleStage.Active, journal.Observer("active"));
        lifecycle.Subscribe("cache", ServiceLifecycleStage.Cache, journal.Observer("cache"));
        lifecycle.Subscribe("telemetry", ServiceLifecycleStage.Telemetry, journal.Observer("telemetry"));

        await lifecycle.StartAsync();
        await lifecycle.StopAsync();

        Assert.Equal(
        [
            "start telemetry", "start storage", "start cache", "start workers", "start active",
            "stop active", "stop workers", "stop cache", "stop storage", "stop telemetry",
        ], journal.Entries);
    }

    [Fact]
    public async Task Observers_of_one_stage_start_in_subscription_order_and_stop_in_reverse()
    {
        var journal = new Journal();
        var lifecycle = new HostLifecycle();
        lifecycle.Subscribe("a", ServiceLifecycleStage.Cache, journal.Observer("a"));
        lifecycle.Subscribe("b", ServiceLifecycleStage.Cache, journal.Observer("b"));

        await lifecycle.StartAsync();
        await lifecycle.StopAsync();

        Assert.Equal(["start a", "start b", "stop b", "stop a"], journal.Entries);
    }

    [Fact]
    public async Task A_failing_start_stops_what_started_in_reverse_and_rethrows_the_components_own_exception()
    {
        var journal = new Journal();
        var lifecycle = new HostLifecycle();
        var failure = new InvalidOperationException("the worker runtime is missing");
        lifecycle.Subscribe("storage", ServiceLifecycleStage.Storage, journal.Observer("storage"));
        lifecycle.Subscribe("cache", ServiceLifecycleStage.Cache, journal.Observer("cache"));
        lifecycle.Subscribe("workers", ServiceLifecycleStage.Workers, journal.Observer("workers", failStart: failure));
        lifecycle.Subscribe("active", ServiceLifecycleStage.Active, journal.Observer("active"));
        journal.Watch(lifecycle);

        var thrown = await Assert.ThrowsAsync<InvalidOperationException>(() => lifecycle.StartAsync());

        Assert.Same(failure, thrown);
        // The failed component is not stopped (it did not start), nor is the one after it started.
        Assert.Equal(
        [
            "start storage", "start cache", "start workers",
            "state Draining", "state Unloading", "stop cache", "stop storage", "state Stopped",
        ], journal.Entries);
        Assert.Equal(LifecycleState.Stopped, lifecycle.State);
    }

    [Fact]
    public async Task Observers_see_started_draining_unloading_and_stopped_in_order_and_draining_stops_the_stages_that_take_work_first()
    {
        var journal = new Journal();
        var lifecycle = new HostLifecycle();
        lifecycle.Subscribe("workers", ServiceLifecycleStage.Workers, journal.Observer("workers"));
        lifecycle.Subscribe("peers", ServiceLifecycleStage.Peers, journal.Observer("peers"));
        lifecycle.Subscribe("http", ServiceLifecycleStage.Active, journal.Observer("http"));
        journal.Watch(lifecycle);

        await lifecycle.StartAsync();
        Assert.Equal(LifecycleState.Started, lifecycle.State);
        await lifecycle.StopAsync();

        Assert.Equal(
        [
            "start workers", "start peers", "start http", "state Started",
            "state Draining", "stop http", "stop peers",
            "state Unloading", "stop workers",
            "state Stopped",
        ], journal.Entries);
    }

    [Fact]
    public async Task A_draining_observer_is_awaited_before_any_stage_stops()
    {
        var journal = new Journal();
        var lifecycle = new HostLifecycle();
        lifecycle.Subscribe("http", ServiceLifecycleStage.Active, journal.Observer("http"));
        var release = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        lifecycle.OnState(async (state, _) =>
        {
            if (state != LifecycleState.Draining)
                return;
            journal.Add("draining observer waits");
            await release.Task;
            journal.Add("draining observer done");
        });
        await lifecycle.StartAsync();

        var stopping = lifecycle.StopAsync();
        Assert.False(stopping.IsCompleted);
        Assert.DoesNotContain("stop http", journal.Entries);
        release.SetResult();
        await stopping;

        Assert.Equal(["start http", "draining observer waits", "draining observer done", "stop http"], journal.Entries);
    }

    [Fact]
    public async Task A_throwing_observer_or_stop_is_logged_and_does_not_keep_the_other_stages_running()
    {
        var journal = new Journal();
        var lifecycle = new HostLifecycle();
        lifecycle.Subscribe("storage", ServiceLifecycleStage.Storage, journal.Observer("storage"));
        lifecycle.Subscribe("cache", ServiceLifecycleStage.Cache, new LifecycleObserver(_ => Task.CompletedTask, _ => throw new IOException("segment busy")));
        lifecycle.OnState((_, _) => throw new InvalidOperationException("observer bug"));
        await lifecycle.StartAsync();

        await lifecycle.StopAsync();

        Assert.Equal(["start storage", "stop storage"], journal.Entries);
        Assert.Equal(LifecycleState.Stopped, lifecycle.State);
    }

    [Fact]
    public async Task Stopping_twice_stops_each_stage_once_and_joining_after_start_is_refused_naming_the_component()
    {
        var journal = new Journal();
        var lifecycle = new HostLifecycle();
        lifecycle.Subscribe("storage", ServiceLifecycleStage.Storage, journal.Observer("storage"));
        await lifecycle.StartAsync();

        var late = Assert.Throws<InvalidOperationException>(() => lifecycle.Subscribe("prewarm", ServiceLifecycleStage.Workers, journal.Observer("prewarm")));
        Assert.Contains("prewarm", late.Message, StringComparison.Ordinal);

        await Task.WhenAll(lifecycle.StopAsync(), lifecycle.StopAsync());
        await lifecycle.StopAsync();
        Assert.Equal(["start storage", "stop storage"], journal.Entries);
    }

    [Fact]
    public async Task An_unsubscribed_state_observer_is_not_called()
    {
        var journal = new Journal();
        var lifecycle = new HostLifecycle();
        var subscription = lifecycle.OnState((state, _) =>
        {
            journal.Add("state " + state);
            return Task.CompletedTask;
        });
        await lifecycle.StartAsync();
        subscription.Dispose();
        await lifecycle.StopAsync();

        Assert.Equal(["state Started"], journal.Entries);
    }
}
