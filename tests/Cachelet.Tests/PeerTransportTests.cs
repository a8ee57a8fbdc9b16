using System.Collections.Concurrent;
using System.Diagnostics.Metrics;
using FaaST.Cachelet.Peers;
using FaaST.Peers;
using FaaST.Protos.Peer;

namespace FaaST.Cachelet.Tests;

/// <summary>
/// The client's transports: the Lookup stream, and instances that leave the view
/// (the client's connections to them are closed and forgotten).
/// </summary>
public sealed partial class PeerProtocolTests
{
    /// <summary>Kestrel's open connections per listening port, from its own meter.</summary>
    private sealed class KestrelConnections : IDisposable
    {
        private readonly MeterListener _listener = new();
        private readonly ConcurrentDictionary<int, long> _open = new();

        public KestrelConnections()
        {
            _listener.InstrumentPublished = (instrument, listener) =>
            {
                if (instrument.Meter.Name == "Microsoft.AspNetCore.Server.Kestrel" && instrument.Name == "kestrel.active_connections")
                    listener.EnableMeasurementEvents(instrument);
            };
            _listener.SetMeasurementEventCallback<long>((_, delta, tags, _) =>
            {
                foreach (var tag in tags)
                    if (tag.Key == "server.port" && tag.Value is int port)
                        _open.AddOrUpdate(port, delta, (_, n) => n + delta);
            });
            _listener.Start();
        }

        public long OpenOn(Uri address) => _open.GetValueOrDefault(address.Port);

        public void Dispose() => _listener.Dispose();
    }

    [Fact]
    public async Task When_an_owner_leaves_the_view_its_channel_lookup_stream_and_bulk_connections_are_closed_and_forgotten()
    {
        using var connections = new KestrelConnections();
        await using var stays = await PeerNode.StartAsync("stays", azurite.Store, LocalRead, Generous);
        await using var leaves = await PeerNode.StartAsync("leaves", azurite.Store, LocalRead, Generous);
        await using var reader = await PeerNode.StartAsync("reader", azurite.Store, LocalRead, Generous);
        // A small object (the Lookup stream) and a large one (bulk) from each owner.
        var names = new Dictionary<PeerNode, string[]>
        {
            [stays] = [await PutAsync(Random(1000)), await PutAsync(Random(1 << 20))],
            [leaves] = [await PutAsync(Random(1000)), await PutAsync(Random(1 << 20))],
        };
        foreach (var (owner, objects) in names)
        {
            reader.Owners.View[owner.Id] = owner.AsPeer;
            foreach (var name in objects)
            {
                reader.Owners.Remote[Placement(name)] = owner.AsPeer;
                (await ReadAsync(owner, name)).Dispose(); // cached at the owner: the reader's read is a remote hit
                using var read = await ReadAsync(reader, name);
                Assert.Equal(ReadPath.RemoteHit, read.Path);
            }
        }
        Assert.Equal([leaves.Address, stays.Address], reader.Client.ConnectedPeers.OrderBy(u => u.Port == stays.Address.Port));
        Assert.True(connections.OpenOn(leaves.Address) > 0);

        reader.Owners.View.TryRemove(leaves.Id, out _);
        reader.Cache.OnOwnershipChanged();

        Assert.Equal([stays.Address], reader.Client.ConnectedPeers);
        // The closes reach the departed instance's Kestrel asynchronously: wait for them (bounded).
        for (var waited = 0; connections.OpenOn(leaves.Address) > 0 && waited < 300; waited++)
            await Task.Delay(100);
        Assert.Equal(0, connections.OpenOn(leaves.Address));
        Assert.True(connections.OpenOn(stays.Address) > 0);
    }

    [Fact]
    public async Task Small_objects_come_inline_on_the_lookup_stream_and_a_lookup_with_wrong_credentials_is_refused()
    {
        await using var owner = await PeerNode.StartAsync("a", azurite.Store, LocalRead, Generous);
        var objects = await Task.WhenAll(Enumerable.Range(0, 20).Select(async i =>
        {
            var data = Random(100 + i * 1000);
            var name = await PutAsync(data);
            (await ReadAsync(owner, name)).Dispose();
            return (Name: name, Data: data);
        }));
        // Bulk and the Get method are off: only the Lookup stream can answer.
        using var client = new PeerClient(new PeerOptions { Credentials = PeerNode.NewCredentials(), Timeout = Generous, BulkTransfers = false });
        var answers = await Task.WhenAll(objects.Select(o => GetAsync(client, owner.Address, new GetRequest { Blob = Ref(o.Name) })));
        for (var i = 0; i < objects.Length; i++)
        {
            Assert.Equal(ObjectHeader.Types.Status.Ok, answers[i].Header.Status);
            Assert.Equal(objects[i].Data, answers[i].Bytes);
        }
        Assert.Equal(objects.Length, owner.Cache.Metrics.Reads(ReadPath.LocalHit)); // each served once, by the owner's index
        Assert.Equal(0, client.LookupFailures); // every one on the Lookup stream, none left to a Get

        using var stranger = new PeerClient(new PeerOptions { Credentials = new PeerAuth("another-secret"u8, PeerNode.App), Timeout = Generous, BulkTransfers = false });
        var refused = await Assert.ThrowsAsync<PeerException>(() => stranger.GetAsync(owner.Address, new GetRequest { Blob = Ref(objects[0].Name) }, _ => new MemoryStream(), default));
        Assert.Contains("credentials", refused.Message, StringComparison.Ordinal);
        Assert.Equal(1, stranger.LookupFailures);
        await Eventually.TrueAsync(() => owner.Logs.All.Contains("Refused a peer Lookup call", StringComparison.Ordinal), "the owner logs the refused lookup");
    }
}
