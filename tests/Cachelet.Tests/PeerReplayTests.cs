using System.Net;
using System.Net.Sockets;
using FaaST.Peers;
using FaaST.Protos.Peer;

namespace FaaST.Cachelet.Tests;

/// <summary>Peer credentials: nothing captured on the wire opens a peer again.</summary>
public sealed partial class PeerProtocolTests
{
    // ---- PeerAuth itself ---------------------------------------------------------------------

    [Fact]
    public void A_signed_call_is_accepted_once_and_refused_when_presented_again()
    {
        var client = new PeerAuth(PeerNode.Secret, PeerNode.App);
        var server = new PeerAuth(PeerNode.Secret, PeerNode.App);
        var header = client.SignCall(PeerClient.StatsPath);

        Assert.True(server.VerifyCall(header, PeerClient.StatsPath, out var first), first);
        Assert.False(server.VerifyCall(header, PeerClient.StatsPath, out var again));
        Assert.Contains("already used", again, StringComparison.Ordinal);
        Assert.True(server.VerifyCall(client.SignCall(PeerClient.StatsPath), PeerClient.StatsPath, out var fresh), fresh);
    }

    [Fact]
    public void A_credential_for_one_method_or_app_or_secret_opens_nothing_else()
    {
        var server = new PeerAuth(PeerNode.Secret, PeerNode.App);
        var stats = new PeerAuth(PeerNode.Secret, PeerNode.App).SignCall(PeerClient.StatsPath);
        Assert.False(server.VerifyCall(stats, PeerClient.PutPath, out var reason));
        Assert.Contains("wrong credentials", reason, StringComparison.Ordinal);
        Assert.False(server.VerifyCall(new PeerAuth(PeerNode.Secret, "otherapp").SignCall(PeerClient.GetPath), PeerClient.GetPath, out _));
        Assert.False(server.VerifyCall(new PeerAuth("another-secret"u8, PeerNode.App).SignCall(PeerClient.GetPath), PeerClient.GetPath, out _));
        foreach (var junk in new[] { null, "", PeerAuth.Scheme, PeerAuth.Scheme + "1.2.3", PeerAuth.Scheme + "..", PeerAuth.Scheme + "x.y.z", "FaaST-Peer " + Convert.ToBase64String(new byte[32]) })
            Assert.False(server.VerifyCall(junk, PeerClient.GetPath, out _), junk ?? "(null)");
        Assert.Equal(0, server.RememberedNonces); // nothing unauthenticated is remembered
    }

    [Fact]
    public void A_credential_with_characters_that_are_not_base64url_is_refused_not_thrown()
    {
        // Found by the fuzzer: Base64Url.TryDecodeFromChars throws on such characters, which became a 500.
        var server = new PeerAuth(PeerNode.Secret, PeerNode.App);
        var signed = new PeerAuth(PeerNode.Secret, PeerNode.App).SignCall(PeerClient.GetPath);
        foreach (var bad in new[] { signed + "x", signed[..^2] + "!!", signed + "=", signed.Replace('_', '/') + "+/", PeerAuth.Scheme + "1.2.3" })
        {
            Assert.False(server.VerifyCall(bad, PeerClient.GetPath, out var reason), bad);
            Assert.NotEmpty(reason);
        }
    }

    [Fact]
    public void A_credential_from_outside_the_replay_window_is_refused_and_old_nonces_are_forgotten()
    {
        long now = 1_000_000_000;
        var client = new PeerAuth(PeerNode.Secret, PeerNode.App, () => now);
        var server = new PeerAuth(PeerNode.Secret, PeerNode.App, () => now) { ReplayWindow = TimeSpan.FromMinutes(2) };
        var old = client.SignCall(PeerClient.GetPath);
        now += (long)TimeSpan.FromMinutes(3).TotalMilliseconds;
        Assert.False(server.VerifyCall(old, PeerClient.GetPath, out var reason));
        Assert.Contains("away from this instance's clock", reason, StringComparison.Ordinal);

        // Accepted nonces are let go once their time is out of the window (checked every 1024 calls).
        Assert.True(server.VerifyCall(client.SignCall(PeerClient.GetPath), PeerClient.GetPath, out _));
        now += (long)TimeSpan.FromMinutes(3).TotalMilliseconds;
        for (var i = 0; i < 1023; i++)
            Assert.True(server.VerifyCall(client.SignCall(PeerClient.GetPath), PeerClient.GetPath, out _));
        Assert.Equal(1023, server.RememberedNonces);
    }

    [Fact]
    public void The_bulk_handshake_proofs_depend_on_both_nonces_and_the_secret()
    {
        var a = new PeerAuth(PeerNode.Secret, PeerNode.App);
        var b = new PeerAuth(PeerNode.Secret, PeerNode.App);
        byte[] n1 = PeerAuth.NewNonce(), n2 = PeerAuth.NewNonce(), n3 = PeerAuth.NewNonce();
        Assert.True(PeerAuth.Same(a.BulkClientProof(n1, n2), b.BulkClientProof(n1, n2)));
        Assert.False(PeerAuth.Same(a.BulkClientProof(n1, n2), b.BulkClientProof(n1, n3)));
        Assert.False(PeerAuth.Same(a.BulkClientProof(n1, n2), b.BulkServerProof(n1, n2))); // a server's proof is no client's answer
        Assert.False(PeerAuth.Same(a.BulkClientProof(n1, n2), new PeerAuth("another-secret"u8, PeerNode.App).BulkClientProof(n1, n2)));
    }

    // ---- replays on the wire -----------------------------------------------------------------

    [Fact]
    public async Task A_recorded_grpc_call_replayed_on_a_new_connection_is_refused()
    {
        await using var owner = await PeerNode.StartAsync("a", azurite.Store, LocalRead);
        var data = Random(300_000);
        var name = await PutAsync(data);
        await using var proxy = RecordingProxy.Start(owner.Address);
        using (var client = new PeerClient(new PeerOptions { Credentials = PeerNode.NewCredentials(), BulkTransfers = false, Timeout = Generous }))
        {
            // A range: no Lookup stream, one gRPC Get on one HTTP/2 connection.
            var (header, bytes, _) = await GetAsync(client, proxy.Address, new GetRequest { Blob = Ref(name), Offset = 1, Length = data.Length - 1, Fetch = true });
            Assert.Equal(ObjectHeader.Types.Status.Ok, header.Status);
            Assert.Equal(data.AsSpan(1).ToArray(), bytes);
        }
        var recorded = Assert.Single(proxy.Connections);

        // Everything the instance sent, byte for byte, from another connection.
        var answer = await ReplayAsync(owner.Address, recorded.ToArray(), () => owner.Logs.All.Contains("already used", StringComparison.Ordinal));
        Assert.Contains("Refused a peer Get call", owner.Logs.All, StringComparison.Ordinal);
        Assert.False(Contains(answer, data.AsSpan(1000, 64)), "the replayed call got the object's bytes");
    }

    [Fact]
    public async Task A_recorded_bulk_connection_replayed_on_a_new_connection_is_refused()
    {
        await using var owner = await PeerNode.StartAsync("a", azurite.Store, LocalRead);
        var data = Random(2_000_000);
        var name = await PutAsync(data);
        await using var proxy = RecordingProxy.Start(owner.Address);
        using (var client = new PeerClient(new PeerOptions { Credentials = PeerNode.NewCredentials(), Timeout = Generous }))
        {
            // A range of a large object: the bulk framing.
            var (header, bytes, _) = await GetAsync(client, proxy.Address, new GetRequest { Blob = Ref(name), Offset = 0, Length = data.Length - 1, Fetch = true });
            Assert.Equal(ObjectHeader.Types.Status.Ok, header.Status);
            Assert.Equal(data.AsSpan(0, data.Length - 1).ToArray(), bytes);
        }
        var recorded = Assert.Single(proxy.Connections, c => c.Length > 8 && c.ToArray().AsSpan(0, 5).SequenceEqual("FAAST"u8)).ToArray();

        var answer = await ReplayAsync(owner.Address, recorded, () => owner.Logs.All.Contains("Refused a peer Get call (bulk connection)", StringComparison.Ordinal));
        Assert.False(Contains(answer, data.AsSpan(1000, 64)), "the replayed handshake got the object's bytes");
        Assert.Equal(0, owner.Cache.PinnedBytes);
    }

    /// <summary>Sends <paramref name="recorded"/> on a new connection; returns what came back by the time
    /// <paramref name="refused"/> holds and the connection went quiet (or closed).</summary>
    private static async Task<byte[]> ReplayAsync(Uri peer, byte[] recorded, Func<bool> refused)
    {
        using var socket = new Socket(SocketType.Stream, ProtocolType.Tcp) { NoDelay = true };
        await socket.ConnectAsync(peer.Host, peer.Port);
        await FakeBulkPeer.SendAsync(socket, recorded);
        var received = new MemoryStream();
        var buffer = new byte[1 << 16];
        var receiving = Task.Run(async () =>
        {
            try
            {
                int n;
                while ((n = await socket.ReceiveAsync(buffer)) > 0)
                    lock (received)
                        received.Write(buffer, 0, n);
            }
            catch (SocketException)
            {
                // reset by the server: what arrived before counts
            }
        });
        await Eventually.TrueAsync(refused, "the owner refuses the replay");
        // Anything the server still sends arrives well within this; it never sends the object here.
        await Task.WhenAny(receiving, Task.Delay(TimeSpan.FromSeconds(1)));
        socket.Shutdown(SocketShutdown.Both);
        await receiving;
        lock (received)
            return received.ToArray();
    }

    private static bool Contains(byte[] haystack, ReadOnlySpan<byte> needle) => haystack.AsSpan().IndexOf(needle) >= 0;

    /// <summary>A TCP relay on loopback that records what each client connection sends.</summary>
    private sealed class RecordingProxy : IAsyncDisposable
    {
        private readonly Socket _listener = new(SocketType.Stream, ProtocolType.Tcp);
        private readonly CancellationTokenSource _stop = new();
        private readonly List<MemoryStream> _connections = [];
        private readonly List<Socket> _sockets = [];
        private readonly Task _accepting;

        private RecordingProxy(Uri target)
        {
            _listener.Bind(new IPEndPoint(IPAddress.Loopback, 0));
            _listener.Listen();
            Address = new Uri($"http://127.0.0.1:{((IPEndPoint)_listener.LocalEndPoint!).Port}/");
            _accepting = Task.Run(async () =>
            {
                while (!_stop.IsCancellationRequested)
                {
                    Socket client;
                    try
                    {
                        client = await _listener.AcceptAsync(_stop.Token);
                    }
                    catch (Exception) when (_stop.IsCancellationRequested)
                    {
                        return;
                    }
                    var server = new Socket(SocketType.Stream, ProtocolType.Tcp) { NoDelay = true };
                    await server.ConnectAsync(target.Host, target.Port);
                    var record = new MemoryStream();
                    lock (_connections)
                    {
                        _connections.Add(record);
                        _sockets.Add(client);
                        _sockets.Add(server);
                    }
                    _ = PumpAsync(client, server, record);
                    _ = PumpAsync(server, client, null);
                }
            });
        }

        public Uri Address { get; }

        /// <summary>What each connection's client sent so far.</summary>
        public IReadOnlyList<MemoryStream> Connections
        {
            get
            {
                lock (_connections)
                    return _connections.Select(c =>
                    {
                        lock (c)
                            return new MemoryStream(c.ToArray());
                    }).ToList();
            }
        }

        public static RecordingProxy Start(Uri target) => new(target);

        private static async Task PumpAsync(Socket from, Socket to, MemoryStream? record)
        {
            var buffer = new byte[1 << 16];
            try
            {
                int n;
                while ((n = await from.ReceiveAsync(buffer)) > 0)
                {
                    if (record is not null)
                        lock (record)
                            record.Write(buffer, 0, n);
                    await FakeBulkPeer.SendAsync(to, buffer.AsMemory(0, n));
                }
                to.Shutdown(SocketShutdown.Send);
            }
            catch (Exception e) when (e is SocketException or ObjectDisposedException)
            {
            }
        }

        public async ValueTask DisposeAsync()
        {
            _stop.Cancel();
            _listener.Dispose();
            await _accepting;
            lock (_connections)
                foreach (var s in _sockets)
                    s.Dispose();
        }
    }
}
