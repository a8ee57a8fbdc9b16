using System.Text;
using System.Text.Json;
using FaaST.Peers;
using FaaST.Protos.Scale;
using FaaST.Scaling;
using Grpc.Core;
using Grpc.Net.Client;

namespace FaaST.Runtime.Tests;

/// <summary>
/// The instance side of scaling (Faa$T §4) on a real host: InstanceScaling on the peer endpoint over real
/// gRPC with the app's peer credentials, real workers, real Azurite; drains of real host processes.
/// </summary>
[Collection("azurite")]
public sealed class InstanceScalingTests(AzuriteFixture azurite)
{
    private const string Secret = "instance-scaling-tests-secret";
    private const string GetVotePath = "/faast.scale.v1.InstanceScaling/GetVote";
    private const string DrainPath = "/faast.scale.v1.InstanceScaling/Drain";

    /// <summary>A Python app whose Sleep function sleeps ?s= seconds; two threads per worker, so a few invocations fill it.</summary>
    private static TestApp SleepApp() => new TestApp("python", settings: new()
    {
        ["FAAST_PEER_SECRET"] = Secret,
        ["PYTHON_THREADPOOL_THREAD_COUNT"] = "2",
        ["FUNCTIONS_WORKER_PROCESS_COUNT"] = "1",
    }).Function("Sleep", TestApp.HttpFunctionJson, ("__init__.py", """
        import time
        import azure.functions as func
        def main(req: func.HttpRequest) -> str:
            time.sleep(float(req.params.get('s', '0')))
            return 'slept'
        """));

    /// <summary>Calls on one instance's peer endpoint, each signed with a fresh peer credential of the app.</summary>
    private sealed class Caller : IDisposable
    {
        private readonly GrpcChannel _channel;
        private readonly PeerAuth _auth;

        public Caller(Uri peer, string app)
        {
            _channel = GrpcChannel.ForAddress(peer);
            _auth = new PeerAuth(Encoding.UTF8.GetBytes(Secret), app);
            Client = new InstanceScaling.InstanceScalingClient(_channel);
        }

        public InstanceScaling.InstanceScalingClient Client { get; }

        public async Task<VoteReply> VoteAsync(int instances = 1, double loadSeconds = 0) =>
            await Client.GetVoteAsync(new VoteRequest { Instances = instances, InstanceLoadSeconds = loadSeconds }, Signed(GetVotePath));

        public async Task<DrainReply> DrainAsync(int deadlineMs, string reason) =>
            await Client.DrainAsync(new DrainRequest { DeadlineMs = deadlineMs, Reason = reason }, Signed(DrainPath));

        private Metadata Signed(string path) => new() { { PeerAuth.HeaderName, _auth.SignCall(path) } };

        public void Dispose() => _channel.Dispose();
    }

    [Fact]
    public async Task A_vote_is_answered_with_the_compute_cache_size_and_bandwidth_policies_the_load_and_the_state()
    {
        using var app = SleepApp();
        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString);
        using var caller = new Caller(host.Host.Self!.PeerAddress, host.Host.App.Name);

        var reply = await caller.VoteAsync(instances: 1, loadSeconds: 2.5);

        Assert.Equal([VoteRules.Compute, VoteRules.CacheSize, VoteRules.Bandwidth], reply.Votes.Select(v => v.Policy));
        Assert.All(reply.Votes, v => Assert.False(string.IsNullOrWhiteSpace(v.Reason)));
        Assert.Equal(host.Host.Self!.Id, reply.InstanceId);
        Assert.Equal("active", reply.State);
        Assert.True(reply.Load.IntervalSeconds > 0);
        Assert.Equal(host.Host.Cache!.CapacityBytes, reply.Load.CacheCapacityBytes);
        // T_Load is kept for the bandwidth planner and sent back in the profile.
        Assert.Equal(2.5, reply.Profile.LoadSeconds);
        Assert.Equal(TimeSpan.FromSeconds(2.5), host.Host.InstanceLoadTime!.InstanceLoadTime);
    }

    [Fact]
    public async Task A_vote_call_without_peer_credentials_is_refused_as_unauthenticated()
    {
        using var app = SleepApp();
        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString);
        using var channel = GrpcChannel.ForAddress(host.Host.Self!.PeerAddress);
        var client = new InstanceScaling.InstanceScalingClient(channel);

        var e = await Assert.ThrowsAsync<RpcException>(async () => await client.GetVoteAsync(new VoteRequest { Instances = 1 }));

        Assert.Equal(StatusCode.Unauthenticated, e.StatusCode);
        Assert.Contains("peer credentials", e.Status.Detail, StringComparison.Ordinal);
    }

    [Fact]
    public async Task A_drain_signed_with_another_apps_credentials_is_refused_and_the_host_keeps_serving()
    {
        using var app = SleepApp();
        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString);
        using var caller = new Caller(host.Host.Self!.PeerAddress, "another-app");

        var e = await Assert.ThrowsAsync<RpcException>(() => caller.DrainAsync(1000, "scale-in"));

        Assert.Equal(StatusCode.Unauthenticated, e.StatusCode);
        Assert.Equal("slept", await host.Http.GetStringAsync("/api/Sleep"));
    }

    [Fact]
    public async Task Under_load_that_fills_the_workers_the_compute_vote_says_out()
    {
        using var app = SleepApp();
        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString);
        using var caller = new Caller(host.Host.Self!.PeerAddress, host.Host.App.Name);
        // 8 invocations of 4 s on 2 slots: about 4 busy slots per slot.
        var requests = Enumerable.Range(0, 8).Select(_ => host.Http.GetStringAsync("/api/Sleep?s=4")).ToArray();
        // Each query starts a new interval: wait until all 8 run, then measure an interval they fill.
        await Eventually.TrueAsync(async () => (await caller.VoteAsync()).Load.InFlight == 8, "the 8 invocations to be in flight");
        await Task.Delay(TimeSpan.FromMilliseconds(500));

        var reply = await caller.VoteAsync(instances: 1);

        var compute = reply.Votes.Single(v => v.Policy == VoteRules.Compute);
        Assert.True(reply.Load.Utilization > 0.8, $"utilisation {reply.Load.Utilization}");
        Assert.True(compute.Delta >= 1, compute.Reason);
        Assert.StartsWith("utilisation ", compute.Reason, StringComparison.Ordinal);
        Assert.Contains("> 0.80", compute.Reason, StringComparison.Ordinal);
        Assert.All(await Task.WhenAll(requests), r => Assert.Equal("slept", r));
    }

    /// <summary>A Node app: Wait awaits ?ms= milliseconds (the loop is free meanwhile); Spin holds the loop for ?ms=.</summary>
    private static TestApp NodeLoopApp() => new TestApp("node", settings: new()
    {
        ["FAAST_PEER_SECRET"] = Secret,
        ["FUNCTIONS_WORKER_PROCESS_COUNT"] = "1",
    }).Function("Wait", TestApp.HttpFunctionJson, ("index.js", """
        module.exports = async function (context, req) {
          await new Promise((r) => setTimeout(r, Number(req.query.ms || 0)));
          return { body: 'waited' };
        };
        """)).Function("Spin", TestApp.HttpFunctionJson, ("index.js", """
        module.exports = async function (context, req) {
          const end = Date.now() + Number(req.query.ms || 0);
          while (Date.now() < end) { }
          return { body: 'spun' };
        };
        """));

    [Fact]
    public async Task A_node_worker_with_many_invocations_awaiting_is_not_full_and_the_compute_vote_does_not_say_out()
    {
        // Eight invocations in flight on one Node worker counted as slots would be utilisation 8; the worker's
        // event loop is idle while they await, and its busy share is what the vote uses.
        using var app = NodeLoopApp();
        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString);
        using var caller = new Caller(host.Host.Self!.PeerAddress, host.Host.App.Name);
        var requests = Enumerable.Range(0, 8).Select(_ => host.Http.GetStringAsync("/api/Wait?ms=4000")).ToArray();
        await Eventually.TrueAsync(async () => (await caller.VoteAsync()).Load.InFlight == 8, "the 8 invocations to be in flight");
        // Each query starts a new interval: measure one of two or more reports (every 0.5 s) while all 8 wait.
        await Task.Delay(TimeSpan.FromMilliseconds(1200));

        var reply = await caller.VoteAsync(instances: 1);

        var compute = reply.Votes.Single(v => v.Policy == VoteRules.Compute);
        Assert.Equal(8, reply.Load.InFlight);
        Assert.True(reply.Load.Utilization < 0.5, $"utilisation {reply.Load.Utilization}");
        Assert.True(compute.Delta <= 0, compute.Reason);
        Assert.All(await Task.WhenAll(requests), r => Assert.Equal("waited", r));
    }

    [Fact]
    public async Task A_node_worker_whose_loop_is_held_by_one_invocation_is_full_and_the_compute_vote_says_out()
    {
        using var app = NodeLoopApp();
        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString);
        using var caller = new Caller(host.Host.Self!.PeerAddress, host.Host.App.Name);
        // Three callers back to back, each invocation holding the loop for 300 ms: the loop always has two
        // more waiting, so it is never idle however slowly the host passes the next one on (a run beside
        // other tests once measured below 0.8 with two callers).
        using var stop = new CancellationTokenSource();
        var spinning = Task.WhenAll(Enumerable.Range(0, 3).Select(_ => Task.Run(async () =>
        {
            while (!stop.IsCancellationRequested)
                Assert.Equal("spun", await host.Http.GetStringAsync("/api/Spin?ms=300"));
        })));
        try
        {
            await Eventually.TrueAsync(async () => (await caller.VoteAsync()).Load.InFlight >= 1, "the spinning invocations to run");
            // Until the worker's first WorkerLoad report the vote counts slots by design (EventLoopLoad: null while no
            // worker reported); on a busy machine that report can come after the first sample below (CI beside a
            // CPU hog once read 3.0, the three in flight as slots). The loop's share is what this test is about.
            await Eventually.TrueAsync(() => host.Host.WorkerEventLoops.Count > 0, "the worker's first event-loop report");

            // The loop is idle only while the host passes the next invocation on, which on a busy machine can take
            // long enough to pull one interval below 0.8 (CI beside a CPU hog once measured 0.77: 932 ms busy,
            // 286 ms idle). Each query starts a new interval, so measure intervals of 1.5 s until one finds the
            // loop full; counted as slots (3 in flight) every interval would be above 1 and the test fails.
            var seen = new List<double>();
            VoteReply reply;
            var clock = System.Diagnostics.Stopwatch.StartNew();
            do
            {
                await Task.Delay(TimeSpan.FromMilliseconds(1500));
                reply = await caller.VoteAsync(instances: 1);
                seen.Add(reply.Load.Utilization);
                Assert.True(reply.Load.Utilization <= 1.0, $"utilisation {reply.Load.Utilization} counts more than the one loop");
            }
            while (reply.Load.Utilization <= 0.8 && clock.Elapsed < TimeSpan.FromSeconds(60));

            var compute = reply.Votes.Single(v => v.Policy == VoteRules.Compute);
            // The loop's busy share: at most 1, where slots would count the three in flight as 3.
            Assert.True(reply.Load.Utilization is > 0.8 and <= 1.0, $"utilisations seen {string.Join(", ", seen)}: {compute.Reason}; event loops now: {string.Join(", ", host.Host.WorkerEventLoops)}");
            Assert.True(compute.Delta >= 1, compute.Reason);
        }
        finally
        {
            stop.Cancel();
            await spinning;
        }
    }

    [Fact]
    public async Task A_working_set_larger_than_the_cache_makes_the_cache_size_vote_say_out()
    {
        using var app = SleepApp().Function("Read", TestApp.BlobReadJson("data"), ("__init__.py", """
            import azure.functions as func
            def main(req: func.HttpRequest, inblob: func.InputStream) -> str:
                return str(len(inblob.read()))
            """));
        File.WriteAllText(Path.Combine(app.Directory, "faast.json"), """{ "cache": { "cacheCapacity": "1MiB" } }""");
        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString);
        using var caller = new Caller(host.Host.Self!.PeerAddress, host.Host.App.Name);
        await host.Blobs!.CreateContainerIfNotExistsAsync("data");
        var names = Enumerable.Range(0, 4).Select(i => $"ws-{i}-{Guid.NewGuid():N}").ToArray();
        foreach (var name in names)
            await host.Blobs.UploadAsync("data", name, new byte[400 << 10]);
        await caller.VoteAsync(); // the interval starts here

        // 1.6 MiB read round-robin through a 1 MiB cache: each object comes back after being evicted.
        for (var round = 0; round < 3; round++)
        {
            foreach (var name in names)
                Assert.Equal((400 << 10).ToString(System.Globalization.CultureInfo.InvariantCulture), await host.Http.GetStringAsync($"/api/read/{name}"));
        }
        var reply = await caller.VoteAsync();

        var cacheSize = reply.Votes.Single(v => v.Policy == VoteRules.CacheSize);
        Assert.True(reply.Load.ObjectsEvictedTwice >= 1, $"{reply.Load.Evictions} evictions, {reply.Load.ObjectsEvictedTwice} objects evicted twice");
        Assert.Equal(1, cacheSize.Delta);
        Assert.Contains("evicted more than once", cacheSize.Reason, StringComparison.Ordinal);
        Assert.True(reply.Load.CacheAccesses >= 12, $"{reply.Load.CacheAccesses} accesses");
    }

    private static async Task<Uri> PeerAddressAsync(HostProcess host)
    {
        using var status = JsonDocument.Parse(await host.Http.GetStringAsync("/admin/host/status"));
        return new Uri(status.RootElement.GetProperty("instance").GetProperty("peerAddress").GetString()!);
    }

    private async Task<List<string>> MembersAsync(string app)
    {
        var names = new List<string>();
        await foreach (var item in azurite.Store.ListAsync("faast-membership", app + "/instances/"))
            names.Add(item.Name);
        return names;
    }

    [Fact]
    public async Task A_drained_idle_host_leaves_membership_and_exits_with_code_zero()
    {
        using var app = SleepApp();
        await using var host = await HostProcess.StartAsync(app.Directory, azurite.ConnectionString);
        var name = FunctionApp.NameOf(app.Directory);
        using var caller = new Caller(await PeerAddressAsync(host), name);
        await Eventually.TrueAsync(async () => (await MembersAsync(name)).Count == 1, "the host to be in membership");

        var reply = await caller.DrainAsync(5000, "scale-in: utilisation 0.10 < 0.60");

        Assert.Equal(0, reply.InFlight);
        Assert.Equal(0, await host.WaitForExitAsync(TimeSpan.FromSeconds(30)));
        Assert.Empty(await MembersAsync(name));
        Assert.Contains(host.Output, l => l.Contains("Draining at the scale controller's request (scale-in: utilisation 0.10 < 0.60)", StringComparison.Ordinal));
    }

    [Fact]
    public async Task A_drain_lets_the_invocation_in_flight_finish_then_refuses_new_ones_and_exits()
    {
        using var app = SleepApp();
        await using var host = await HostProcess.StartAsync(app.Directory, azurite.ConnectionString);
        var name = FunctionApp.NameOf(app.Directory);
        using var caller = new Caller(await PeerAddressAsync(host), name);
        // Longer than the host's own drain timeout (5 s): the drain's deadline is what it waits for.
        var running = host.Http.GetAsync("/api/Sleep?s=7");
        await Eventually.TrueAsync(async () => (await caller.VoteAsync()).Load.InFlight == 1, "the invocation to be in flight");

        var reply = await caller.DrainAsync(20_000, "scale-in");

        Assert.Equal(1, reply.InFlight);
        using (var refused = await host.Http.GetAsync("/api/Sleep"))
        {
            Assert.Equal(System.Net.HttpStatusCode.ServiceUnavailable, refused.StatusCode);
            Assert.Equal("1", refused.Headers.GetValues("Retry-After").Single());
        }
        using var finished = await running;
        Assert.Equal(System.Net.HttpStatusCode.OK, finished.StatusCode);
        Assert.Equal("slept", await finished.Content.ReadAsStringAsync());
        Assert.Equal(0, await host.WaitForExitAsync(TimeSpan.FromSeconds(30)));
        Assert.Empty(await MembersAsync(name));
    }
}
