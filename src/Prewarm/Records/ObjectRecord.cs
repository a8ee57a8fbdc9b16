namespace FaaST.Prewarm.Records;

/// <summary>
/// What one cachelet saw of one object between its load and its unload (Faa$T §3.3: the metadata the Load Daemon
/// keeps per object): its key, size and version, and the count of each kind of access. <see cref="Produced"/>
/// counts the times the object was written as a function's output; <see cref="MeanInterArrival"/> is the mean time
/// between consecutive accesses (zero when there was at most one).
/// </summary>
public sealed record ObjectRecord(string Account, string Container, string Blob, long Size, string ETag,
    long LocalHits, long RemoteHits, long LocalMisses, long RemoteMisses, long Produced, TimeSpan MeanInterArrival)
{
    /// <summary>All reads, whichever cachelet or storage answered them.</summary>
    public long Reads => LocalHits + RemoteHits + LocalMisses + RemoteMisses;
}
