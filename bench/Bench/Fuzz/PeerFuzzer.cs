using System.Buffers.Binary;
using System.Diagnostics;
using System.Net.Sockets;
using System.Text;
using FaaST.Peers;
using FaaST.Protos.Peer;
using Google.Protobuf;

namespace FaaST.Bench.Fuzz;

/// <summary>
/// The peer port of a real host: gRPC calls (Get, Put, Invalidate, Stats, Lookup and unknown methods)
/// with well-formed and malformed messages and frames, authenticated and not; and raw connections on
/// the bulk framing (hello, Get frames, broken lengths, random bytes). Oracle: every call ends with
/// a gRPC status (or 404/415 for what is not a gRPC call at all), an unauthenticated call never gets
/// OK, and the host stays up and serves peers correctly afterwards.
/// </summary>
public static class PeerFuzzer
{
    private static readonly string[] Methods = ["Get", "Put", "Invalidate", "Stats", "Lookup"];

    private static readonly string[] Names =
    [
        "fuzz", "fuzzcheck", "", "a", "A", "..", "$logs", "x/../../y", "a//b", "%2F", "\0", "ü", "😀", new string('n', 1100), "fuzz/", "/", " ", "a\r\nb",
    ];

    public static async Task<TargetResult> RunGrpcAsync(FuzzHost host, string appName, string account, int seed, int count, TimeSpan budget)
    {
        var result = new TargetResult("peer-grpc", seed);
        var clock = Stopwatch.StartNew();
        var auth = new PeerAuth(Encoding.UTF8.GetBytes(FuzzHost.PeerSecret), appName);
        var peer = new Uri($"http://127.0.0.1:{host.PeerPort}/");
        using var grpc = new RawGrpc();
        var gate = new object();
        var next = await FuzzRun.ForEachInputAsync(4, count, clock, budget, async i =>
        {
            var r = new Random(FuzzRun.Mix(seed, 0x5052, i));
            var method = r.Next(12) == 0 ? new[] { "Nope", "get", "", "Get/x" }[r.Next(4)] : Methods[r.Next(Methods.Length)];
            var path = r.Next(25) == 0 ? "/faast.peer.v1.Other/" + method : "/faast.peer.v1.CacheletPeer/" + method;
            var kind = r.Next(10);
            // A fresh signed credential (accepted once), none, or one that must be refused: garbage, a
            // signature altered, cut short, made for another method, or signed under another secret.
            var signed = auth.SignCall(path);
            var authorization = kind < 6 ? signed : kind < 8 ? null : r.Next(7) switch
            {
                0 => "FaaST-Peer AAAA",
                1 => PeerAuth.Scheme,
                2 => "Basic x",
                3 => signed + "x",
                4 => signed[..^2],
                5 => auth.SignCall(path + "x"),
                _ => new PeerAuth("another secret"u8, appName).SignCall(path),
            };
            var contentType = r.Next(40) == 0 ? new[] { "text/plain", "application/grpc+json", "application/json" }[r.Next(3)] : "application/grpc";
            var body = Body(r, method, account);
            var reply = await grpc.CallAsync(peer, path, body, authorization, contentType, TimeSpan.FromSeconds(20));
            var outcome = Judge(reply, ReferenceEquals(authorization, signed), method, path);
            lock (gate)
            {
                result.Count(reply.GrpcStatus is { } s ? $"grpc_status_{s}" : $"http_{reply.HttpStatus}");
                result.Add(outcome, i, _ => $"{path} auth={(ReferenceEquals(authorization, signed) ? "right" : authorization ?? "none")} body(base64)={Convert.ToBase64String(body.Length > 2000 ? body[..2000] : body)}");
            }
            return true;
        });
        if (next < count)
            result.Stopped = $"time bound of {budget.TotalSeconds:0} s reached after {next} calls";
        result.Seconds = clock.Elapsed.TotalSeconds;
        await CheckAfterAsync(host, result, grpc, peer, auth, account);
        return result;
    }

    private static Outcome Judge(RawGrpc.Reply reply, bool authenticated, string method, string path)
    {
        if (reply.Failure is { } failure)
            return Outcome.Crash($"{method}: the call ended without a gRPC status: {Shape(failure)}", failure);
        if (reply.HttpStatus is 404 or 415 && reply.GrpcStatus is null)
            return path.StartsWith("/faast.peer.v1.CacheletPeer/", StringComparison.Ordinal) && Methods.Contains(method) && reply.HttpStatus == 404
                ? Outcome.Crash($"{method}: 404 for a method the peer service has", "")
                : Outcome.Rejected;
        if (reply.GrpcStatus is null)
            return Outcome.Crash($"{method}: HTTP {reply.HttpStatus} without a grpc-status", "");
        if (reply.GrpcStatus == 0 && !authenticated)
            return Outcome.Crash($"{method}: an unauthenticated call got OK", "");
        return reply.GrpcStatus == 0 ? Outcome.Accepted : Outcome.Rejected;
    }

    private static string Shape(string s)
    {
        var t = System.Text.RegularExpressions.Regex.Replace(s, "\\d+", "#");
        return t.Length > 100 ? t[..100] : t;
    }

    // Writes (Put) never name the blob the checks after a run read back.
    private static BlobRef Blob(Random r, string account, bool write = false)
    {
        var accountName = r.Next(4) != 0 ? account : new[] { "", "http://127.0.0.1:1/x/", account.TrimEnd('/'), account.ToUpperInvariant(), "not a uri" }[r.Next(5)];
        var container = r.Next(3) != 0 ? "fuzz" : Names[r.Next(Names.Length)];
        var blob = r.Next(3) != 0 ? "fuzzcheck" : Names[r.Next(Names.Length)];
        return new BlobRef { Account = accountName, Container = container, Blob = write && blob == "fuzzcheck" ? "fuzzput" : blob };
    }

    private static long Number(Random r) => r.Next(8) switch
    {
        0 => -1,
        1 => long.MaxValue,
        2 => long.MinValue,
        3 => int.MaxValue + 1L,
        4 => r.Next(0, 10),
        _ => 0,
    };

    private static IMessage Message(Random r, string method, string account) => method switch
    {
        "Get" => GetRequest(r, account),
        "Put" => r.Next(3) == 0
            ? new PutChunk { Data = ByteString.CopyFrom(Bytes(r, r.Next(0, 3000))) }
            : new PutChunk { Header = new PutHeader { Blob = Blob(r, account, write: true), Length = r.Next(3) == 0 ? Number(r) : r.Next(0, 3000), UploadSync = r.Next(2) == 0 } },
        "Invalidate" => new InvalidateRequest { Blob = r.Next(8) == 0 ? null : Blob(r, account), KeepVersion = r.Next(2) == 0 ? "" : "\"0x8D\"" },
        "Lookup" => new LookupRequest { Id = (ulong)r.NextInt64(), Get = r.Next(8) == 0 ? null : GetRequest(r, account), InlineLimit = Number(r) },
        _ => new StatsRequest(),
    };

    private static GetRequest GetRequest(Random r, string account) => new()
    {
        Blob = r.Next(10) == 0 ? null : Blob(r, account),
        IfVersion = r.Next(3) == 0 ? "\"x\"" : "",
        Offset = r.Next(2) == 0 ? 0 : Number(r),
        Length = r.Next(2) == 0 ? 0 : Number(r),
        Fetch = r.Next(2) == 0,
        Validate = r.Next(3) == 0,
    };

    /// <summary>A request body: a few frames, well-formed or not.</summary>
    private static byte[] Body(Random r, string method, string account)
    {
        var frames = new List<byte>();
        var n = method is "Put" or "Lookup" ? r.Next(0, 5) : r.Next(8) == 0 ? r.Next(0, 3) : 1;
        for (var i = 0; i < n; i++)
        {
            switch (r.Next(10))
            {
                case 0: // random bytes as the message (often not protobuf)
                    frames.AddRange(RawGrpc.Frame(Bytes(r, r.Next(0, 200))));
                    break;
                case 1: // broken framing: compressed flag, a length past the end, a huge length
                    var payload = Message(r, method, account).ToByteArray();
                    frames.AddRange(r.Next(3) switch
                    {
                        0 => RawGrpc.Frame(payload, compressed: 1),
                        1 => RawGrpc.Frame(payload, length: (uint)payload.Length + (uint)r.Next(1, 100)),
                        _ => RawGrpc.Frame(payload, length: 0xFFFFFFF0),
                    });
                    break;
                case 2: // a message of another type
                    frames.AddRange(RawGrpc.Frame(Message(r, Methods[r.Next(Methods.Length)], account)));
                    break;
                default:
                    frames.AddRange(RawGrpc.Frame(Message(r, method, account)));
                    break;
            }
        }
        if (r.Next(30) == 0)
            frames.AddRange(Bytes(r, r.Next(1, 5))); // a partial frame header at the end
        return frames.ToArray();
    }

    private static byte[] Bytes(Random r, int n)
    {
        var b = new byte[n];
        r.NextBytes(b);
        return b;
    }

    /// <summary>Raw connections on the peer port's bulk framing.</summary>
    public static async Task<TargetResult> RunBulkAsync(FuzzHost host, string appName, string account, int seed, int count, TimeSpan budget)
    {
        var result = new TargetResult("peer-bulk", seed);
        var clock = Stopwatch.StartNew();
        var auth = new PeerAuth(Encoding.UTF8.GetBytes(FuzzHost.PeerSecret), appName);
        var gate = new object();
        var next = await FuzzRun.ForEachInputAsync(4, count, clock, budget, async i =>
        {
            var r = new Random(FuzzRun.Mix(seed, 0x424B, i));
            var connection = BulkConnection(r, auth, account);
            var (received, counter) = await ExchangeAsync(host.PeerPort, connection);
            var (bytes, authenticated) = (connection.Hello, connection.Authenticated);
            lock (gate)
            {
                result.Count(counter);
                // A connection is judged by the host afterwards (checked every 500 connections and at the
                // end); on its own it may be answered or dropped, as long as it ends.
                result.Add(counter == "bulk_no_end_within_10s"
                    ? Outcome.Crash("a bulk connection the host neither answered nor closed within 10 s after the requester finished", $"{received} bytes received")
                    : authenticated && received > 0 ? Outcome.Accepted : Outcome.Rejected, i, _ => "base64:" + Convert.ToBase64String(bytes.Length > 2000 ? bytes[..2000] : bytes));
            }
            if (i % 500 == 499 && host.Process.HasExited)
                return false;
            return true;
        });
        if (next < count)
            result.Stopped = $"time bound of {budget.TotalSeconds:0} s reached after {next} connections";
        result.Seconds = clock.Elapsed.TotalSeconds;
        using var grpc = new RawGrpc();
        await CheckAfterAsync(host, result, grpc, new Uri($"http://127.0.0.1:{host.PeerPort}/"), auth, account);
        return result;
    }

    /// <summary>
    /// One bulk connection: the hello (the magic, a nonce, CRLF, or something else), then, if the server
    /// answers with a challenge, the requester's proof (right or wrong, computed from the challenge) and
    /// requests.
    /// </summary>
    private sealed record BulkScript(byte[] Hello, Func<byte[], byte[], byte[]>? Answer, byte[] Requests, bool Authenticated);

    private static BulkScript BulkConnection(Random r, PeerAuth auth, string account)
    {
        if (r.Next(8) == 0)
        {
            // Not the bulk magic: random bytes, a partial magic, or the start of HTTP/2 gone wrong.
            byte[] other = r.Next(3) switch
            {
                0 => Bytes(r, r.Next(0, 300)),
                1 => PeerBulk.Magic[..r.Next(1, PeerBulk.Magic.Length)].ToArray(),
                _ => [.. "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"u8.ToArray(), .. Bytes(r, r.Next(0, 100))],
            };
            return new BulkScript(other, null, [], false);
        }
        var nonce = Bytes(r, PeerAuth.NonceLength);
        var helloKind = r.Next(12);
        byte[] hello = helloKind switch
        {
            0 => [.. PeerBulk.Magic, .. nonce[..r.Next(0, nonce.Length)]],              // nonce cut short
            1 => [.. PeerBulk.Magic, .. Bytes(r, r.Next(0, 5000))],                     // anything after the magic
            2 => [.. "FAASTBK1"u8.ToArray(), .. Bytes(r, r.Next(0, 60))],                // the old protocol's magic
            _ => [.. PeerBulk.Magic, .. nonce, .. "\r\n"u8.ToArray()],
        };
        var proofKind = r.Next(10);
        var requests = new List<byte>();
        for (var n = r.Next(0, 4); n > 0; n--)
        {
            var request = r.Next(6) == 0 ? Bytes(r, r.Next(0, 100)) : GetRequest(r, account).ToByteArray();
            requests.AddRange(LengthPrefix(r, request));
        }
        var garbage = Bytes(r, r.Next(0, 80));
        Func<byte[], byte[], byte[]> answer = (requesterNonce, challenge) => proofKind switch
        {
            < 7 => auth.BulkClientProof(requesterNonce, challenge.AsSpan(0, PeerAuth.NonceLength)),
            7 => auth.BulkServerProof(requesterNonce, challenge.AsSpan(0, PeerAuth.NonceLength)),   // the wrong label
            8 => challenge[PeerAuth.NonceLength..],                                                  // echo the server's proof
            _ => garbage,
        };
        // A malformed hello is sent and the connection half-closed at once: the host must end it.
        return new BulkScript(hello, helloKind >= 3 ? (challenge, _) => answer(nonce, challenge) : null, requests.ToArray(), helloKind >= 3 && proofKind < 7);
    }

    private static byte[] LengthPrefix(Random r, byte[] payload)
    {
        var frame = new byte[4 + payload.Length];
        var length = r.Next(15) switch
        {
            0 => 0xFFFFFFFFu,
            1 => (uint)payload.Length + 10,
            2 => (uint)Math.Max(0, payload.Length - 1),
            _ => (uint)payload.Length,
        };
        BinaryPrimitives.WriteUInt32LittleEndian(frame, length);
        payload.CopyTo(frame.AsSpan(4));
        return frame;
    }

    private static async Task<(long Received, string Counter)> ExchangeAsync(int port, BulkScript script)
    {
        using var socket = new Socket(AddressFamily.InterNetwork, SocketType.Stream, ProtocolType.Tcp);
        using var timeout = new CancellationTokenSource(TimeSpan.FromSeconds(10));
        long received = 0;
        try
        {
            await socket.ConnectAsync(System.Net.IPAddress.Loopback, port, timeout.Token);
            await socket.SendAsync(script.Hello, SocketFlags.None, timeout.Token);
            var buffer = new byte[65536];
            if (script.Answer is { } answer)
            {
                // A challenge is 4 bytes of length and the server's nonce and proof; anything else is
                // read to its end below (an error reply, or the connection closed).
                var challenge = new byte[4 + PeerBulk.ChallengeLength];
                var got = 0;
                while (got < challenge.Length)
                {
                    var n = await socket.ReceiveAsync(challenge.AsMemory(got), SocketFlags.None, timeout.Token);
                    if (n == 0)
                        return (received, received > 0 ? "bulk_answered_then_closed" : "bulk_closed");
                    got += n;
                    received += n;
                }
                if (BinaryPrimitives.ReadUInt32LittleEndian(challenge) == PeerBulk.ChallengeLength)
                {
                    await socket.SendAsync(answer(challenge[4..], []), SocketFlags.None, timeout.Token);
                    await socket.SendAsync(script.Requests, SocketFlags.None, timeout.Token);
                }
            }
            socket.Shutdown(SocketShutdown.Send);
            while (true)
            {
                var n = await socket.ReceiveAsync(buffer, SocketFlags.None, timeout.Token);
                if (n == 0)
                    return (received, received > 0 ? "bulk_answered_then_closed" : "bulk_closed");
                received += n;
            }
        }
        catch (SocketException)
        {
            return (received, "bulk_reset");
        }
        catch (OperationCanceledException)
        {
            return (received, "bulk_no_end_within_10s");
        }
    }

    /// <summary>After a run: the host is up, its status page answers, and an authenticated peer reads the check blob.</summary>
    private static async Task CheckAfterAsync(FuzzHost host, TargetResult result, RawGrpc grpc, Uri peer, PeerAuth auth, string account)
    {
        var problems = new List<string>();
        if (host.Process.HasExited)
            problems.Add($"the host exited with {host.Process.ExitCode}");
        else
        {
            using var client = new HttpClient { BaseAddress = host.BaseAddress, Timeout = TimeSpan.FromSeconds(20) };
            try
            {
                using var status = await client.GetAsync("/admin/host/status");
                if (!status.IsSuccessStatusCode)
                    problems.Add($"/admin/host/status: {(int)status.StatusCode}");
            }
            catch (Exception e) when (e is HttpRequestException or TaskCanceledException)
            {
                problems.Add("/admin/host/status: " + e.Message);
            }
            var stats = await grpc.CallAsync(peer, "/faast.peer.v1.CacheletPeer/Stats", RawGrpc.Frame(new StatsRequest()), auth.SignCall("/faast.peer.v1.CacheletPeer/Stats"), "application/grpc", TimeSpan.FromSeconds(20));
            if (stats.GrpcStatus != 0)
                problems.Add($"Stats: {stats.Failure ?? stats.GrpcMessage ?? "HTTP " + stats.HttpStatus}");
            var get = await grpc.CallAsync(peer, "/faast.peer.v1.CacheletPeer/Get",
                RawGrpc.Frame(new GetRequest { Blob = new BlobRef { Account = account, Container = "fuzz", Blob = "fuzzcheck" }, Fetch = true }), auth.SignCall("/faast.peer.v1.CacheletPeer/Get"), "application/grpc", TimeSpan.FromSeconds(20));
            var data = get.Messages.Skip(1).Sum(m => GetChunk.Parser.ParseFrom(m).Data.Length);
            if (get.GrpcStatus != 0 || get.Messages.Count == 0 || GetChunk.Parser.ParseFrom(get.Messages[0]).Header?.Status != ObjectHeader.Types.Status.Ok || data != 5)
                problems.Add($"Get fuzz/fuzzcheck: status {get.GrpcStatus} {get.GrpcMessage ?? get.Failure}, {data} bytes (expected 5)");
        }
        if (host.UnhandledException() is { } unhandled)
            problems.Add("unhandled exception in the host's output: " + unhandled);
        result.Count(problems.Count == 0 ? "after_run_host_serves_correctly" : "after_run_host_broken");
        foreach (var p in problems)
            result.Add(Outcome.Crash("after the run: " + (p.Length > 120 ? p[..120] : p), p), -1);
    }
}
