using FaaST.Cachelet.Index;
using FaaST.Cachelet.Memory;
using FaaST.Cachelet.Peers;
using FaaST.Storage;

namespace FaaST.Cachelet.Writes;

/// <summary>
/// Conditional writes (an output written only if the blob still has the version its invocation read) where the
/// cache, not storage, decides: under the write-behind presets the version a reader saw may be one storage has not
/// been given yet, so the check is against the cached entry (this instance's own view under local/async/local, the
/// owner's under owner/async/owner), made and acted on in one step under the index's lock. A key not cached here has
/// no version in this view: storage decides, synchronously. Every other preset writes through, and storage (or the
/// owner, by uploading with the condition) decides there (<see cref="WriteThrough"/>).
/// </summary>
internal sealed class ConditionalWrites(CacheCore core, WriteThrough through, WriteBehind behind)
{
    /// <summary>
    /// Caches <paramref name="extent"/> and queues its upload if the key's cached entry meets <paramref name="condition"/>;
    /// storage decides when the key is not cached. The cache owns the extent afterwards (freed on failure). A failed
    /// condition throws <see cref="BlobConditionFailedException"/> naming the version the cache holds.
    /// </summary>
    public async ValueTask<BlobProperties> CommitIfCurrentAsync(IBlobStore store, BlobKey key, Extent extent, BlobWriteCondition condition,
        Peer? owner, CancellationToken ct)
    {
        if (!core.Index.TryPeek(key, out var current))
            return await through.CommitAsync(store, key, extent, owner, toOwner: false, ct, condition);
        if (condition.IfMatch is { } expected && current.IsVersion(expected) &&
            behind.TryCommit(store, key, extent, owned: owner is null, current) is { } provisional)
            return new BlobProperties(provisional, extent.Length, DateTimeOffset.UtcNow, null);
        core.Arena.Free(extent);
        // Either the entry is another version, or a concurrent write replaced it between the check and the install.
        var now = core.Index.TryPeek(key, out var latest) ? latest.ETag : current.ETag;
        throw new BlobConditionFailedException(412, "ConditionNotMet",
            $"{key.Container}/{key.Blob} is version {now} in the cache, not the {condition} the write requires");
    }

    /// <summary>
    /// After a failed condition: a cached copy of the version the writer read is stale (another writer replaced it in
    /// storage or at the owner), and a preset that reads locally would otherwise serve it, and fail the same way, forever.
    /// </summary>
    public static void DropStale(CacheCore core, in BlobKey key, BlobWriteCondition condition)
    {
        if (condition.IfMatch is { } read && core.Index.TryPeek(key, out var entry) && entry.IsVersion(read))
            core.Index.Remove(entry);
    }
}
