using FaaST.Cachelet.Peers;
using FaaST.Cachelet.Policy;
using FaaST.Cachelet.Telemetry;
using FaaST.Protos.Peer;
using FaaST.Storage;

namespace FaaST.Cachelet.Tests;

/// <summary>The peer protocol between two real cachelets on real Kestrel listeners, over real Azurite.</summary>
[Collection("azurite")]
public sealed class PeerProtocolTests(AzuriteFixture azurite)
{
    private static readonly CachePolicy LocalRead = new() { Consistency = ConsistencyPreset.LocalSyncLocal };

    private static byte[] Random(int n)
    {
        var b = new byte[n];
        System.Random.Shared.NextBytes(b);
        return b;
    }

    private async Task<string> PutAsync(byte[] data)
    {
        await azurite.Store.CreateContainerIfNotExistsAsync("peers");
        var name = $"obj-{Guid.NewGuid():N}";
        await azurite.Store.UploadAsync("peers", name, data);
        return name;
    }

    private static byte[] Bytes(CachedRead read) => read.Entry is { } e ? e.Extent.Span.ToArray() : read.Bytes.ToArray();

    [Fact]
    public async Task A_non_owner_gets_a_remote_miss_then_the_owner_serves_a_remote_hit()
    {
        await using var owner = await PeerNode.StartAsync("a", azurite.Store, LocalRead);
        await using var reader = await PeerNode.StartAsync("b", azurite.Store, LocalRead);
        await using var third = await PeerNode.StartAsync("c", azurite.Store, LocalRead);
        reader.Owners.Everything = owner.AsPeer;
        third.Owners.Everything = owner.AsPeer;
        var data = Random(300_000);
        var name = await PutAsync(data);

        using (var first = (await reader.Cache.ReadAsync(azurite.Store, "peers", name, default))!.Value)
        {
            Assert.Equal(ReadPath.RemoteMiss, first.Path);
            Assert.Equal(data, Bytes(first));
        }
        using (var second = (await third.Cache.ReadAsync(azurite.Store, "peers", name, default))!.Value)
        {
            Assert.Equal(ReadPath.RemoteHit, second.Path);
            Assert.Equal(data, Bytes(second));
        }
        using (var local = (await reader.Cache.ReadAsync(azurite.Store, "peers", name, default))!.Value)
            Assert.Equal(ReadPath.LocalHit, local.Path);
        Assert.Equal(1, owner.Cache.Metrics.Reads(ReadPath.LocalMiss));
        Assert.Equal(1, reader.Cache.Metrics.Reads(ReadPath.RemoteMiss));
        Assert.Equal(1, third.Cache.Metrics.Reads(ReadPath.RemoteHit));
        Assert.Equal(0, reader.Cache.PeerFallbacks);
    }
}

