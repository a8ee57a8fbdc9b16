using System.Buffers.Text;
using System.Collections.Concurrent;
using System.Globalization;
using System.Security.Cryptography;
using System.Text;

namespace FaaST.Peers;

/// <summary>
/// How the instances of one app recognise each other, without anything on the wire that can be
/// reused. Both sides hold the app's peer secret; the key is HMAC-SHA256(secret, "faast-peer-v2:" + app).
/// <list type="bullet">
/// <item>Every gRPC call carries <c>authorization: FaaST-Peer v2 TIME.NONCE.MAC</c>: the caller's clock
/// in Unix milliseconds, 16 random bytes, and the HMAC of (method path, time, nonce). The server
/// accepts a time within <see cref="ReplayWindow"/> of its own and each nonce once (it remembers
/// the nonces it took until their time is out of the window), so a captured header is refused on any
/// new call, and it names its method, so it cannot be turned into another one.</item>
/// <item>A bulk connection is a challenge and response: the requester sends 32 random bytes after the
/// magic, the server answers with its own 32 and the HMAC of both (proving it holds the secret), the
/// requester answers with the HMAC of both in the other order. A recorded handshake is worthless on a
/// new connection, whose server nonce differs.</item>
/// </list>
/// The secret is never derived from public data: see the host (FAAST_PEER_SECRET, a private storage key,
/// or a secret generated into the app's .faast folder).
/// </summary>
public sealed class PeerAuth
{
    public const string HeaderName = "authorization";
    public const string Scheme = "FaaST-Peer v2 ";
    public const int NonceLength = 32;
    public const int MacLength = 32;
    private const int CallNonceLength = 16;

    private readonly byte[] _key;
    private readonly ConcurrentDictionary<string, long> _seen = new(StringComparer.Ordinal);
    private readonly Func<long> _clock;
    private long _taken;

    /// <param name="secret">The app's peer secret (shared by its instances).</param>
    /// <param name="app">The app's name: the key differs per app even under one secret.</param>
    /// <param name="clock">Unix milliseconds (tests move it); default the system clock.</param>
    public PeerAuth(ReadOnlySpan<byte> secret, string app, Func<long>? clock = null)
    {
        if (secret.IsEmpty)
            throw new ArgumentException("the peer secret is empty", nameof(secret));
        App = app;
        _key = HMACSHA256.HashData(secret, Encoding.UTF8.GetBytes("faast-peer-v2:" + app));
        _clock = clock ?? (() => DateTimeOffset.UtcNow.ToUnixTimeMilliseconds());
    }

    public string App { get; }

    /// <summary>How far a call's time may be from the server's (clock skew plus transit); default 2 minutes.</summary>
    public TimeSpan ReplayWindow { get; init; } = TimeSpan.FromMinutes(2);

    /// <summary>Nonces of accepted calls still remembered (tests, diagnostics).</summary>
    public int RememberedNonces => _seen.Count;

    // ---- gRPC calls --------------------------------------------------------------------------

    /// <summary>A fresh header value for one call of <paramref name="path"/> (never reuse it).</summary>
    public string SignCall(string path)
    {
        var time = _clock();
        Span<byte> nonce = stackalloc byte[CallNonceLength];
        RandomNumberGenerator.Fill(nonce);
        var nonceText = Base64Url.EncodeToString(nonce);
        return Scheme + time.ToString(CultureInfo.InvariantCulture) + "." + nonceText + "." + Base64Url.EncodeToString(CallMac(path, time, nonceText));
    }

    /// <summary>
    /// Checks a call's header for <paramref name="path"/>; true takes its nonce (a second call with
    /// the same header is refused). <paramref name="reason"/> says what is wrong otherwise.
    /// </summary>
    public bool VerifyCall(string? header, string path, out string reason)
    {
        if (header is null || !header.StartsWith(Scheme, StringComparison.Ordinal))
        {
            reason = "missing or not a FaaST-Peer v2 credential";
            return false;
        }
        var parts = header.AsSpan(Scheme.Length);
        var dot1 = parts.IndexOf('.');
        var dot2 = dot1 < 0 ? -1 : parts[(dot1 + 1)..].IndexOf('.');
        if (dot1 <= 0 || dot2 <= 0 ||
            !long.TryParse(parts[..dot1], NumberStyles.None, CultureInfo.InvariantCulture, out var time))
        {
            reason = "a malformed credential";
            return false;
        }
        var nonceText = parts.Slice(dot1 + 1, dot2).ToString();
        var macText = parts[(dot1 + 2 + dot2)..];
        Span<byte> presented = stackalloc byte[MacLength + 3];
        int macLength;
        try
        {
            // TryDecodeFromChars returns false only for a destination too small; a character that is not
            // base64url throws (found by the fuzzer: it became a 500 and a reset stream).
            if (macText.Length > Base64Url.GetEncodedLength(MacLength) || !Base64Url.TryDecodeFromChars(macText, presented, out macLength))
                macLength = -1;
        }
        catch (FormatException)
        {
            macLength = -1;
        }
        if (nonceText.Length != Base64Url.GetEncodedLength(CallNonceLength) || macLength != MacLength ||
            !CryptographicOperations.FixedTimeEquals(presented[..MacLength], CallMac(path, time, nonceText)))
        {
            reason = "wrong credentials (not signed with this app's peer secret for this method)";
            return false;
        }
        var now = _clock();
        var window = (long)ReplayWindow.TotalMilliseconds;
        if (Math.Abs(now - time) > window)
        {
            reason = $"a credential {Math.Abs(now - time) / 1000.0:0.#} s away from this instance's clock (at most {window / 1000} s: a replay, or clocks out of step)";
            return false;
        }
        // Kept until the time is out of the window, after which the time check refuses it anyway.
        if (!_seen.TryAdd(nonceText, time + window))
        {
            reason = "a credential already used (a replayed call)";
            return false;
        }
        if ((Interlocked.Increment(ref _taken) & 1023) == 0)
            Forget(now);
        reason = "";
        return true;
    }

    /// <summary>Drops the nonces whose time left the window (amortised over 1024 accepted calls).</summary>
    private void Forget(long now)
    {
        foreach (var (nonce, expires) in _seen)
            if (expires < now)
                _seen.TryRemove(nonce, out _);
    }

    private byte[] CallMac(string path, long time, string nonce) =>
        HMACSHA256.HashData(_key, Encoding.UTF8.GetBytes(string.Create(CultureInfo.InvariantCulture, $"call\n{path}\n{time}\n{nonce}")));

    // ---- bulk connections --------------------------------------------------------------------

    /// <summary>32 random bytes: a nonce for one handshake.</summary>
    public static byte[] NewNonce() => RandomNumberGenerator.GetBytes(NonceLength);

    /// <summary>The server's proof for a handshake: HMAC("bulk-server", requester nonce, server nonce).</summary>
    public byte[] BulkServerProof(ReadOnlySpan<byte> requesterNonce, ReadOnlySpan<byte> serverNonce) =>
        BulkMac("bulk-server\n"u8, requesterNonce, serverNonce);

    /// <summary>The requester's answer to a handshake: HMAC("bulk-client", server nonce, requester nonce).</summary>
    public byte[] BulkClientProof(ReadOnlySpan<byte> requesterNonce, ReadOnlySpan<byte> serverNonce) =>
        BulkMac("bulk-client\n"u8, serverNonce, requesterNonce);

    /// <summary>Constant-time comparison of a presented proof with the expected one.</summary>
    public static bool Same(ReadOnlySpan<byte> presented, ReadOnlySpan<byte> expected) =>
        presented.Length == expected.Length && CryptographicOperations.FixedTimeEquals(presented, expected);

    private byte[] BulkMac(ReadOnlySpan<byte> label, ReadOnlySpan<byte> first, ReadOnlySpan<byte> second)
    {
        Span<byte> data = stackalloc byte[label.Length + first.Length + second.Length];
        label.CopyTo(data);
        first.CopyTo(data[label.Length..]);
        second.CopyTo(data[(label.Length + first.Length)..]);
        return HMACSHA256.HashData(_key, data);
    }
}
