using System.Collections.Concurrent;
using System.Net;
using FaaST.Peers;
using FaaST.Protos.Scale;
using FaaST.Runtime.Bandwidth;
using FaaST.Runtime.Hosting;
using FaaST.Scaling;
using Grpc.Core;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Hosting;
using Microsoft.AspNetCore.Server.Kestrel.Core;
using Microsoft.Extensions.DependencyInjection;

namespace FaaST.Runtime.Tests;

/// <summary>The instance's side of bandwidth scaling: asking the platform for instances, its settings, its planner.</summary>
public sealed class BandwidthScalingHostTests
{
    private static readonly byte[] Secret = "bandwidth-test-secret-0123"u8.ToArray();

    /// <summary>The platform's ScaleControl as far as these tests need it: checks the caller and grants up to three instances.</summary>
    private sealed class Controller(PeerAuth credentials) : ScaleControl.ScaleControlBase
    {
        public ConcurrentQueue<ScaleOutRequest> Requests { get; } = new();

        public override Task<ScaleOutReply> RequestScaleOut(ScaleOutRequest request, ServerCallContext context)
        {
            var header = context.RequestHeaders.GetValue(PeerAuth.HeaderName);
            if (!credentials.VerifyCall(header, "/faast.scale.v1.ScaleControl/RequestScaleOut", out var reason))
                throw new RpcException(new Status(StatusCode.Unauthenticated, reason));
            Requests.Enqueue(request);
            return Task.FromResult(new ScaleOutReply { GrantedInstances = Math.Min(request.TargetInstances, 3), Reason = "capped at 3" });
        }
    }

    private static async Task<(WebApplication Web, Uri Address)> StartControllerAsync(Controller controller)
    {
        var builder = WebApplication.CreateSlimBuilder();
        builder.Logging.ClearProviders();
        builder.Services.AddGrpc();
        builder.Services.AddSingleton(controller);
        builder.WebHost.ConfigureKestrel(k => k.Listen(IPAddress.Loopback, 0, l => l.Protocols = HttpProtocols.Http2));
        var web = builder.Build();
        web.MapGrpcService<Controller>();
        await web.StartAsync();
        return (web, new Uri(web.Urls.First().Replace("[::1]", "127.0.0.1", StringComparison.Ordinal)));
    }

    [Fact]
    public async Task A_scale_out_request_reaches_the_controller_signed_with_the_apps_credentials_and_returns_what_it_granted()
    {
        var controller = new Controller(new PeerAuth(Secret, "bw-app"));
        var (web, address) = await StartControllerAsync(controller);
        await using var _ = web;
        using var scaler = ScaleControlScaler.FromEnvironment(address.AbsoluteUri, "bw-app", () => "instance-7", new PeerAuth(Secret, "bw-app"))!;

        var granted = await scaler.RequestInstancesAsync(5, "bandwidth: c/big.bin in 5 ranges", default);

        Assert.Equal(3, granted);
        var request = Assert.Single(controller.Requests);
        Assert.Equal(("bw-app", "instance-7", 5, "bandwidth", "bandwidth: c/big.bin in 5 ranges"),
            (request.App, request.InstanceId, request.TargetInstances, request.Policy, request.Reason));
    }

    [Fact]
    public async Task A_scale_out_request_with_the_wrong_secret_fails_naming_the_controller_and_the_refusal()
    {
        var controller = new Controller(new PeerAuth(Secret, "bw-app"));
        var (web, address) = await StartControllerAsync(controller);
        await using var _ = web;
        using var scaler = ScaleControlScaler.FromEnvironment(address.AbsoluteUri, "bw-app", () => "i", new PeerAuth("another-secret-0123456789"u8, "bw-app"))!;

        var e = await Assert.ThrowsAsync<InvalidOperationException>(() => scaler.RequestInstancesAsync(2, "r", default));

        Assert.Contains(ScaleControlScaler.Variable, e.Message, StringComparison.Ordinal);
        Assert.Contains("Unauthenticated", e.Message, StringComparison.Ordinal);
        Assert.Empty(controller.Requests);
    }

    [Fact]
    public void Without_a_scale_controller_address_there_is_no_scaler()
    {
        Assert.Null(ScaleControlScaler.FromEnvironment(null, "a", () => "i", new PeerAuth(Secret, "a")));
        Assert.Null(ScaleControlScaler.FromEnvironment("  ", "a", () => "i", new PeerAuth(Secret, "a")));
    }

    [Theory]
    [InlineData("controller:7070")]
    [InlineData("ftp://127.0.0.1:7070/")]
    [InlineData("/relative")]
    public void A_scale_controller_address_that_is_not_an_http_url_is_refused_naming_the_variable(string value)
    {
        var e = Assert.Throws<InvalidOperationException>(() => ScaleControlScaler.FromEnvironment(value, "a", () => "i", new PeerAuth(Secret, "a")));
        Assert.Contains(ScaleControlScaler.Variable, e.Message, StringComparison.Ordinal);
        Assert.Contains(value, e.Message, StringComparison.Ordinal);
    }

    [Fact]
    public void The_bandwidth_threshold_variable_sets_the_minimum_object_size()
    {
        Assert.Equal(1_048_576, PeerHostOptions.BandwidthFromEnvironment("1048576").MinObjectSize);
        Assert.Equal(64L << 20, PeerHostOptions.BandwidthFromEnvironment(null).MinObjectSize);
    }

    [Theory]
    [InlineData("64MiB")]
    [InlineData("0")]
    [InlineData("-5")]
    public void A_bandwidth_threshold_that_is_not_a_byte_count_is_refused_naming_the_variable(string value)
    {
        var e = Assert.Throws<InvalidOperationException>(() => PeerHostOptions.BandwidthFromEnvironment(value));
        Assert.Contains(PeerHostOptions.BandwidthMinObjectSizeVariable, e.Message, StringComparison.Ordinal);
        Assert.Contains(value, e.Message, StringComparison.Ordinal);
    }

    [Fact]
    public void The_instance_planner_plans_with_what_its_transfers_measured()
    {
        var profile = new ProfiledBandwidth();
        var planner = new ProfiledBandwidthPlanner(profile, maxInstances: 16);
        var before = planner.PlanInstances(800_000_000, running: 1);
        // Storage turned out as fast as the links between instances: splitting gains little.
        planner.ObserveStorageTransfer(750_000_000, TimeSpan.FromSeconds(1));

        var after = planner.PlanInstances(800_000_000, running: 1);

        Assert.True(after < before, $"measured storage at instance speed: {after} instances, before {before}");
        Assert.Equal(BandwidthPlanner.PlanInstances(800_000_000, 1, profile.Snapshot(), 16), after);
    }
}
