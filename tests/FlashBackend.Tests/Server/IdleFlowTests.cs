using FaaST.FlashBackend.Server;
using Grpc.Core;

namespace FaaST.FlashBackend.Tests.Server;

/// <summary>Flows without a request for the server's idle time are closed (flash.proto CloseFlow's comment): a crashed
/// instance's flow does not stay open, while a flow in use is never closed under its instance.</summary>
public sealed class IdleFlowTests
{
    [Fact]
    public async Task A_flow_idle_longer_than_the_idle_time_is_closed_and_a_busy_flow_of_the_same_tenant_stays_open()
    {
        using var files = new ServerFiles();
        await using var server = await FlashServer.StartAsync(new ServeOptions
        {
            Device = files.Device,
            Capacity = 16 << 20,
            StateDirectory = files.State,
            FlowIdleTimeout = TimeSpan.FromSeconds(2),
        }, logging: _ => { });
        using var clients = new FlashClients(server.Address, server.AdminKeyPath);
        var busy = await clients.TenantAsync("idle-flows");
        var idle = await TenantClient.OpenAsync(clients.Tier, busy.Token);
        Assert.NotEqual(busy.Flow, idle.Flow);
        await busy.PutAsync("k", "\"1\"", [1, 2, 3]);

        // The busy flow gets every 200 ms (well inside 2 s, however slow the machine); the idle one does nothing.
        using var stop = new CancellationTokenSource();
        var keepBusy = Task.Run(async () =>
        {
            while (!stop.IsCancellationRequested)
            {
                Assert.True((await busy.GetAsync("k")).Header.Found);
                await Task.Delay(200);
            }
        });
        await Eventually.TrueAsync(async () => (await busy.StatsAsync()).Flows == 1, "the idle flow was closed", seconds: 60);
        stop.Cancel();
        await keepBusy;

        var closed = await Assert.ThrowsAsync<RpcException>(() => idle.GetAsync("k"));
        Assert.Equal(StatusCode.NotFound, closed.StatusCode);
        Assert.Contains($"flow {idle.Flow} is not open for tenant 'idle-flows'", closed.Status.Detail, StringComparison.Ordinal);
        Assert.True((await busy.GetAsync("k")).Header.Found);
    }
}
