using System.Collections.Concurrent;
using System.Security.Cryptography;
using System.Text;
using FaaST.Cachelet.Index;
using FaaST.Protos.Flash;

namespace FaaST.Runtime.Flash;

/// <summary>How a cached blob is named on the flash tier.</summary>
internal static class FlashKeys
{
    private static readonly ConcurrentDictionary<string, string> AccountTags = new(StringComparer.Ordinal);

    /// <summary>
    /// The tier's key of <paramref name="key"/>: <c>container@account</c>, the account as the first 16 hex digits of
    /// the SHA-256 of its URI. An app may read several storage accounts and the tier knows only (tenant, container,
    /// blob); without the account two accounts' <c>data/a</c> would share one flash object, kept apart only by their
    /// ETags. A hash, not the URI, because the tier's container names hold no '/' (its keys are container/blob).
    /// </summary>
    public static ObjectKey Of(in BlobKey key) =>
        new() { Container = key.Container + "@" + AccountTags.GetOrAdd(key.Account, Tag), Blob = key.Blob };

    private static string Tag(string account) => Convert.ToHexStringLower(SHA256.HashData(Encoding.UTF8.GetBytes(account)))[..16];
}
