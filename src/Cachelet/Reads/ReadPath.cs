using FaaST.Cachelet.Index;

namespace FaaST.Cachelet;

/// <summary>How a read was served: Faa$T's four read paths (§3.2), plus reads the cache let through.</summary>
public enum ReadPath
{
    /// <summary>From this instance's memory.</summary>
    LocalHit,

    /// <summary>This instance owns the key and lacked it: fetched from storage (or a tier) and cached.</summary>
    LocalMiss,

    /// <summary>From the owner's memory.</summary>
    RemoteHit,

    /// <summary>The owner lacked it too: it fetched, cached and streamed it.</summary>
    RemoteMiss,

    /// <summary>Not cached (disabled, do-not-cache, no room): served straight from storage.</summary>
    Passthrough,
}

/// <summary>
/// The one place a read's path is decided and counted (metrics, and the key's access statistics when
/// the object is cached). The read chain and peer serving call it; a prefetch never does.
/// </summary>
internal static class ReadPaths
{
    /// <summary>
    /// The path of an object a source found: the source's own (a storage read is a local miss, an
    /// owner's a remote hit or miss), except that a storage read the cache could not keep passed through.
    /// </summary>
    public static ReadPath OfFetch(ReadPath sourcePath, bool cached) =>
        !cached && sourcePath == ReadPath.LocalMiss ? ReadPath.Passthrough : sourcePath;

    /// <summary>Counts a read: in the metrics always, in the key's statistics when it was served from a cache entry.</summary>
    public static void Count(CacheCore core, in BlobKey key, ReadPath path, long length, bool fromEntry)
    {
        if (fromEntry)
        {
            switch (path)
            {
                case ReadPath.LocalHit:
                    core.Index.RecordLocalHit(key);
                    break;
                case ReadPath.RemoteHit:
                    core.Index.RecordRemoteHit(key);
                    break;
                case ReadPath.RemoteMiss:
                    core.Index.RecordRemoteMiss(key);
                    break;
                case ReadPath.LocalMiss:
                    core.Index.RecordLocalMiss(key);
                    break;
            }
        }
        core.Metrics.Read(path, length);
    }
}
