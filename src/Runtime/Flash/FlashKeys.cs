using FaaST.Cachelet.Index;
using FaaST.Protos.Flash;

namespace FaaST.Runtime.Flash;

/// <summary>How a cached blob is named on the flash tier.</summary>
internal static class FlashKeys
{
    /// <summary>
    /// The tier's key of <paramref name="key"/>: the container field carries the storage account's URI before the
    /// container, because an app may read several accounts and the tier knows only (tenant, container, blob); without it
    /// two accounts' <c>data/a</c> would share one flash object, kept apart only by their ETags.
    /// </summary>
    public static ObjectKey Of(in BlobKey key) => new() { Container = key.Account + key.Container, Blob = key.Blob };
}
