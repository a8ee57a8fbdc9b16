using FaaST.Protos.Keda;
using FaaST.ScaleController.Keda;
using Grpc.Core;
using Microsoft.Extensions.Logging;

namespace FaaST.ScaleController.Tests.Keda;

/// <summary>
/// The KEDA external scaler over real gRPC: a real client calls it exactly as KEDA does (a ScaledObjectRef with
/// the ScaledObject's name, namespace and trigger metadata), over loopback HTTP/2 to a real Kestrel.
/// </summary>
public sealed class ExternalScalerTests : IAsyncLifetime
{
    private const string App = "counter";

    // Guards a test against a hang (a stream that never delivers); not a timing assertion.
    private static readonly TimeSpan HangGuard = TimeSpan.FromSeconds(30);

    private KedaScalerServer _server = null!;

    private ExternalScaler.ExternalScalerClient Client => _server.Client;

    public async Task InitializeAsync() => _server = await KedaScalerServer.StartAsync();

    public async Task DisposeAsync() => await _server.DisposeAsync();

    [Fact]
    public async Task IsActive_IsTrue_WhenTheControllerWantsInstances()
    {
        _server.Decisions.Set(App, 2);

        var response = await Client.IsActiveAsync(KedaScalerServer.Ref(App));

        Assert.True(response.Result);
    }

    [Fact]
    public async Task IsActive_IsFalse_WhenTheAppIsUnloaded()
    {
        _server.Decisions.Set(App, 0, "idle for its keep-alive");

        var response = await Client.IsActiveAsync(KedaScalerServer.Ref(App));

        Assert.False(response.Result);
    }

    [Fact]
    public async Task GetMetricSpec_NamesOneInstancesMetricOfTheApp_WithTargetOne()
    {
        _server.Decisions.Set(App, 3);

        var response = await Client.GetMetricSpecAsync(KedaScalerServer.Ref(App));

        var spec = Assert.Single(response.MetricSpecs);
        Assert.Equal("faast-counter-instances", spec.MetricName);
        Assert.Equal(1, spec.TargetSize);
        Assert.Equal(1.0, spec.TargetSizeFloat);
    }

    [Fact]
    public async Task GetMetrics_ReturnsTheControllersDesiredInstanceCount()
    {
        _server.Decisions.Set(App, 5);

        var response = await Client.GetMetricsAsync(new GetMetricsRequest
        {
            ScaledObjectRef = KedaScalerServer.Ref(App),
            MetricName = "faast-counter-instances",
        });

        var value = Assert.Single(response.MetricValues);
        Assert.Equal("faast-counter-instances", value.MetricName);
        Assert.Equal(5, value.MetricValue_);
        Assert.Equal(5.0, value.MetricValueFloat);
    }

    [Fact]
    public async Task TheHpaFormula_OnTheSpecAndTheMetrics_GivesTheControllersDecision_FromAnyCurrentReplicaCount()
    {
        _server.Decisions.Set(App, 1);
        var spec = Assert.Single((await Client.GetMetricSpecAsync(KedaScalerServer.Ref(App))).MetricSpecs);
        // KEDA reads the float target when it is positive, else the integer one.
        var target = spec.TargetSizeFloat > 0 ? spec.TargetSizeFloat : spec.TargetSize;

        for (var desired = 1; desired <= 9; desired++)
        {
            _server.Decisions.Set(App, desired);
            var metrics = await Client.GetMetricsAsync(new GetMetricsRequest { ScaledObjectRef = KedaScalerServer.Ref(App), MetricName = spec.MetricName });
            var m = Assert.Single(metrics.MetricValues);
            var value = m.MetricValueFloat > 0 ? m.MetricValueFloat : m.MetricValue_; // likewise for the value

            for (var current = 1; current <= 9; current++)
                Assert.Equal(desired, HpaReplicasForAverageValue(current, value, target));
        }
    }

    [Fact]
    public async Task StreamIsActive_SendsTheActivityAtOnce_ThenEachChangeOfIt_AndNotCountChanges()
    {
        _server.Decisions.Set(App, 2);
        using var hang = new CancellationTokenSource(HangGuard);
        using var call = Client.StreamIsActive(KedaScalerServer.Ref(App), cancellationToken: hang.Token);

        Assert.True(await call.ResponseStream.MoveNext(hang.Token));
        Assert.True(call.ResponseStream.Current.Result);

        // Still active: nothing is sent. Wait until the stream has read this decision, so that it cannot be
        // folded into the next change.
        var lookups = _server.Decisions.Lookups;
        _server.Decisions.Set(App, 5, "compute voted +3");
        await Eventually.TrueAsync(() => _server.Decisions.Lookups > lookups, "the stream read the decision for 5 instances");
        _server.Decisions.Set(App, 0, "unloaded after its keep-alive");
        Assert.True(await call.ResponseStream.MoveNext(hang.Token));
        Assert.False(call.ResponseStream.Current.Result);

        _server.Decisions.Set(App, 1, "cold start");
        Assert.True(await call.ResponseStream.MoveNext(hang.Token));
        Assert.True(call.ResponseStream.Current.Result);
    }

    [Fact]
    public async Task StreamIsActive_EndsWithNotFound_WhenTheAppIsRemoved()
    {
        _server.Decisions.Set(App, 1);
        using var hang = new CancellationTokenSource(HangGuard);
        using var call = Client.StreamIsActive(KedaScalerServer.Ref(App), cancellationToken: hang.Token);
        Assert.True(await call.ResponseStream.MoveNext(hang.Token));

        _server.Decisions.Remove(App);

        var error = await Assert.ThrowsAsync<RpcException>(() => call.ResponseStream.MoveNext(hang.Token));
        Assert.Equal(StatusCode.NotFound, error.StatusCode);
        Assert.Contains("\"counter\"", error.Status.Detail, StringComparison.Ordinal);
    }

    [Fact]
    public async Task StreamIsActive_StopsListeningToTheController_WhenKedaClosesTheStream()
    {
        _server.Decisions.Set(App, 1);
        using var hang = new CancellationTokenSource(HangGuard);
        using (var call = Client.StreamIsActive(KedaScalerServer.Ref(App), cancellationToken: hang.Token))
        {
            Assert.True(await call.ResponseStream.MoveNext(hang.Token));
            Assert.Equal(1, _server.Decisions.Subscribers);
        }

        await Eventually.TrueAsync(() => _server.Decisions.Subscribers == 0, "the closed stream unsubscribed from the controller's changes");
    }

    [Theory]
    [InlineData(nameof(ExternalScaler.ExternalScalerClient.IsActive))]
    [InlineData(nameof(ExternalScaler.ExternalScalerClient.StreamIsActive))]
    [InlineData(nameof(ExternalScaler.ExternalScalerClient.GetMetricSpec))]
    [InlineData(nameof(ExternalScaler.ExternalScalerClient.GetMetrics))]
    public async Task AnUnknownApp_IsNotFound_NamingTheApp(string method)
    {
        _server.Decisions.Set(App, 1);

        var error = await Assert.ThrowsAsync<RpcException>(() => Call(method, KedaScalerServer.Ref("shop"), "faast-shop-instances"));

        Assert.Equal(StatusCode.NotFound, error.StatusCode);
        Assert.Contains("app \"shop\"", error.Status.Detail, StringComparison.Ordinal);
    }

    [Theory]
    [InlineData(nameof(ExternalScaler.ExternalScalerClient.IsActive))]
    [InlineData(nameof(ExternalScaler.ExternalScalerClient.StreamIsActive))]
    [InlineData(nameof(ExternalScaler.ExternalScalerClient.GetMetricSpec))]
    [InlineData(nameof(ExternalScaler.ExternalScalerClient.GetMetrics))]
    public async Task AMissingAppKey_IsInvalidArgument_NamingTheKey_EvenWhenTheScaledObjectIsNamedLikeAnApp(string method)
    {
        _server.Decisions.Set(App, 1);

        var error = await Assert.ThrowsAsync<RpcException>(() => Call(method, KedaScalerServer.Ref(app: null, name: App), "faast-counter-instances"));

        Assert.Equal(StatusCode.InvalidArgument, error.StatusCode);
        Assert.Contains("no key \"app\"", error.Status.Detail, StringComparison.Ordinal);
    }

    [Theory]
    [InlineData("", "is empty")]
    [InlineData("shop/../counter", "holds '/'")]
    [InlineData("-counter", "does not start with a letter or digit")]
    [InlineData("counter app", "holds ' ' U+0020")]
    [InlineData("counter\nWarning: forged", "\"counter?Warning: forged\" holds U+000A")]
    [InlineData("a123456789012345678901234567890123456789012345678901234567890123", "64 characters long")]
    public async Task AMalformedAppValue_IsInvalidArgument_NamingTheKeyAndTheProblem(string value, string problem)
    {
        _server.Decisions.Set(App, 1);

        var error = await Assert.ThrowsAsync<RpcException>(() => Client.IsActiveAsync(KedaScalerServer.Ref(value)).ResponseAsync);

        Assert.Equal(StatusCode.InvalidArgument, error.StatusCode);
        Assert.Contains("key \"app\"", error.Status.Detail, StringComparison.Ordinal);
        Assert.Contains(problem, error.Status.Detail, StringComparison.Ordinal);
    }

    [Fact]
    public async Task GetMetrics_ForAMetricTheSpecDidNotName_IsInvalidArgument_NamingBoth()
    {
        _server.Decisions.Set(App, 2);

        var error = await Assert.ThrowsAsync<RpcException>(() => Client.GetMetricsAsync(new GetMetricsRequest
        {
            ScaledObjectRef = KedaScalerServer.Ref(App),
            MetricName = "s0-faast-counter-instances",
        }).ResponseAsync);

        Assert.Equal(StatusCode.InvalidArgument, error.StatusCode);
        Assert.Contains("metricName \"s0-faast-counter-instances\"", error.Status.Detail, StringComparison.Ordinal);
        Assert.Contains("\"faast-counter-instances\"", error.Status.Detail, StringComparison.Ordinal);
    }

    [Fact]
    public async Task GetMetrics_WithoutAScaledObjectRef_IsInvalidArgument_NamingTheField()
    {
        var error = await Assert.ThrowsAsync<RpcException>(() => Client.GetMetricsAsync(new GetMetricsRequest { MetricName = "faast-counter-instances" }).ResponseAsync);

        Assert.Equal(StatusCode.InvalidArgument, error.StatusCode);
        Assert.Contains("scaledObjectRef", error.Status.Detail, StringComparison.Ordinal);
    }

    [Fact]
    public async Task ARefusal_IsLoggedAsAWarning_NamingTheScaledObjectAndTheApp()
    {
        await Assert.ThrowsAsync<RpcException>(() => Client.IsActiveAsync(KedaScalerServer.Ref("shop", name: "shop-scaler", @namespace: "team-a")).ResponseAsync);

        var entry = Assert.Single(_server.Logs.Entries, e => e.EventId == 8153);
        Assert.Equal(LogLevel.Warning, entry.Level);
        Assert.Contains("team-a/shop-scaler", entry.Text, StringComparison.Ordinal);
        Assert.Contains("app \"shop\"", entry.Text, StringComparison.Ordinal);
    }

    [Fact]
    public void TheMetricName_IsLowerCase_WithOnlyDashesBetweenWords()
    {
        Assert.Equal("faast-my-shop-v2-instances", ExternalScalerService.MetricNameOf("My_Shop.v2"));
    }

    /// <summary>
    /// The Kubernetes HPA's replica count for an external metric with an AverageValue target (what KEDA creates by
    /// default): no change while the usage ratio value / (target · current) is within the tolerance (10 % by
    /// default) of 1, else ceil(value / target).
    /// </summary>
    private static int HpaReplicasForAverageValue(int current, double value, double target, double tolerance = 0.1)
    {
        var usageRatio = value / (target * current);
        return Math.Abs(1.0 - usageRatio) <= tolerance ? current : (int)Math.Ceiling(value / target);
    }

    /// <summary>Calls <paramref name="method"/> as KEDA would, to the first answer; throws what the call throws.</summary>
    private async Task Call(string method, ScaledObjectRef so, string metricName)
    {
        switch (method)
        {
            case nameof(ExternalScaler.ExternalScalerClient.IsActive):
                await Client.IsActiveAsync(so);
                break;
            case nameof(ExternalScaler.ExternalScalerClient.GetMetricSpec):
                await Client.GetMetricSpecAsync(so);
                break;
            case nameof(ExternalScaler.ExternalScalerClient.GetMetrics):
                await Client.GetMetricsAsync(new GetMetricsRequest { ScaledObjectRef = so, MetricName = metricName });
                break;
            case nameof(ExternalScaler.ExternalScalerClient.StreamIsActive):
                using (var hang = new CancellationTokenSource(HangGuard))
                using (var call = Client.StreamIsActive(so, cancellationToken: hang.Token))
                    await call.ResponseStream.MoveNext(hang.Token);
                break;
            default:
                throw new ArgumentOutOfRangeException(nameof(method), method, "not a method of ExternalScaler");
        }
    }
}
