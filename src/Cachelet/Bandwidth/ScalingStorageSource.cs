using System.Diagnostics;
using FaaST.Cachelet.Sources;
using FaaST.Storage;

namespace FaaST.Cachelet.Bandwidth;

/// <summary>
/// The last link of the read chain: storage. With bandwidth scaling on (and peers connected), the
/// download's first response (the object's length and ETag, no extra HEAD) decides: a small object is
/// received as it is, a large one ends that request and is fetched in parallel ranges
/// (<see cref="ParallelRangeFetch"/>).
/// </summary>
internal sealed class ScalingStorageSource(CacheCore core, ParallelRangeFetch ranges) : IBlobSource
{
    public string Name => "storage";

    public bool Authoritative => true;

    /// <summary>Thrown inside a download's destination factory: the object is large enough to fetch in ranges.</summary>
    private sealed class LargeObjectException(BlobProperties properties) : Exception("a large object: fetched in parallel ranges")
    {
        public BlobProperties Properties => properties;
    }

    public async ValueTask<SourceResult> FetchAsync(SourceRequest request, IFetchTarget target, CancellationToken ct)
    {
        if (ranges.Current is not { } bandwidth || core.Peers.Client is null || core.Ownership.Directory is null)
            return await StorageSource.Instance.FetchAsync(request, target, ct);
        var key = request.Key;
        var started = Stopwatch.GetTimestamp();
        BlobProperties? properties;
        try
        {
            properties = await request.Store.DownloadToAsync(key.Container, key.Blob, props =>
                props.Length >= bandwidth.Options.MinObjectSize ? throw new LargeObjectException(props) : target.Open(props.Length, props.ETag), ct: ct);
        }
        catch (LargeObjectException large)
        {
            return await ranges.FetchInRangesAsync(bandwidth, request, large.Properties, target, ct);
        }
        if (properties is null)
            return SourceResult.NotFound;
        if (properties.Length >= bandwidth.Options.ObserveMinBytes)
            bandwidth.Planner.ObserveStorageTransfer(properties.Length, Stopwatch.GetElapsedTime(started));
        return new SourceResult(SourceOutcome.Found, properties.ETag, properties.Length, ReadPath.LocalMiss, Validated: true);
    }
}
