using FaaST.Protos.Flash;
using Grpc.Core;

namespace FaaST.FlashBackend.Tests.Server;

/// <summary>GetMany with its items read through io_uring (the server's default).</summary>
public sealed class GetManyTests : GetManyTestsBase
{
    protected override bool UseIoUring => true;

    [Fact]
    public void The_server_reads_through_io_uring_on_this_kernel() =>
        Assert.True(Server.Server.Store.UsesIoUring, $"io_uring unavailable: {Server.Server.Store.IoUringUnavailable}");
}

/// <summary>The same behaviour with --io pread (the fallback where io_uring is refused).</summary>
public sealed class GetManyPreadTests : GetManyTestsBase
{
    protected override bool UseIoUring => false;

    [Fact]
    public void The_server_reads_with_pread_when_told_to() =>
        Assert.False(Server.Server.Store.UsesIoUring);
}

/// <summary>GetMany: many small gets on one stream, each answered as a Get would be, in the caller's tenant only.</summary>
public abstract class GetManyTestsBase : IAsyncLifetime
{
    private InProcessServer _server = null!;

    protected abstract bool UseIoUring { get; }

    private protected InProcessServer Server => _server;

    public async Task InitializeAsync() => _server = await InProcessServer.StartAsync(capacity: 64 << 20, useIoUring: UseIoUring);

    public async Task DisposeAsync() => await _server.DisposeAsync();

    private static GetManyItem Item(ulong id, string blob, string etag = "", long offset = 0, long length = 0) =>
        new() { Id = id, Key = TenantClient.Key(blob), Etag = etag, Offset = offset, Length = length };

    /// <summary>Sends the items in batches of <paramref name="batch"/> on one stream and returns every result by id.</summary>
    private static async Task<Dictionary<ulong, GetManyResult>> GetManyAsync(TenantClient tenant, IReadOnlyList<GetManyItem> items, int batch = 16, Metadata? auth = null)
    {
        using var call = tenant.Tier.GetMany(auth ?? tenant.Auth);
        try
        {
            for (int i = 0; i < items.Count; i += batch)
            {
                var request = new GetManyRequest { Flow = tenant.Flow };
                request.Items.AddRange(items.Skip(i).Take(batch));
                await call.RequestStream.WriteAsync(request);
            }
            await call.RequestStream.CompleteAsync();
        }
        catch (RpcException)
        {
            // The server may end the call (a refusal) before our writes are done; then a write fails with the
            // stream's reset (CANCELLED), and the call's own status, the one to assert, is read from the responses.
        }
        var results = new Dictionary<ulong, GetManyResult>();
        while (await call.ResponseStream.MoveNext(CancellationToken.None))
            foreach (var r in call.ResponseStream.Current.Results)
                Assert.True(results.TryAdd(r.Id, r), $"item {r.Id} answered twice");
        return results;
    }

    [Fact]
    public async Task Every_item_is_answered_once_with_the_bytes_a_get_gives_and_an_oversized_item_fails_alone()
    {
        var tenant = await _server.TenantAsync("many");
        var values = new Dictionary<string, byte[]>();
        for (int i = 0; i < 40; i++)
        {
            var value = new byte[4096 + i];
            Random.Shared.NextBytes(value);
            values[$"k{i}"] = value;
            await tenant.PutAsync($"k{i}", $"\"{i}\"", value);
        }
        await tenant.PutAsync("large", "\"L\"", new byte[200 << 10]);
        var items = values.Keys.Select((k, i) => Item((ulong)i, k)).ToList();
        items.Add(Item(100, "absent"));
        items.Add(Item(101, "k3", etag: "\"other\""));          // not the version held: not found
        items.Add(Item(102, "k5", offset: 100, length: 50));    // a range
        items.Add(Item(103, "large"));                          // 200 KiB: refused for this item only
        items.Add(Item(104, "large", offset: 1000, length: 4096)); // a small range of it is fine

        var results = await GetManyAsync(tenant, items);

        Assert.Equal(items.Count, results.Count);
        for (int i = 0; i < 40; i++)
        {
            var r = results[(ulong)i];
            Assert.True(r.Header.Found);
            Assert.Equal($"\"{i}\"", r.Header.Etag);
            Assert.Equal(values[$"k{i}"], r.Data.ToByteArray());
        }
        Assert.False(results[100].Header.Found);
        Assert.False(results[101].Header.Found);
        Assert.Equal(values["k5"].AsSpan(100, 50).ToArray(), results[102].Data.ToByteArray());
        Assert.Equal((100L, 50L, (long)values["k5"].Length), (results[102].Header.Offset, results[102].Header.Length, results[102].Header.ObjectLength));
        Assert.Equal(nameof(StatusCode.InvalidArgument), results[103].ErrorCode);
        Assert.Contains("GetMany item 103 of 'c/large'", results[103].Error, StringComparison.Ordinal);
        Assert.Contains("read larger ranges with Get", results[103].Error, StringComparison.Ordinal);
        Assert.Equal(4096, results[104].Data.Length);
        var stats = await tenant.StatsAsync();
        Assert.Equal(42, stats.Hits);   // the 40 values, the range of k5 and the small range of large, as Gets count them
        Assert.Equal(2, stats.Misses);  // absent, and k3 at a version the tier does not hold
    }

    [Fact]
    public async Task A_malformed_item_fails_alone_naming_its_id()
    {
        var tenant = await _server.TenantAsync("malformed");
        await tenant.PutAsync("ok", "\"1\"", [1, 2, 3]);
        var bad = new GetManyItem { Id = 7, Key = new ObjectKey { Container = "", Blob = "x" } };

        var results = await GetManyAsync(tenant, [bad, Item(8, "ok"), Item(9, "ok", offset: -1)]);

        Assert.Equal(nameof(StatusCode.InvalidArgument), results[7].ErrorCode);
        Assert.Contains("GetMany item 7", results[7].Error, StringComparison.Ordinal);
        Assert.Equal(new byte[] { 1, 2, 3 }, results[8].Data.ToByteArray());
        Assert.Equal(nameof(StatusCode.InvalidArgument), results[9].ErrorCode);
        Assert.Contains("must not be negative", results[9].Error, StringComparison.Ordinal);
    }

    [Fact]
    public async Task Without_a_token_the_stream_is_refused_and_a_tenant_never_sees_another_tenants_object()
    {
        var owner = await _server.TenantAsync("owner");
        await owner.PutAsync("secret", "\"1\"", [42]);
        var other = await _server.TenantAsync("other");

        var refused = await Assert.ThrowsAsync<RpcException>(() => GetManyAsync(other, [Item(1, "secret")], auth: new Metadata()));
        Assert.Equal(StatusCode.Unauthenticated, refused.StatusCode);
        var results = await GetManyAsync(other, [Item(1, "secret")]);
        Assert.False(results[1].Header.Found);
        Assert.True((await GetManyAsync(owner, [Item(1, "secret")]))[1].Header.Found);
    }

    [Fact]
    public async Task A_flow_that_is_not_open_ends_the_stream_with_not_found()
    {
        var tenant = await _server.TenantAsync("noflow");
        using var call = tenant.Tier.GetMany(tenant.Auth);
        await call.RequestStream.WriteAsync(new GetManyRequest { Flow = 9999, Items = { Item(1, "x") } });
        await call.RequestStream.CompleteAsync();
        var e = await Assert.ThrowsAsync<RpcException>(async () =>
        {
            while (await call.ResponseStream.MoveNext(CancellationToken.None))
            {
            }
        });
        Assert.Equal(StatusCode.NotFound, e.StatusCode);
        Assert.Contains("flow 9999", e.Status.Detail, StringComparison.Ordinal);
    }
}
