using FaaST.Cachelet.Consistency;
using FaaST.Cachelet.Index;
using FaaST.Cachelet.Peers;

namespace FaaST.Cachelet.Ownership;

/// <summary>
/// Who owns a key, in the cachelet's one home for it (Faa$T §3.2): consistent hashing over the
/// membership view, behind an <see cref="IOwnerDirectory"/> (the runtime's RingOwnerDirectory over
/// src/Membership's HashRing). Without a directory (no peers) this instance owns every key.
/// </summary>
internal sealed class CacheOwnership(CacheIndex index, ValidationEpoch epoch)
{
    private IOwnerDirectory? _directory;

    /// <summary>The directory once peers are connected; null before.</summary>
    public IOwnerDirectory? Directory => _directory;

    /// <summary>This instance's membership id ("" before peers are connected).</summary>
    public string SelfId => _directory?.SelfId ?? "";

    /// <summary>The other instances of the current view (none without peers).</summary>
    public IReadOnlyCollection<Peer> Others => _directory?.Others ?? [];

    /// <summary>The string consistent hashing places: the storage namespace of the key.</summary>
    public static string PlacementKey(in BlobKey key) => key.Account + "|" + key.Container + "/" + key.Blob;

    /// <summary>The key's owner, or null when it is this instance (always, without peers).</summary>
    public Peer? OwnerOf(in BlobKey key) => _directory?.OwnerOf(PlacementKey(key));

    public void Connect(IOwnerDirectory directory) => _directory = directory;

    /// <summary>
    /// After a membership change: distrusts every copy, then moves the owner lookups to the new view
    /// (in that order: a lookup that sees the new view reads the epoch after it, so a key this instance
    /// just took over is never served from a copy validated under the old owner), then re-marks which
    /// cached objects this instance owns (eviction prefers the others).
    /// </summary>
    public void OnChanged()
    {
        epoch.Distrust();
        _directory?.Refresh();
        foreach (var entry in index.Entries)
        {
            var owned = OwnerOf(entry.Key) is null;
            if (entry.Owned != owned)
                entry.Owned = owned;
        }
    }
}
