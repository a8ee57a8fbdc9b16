using FaaST.Cachelet.Index;

namespace FaaST.Cachelet.Peers;

/// <summary>Another instance of the same app: its membership id and peer endpoint.</summary>
public sealed record Peer(string Id, Uri Address);

/// <summary>Who owns a key (consistent hashing over the current membership view).</summary>
public interface IOwnerDirectory
{
    /// <summary>This instance's membership id.</summary>
    string SelfId { get; }

    /// <summary>The owner of <paramref name="key"/>, or null when it is this instance.</summary>
    Peer? OwnerOf(string key);

    /// <summary>The other instances of the current view: those a write that could not reach its owner
    /// tells (any of them may be serving the key by now), and the only ones the cache keeps
    /// connections to.</summary>
    IReadOnlyCollection<Peer> Others => [];

    /// <summary>
    /// Moves to the membership's latest view. The cache calls this after it has started distrusting
    /// what it owns, so that no lookup sees the new owners before the cache is ready for them.
    /// </summary>
    void Refresh()
    {
    }
}

/// <summary>
/// How the cache core reaches the owners of keys (the app's other instances). The core knows only
/// these domain types; src/Peers implements it over the peer protocol. Every failure (unreachable,
/// timed out, refused, nonsense) is a <see cref="PeerException"/>, after which the caller goes to storage.
/// </summary>
public interface IOwnerClient
{
    /// <summary>
    /// Asks <paramref name="owner"/> for a whole object. For an <see cref="PeerStatus.Ok"/> answer,
    /// <paramref name="destination"/> gets the answer first and returns the stream its bytes are
    /// written into (null abandons the call); the answer is returned once every byte arrived.
    /// </summary>
    Task<PeerAnswer> GetAsync(Peer owner, PeerGet request, Func<PeerAnswer, Stream?> destination, CancellationToken ct);

    /// <summary>
    /// Bandwidth scaling (Faa$T §4): asks <paramref name="peer"/> to download the range
    /// [<paramref name="offset"/>, <paramref name="offset"/> + <paramref name="length"/>) of
    /// <paramref name="key"/> from storage (not from its cache, without caching it), on condition
    /// that storage still holds <paramref name="version"/>, and writes the bytes into
    /// <paramref name="destination"/> as they arrive. <see cref="PeerStatus.NotFound"/> if the blob
    /// is gone; a changed blob, a short range or any other failure is a <see cref="PeerException"/>.
    /// </summary>
    Task<PeerAnswer> GetRangeFromStorageAsync(Peer peer, BlobKey key, string version, long offset, long length, Stream destination, CancellationToken ct);

    /// <summary>
    /// Writes an object through to its owner: <paramref name="length"/> bytes, taken window by window
    /// from <paramref name="source"/> (offset, length). Returns the version the owner then holds. With a
    /// <paramref name="condition"/> the owner decides it (see <c>ConditionalWrites</c>); a failed one throws
    /// <see cref="FaaST.Storage.BlobConditionFailedException"/>, never a <see cref="PeerException"/> (a conflict
    /// is an answer: the writer must not go to storage instead).
    /// </summary>
    Task<string> PutAsync(Peer owner, BlobKey key, long length, bool uploadSync, Func<long, int, ReadOnlyMemory<byte>> source, CancellationToken ct,
        FaaST.Storage.BlobWriteCondition condition = default);

    /// <summary>Tells <paramref name="peer"/> to drop its copy of <paramref name="key"/> unless it is
    /// <paramref name="keepVersion"/>; whether it dropped one.</summary>
    Task<bool> InvalidateAsync(Peer peer, BlobKey key, string keepVersion, CancellationToken ct);

    /// <summary>The peer's cache statistics.</summary>
    Task<CacheStats> StatsAsync(Peer peer, CancellationToken ct);

    /// <summary>
    /// The membership view moved: connections (channels, streams, pooled bulk connections) to any
    /// peer not in <paramref name="current"/> are closed and forgotten.
    /// </summary>
    void RetainOnly(IReadOnlyCollection<Peer> current);
}

/// <summary>A whole-object read from an owner.</summary>
/// <param name="IfVersion">The asker holds this version: if it is still current the answer is <see cref="PeerStatus.NotModified"/>, no bytes.</param>
/// <param name="Fetch">The owner may fetch the object from storage if it does not hold it (a remote miss).</param>
/// <param name="Validate">The owner checks its copy against storage (one HEAD) before answering.</param>
public readonly record struct PeerGet(BlobKey Key, string? IfVersion, bool Fetch, bool Validate);

/// <summary>What an owner answered about an object.</summary>
public enum PeerStatus
{
    Ok,
    NotModified,
    /// <summary>The blob does not exist in storage.</summary>
    NotFound,
    /// <summary>The owner does not hold it and was not asked to fetch it.</summary>
    NotCached,
}

/// <summary>
/// A peer's answer to a read: the status and, for <see cref="PeerStatus.Ok"/>, the object's version,
/// its whole length, and the range whose bytes follow (whole objects: offset 0, the whole length).
/// </summary>
/// <param name="Fetched">The owner had to fetch it from storage (a remote miss).</param>
public sealed record PeerAnswer(PeerStatus Status, string Version = "", long Length = 0, long Offset = 0, long RangeLength = 0, bool Fetched = false);

/// <summary>An instance's cache statistics (what a peer's Stats call returns).</summary>
/// <param name="Reads">Reads by path name (local_hit, local_miss, remote_hit, remote_miss, passthrough).</param>
/// <param name="Parallel">Bandwidth scaling's counts (see <see cref="ParallelFetchStats"/>).</param>
public sealed record CacheStats(string MemberId, long Objects, long Bytes, long PinnedBytes, long Evictions, IReadOnlyDictionary<string, long> Reads,
    ParallelFetchStats Parallel = default);

/// <summary>Bandwidth scaling's counts at one instance (Faa$T §4).</summary>
/// <param name="Fetches">Misses this instance fetched in parallel ranges.</param>
/// <param name="Ranges">Ranges other instances sent it for those.</param>
/// <param name="Fallbacks">Ranges it fetched from storage itself after another instance failed.</param>
/// <param name="StorageRangesServed">range_from_storage Gets it served for other instances.</param>
public readonly record struct ParallelFetchStats(long Fetches, long Ranges, long Fallbacks, long StorageRangesServed);

/// <summary>
/// An object a peer asked for, pinned while it is sent. <see cref="Status"/> OK means <see cref="Read"/>
/// holds it (cached, or in a file or bytes of its own when this cache had no room).
/// </summary>
public readonly record struct PeerObject(PeerStatus Status, CachedRead Read, bool Fetched);

/// <summary>A peer call failed (unreachable, timed out, refused, or answered nonsense).</summary>
public sealed class PeerException(string message, Exception? inner = null) : Exception(message, inner)
{
    /// <summary>The peer and this instance do not share the app's credentials (asking it another way is no use).</summary>
    public bool CredentialsRefused { get; init; }
}
