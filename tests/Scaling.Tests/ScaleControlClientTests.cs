using System.Collections;
using System.Net;
using FaaST.Protos.Scale;
using Grpc.Core;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Hosting;
using Microsoft.AspNetCore.Server.Kestrel.Core;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Logging;

namespace FaaST.Scaling.Tests;

/// <summary>The instance's unrequested vote, against a ScaleControl service on a real Kestrel listener.</summary>
public sealed class ScaleControlClientTests
{
    /// <summary>A controller that grants at most <see cref="Max"/> instances and remembers what it was asked.</summary>
    private sealed class RecordingController : ScaleControl.ScaleControlBase
    {
        public const int Max = 3;

        public ScaleOutRequest? Last { get; private set; }

        public string? Authorization { get; private set; }

        public override Task<ScaleOutReply> RequestScaleOut(ScaleOutRequest request, ServerCallContext context)
        {
            Last = request;
            Authorization = context.RequestHeaders.GetValue("authorization");
            return Task.FromResult(new ScaleOutReply { GrantedInstances = Math.Min(Max, request.TargetInstances), Reason = "maxInstances" });
        }
    }

    private static async Task<(WebApplication Web, RecordingController Controller, Uri Address)> StartControllerAsync()
    {
        var controller = new RecordingController();
        var builder = WebApplication.CreateSlimBuilder();
        builder.Logging.ClearProviders();
        builder.WebHost.ConfigureKestrel(k => k.Listen(IPAddress.Loopback, 0, l => l.Protocols = HttpProtocols.Http2));
        builder.Services.AddGrpc();
        builder.Services.AddSingleton(controller);
        var web = builder.Build();
        web.MapGrpcService<RecordingController>();
        await web.StartAsync();
        return (web, controller, new Uri(web.Urls.First()));
    }

    [Fact]
    public async Task A_scale_out_request_reaches_the_controller_and_returns_the_instances_it_granted()
    {
        var (web, controller, address) = await StartControllerAsync();
        await using var _ = web;
        using var client = ScaleControlClient.FromEnvironment(new Hashtable { [ScaleControlClient.EnvironmentVariable] = address.ToString() },
            path => "signed " + path);

        var granted = await client.RequestScaleOutAsync("shop", "i-1", 4, VoteRules.Bandwidth, "800 MiB object, T_DR falls to 2.9 s with 4", CancellationToken.None);

        Assert.Equal(RecordingController.Max, granted);
        Assert.Equal(("shop", "i-1", 4, "bandwidth"), (controller.Last!.App, controller.Last.InstanceId, controller.Last.TargetInstances, controller.Last.Policy));
        Assert.Equal("800 MiB object, T_DR falls to 2.9 s with 4", controller.Last.Reason);
        Assert.Equal("signed " + ScaleControlClient.RequestScaleOutPath, controller.Authorization);
    }

    [Fact]
    public void Without_the_controller_variable_the_error_names_it_and_says_who_sets_it()
    {
        var e = Assert.Throws<InvalidOperationException>(() => ScaleControlClient.FromEnvironment(new Hashtable()));

        Assert.StartsWith(ScaleControlClient.EnvironmentVariable + " is not set", e.Message, StringComparison.Ordinal);
        Assert.Contains("the platform sets it", e.Message, StringComparison.Ordinal);
    }

    [Theory]
    [InlineData("127.0.0.1:7080")]
    [InlineData("ftp://127.0.0.1:7080")]
    public void A_controller_variable_that_is_not_an_http_url_is_refused_with_its_value(string value)
    {
        var e = Assert.Throws<InvalidOperationException>(() => ScaleControlClient.FromEnvironment(new Hashtable { [ScaleControlClient.EnvironmentVariable] = value }));

        Assert.Contains($"\"{value}\"", e.Message, StringComparison.Ordinal);
    }
}
