using System.Net.Sockets;
using FaaST.Peers;
using FaaST.Protos.Peer;

namespace FaaST.Cachelet.Tests;

/// <summary>Bulk Gets: the peer port's plain framing for large objects (protos/peer.proto).</summary>
public sealed partial class PeerProtocolTests
{
    public enum BulkMisbehaviour
    {
        StallBeforeReply,
        StallAfterPart,
        CloseAfterPart,
        InvalidRange,
        PartialRangeForWholeRead,
        NotCachedToAFetch,
        ErrorReply,
        OversizedReplyAfterHeartbeat,
        HeartbeatsForever,
    }

    [Theory]
    [InlineData(BulkMisbehaviour.StallBeforeReply, "did not answer Get")]
    [InlineData(BulkMisbehaviour.StallAfterPart, "did not answer Get")]
    [InlineData(BulkMisbehaviour.CloseAfterPart, "ended a bulk Get after 2097152 of 4194321 bytes")]
    [InlineData(BulkMisbehaviour.InvalidRange, "invalid range")]
    [InlineData(BulkMisbehaviour.PartialRangeForWholeRead, "for a whole-object read")]
    [InlineData(BulkMisbehaviour.NotCachedToAFetch, "answered NotCached")]
    [InlineData(BulkMisbehaviour.ErrorReply, "could not serve")]
    [InlineData(BulkMisbehaviour.OversizedReplyAfterHeartbeat, "bulk reply (at most")]
    [InlineData(BulkMisbehaviour.HeartbeatsForever, "still fetching")]
    public async Task A_misbehaving_bulk_owner_is_given_up_the_read_comes_from_storage_and_nothing_torn_is_cached(BulkMisbehaviour how, string reason)
    {
        var data = Random((4 << 20) + 17);
        var name = await PutAsync(data);
        var etag = (await azurite.Store.GetPropertiesAsync(Container, name))!.ETag;
        await using var fake = FakeBulkPeer.Start(async (socket, request, ct) =>
        {
            var whole = new ObjectHeader { Status = ObjectHeader.Types.Status.Ok, Version = etag, Length = data.Length, RangeLength = data.Length };
            switch (how)
            {
                case BulkMisbehaviour.StallBeforeReply:
                    await FakeBulkPeer.UntilClosedAsync(socket, ct);
                    return;
                case BulkMisbehaviour.InvalidRange:
                    await FakeBulkPeer.ReplyAsync(socket, new BulkReply { Header = new ObjectHeader(whole) { RangeLength = data.Length + 1 } });
                    return;
                case BulkMisbehaviour.PartialRangeForWholeRead:
                    await FakeBulkPeer.ReplyAsync(socket, new BulkReply { Header = new ObjectHeader(whole) { RangeLength = data.Length / 2 } });
                    await FakeBulkPeer.SendAsync(socket, data.AsMemory(0, data.Length / 2));
                    return;
                case BulkMisbehaviour.NotCachedToAFetch:
                    await FakeBulkPeer.ReplyAsync(socket, new BulkReply { Header = new ObjectHeader { Status = ObjectHeader.Types.Status.NotCached } });
                    return;
                case BulkMisbehaviour.ErrorReply:
                    await FakeBulkPeer.ReplyAsync(socket, new BulkReply { Error = "storage is down" });
                    return;
                case BulkMisbehaviour.OversizedReplyAfterHeartbeat:
                    await FakeBulkPeer.ReplyAsync(socket, new BulkReply());
                    await FakeBulkPeer.SendAsync(socket, BitConverter.GetBytes(1 << 30));
                    await FakeBulkPeer.UntilClosedAsync(socket, ct);
                    return;
                case BulkMisbehaviour.HeartbeatsForever:
                    while (true)
                    {
                        await FakeBulkPeer.ReplyAsync(socket, new BulkReply());
                        await Task.Delay(100, ct);
                    }
            }
            await FakeBulkPeer.ReplyAsync(socket, new BulkReply { Header = whole });
            await FakeBulkPeer.SendAsync(socket, data.AsMemory(0, 2 << 20));
            if (how == BulkMisbehaviour.StallAfterPart)
                await FakeBulkPeer.UntilClosedAsync(socket, ct);
            else if (how == BulkMisbehaviour.CloseAfterPart)
                socket.Shutdown(SocketShutdown.Send);
            else
                throw new InvalidOperationException(how.ToString());
        });
        // Only a stall needs the timeout to end it, and gets a short one; the other faults must be
        // caught by the protocol's checks, so their timeout is out of reach.
        var stalls = how is BulkMisbehaviour.StallBeforeReply or BulkMisbehaviour.StallAfterPart;
        await using var reader = await PeerNode.StartAsync("b", azurite.Store, timeout: stalls ? TimeSpan.FromMilliseconds(500) : Generous,
            fetchTimeout: how == BulkMisbehaviour.HeartbeatsForever ? TimeSpan.FromSeconds(1) : null);
        reader.Owners.Everything = fake.AsPeer;

        using (var read = await ReadAsync(reader, name))
        {
            Assert.Equal(ReadPath.LocalMiss, read.Path);
            Assert.Equal(etag, read.ETag);
            Assert.Equal(Sha(data), Sha(Bytes(read)));
        }
        Assert.Equal(1, fake.Calls);
        Assert.Equal(1, reader.Cache.PeerFallbacks);
        var warning = Assert.Single(reader.Logs.Lines, l => l.Contains("failed, reading storage instead", StringComparison.Ordinal));
        Assert.Contains(reason, warning, StringComparison.Ordinal);
        Assert.Equal(data.Length, reader.Cache.CachedBytes); // no partial extent leaked
        Assert.Equal(1, reader.Cache.ObjectCount);
        if (how != BulkMisbehaviour.NotCachedToAFetch) // (that answer leaves the connection in step: it is kept)
            await fake.Abandoned.Task.WaitAsync(Generous); // the requester closed the connection, not left it open
        Assert.Equal(0, reader.Cache.PinnedBytes);
    }

    [Fact]
    public async Task Bulk_requests_answer_with_the_bytes_and_bad_ones_lose_only_their_own_connection()
    {
        await using var owner = await PeerNode.StartAsync("a", azurite.Store, LocalRead);
        var data = Random(3_000_000);
        var name = await PutAsync(data);
        var token = PeerNode.NewCredentials();

        // A good connection: the object, then a range of it, on the same connection.
        using var good = await ConnectBulkAsync(owner, token);
        await FakeBulkPeer.SendAsync(good, FakeBulkPeer.Frame(new GetRequest { Blob = Ref(name), Fetch = true }));
        var (header, bytes) = await ReadBulkAnswerAsync(good);
        Assert.Equal(ObjectHeader.Types.Status.Ok, header.Status);
        Assert.True(header.Fetched);
        Assert.Equal(data, bytes);
        await FakeBulkPeer.SendAsync(good, FakeBulkPeer.Frame(new GetRequest { Blob = Ref(name), Offset = 1000, Length = 5000 }));
        (header, bytes) = await ReadBulkAnswerAsync(good);
        Assert.Equal(data.AsSpan(1000, 5000).ToArray(), bytes);

        // Bad requests: each gets an error reply (the connection stays) or, if the framing is broken,
        // the connection closed. A good request always works right after.
        var cases = new (string Why, byte[] Frame, bool Closes, string Error)[]
        {
            ("no blob", FakeBulkPeer.Frame(new GetRequest()), false, "names no blob"),
            ("range outside", FakeBulkPeer.Frame(new GetRequest { Blob = Ref(name), Offset = data.Length, Length = 1 }), false, "is outside"),
            ("unknown account", FakeBulkPeer.Frame(new GetRequest { Blob = new BlobRef { Account = "http://elsewhere/", Container = Container, Blob = name } }), false, "no storage account"),
            ("garbage", [5, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF], true, ""),
            ("oversized frame", [0xFF, 0xFF, 0xFF, 0x7F], true, ""),
        };
        foreach (var (why, frame, closes, error) in cases)
        {
            using var bad = await ConnectBulkAsync(owner, token);
            await FakeBulkPeer.SendAsync(bad, frame);
            if (closes)
            {
                Assert.True(await bad.ReceiveAsync(new byte[1]).WaitAsync(Generous) == 0, why);
            }
            else
            {
                var reply = await ReadReplyAsync(bad);
                Assert.True(reply.Error.Contains(error, StringComparison.Ordinal), $"{why}: {reply.Error}");
                await FakeBulkPeer.SendAsync(bad, FakeBulkPeer.Frame(new GetRequest { Blob = Ref(name) }));
                Assert.Equal(data, (await ReadBulkAnswerAsync(bad)).Bytes);
            }
            await FakeBulkPeer.SendAsync(good, FakeBulkPeer.Frame(new GetRequest { Blob = Ref(name) }));
            Assert.Equal(data, (await ReadBulkAnswerAsync(good)).Bytes);
        }

        Assert.Contains("Dropped a bulk peer connection", owner.Logs.All, StringComparison.Ordinal); // the broken framing, logged

        // Wrong credentials: an error reply, the connection closed, no bytes, logged.
        using (var intruder = await ConnectBulkAsync(owner, new PeerAuth("another-secret"u8, PeerNode.App)))
        {
            await FakeBulkPeer.SendAsync(intruder, FakeBulkPeer.Frame(new GetRequest { Blob = Ref(name) }));
            Assert.Contains("credentials", (await ReadReplyAsync(intruder)).Error, StringComparison.Ordinal);
            Assert.Equal(0, await intruder.ReceiveAsync(new byte[1]).WaitAsync(Generous));
        }
        Assert.Contains("Refused a peer Get call (bulk connection)", owner.Logs.All, StringComparison.Ordinal);
        await Eventually.TrueAsync(() => owner.Cache.PinnedBytes == 0, "the owner pins nothing");
    }

    [Fact]
    public async Task A_remote_miss_that_outlasts_the_peer_timeout_arrives_because_the_owner_says_it_is_fetching()
    {
        // The owner says it is still fetching once a second: more often than the requester's timeout.
        var slow = new SlowDownloads(azurite.Store, TimeSpan.FromSeconds(4));
        await using var owner = await PeerNode.StartAsync("a", slow, LocalRead);
        await using var reader = await PeerNode.StartAsync("b", azurite.Store, timeout: TimeSpan.FromSeconds(2));
        reader.Owners.Everything = owner.AsPeer;
        var data = Random(5_000_000);
        var name = await PutAsync(data);

        using (var read = await ReadAsync(reader, name))
        {
            Assert.True(read.Path == ReadPath.RemoteMiss, $"{read.Path}: {reader.Logs.All}");
            Assert.Equal(Sha(data), Sha(Bytes(read)));
        }
        Assert.Equal(0, reader.Cache.PeerFallbacks);
    }

    [Fact]
    public async Task Gets_over_grpc_and_over_the_bulk_framing_give_the_same_bytes()
    {
        await using var owner = await PeerNode.StartAsync("a", azurite.Store, LocalRead);
        var data = Random(6_000_000);
        var name = await PutAsync(data);
        using var bulk = new PeerClient(new PeerOptions { Credentials = PeerNode.NewCredentials() });
        using var grpc = new PeerClient(new PeerOptions { Credentials = PeerNode.NewCredentials(), BulkTransfers = false });
        foreach (var request in new[]
                 {
                     new GetRequest { Blob = Ref(name), Fetch = true },
                     new GetRequest { Blob = Ref(name) },
                     new GetRequest { Blob = Ref(name), Offset = 4_000_000, Length = 1_999_999 },
                 })
        {
            var viaBulk = await GetAsync(bulk, owner.Address, request);
            var viaGrpc = await GetAsync(grpc, owner.Address, request);
            Assert.Equal(ObjectHeader.Types.Status.Ok, viaBulk.Header.Status);
            Assert.Equal(viaGrpc.Header.Version, viaBulk.Header.Version);
            Assert.Equal(data.AsSpan((int)request.Offset, request.Length == 0 ? data.Length : (int)request.Length).ToArray(), viaBulk.Bytes);
            Assert.Equal(viaGrpc.Bytes, viaBulk.Bytes);
        }
        await Eventually.TrueAsync(() => owner.Cache.PinnedBytes == 0, "the owner unpins what it sent");
    }

    [Fact]
    public async Task A_pooled_bulk_connection_the_peer_closed_is_replaced_and_the_get_succeeds()
    {
        var data = Random(2_000_000);
        await using var fake = FakeBulkPeer.Start(async (socket, request, ct) =>
        {
            await FakeBulkPeer.ReplyAsync(socket, new BulkReply
            {
                Header = new ObjectHeader { Status = ObjectHeader.Types.Status.Ok, Version = "v1", Length = data.Length, RangeLength = data.Length },
            });
            await FakeBulkPeer.SendAsync(socket, data);
            socket.Shutdown(SocketShutdown.Both); // then drops the connection the requester pools
        });
        using var client = new PeerClient(new PeerOptions { Credentials = PeerNode.NewCredentials(), Timeout = Generous });
        for (var i = 0; i < 3; i++)
        {
            var (header, bytes, _) = await GetAsync(client, fake.Address, new GetRequest { Blob = Ref("x"), Offset = 0, Length = data.Length });
            Assert.Equal(ObjectHeader.Types.Status.Ok, header.Status);
            Assert.Equal(data, bytes);
        }
        // Each get has a connection of its own: a pooled one seen closed is dropped before use, or (when the peer's close
        // has not arrived yet, as on a busy machine) found dead by the request sent on it and replaced once; a request the
        // fake had already taken off such a connection is then answered again on the new one (CI beside a CPU hog saw 4
        // calls for 3 gets). Every get still succeeded with the whole object, above.
        Assert.InRange(fake.Calls, 3, 6);
        Assert.InRange(fake.Connections, 3, 6);
    }

    [Fact]
    public async Task A_bulk_connection_that_never_finishes_its_hello_is_closed_by_the_owner()
    {
        // Found by the fuzzer: the magic and part of a nonce, then silence, held the connection forever.
        await using var owner = await PeerNode.StartAsync("a", azurite.Store, LocalRead);
        using var socket = new Socket(SocketType.Stream, ProtocolType.Tcp);
        await socket.ConnectAsync(owner.Address.Host, owner.Address.Port);
        await FakeBulkPeer.SendAsync(socket, (byte[])[.. "FAASTBK2"u8, .. new byte[10]]);
        Assert.Equal(0, await socket.ReceiveAsync(new byte[64]).WaitAsync(Generous));
    }

    /// <summary>A bulk connection after the handshake, answered under <paramref name="credentials"/>
    /// (<paramref name="answer"/> replaces the answer: e.g. one recorded on another connection).</summary>
    private static async Task<Socket> ConnectBulkAsync(PeerNode node, PeerAuth credentials, byte[]? answer = null, Action<byte[], byte[]>? record = null)
    {
        var socket = new Socket(SocketType.Stream, ProtocolType.Tcp) { NoDelay = true };
        await socket.ConnectAsync(node.Address.Host, node.Address.Port);
        var nonce = PeerAuth.NewNonce();
        await FakeBulkPeer.SendAsync(socket, (byte[])[.. "FAASTBK2"u8, .. nonce, .. "\r\n"u8]);
        var challenge = new byte[4 + PeerAuth.NonceLength + PeerAuth.MacLength];
        await FakeBulkPeer.ReceiveExactlyAsync(socket, challenge).WaitAsync(Generous);
        Assert.Equal(PeerAuth.NonceLength + PeerAuth.MacLength, BitConverter.ToInt32(challenge));
        var proof = answer ?? credentials.BulkClientProof(nonce, challenge.AsSpan(4, PeerAuth.NonceLength));
        record?.Invoke([.. "FAASTBK2"u8, .. nonce, .. "\r\n"u8], proof);
        await FakeBulkPeer.SendAsync(socket, proof);
        return socket;
    }

    private static async Task<BulkReply> ReadReplyAsync(Socket socket)
    {
        var prefix = new byte[4];
        await FakeBulkPeer.ReceiveExactlyAsync(socket, prefix).WaitAsync(Generous);
        var payload = new byte[BitConverter.ToInt32(prefix)];
        await FakeBulkPeer.ReceiveExactlyAsync(socket, payload).WaitAsync(Generous);
        return BulkReply.Parser.ParseFrom(payload);
    }

    private static async Task<(ObjectHeader Header, byte[] Bytes)> ReadBulkAnswerAsync(Socket socket)
    {
        BulkReply reply;
        do
            reply = await ReadReplyAsync(socket);
        while (reply.Header is null && reply.Error.Length == 0);
        Assert.True(reply.Error.Length == 0, reply.Error);
        var bytes = new byte[reply.Header!.RangeLength];
        await FakeBulkPeer.ReceiveExactlyAsync(socket, bytes).WaitAsync(Generous);
        return (reply.Header, bytes);
    }
}
