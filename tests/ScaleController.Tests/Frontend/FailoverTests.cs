using System.Net;
using System.Net.Sockets;
using FaaST.ScaleController.Frontend;

namespace FaaST.ScaleController.Tests.Frontend;

/// <summary>Instances that refuse connections or die mid-request: what is retried, what gets 502.</summary>
public sealed class FailoverTests
{
    [Fact]
    public async Task A_dead_instance_is_taken_out_of_rotation_and_reported_and_the_request_succeeds_on_another()
    {
        await using var dead = await Backend.StartAsync("dead");
        await using var alive = await Backend.StartAsync("alive");
        await using var host = await FrontendHost.StartAsync();
        host.Frontend.AddInstance(dead.Endpoint);
        host.Frontend.AddInstance(alive.Endpoint);
        var failed = new List<(string Id, Exception Error)>();
        host.Frontend.InstanceFailed += (id, e) => { lock (failed) failed.Add((id, e)); };
        await dead.StopAsync();

        var answers = new List<string>();
        for (var i = 0; i < 4; i++)
            answers.Add(await host.Client.GetStringAsync("/echo"));

        Assert.All(answers, a => Assert.Contains("instance=alive", a));
        var failure = Assert.Single(failed);
        Assert.Equal("dead", failure.Id);
        Assert.Equal(["alive"], host.Frontend.Instances.Select(i => i.Id));
        Assert.Contains(host.Logs.Entries, e => e.EventId == 8004 && e.Text.Contains("dead", StringComparison.Ordinal));
    }

    [Fact]
    public async Task A_post_whose_instance_dies_mid_request_gets_502_and_is_not_sent_again()
    {
        await using var dying = await Backend.StartAsync("dying");
        dying.Dying = true;
        await using var host = await FrontendHost.StartAsync();
        host.Frontend.AddInstance(dying.Endpoint);

        using var response = await host.Client.PostAsync("/api/work", new ByteArrayContent(new byte[4096]));
        var body = await response.Content.ReadAsStringAsync();

        Assert.Equal(HttpStatusCode.BadGateway, response.StatusCode);
        Assert.StartsWith("app \"app\": instance dying failed while handling POST /api/work", body, StringComparison.Ordinal);
        Assert.EndsWith("not retried: the request is not idempotent or has a body\n", body, StringComparison.Ordinal);
        Assert.Single(body.TrimEnd('\n').Split('\n'));
        Assert.Equal(1, dying.Hits);
        Assert.Equal(1, host.Frontend.TakeStats().Failed);
    }

    [Fact]
    public async Task A_get_whose_instance_dies_mid_request_is_sent_again_to_another_instance()
    {
        await using var dying = await Backend.StartAsync("dying");
        dying.Dying = true;
        await using var alive = await Backend.StartAsync("alive");
        await using var host = await FrontendHost.StartAsync();
        host.Frontend.AddInstance(dying.Endpoint);
        host.Frontend.AddInstance(alive.Endpoint);

        // Two in a row: the round robin among equally idle instances puts one of them on "dying" first.
        for (var i = 0; i < 2; i++)
        {
            using var response = await host.Client.GetAsync("/api/work");
            Assert.Equal(HttpStatusCode.OK, response.StatusCode);
            Assert.Equal(["alive"], response.Headers.GetValues("X-Instance"));
        }

        Assert.True(dying.Hits >= 1, $"dying got {dying.Hits} requests");
        Assert.Equal(2, host.Frontend.Instances.Count); // not a connect failure: it stays in rotation
    }

    [Fact]
    public async Task A_response_that_breaks_after_it_started_aborts_the_clients_connection()
    {
        await using var dying = await Backend.StartAsync("dying");
        await using var host = await FrontendHost.StartAsync();
        host.Frontend.AddInstance(dying.Endpoint);

        using var response = await host.Client.GetAsync("/die-mid-response", HttpCompletionOption.ResponseHeadersRead);
        Assert.Equal(HttpStatusCode.OK, response.StatusCode);
        var stream = await response.Content.ReadAsStreamAsync();
        dying.Gate.SetResult();

        await Assert.ThrowsAnyAsync<IOException>(() => stream.CopyToAsync(Stream.Null));
        Assert.Equal(1, dying.Hits);
    }

    [Fact]
    public async Task An_instance_that_does_not_accept_within_the_connect_timeout_is_taken_out_of_rotation()
    {
        // A listener that never accepts, its accept queue filled: the kernel drops further SYNs, so a connect hangs.
        using var stuck = new Socket(AddressFamily.InterNetwork, SocketType.Stream, ProtocolType.Tcp);
        stuck.Bind(new IPEndPoint(IPAddress.Loopback, 0));
        stuck.Listen(0);
        var endpoint = (IPEndPoint)stuck.LocalEndPoint!;
        var fillers = new List<Socket>();
        try
        {
            for (var i = 0; i < 4; i++)
            {
                var filler = new Socket(AddressFamily.InterNetwork, SocketType.Stream, ProtocolType.Tcp);
                fillers.Add(filler);
                _ = filler.ConnectAsync(endpoint);
            }
            await using var alive = await Backend.StartAsync("alive");
            await using var host = await FrontendHost.StartAsync(new FrontendOptions { ConnectTimeout = TimeSpan.FromMilliseconds(300) });
            host.Frontend.AddInstance(new InstanceEndpoint("stuck", new Uri($"http://127.0.0.1:{endpoint.Port}/"), "v1"));
            host.Frontend.AddInstance(alive.Endpoint);
            var failed = new List<string>();
            host.Frontend.InstanceFailed += (id, e) => { lock (failed) failed.Add($"{id}: {e.InnerException?.Message}"); };

            for (var i = 0; i < 2; i++)
                Assert.Contains("instance=alive", await host.Client.GetStringAsync("/echo"));

            Assert.Equal([$"stuck: connecting to 127.0.0.1:{endpoint.Port} took longer than 0.3 s"], failed);
            Assert.Equal(["alive"], host.Frontend.Instances.Select(i => i.Id));
            Assert.Contains(host.Logs.Entries, e => e.EventId == 8004 && e.Text.Contains("stuck", StringComparison.Ordinal));
        }
        finally
        {
            foreach (var filler in fillers)
                filler.Dispose();
        }
    }
}
