using FaaST.ScaleController.Keda;
using Grpc.Core;

namespace FaaST.ScaleController.Tests.Keda;

/// <summary>
/// KEDA's StreamIsActive subscribers are bounded (issue 19, defect 10): each open stream holds a subscription to the
/// controller's changes, so a client opening them without end would hold the platform's memory.
/// </summary>
public sealed class ExternalScalerLimitsTests
{
    private static readonly TimeSpan HangGuard = TimeSpan.FromSeconds(30);

    [Fact]
    public async Task A_stream_past_the_per_app_or_the_total_bound_is_resource_exhausted_and_a_closed_one_frees_its_place()
    {
        await using var server = await KedaScalerServer.StartAsync(new KedaScalerOptions { MaxStreamsPerApp = 2, MaxStreams = 3 });
        foreach (var app in new[] { "a", "b", "c" })
            server.Decisions.Set(app, 1);
        using var hang = new CancellationTokenSource(HangGuard);
        var open = new List<AsyncServerStreamingCall<Protos.Keda.IsActiveResponse>>();
        async Task<AsyncServerStreamingCall<Protos.Keda.IsActiveResponse>> OpenAsync(string app)
        {
            var call = server.Client.StreamIsActive(KedaScalerServer.Ref(app), cancellationToken: hang.Token);
            open.Add(call);
            Assert.True(await call.ResponseStream.MoveNext(hang.Token)); // open: its first answer came
            return call;
        }
        async Task<RpcException> RefusedAsync(string app)
        {
            using var call = server.Client.StreamIsActive(KedaScalerServer.Ref(app), cancellationToken: hang.Token);
            return await Assert.ThrowsAsync<RpcException>(async () => await call.ResponseStream.MoveNext(hang.Token));
        }

        try
        {
            var first = await OpenAsync("a");
            await OpenAsync("a");
            var perApp = await RefusedAsync("a");
            await OpenAsync("b");
            var total = await RefusedAsync("c");

            Assert.Equal(StatusCode.ResourceExhausted, perApp.StatusCode);
            Assert.Contains("MaxStreamsPerApp", perApp.Status.Detail, StringComparison.Ordinal);
            Assert.Equal(StatusCode.ResourceExhausted, total.StatusCode);
            Assert.Contains("MaxStreams", total.Status.Detail, StringComparison.Ordinal);

            first.Dispose(); // KEDA closes one: its place is free again (once the server saw it end)
            open.Remove(first);
            await Eventually.TrueAsync(() => server.Decisions.Subscribers == 2, "the closed stream to end on the server");
            await OpenAsync("a");
        }
        finally
        {
            foreach (var call in open)
                call.Dispose();
        }
    }
}
