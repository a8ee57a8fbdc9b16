using System.Net;
using System.Text;
using FaaST.Policy;
using FaaST.Peers;
using FaaST.Protos.Scale;
using FaaST.ScaleController.Control;
using Grpc.Core;
using Grpc.Net.Client;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Hosting;
using Microsoft.AspNetCore.Server.Kestrel.Core;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Logging;
using Microsoft.Extensions.Logging.Abstractions;

namespace FaaST.ScaleController.Tests.Control;

/// <summary>
/// The controller's gRPC parts against real Kestrel on loopback: <see cref="GrpcVoteClient"/> calling a
/// small InstanceScaling service that answers fixed votes (it checks the peer credential as an instance
/// does), and <see cref="ScaleControlService"/> called through a real Grpc.Net.Client.
/// </summary>
public sealed class GrpcTests
{
    private static readonly byte[] Secret = Encoding.UTF8.GetBytes("a peer secret of the app, for tests");

    /// <summary>An instance's InstanceScaling as the test needs it: verifies each call, answers fixed votes.</summary>
    private sealed class FixedVotes(PeerAuth credentials) : InstanceScaling.InstanceScalingBase
    {
        public List<(VoteRequest Request, string? Header)> Calls { get; } = [];

        public override Task<VoteReply> GetVote(VoteRequest request, ServerCallContext context)
        {
            var header = context.RequestHeaders.GetValue(PeerAuth.HeaderName);
            lock (Calls)
                Calls.Add((request, header));
            if (!credentials.VerifyCall(header, context.Method, out var why))
                throw new RpcException(new Status(StatusCode.Unauthenticated, why));
            return Task.FromResult(new VoteReply
            {
                InstanceId = "instance-7",
                State = "active",
                Votes =
                {
                    new PolicyVote { Policy = "compute", Delta = 2, Reason = "utilisation 0.93 > 0.80" },
                    new PolicyVote { Policy = "cache-size", Delta = 0, Reason = "steady" },
                    new PolicyVote { Policy = "bandwidth", Delta = -1, Reason = "no large object" },
                },
                Load = new InstanceLoad { InvocationsPerSecond = 410, InFlight = 3, Utilization = 0.93, LatencyP50Ms = 2.1, Evictions = 4, CacheAccesses = 900 },
            });
        }
    }

    private sealed class Registry(params ScaleLoop[] loops) : IScaleLoopRegistry
    {
        public ScaleLoop? Find(string app) => loops.FirstOrDefault(l => l.App == app);
    }

    private static async Task<(WebApplication Web, Uri Address)> StartAsync(Action<IServiceCollection> services, Action<WebApplication> map)
    {
        var builder = WebApplication.CreateSlimBuilder();
        builder.Logging.ClearProviders();
        builder.WebHost.ConfigureKestrel(k => k.Listen(IPAddress.Loopback, 0, l => l.Protocols = HttpProtocols.Http2));
        builder.Services.AddGrpc();
        services(builder.Services);
        var web = builder.Build();
        map(web);
        await web.StartAsync();
        return (web, new Uri(web.Urls.First().Replace("[::1]", "127.0.0.1", StringComparison.Ordinal) + "/"));
    }

    [Fact]
    public async Task The_vote_client_signs_its_call_and_maps_the_instances_reply()
    {
        var service = new FixedVotes(new PeerAuth(Secret, "app"));
        var (web, address) = await StartAsync(s => s.AddSingleton(service), w => w.MapGrpcService<FixedVotes>());
        await using var _ = web;
        using var client = new GrpcVoteClient(new PeerAuth(Secret, "app"), TimeProvider.System);

        var vote = await client.GetVoteAsync(new VoteEndpoint("i3", address), new VoteQuery("app", 3, 1.5), CancellationToken.None);

        var call = Assert.Single(service.Calls);
        Assert.StartsWith(PeerAuth.Scheme, call.Header);
        Assert.Equal(new VoteRequest { App = "app", Instances = 3, InstanceLoadSeconds = 1.5 }, call.Request);
        Assert.True(vote.Answered);
        Assert.Equal("i3", vote.InstanceId);
        Assert.Equal("active", vote.State);
        Assert.Equal(
            [new PolicyVoteEntry("compute", 2, "utilisation 0.93 > 0.80"), new PolicyVoteEntry("cache-size", 0, "steady"), new PolicyVoteEntry("bandwidth", -1, "no large object")],
            vote.Votes);
        Assert.Equal(new InstanceLoadSummary(410, 3, 0.93, 2.1, 4, 900), vote.Load);
    }

    [Fact]
    public async Task A_vote_client_with_another_apps_secret_is_refused_by_the_instance()
    {
        var service = new FixedVotes(new PeerAuth(Secret, "app"));
        var (web, address) = await StartAsync(s => s.AddSingleton(service), w => w.MapGrpcService<FixedVotes>());
        await using var _ = web;
        using var client = new GrpcVoteClient(new PeerAuth("another secret"u8, "app"), TimeProvider.System);

        var e = await Assert.ThrowsAsync<RpcException>(() => client.GetVoteAsync(new VoteEndpoint("i3", address), new VoteQuery("app", 1, 0), CancellationToken.None));

        Assert.Equal(StatusCode.Unauthenticated, e.StatusCode);
    }

    [Fact]
    public async Task A_loop_over_the_grpc_client_scales_out_on_a_real_instances_vote()
    {
        var service = new FixedVotes(new PeerAuth(Secret, "app"));
        var (web, address) = await StartAsync(s => s.AddSingleton(service), w => w.MapGrpcService<FixedVotes>());
        await using var _ = web;
        using var client = new GrpcVoteClient(new PeerAuth(Secret, "app"), TimeProvider.System);
        var target = new EndpointTarget("app", address);
        var loop = new ScaleLoop(target, ScalePolicy.Default, client, TimeProvider.System, NullLogger.Instance,
            new ScaleLoopOptions { VoteDeadline = TimeSpan.FromSeconds(30) });

        var decision = await loop.RoundAsync(CancellationToken.None);

        Assert.Equal(ScaleDecisionKind.Out, decision.Kind);
        Assert.Equal(3, decision.Target);
        Assert.Contains("instance i0 compute votes +2: utilisation 0.93 > 0.80", decision.Reason);
    }

    /// <summary>One ready instance at a real address; scaling changes only the count.</summary>
    private sealed class EndpointTarget(string app, Uri address) : IScaleTarget
    {
        public string App => app;
        public int CurrentInstances { get; private set; } = 1;
        public int StartingInstances => 0;
        public IReadOnlyList<VoteEndpoint> ReadyInstances => [new VoteEndpoint("i0", address)];
        public FrontendLoad Load() => FrontendLoad.Idle;
        public DateTimeOffset LastInvocation => DateTimeOffset.UtcNow;

        public Task ScaleToAsync(int target, string reason, CancellationToken ct)
        {
            CurrentInstances = target;
            return Task.CompletedTask;
        }

        public Task UnloadAsync(string reason, CancellationToken ct) => throw new InvalidOperationException("not idle");
    }

    private static async Task<(WebApplication Web, ScaleControl.ScaleControlClient Client, GrpcChannel Channel)> StartControlAsync(IScaleLoopRegistry registry)
    {
        var (web, address) = await StartAsync(s => s.AddSingleton(registry), w => w.MapGrpcService<ScaleControlService>());
        var channel = GrpcChannel.ForAddress(address);
        return (web, new ScaleControl.ScaleControlClient(channel), channel);
    }

    private static ScaleLoop LoopOf(string app, int instances, PeerAuth? credentials = null) =>
        new(new FakeTarget(app, TimeProvider.System) { CurrentInstances = instances }, ScalePolicy.Default, new FakeVoteClient(),
            TimeProvider.System, NullLogger.Instance, new ScaleLoopOptions { RequestCredentials = credentials });

    [Fact]
    public async Task Request_scale_out_for_an_unknown_app_is_not_found_naming_it()
    {
        var (web, client, channel) = await StartControlAsync(new Registry(LoopOf("known", 1)));
        await using var _ = web;
        using var __ = channel;

        var e = await Assert.ThrowsAsync<RpcException>(async () =>
            await client.RequestScaleOutAsync(new ScaleOutRequest { App = "nosuchapp", TargetInstances = 2 }));

        Assert.Equal(StatusCode.NotFound, e.StatusCode);
        Assert.Contains("\"nosuchapp\"", e.Status.Detail);
    }

    [Theory]
    [InlineData(0)]
    [InlineData(-3)]
    public async Task Request_scale_out_to_fewer_than_one_instance_is_an_invalid_argument(int target)
    {
        var (web, client, channel) = await StartControlAsync(new Registry(LoopOf("app", 1)));
        await using var _ = web;
        using var __ = channel;

        var e = await Assert.ThrowsAsync<RpcException>(async () =>
            await client.RequestScaleOutAsync(new ScaleOutRequest { App = "app", TargetInstances = target }));

        Assert.Equal(StatusCode.InvalidArgument, e.StatusCode);
        Assert.Contains($"target_instances {target}", e.Status.Detail);
    }

    [Fact]
    public async Task Request_scale_out_is_granted_up_to_max_instances_and_acts_on_the_app()
    {
        var loop = LoopOf("app", 1);
        var (web, client, channel) = await StartControlAsync(new Registry(loop));
        await using var _ = web;
        using var __ = channel;

        var reply = await client.RequestScaleOutAsync(new ScaleOutRequest
        {
            App = "app", InstanceId = "i0", TargetInstances = 20, Policy = "bandwidth", Reason = "800 MB object",
        });

        Assert.Equal(ScalePolicy.Default.MaxInstances, reply.GrantedInstances);
        Assert.Contains("instance i0 bandwidth: 800 MB object", reply.Reason);
        Assert.Equal(ScalePolicy.Default.MaxInstances, Assert.Single(loop.Snapshot().Decisions).Target);
    }

    [Fact]
    public async Task Request_scale_out_for_an_app_with_credentials_refuses_an_unsigned_call_and_takes_a_signed_one()
    {
        var loop = LoopOf("app", 1, new PeerAuth(Secret, "app"));
        var (web, client, channel) = await StartControlAsync(new Registry(loop));
        await using var _ = web;
        using var __ = channel;
        var request = new ScaleOutRequest { App = "app", TargetInstances = 2 };

        var e = await Assert.ThrowsAsync<RpcException>(async () => await client.RequestScaleOutAsync(request));
        var signed = new Metadata { { PeerAuth.HeaderName, new PeerAuth(Secret, "app").SignCall(ScaleControlService.RequestScaleOutPath) } };
        var reply = await client.RequestScaleOutAsync(request, signed);

        Assert.Equal(StatusCode.Unauthenticated, e.StatusCode);
        Assert.Equal(2, reply.GrantedInstances);
    }
}
