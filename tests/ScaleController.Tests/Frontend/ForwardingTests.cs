using System.Net;

namespace FaaST.ScaleController.Tests.Frontend;

/// <summary>The frontend forwarding to real Kestrel instances on loopback: balancing, headers, status codes.</summary>
public sealed class ForwardingTests
{
    [Fact]
    public async Task Concurrent_slow_requests_spread_over_two_instances()
    {
        await using var a = await Backend.StartAsync("a");
        await using var b = await Backend.StartAsync("b");
        await using var host = await FrontendHost.StartAsync();
        host.Frontend.AddInstance(a.Endpoint);
        host.Frontend.AddInstance(b.Endpoint);

        var requests = Enumerable.Range(0, 10).Select(_ => host.Client.GetStringAsync("/slow")).ToArray();
        await Eventually.TrueAsync(() => a.Arrived + b.Arrived == 10, "all 10 slow requests reached an instance", () => $"a {a.Arrived}, b {b.Arrived}");

        Assert.InRange(a.Arrived, 4, 6);
        Assert.InRange(b.Arrived, 4, 6);
        a.Gate.SetResult();
        b.Gate.SetResult();
        var answers = await Task.WhenAll(requests);
        Assert.Equal(a.Arrived, answers.Count(x => x == "a"));
    }

    [Fact]
    public async Task New_requests_go_to_the_instance_with_fewer_outstanding_requests()
    {
        await using var busy = await Backend.StartAsync("busy");
        await using var idle = await Backend.StartAsync("idle");
        await using var host = await FrontendHost.StartAsync();
        host.Frontend.AddInstance(busy.Endpoint);
        var first = Enumerable.Range(0, 3).Select(_ => host.Client.GetStringAsync("/slow")).ToArray();
        await Eventually.TrueAsync(() => busy.Arrived == 3, "3 requests outstanding on the busy instance");

        host.Frontend.AddInstance(idle.Endpoint);
        var second = Enumerable.Range(0, 3).Select(_ => host.Client.GetStringAsync("/slow")).ToArray();
        await Eventually.TrueAsync(() => idle.Arrived == 3, "3 requests on the idle instance", () => $"busy {busy.Arrived}, idle {idle.Arrived}");

        Assert.Equal(3, busy.Arrived);
        Assert.Contains(host.Frontend.Instances, i => i.Id == "busy" && i.Outstanding == 3);
        Assert.Contains(host.Frontend.Instances, i => i.Id == "idle" && i.Outstanding == 3);
        busy.Gate.SetResult();
        idle.Gate.SetResult();
        Assert.All(await Task.WhenAll(first), x => Assert.Equal("busy", x));
        Assert.All(await Task.WhenAll(second), x => Assert.Equal("idle", x));
    }

    [Fact]
    public async Task Status_codes_bodies_and_repeated_headers_pass_through_unchanged()
    {
        await using var backend = await Backend.StartAsync("a");
        await using var host = await FrontendHost.StartAsync();
        host.Frontend.AddInstance(backend.Endpoint);

        using var missing = await host.Client.GetAsync("/status/404");
        Assert.Equal(HttpStatusCode.NotFound, missing.StatusCode);
        Assert.Equal("no such thing", await missing.Content.ReadAsStringAsync());
        Assert.Equal(["missing"], missing.Headers.GetValues("X-Custom"));

        using var broken = await host.Client.GetAsync("/status/500");
        Assert.Equal(HttpStatusCode.InternalServerError, broken.StatusCode);
        Assert.Equal("it broke", await broken.Content.ReadAsStringAsync());

        using var cookies = await host.Client.GetAsync("/cookies");
        Assert.Equal(HttpStatusCode.Created, cookies.StatusCode);
        Assert.Equal(["a=1; Path=/", "b=2; Path=/; HttpOnly"], cookies.Headers.GetValues("Set-Cookie"));
        Assert.Equal(["one", "two"], cookies.Headers.GetValues("X-Multi"));
        Assert.Equal("cookies", await cookies.Content.ReadAsStringAsync());
    }

    [Fact]
    public async Task The_instance_sees_the_clients_host_path_query_and_forwarded_headers_but_no_hop_by_hop_headers()
    {
        await using var backend = await Backend.StartAsync("a");
        await using var host = await FrontendHost.StartAsync();
        host.Frontend.AddInstance(backend.Endpoint);

        using var request = new HttpRequestMessage(HttpMethod.Get, "/api/hello%20world?x=1&y=a%26b");
        request.Headers.Host = "shop.localhost:7071";
        request.Headers.TryAddWithoutValidation("X-Pass", "kept");
        request.Headers.TryAddWithoutValidation("Connection", "X-Hop");
        request.Headers.TryAddWithoutValidation("X-Hop", "dropped");
        request.Headers.TryAddWithoutValidation("Proxy-Authorization", "Basic c2VjcmV0");
        using var response = await host.Client.SendAsync(request);
        var lines = (await response.Content.ReadAsStringAsync()).Split('\n');

        Assert.Equal(HttpStatusCode.OK, response.StatusCode);
        Assert.Contains("path=/api/hello world", lines);
        Assert.Contains("query=?x=1&y=a%26b", lines);
        Assert.Contains("host=shop.localhost:7071", lines);
        Assert.Contains("header:x-pass=kept", lines);
        Assert.Contains("header:x-forwarded-for=127.0.0.1", lines);
        Assert.Contains("header:x-forwarded-proto=http", lines);
        Assert.Contains("header:x-forwarded-host=shop.localhost:7071", lines);
        Assert.DoesNotContain(lines, l => l.StartsWith("header:x-hop", StringComparison.Ordinal));
        Assert.DoesNotContain(lines, l => l.StartsWith("header:proxy-authorization", StringComparison.Ordinal));
    }

    [Fact]
    public async Task Stats_count_the_interval_since_the_previous_call_and_what_is_in_flight_now()
    {
        await using var backend = await Backend.StartAsync("a");
        await using var host = await FrontendHost.StartAsync();
        host.Frontend.AddInstance(backend.Endpoint);
        host.Frontend.TakeStats();

        for (var i = 0; i < 5; i++)
            await host.Client.GetStringAsync("/echo");
        var slow = host.Client.GetStringAsync("/slow");
        await Eventually.TrueAsync(() => backend.Arrived == 1, "the slow request reached the instance");
        var stats = host.Frontend.TakeStats();

        Assert.Equal(5, stats.Completed);
        Assert.Equal(0, stats.Failed);
        Assert.Equal(1, stats.InFlight);
        Assert.Equal(0, stats.Queued);
        Assert.True(stats.InvocationsPerSecond > 0, $"rate {stats.InvocationsPerSecond}");
        Assert.True(stats.LatencyP99Ms >= stats.LatencyP50Ms && stats.LatencyP50Ms > 0, $"p50 {stats.LatencyP50Ms}, p99 {stats.LatencyP99Ms}");

        backend.Gate.SetResult();
        await slow;
        var next = host.Frontend.TakeStats();
        Assert.Equal(1, next.Completed);
        Assert.Equal(0, next.InFlight);
    }
}
