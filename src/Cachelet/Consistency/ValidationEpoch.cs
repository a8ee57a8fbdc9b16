using FaaST.Cachelet.Index;

namespace FaaST.Cachelet.Consistency;

/// <summary>
/// The validation epoch. Under owner/sync/owner an owner serves its copy of a key without asking
/// storage, so it must know that no acknowledged write can have reached storage past it. Two things
/// break that: ownership moving (the new owner's copy may be older than writes the old owner took),
/// and a write whose writer could not reach the owner it saw and uploaded itself. Both move the
/// epoch; an entry records the epoch in which storage was last seen to hold its version, and an owner
/// serves it unchecked only while that is the current epoch, else after one HEAD (lazily, on first
/// use). The hit path pays one volatile read and a compare.
/// </summary>
internal sealed class ValidationEpoch
{
    private long _epoch = 1;

    /// <summary>The current epoch: read before a fetch or upload, so a bypassing write landing during it moves it.</summary>
    public long Current => Volatile.Read(ref _epoch);

    /// <summary>Storage was seen to hold the entry's version in the current epoch.</summary>
    public bool Trusts(CacheEntry entry) => entry.ValidatedEpoch == Current;

    /// <summary>Nothing validated so far may be served unchecked any more.</summary>
    public void Distrust() => Interlocked.Increment(ref _epoch);
}
