using FaaST.FlashBackend.Tests.Engine;
using FaaST.Protos.Flash;
using Grpc.Core;

namespace FaaST.FlashBackend.Tests.Server;

/// <summary>Gets, puts, deletes, admission and stats through a real server on a real device file.</summary>
public sealed class ServerDataPathTests : IAsyncLifetime
{
    private InProcessServer _s = null!;

    public async Task InitializeAsync() => _s = await InProcessServer.StartAsync();

    public async Task DisposeAsync() => await _s.DisposeAsync();

    [Theory]
    [InlineData(0, 1024)]
    [InlineData(1, 1024)]
    [InlineData(4096, 4096)]
    [InlineData((1 << 20) + 4321, 100_000)]
    public async Task AValueRoundTripsByteForByteAndComesBackInMessagesOfAtMost64KiB(int size, int putChunk)
    {
        TenantClient a = await _s.TenantAsync("app-a");
        byte[] value = EngineFiles.Value("v", size, size);
        await a.PutAsync("obj", "\"e1\"", value, putChunk);

        (GetHeader h, byte[] data, int largest) = await a.GetAsync("obj", "\"e1\"");

        Assert.True(h.Found);
        Assert.Equal("\"e1\"", h.Etag);
        Assert.Equal(size, h.ObjectLength);
        Assert.Equal(value, data);
        Assert.InRange(largest, 0, 64 << 10);
    }

    [Fact]
    public async Task AByteRangeGetReturnsExactlyThoseBytesAndARangePastTheEndIsClipped()
    {
        TenantClient a = await _s.TenantAsync("app-a");
        byte[] value = EngineFiles.Value("r", 1, 300_000);
        await a.PutAsync("obj", "\"e1\"", value);

        var mid = await a.GetAsync("obj", "\"e1\"", offset: 140_000, length: 150_000);
        var tail = await a.GetAsync("obj", "\"e1\"", offset: 299_000, length: 5_000);

        Assert.Equal(value.AsSpan(140_000, 150_000).ToArray(), mid.Data);
        Assert.Equal((140_000L, 150_000L, 300_000L), (mid.Header.Offset, mid.Header.Length, mid.Header.ObjectLength));
        Assert.Equal(value.AsSpan(299_000).ToArray(), tail.Data);
        Assert.Equal(1000, tail.Header.Length);
    }

    [Fact]
    public async Task AGetForAnotherEtagMissesAndAnEmptyEtagNamesTheStoredVersion()
    {
        TenantClient a = await _s.TenantAsync("app-a");
        await a.PutAsync("obj", "\"e2\"", [9, 9]);

        Assert.False((await a.GetAsync("obj", "\"e1\"")).Header.Found);
        var any = await a.GetAsync("obj", "");
        Assert.True(any.Header.Found);
        Assert.Equal("\"e2\"", any.Header.Etag);
        Assert.Equal(new byte[] { 9, 9 }, any.Data);
    }

    [Fact]
    public async Task AnOversizedPutIsInvalidArgumentNamingTheSizeAndTheMaximum()
    {
        TenantClient a = await _s.TenantAsync("app-a");
        long tooBig = a.MaxValue + 1;
        var e = await Assert.ThrowsAsync<RpcException>(() => a.PutAsync("big", "\"1\"", [], declared: tooBig));
        Assert.Equal(StatusCode.InvalidArgument, e.StatusCode);
        Assert.Contains($"{tooBig} bytes", e.Status.Detail);
        Assert.Contains($"{a.MaxValue}", e.Status.Detail);
    }

    [Theory]
    [InlineData(1000, 999)]
    [InlineData(1000, 1001)]
    [InlineData(200_000, 150_000)]
    public async Task APutWhoseBytesDifferFromItsHeaderIsInvalidArgumentAndStoresNothing(int declared, int sent)
    {
        TenantClient a = await _s.TenantAsync("app-a");
        var e = await Assert.ThrowsAsync<RpcException>(() => a.PutAsync("k", "\"1\"", new byte[sent], declared: declared));

        Assert.Equal(StatusCode.InvalidArgument, e.StatusCode);
        Assert.Contains($"{declared}", e.Status.Detail);
        Assert.False((await a.GetAsync("k")).Header.Found);
    }

    [Fact]
    public async Task APutWhoseFirstMessageIsNotItsHeaderIsInvalidArgument()
    {
        TenantClient a = await _s.TenantAsync("app-a");
        using var call = a.Tier.Put(a.Auth);
        await call.RequestStream.WriteAsync(new PutRequest { Data = Google.Protobuf.ByteString.CopyFrom(1, 2) });
        await call.RequestStream.CompleteAsync();
        var e = await Assert.ThrowsAsync<RpcException>(async () => await call);
        Assert.Equal(StatusCode.InvalidArgument, e.StatusCode);
        Assert.Contains("first message must be the header", e.Status.Detail);
    }

    [Fact]
    public async Task AGetOnAFlowThatWasClosedIsNotFound()
    {
        TenantClient a = await _s.TenantAsync("app-a");
        await a.Tier.CloseFlowAsync(new CloseFlowRequest { Flow = a.Flow }, a.Auth);
        var e = await Assert.ThrowsAsync<RpcException>(() => a.GetAsync("k"));
        Assert.Equal(StatusCode.NotFound, e.StatusCode);
        Assert.Contains($"flow {a.Flow}", e.Status.Detail);
    }

    [Fact]
    public async Task AWholeGetWhoseChecksumFailsEndsWithDataLossAndTheKeyIsDropped()
    {
        TenantClient a = await _s.TenantAsync("app-a");
        byte[] value = new byte[50_000];
        new Random(7).NextBytes(value);
        "FLIP-ME-MARKER-0123456789"u8.CopyTo(value.AsSpan(30_000));
        await a.PutAsync("obj", "\"1\"", value);
        FlipMarker(_s.DevicePath, "FLIP-ME-MARKER-0123456789"u8.ToArray());

        var e = await Assert.ThrowsAsync<RpcException>(() => a.GetAsync("obj", "\"1\""));

        Assert.Equal(StatusCode.DataLoss, e.StatusCode);
        Assert.Contains("'c/obj'", e.Status.Detail);
        Assert.False((await a.GetAsync("obj", "\"1\"")).Header.Found);
        Assert.Equal(1, (await a.StatsAsync()).ChecksumFailures);
    }

    /// <summary>Flips one byte of the only place the marker occurs on the device (written through the page cache; the
    /// server's next O_DIRECT read sees it, the kernel writes dirty pages back before a direct read of them).</summary>
    private static void FlipMarker(string device, byte[] marker)
    {
        byte[] all = File.ReadAllBytes(device);
        int at = all.AsSpan().IndexOf(marker);
        Assert.True(at >= 0, "marker not found on the device");
        using var f = new FileStream(device, FileMode.Open, FileAccess.Write, FileShare.ReadWrite);
        f.Position = at;
        f.WriteByte((byte)(marker[0] ^ 0xFF));
    }

    [Fact]
    public async Task AnLcSloTheDeviceCannotCarryIsResourceExhaustedNamingTenantAskedAndAvailable()
    {
        // The device here is 50K tokens/s: 40K IOPS fits, a second 40K does not.
        var first = await _s.Admin.RegisterTenantAsync(new RegisterTenantRequest { Tenant = "lc-a", IopsSlo = 20_000, P95LatencyUs = 3000, ReadRatioHint = 1 }, _s.AdminAuth);
        Assert.Equal("LC", first.Class);
        var e = await Assert.ThrowsAsync<RpcException>(async () =>
            await _s.Admin.RegisterTenantAsync(new RegisterTenantRequest { Tenant = "lc-b", IopsSlo = 40_000, P95LatencyUs = 3000, ReadRatioHint = 1 }, _s.AdminAuth));

        Assert.Equal(StatusCode.ResourceExhausted, e.StatusCode);
        Assert.Contains("'lc-b'", e.Status.Detail);
        Assert.Contains("40000 IOPS", e.Status.Detail);
        Assert.Contains("admitted LC tenants hold 20000", e.Status.Detail);
        var stats = await _s.Admin.StatsAsync(new ServerStatsRequest(), _s.AdminAuth);
        Assert.Equal(["lc-a"], stats.Tenants.Select(t => t.Tenant).ToArray());
    }

    [Fact]
    public async Task DeregisteringATenantDeletesItsObjectsAndLeavesOthers()
    {
        TenantClient a = await _s.TenantAsync("app-a");
        TenantClient b = await _s.TenantAsync("app-b");
        for (int i = 0; i < 3; i++)
            await a.PutAsync($"k{i}", "\"1\"", [1]);
        await b.PutAsync("k0", "\"1\"", [2]);

        var reply = await _s.Admin.DeregisterTenantAsync(new DeregisterTenantRequest { Tenant = "app-a" }, _s.AdminAuth);

        Assert.Equal(3, reply.ObjectsDeleted);
        Assert.Equal(new byte[] { 2 }, (await b.GetAsync("k0")).Data);
        var stats = await _s.Admin.StatsAsync(new ServerStatsRequest(), _s.AdminAuth);
        Assert.Equal(1, stats.LiveObjects);
        Assert.True(stats.DirectIo);
        Assert.Equal("en4s", stats.Scheduler);
    }

    [Fact]
    public async Task TenantStatsCountGetsHitsMissesPutsDeletesAndBytes()
    {
        TenantClient a = await _s.TenantAsync("app-a");
        await a.PutAsync("k", "\"1\"", new byte[10_000]);
        await a.GetAsync("k", "\"1\"");
        await a.GetAsync("none");
        await a.DeleteAsync("k");

        TenantStats s = await a.StatsAsync();

        Assert.Equal(("app-a", "BE", 2L, 1L, 1L, 1L, 1L), (s.Tenant, s.Class, s.Gets, s.Hits, s.Misses, s.Puts, s.Deletes));
        Assert.Equal((10_000L, 10_000L, 1), (s.BytesRead, s.BytesWritten, s.Flows));
        Assert.True(s.Iops > 0, "the window counts the I/Os served");
        Assert.True(s.ReadP95Us > 0, "the window holds the read's latency");
    }
}
