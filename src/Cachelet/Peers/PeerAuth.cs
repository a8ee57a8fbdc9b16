using System.Security.Cryptography;
using System.Text;

namespace FaaST.Cachelet.Peers;

/// <summary>
/// How the instances of one app recognise each other: every peer call carries
/// <c>authorization: FaaST-Peer base64(HMAC-SHA256(secret, "faast-peer-v1:" + app))</c>.
/// The secret is the app's <c>FAAST_PEER_SECRET</c> setting or, by default, derived from the storage
/// account key that every instance of the app already shares.
/// </summary>
public static class PeerAuth
{
    public const string HeaderName = "authorization";
    public const string Scheme = "FaaST-Peer ";

    /// <summary>The header value for <paramref name="app"/> under <paramref name="secret"/>.</summary>
    public static string HeaderValue(ReadOnlySpan<byte> secret, string app) =>
        Scheme + Convert.ToBase64String(HMACSHA256.HashData(secret, Encoding.UTF8.GetBytes("faast-peer-v1:" + app)));

    /// <summary>A secret derived from a storage account key (never the key itself on the wire).</summary>
    public static byte[] SecretFromAccountKey(ReadOnlySpan<byte> accountKey) =>
        HMACSHA256.HashData(accountKey, "faast-peer-secret"u8);

    /// <summary>Constant-time comparison of a presented header with the expected one.</summary>
    public static bool Matches(string? presented, string expected) =>
        presented is not null &&
        CryptographicOperations.FixedTimeEquals(Encoding.ASCII.GetBytes(presented), Encoding.ASCII.GetBytes(expected));
}
