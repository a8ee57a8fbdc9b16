using FaaST.Cachelet.Index;
using FaaST.Cachelet.Peers;
using FaaST.Protos.Peer;

namespace FaaST.Peers;

/// <summary>Between the cache core's domain types and the peer protocol's messages.</summary>
internal static class PeerWire
{
    public static BlobRef ToRef(in BlobKey key) => new() { Account = key.Account, Container = key.Container, Blob = key.Blob };

    public static BlobKey ToKey(BlobRef blob) => new(blob.Account, blob.Container, blob.Blob);

    public static ObjectHeader.Types.Status ToWire(PeerStatus status) => status switch
    {
        PeerStatus.Ok => ObjectHeader.Types.Status.Ok,
        PeerStatus.NotModified => ObjectHeader.Types.Status.NotModified,
        PeerStatus.NotFound => ObjectHeader.Types.Status.NotFound,
        PeerStatus.NotCached => ObjectHeader.Types.Status.NotCached,
        _ => throw new ArgumentOutOfRangeException(nameof(status), status, "not a peer status"),
    };

    /// <summary>A header as the core sees it; a status the core has no use for (TOO_LARGE, or an unknown one) is a peer fault.</summary>
    public static PeerAnswer ToAnswer(ObjectHeader header, Uri peer) => new(header.Status switch
    {
        ObjectHeader.Types.Status.Ok => PeerStatus.Ok,
        ObjectHeader.Types.Status.NotModified => PeerStatus.NotModified,
        ObjectHeader.Types.Status.NotFound => PeerStatus.NotFound,
        ObjectHeader.Types.Status.NotCached => PeerStatus.NotCached,
        _ => throw new PeerException($"{peer} answered a Get with status {header.Status}"),
    }, header.Version, header.Length, header.Offset, header.RangeLength, header.Fetched);

    public static StatsResponse ToWire(CacheStats stats)
    {
        var response = new StatsResponse
        {
            MemberId = stats.MemberId,
            Objects = stats.Objects,
            Bytes = stats.Bytes,
            PinnedBytes = stats.PinnedBytes,
            Evictions = stats.Evictions,
            ParallelFetches = stats.Parallel.Fetches,
            ParallelRanges = stats.Parallel.Ranges,
            ParallelRangeFallbacks = stats.Parallel.Fallbacks,
            StorageRangesServed = stats.Parallel.StorageRangesServed,
        };
        foreach (var (path, count) in stats.Reads)
            response.Reads[path] = count;
        return response;
    }

    public static CacheStats ToStats(StatsResponse response) =>
        new(response.MemberId, response.Objects, response.Bytes, response.PinnedBytes, response.Evictions, new Dictionary<string, long>(response.Reads),
            new ParallelFetchStats(response.ParallelFetches, response.ParallelRanges, response.ParallelRangeFallbacks, response.StorageRangesServed));

    public static string Describe(BlobRef? blob) => blob is null ? "(no blob)" : $"{blob.Container}/{blob.Blob}";
}
