using System.Net;
using FaaST.ScaleController.Frontend;
using Microsoft.Extensions.Time.Testing;

namespace FaaST.ScaleController.Tests.Frontend;

/// <summary>Invocations that arrive with no ready instance: the queue, its bounds, cold starts; and draining.</summary>
public sealed class QueueingTests
{
    [Fact]
    public async Task A_request_waiting_with_no_instance_is_forwarded_when_one_is_added()
    {
        await using var backend = await Backend.StartAsync("late");
        await using var host = await FrontendHost.StartAsync();

        var waiting = host.Client.GetStringAsync("/echo");
        await Eventually.TrueAsync(() => host.Frontend.Queued == 1, "the request is queued");
        Assert.False(waiting.IsCompleted);
        host.Frontend.AddInstance(backend.Endpoint);

        Assert.Contains("instance=late", await waiting);
        Assert.Equal(0, host.Frontend.Queued);
    }

    [Fact]
    public async Task A_request_queued_past_the_queue_timeout_gets_503_with_retry_after_and_a_one_line_reason()
    {
        var time = new FakeTimeProvider(DateTimeOffset.Parse("2026-11-26T12:00:00Z", System.Globalization.CultureInfo.InvariantCulture));
        await using var host = await FrontendHost.StartAsync(new FrontendOptions { QueueTimeout = TimeSpan.FromSeconds(30), RetryAfter = TimeSpan.FromSeconds(2) }, time);

        var waiting = host.Client.GetAsync("/api/work");
        await Eventually.TrueAsync(() => host.Frontend.Queued == 1, "the request is queued");
        time.Advance(TimeSpan.FromSeconds(30));
        using var response = await waiting;

        Assert.Equal(HttpStatusCode.ServiceUnavailable, response.StatusCode);
        Assert.Equal(TimeSpan.FromSeconds(2), response.Headers.RetryAfter?.Delta);
        Assert.Equal("app \"app\" has no ready instance after 30 s\n", await response.Content.ReadAsStringAsync());
        Assert.Equal(1, host.Frontend.TakeStats().Failed);
    }

    [Fact]
    public async Task A_request_beyond_a_full_queue_gets_503_at_once()
    {
        await using var host = await FrontendHost.StartAsync(new FrontendOptions { MaxQueueLength = 1, QueueTimeout = TimeSpan.FromMinutes(5) });
        var first = host.Client.GetAsync("/one");
        await Eventually.TrueAsync(() => host.Frontend.Queued == 1, "the first request is queued");

        using var second = await host.Client.GetAsync("/two");

        Assert.Equal(HttpStatusCode.ServiceUnavailable, second.StatusCode);
        Assert.NotNull(second.Headers.RetryAfter);
        Assert.Equal("app \"app\" has no ready instance and 1 invocations already waiting for one (the queue is full)\n", await second.Content.ReadAsStringAsync());
        Assert.False(first.IsCompleted);
        await host.Frontend.DisposeAsync(); // answers the queued one
        using var firstResponse = await first;
        Assert.Equal(HttpStatusCode.ServiceUnavailable, firstResponse.StatusCode);
        Assert.Equal("app \"app\"'s frontend is shutting down\n", await firstResponse.Content.ReadAsStringAsync());
    }

    [Fact]
    public async Task A_burst_with_no_instance_calls_cold_start_once_and_every_request_is_then_served()
    {
        await using var host = await FrontendHost.StartAsync();
        await using var backend = await Backend.StartAsync("cold");
        var calls = 0;
        host.Frontend.ColdStart = async ct =>
        {
            Interlocked.Increment(ref calls);
            // The platform would start a process here; the whole burst queues meanwhile.
            await Eventually.TrueAsync(() => host.Frontend.Queued == 20, "the whole burst is queued");
            host.Frontend.AddInstance(backend.Endpoint);
        };

        var answers = await Task.WhenAll(Enumerable.Range(0, 20).Select(i => host.Client.GetStringAsync($"/echo?i={i}")));

        Assert.Equal(1, Volatile.Read(ref calls));
        Assert.All(answers, a => Assert.Contains("instance=cold", a));
        Assert.Equal(20, backend.Hits);
    }

    [Fact]
    public async Task After_a_failed_cold_start_the_next_request_asks_again_and_both_queued_requests_are_served()
    {
        await using var host = await FrontendHost.StartAsync();
        await using var backend = await Backend.StartAsync("second-try");
        var calls = 0;
        host.Frontend.ColdStart = _ =>
        {
            if (Interlocked.Increment(ref calls) == 1)
                throw new InvalidOperationException("the instance process exited with code 1");
            host.Frontend.AddInstance(backend.Endpoint);
            return Task.CompletedTask;
        };

        var first = host.Client.GetStringAsync("/echo?n=1");
        await Eventually.TrueAsync(() => host.Logs.Entries.Any(e => e.EventId == 8010), "the first cold start failed and was logged");
        Assert.Equal(1, host.Frontend.Queued);
        var second = host.Client.GetStringAsync("/echo?n=2");

        Assert.Contains("instance=second-try", await first);
        Assert.Contains("instance=second-try", await second);
        Assert.Equal(2, Volatile.Read(ref calls));
    }

    [Fact]
    public async Task A_draining_instance_gets_no_new_requests_and_its_drain_completes_when_its_last_request_ends()
    {
        await using var old = await Backend.StartAsync("old");
        await using var fresh = await Backend.StartAsync("new");
        await using var host = await FrontendHost.StartAsync();
        host.Frontend.AddInstance(old.Endpoint);
        var inFlight = host.Client.GetStringAsync("/slow");
        await Eventually.TrueAsync(() => old.Arrived == 1, "a request is in flight on the old instance");
        host.Frontend.AddInstance(fresh.Endpoint);

        var drain = host.Frontend.DrainInstanceAsync("old", CancellationToken.None);
        var during = await Task.WhenAll(Enumerable.Range(0, 6).Select(_ => host.Client.GetStringAsync("/echo")));

        Assert.All(during, a => Assert.Contains("instance=new", a));
        Assert.Equal(1, old.Hits);
        Assert.False(drain.IsCompleted);
        Assert.Contains(host.Frontend.Instances, i => i.Id == "old" && i.State == InstanceRouting.Draining && i.Outstanding == 1);
        old.Gate.SetResult();
        Assert.Equal("old", await inFlight);
        await drain.WaitAsync(TimeSpan.FromSeconds(60));
        host.Frontend.RemoveInstance("old");
        Assert.Equal(["new"], host.Frontend.Instances.Select(i => i.Id));
    }

    [Fact]
    public async Task Draining_an_idle_instance_completes_at_once()
    {
        await using var backend = await Backend.StartAsync("idle");
        await using var host = await FrontendHost.StartAsync();
        host.Frontend.AddInstance(backend.Endpoint);

        await host.Frontend.DrainInstanceAsync("idle", CancellationToken.None).WaitAsync(TimeSpan.FromSeconds(60));

        Assert.Equal(InstanceRouting.Draining, Assert.Single(host.Frontend.Instances).State);
    }
}
