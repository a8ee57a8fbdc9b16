using FaaST.Cachelet.Memory;

namespace FaaST.Cachelet.Index;

/// <summary>
/// One cached version of a blob: its bytes (an <see cref="Memory.Extent"/> the index owns), its
/// ETag, ownership and pins. An entry never changes its bytes; a new version is a new entry, and the
/// old one is retired: it leaves the index at once, and its extent is freed when its last pin goes.
/// Read the bytes only under a pin (<see cref="CacheIndex.TryPin"/>, <see cref="CacheIndex.TryGetPinned"/>).
/// </summary>
public sealed class CacheEntry
{
    // Pin count in the low bits; Retired is set once, after which no new pin is granted and the
    // transition of the count to zero frees the extent (exactly once).
    private const int RetiredBit = 1 << 30;
    private const int PinMask = RetiredBit - 1;

    private readonly CacheIndex _index;
    private int _state;
    private long _lastAccess;
    private volatile string _etag;
    private volatile bool _owned;
    private long _validatedEpoch;

    internal CacheEntry(CacheIndex index, BlobKey key, string etag, Extent extent, bool owned, long now, ObjectStats stats,
        long validatedEpoch = NotValidated, bool pinned = false)
    {
        _index = index;
        // Pinned from birth (before any other thread can see the entry), so that whoever adds it can
        // always pin it: a concurrent replace may retire it at once, but not before this pin exists.
        _state = pinned ? 1 : 0;
        _validatedEpoch = validatedEpoch;
        Key = key;
        _etag = etag;
        Extent = extent;
        _owned = owned;
        InsertedAt = now;
        _lastAccess = now;
        Stats = stats;
    }

    public BlobKey Key { get; }

    /// <summary>The version (blob ETag) these bytes are. Changes only through <see cref="CacheIndex.UpdateVersion"/>
    /// (a write-behind learning the ETag storage gave the bytes).</summary>
    public string ETag
    {
        get => _etag;
        internal set => _etag = value;
    }

    /// <summary>
    /// The provisional version a write-behind gave these bytes before storage's ETag replaced it (null when
    /// there was none): an invocation that read the bytes under it and writes If-Match it still matches them.
    /// </summary>
    public string? FormerVersion { get; internal set; }

    /// <summary>Whether these bytes are version <paramref name="version"/> (their ETag, or the provisional one it replaced).</summary>
    public bool IsVersion(string version) => _etag == version || FormerVersion == version;

    public long Length => Extent.Length;

    public Extent Extent { get; }

    /// <summary>This cachelet owns the key (consistent hashing). Every key is owned until membership
    /// exists; setting it moves the entry between eviction tiers.</summary>
    public bool Owned
    {
        get => _owned;
        set => _index.SetOwned(this, value);
    }

    /// <summary><see cref="ValidatedEpoch"/> of an entry never checked against storage by this cachelet
    /// (a copy from a peer).</summary>
    public const long NotValidated = -1;

    /// <summary>
    /// The cachelet's validation epoch (see BlobCache) read just before this cachelet last saw storage
    /// hold these bytes' version (it fetched or uploaded them, or a HEAD matched), or
    /// <see cref="NotValidated"/>. An owner serves the entry without asking storage only while this
    /// equals its current epoch: the epoch moves whenever ownership may have moved or a write may have
    /// reached storage behind this cachelet's back.
    /// </summary>
    public long ValidatedEpoch => Volatile.Read(ref _validatedEpoch);

    /// <summary>Records a validation at <paramref name="epoch"/>; an older one never overwrites a newer one.</summary>
    public void MarkValidated(long epoch)
    {
        var seen = Volatile.Read(ref _validatedEpoch);
        while (seen < epoch)
        {
            var was = Interlocked.CompareExchange(ref _validatedEpoch, epoch, seen);
            if (was == seen)
                return;
            seen = was;
        }
    }

    /// <summary>Pins held now (invocations reading the bytes).</summary>
    public int Pins => Volatile.Read(ref _state) & PinMask;

    /// <summary>Replaced, removed or evicted: no longer in the index, no new pins.</summary>
    public bool IsRetired => (Volatile.Read(ref _state) & RetiredBit) != 0;

    /// <summary>Stopwatch timestamp (index clock) of the last lookup that found it.</summary>
    public long LastAccess => Volatile.Read(ref _lastAccess);

    /// <summary>Stopwatch timestamp (index clock) when this version was cached (TTL counts from here).</summary>
    public long InsertedAt { get; }

    /// <summary>The key's statistics (shared by every version of the key).</summary>
    public ObjectStats Stats { get; }

    // Index bookkeeping, guarded by the index's mutation lock.
    internal int Tier;
    internal int Slot = -1;

    internal void SetOwnedUnderLock(bool owned) => _owned = owned;

    /// <summary>Hit path: a plain write, skipped when the stored time is recent enough (fewer cache-line
    /// invalidations on hot keys).</summary>
    internal void Touch(long now, long granularity)
    {
        if (now - Volatile.Read(ref _lastAccess) > granularity)
            Volatile.Write(ref _lastAccess, now);
    }

    internal bool TryPin()
    {
        var state = Volatile.Read(ref _state);
        while (true)
        {
            if ((state & RetiredBit) != 0)
                return false;
            var seen = Interlocked.CompareExchange(ref _state, state + 1, state);
            if (seen == state)
            {
                if ((state & PinMask) == 0)
                    _index.OnPinned(this);
                return true;
            }
            state = seen;
        }
    }

    internal void Unpin()
    {
        var state = Interlocked.Decrement(ref _state);
        if ((state & PinMask) != 0)
            return;
        _index.OnUnpinned(this);
        if (state == RetiredBit)
            _index.ReleaseExtent(this, retiredWhilePinned: true);
    }

    /// <summary>Retires the entry; frees its extent now if unpinned, else at the last unpin.</summary>
    internal void Retire()
    {
        var old = Interlocked.Or(ref _state, RetiredBit);
        if ((old & RetiredBit) != 0)
            return;
        if (old == 0)
            _index.ReleaseExtent(this, retiredWhilePinned: false);
        else
            _index.OnRetiredPinned(this);
    }

    /// <summary>Retires the entry only if nobody pins it (eviction); the caller then frees the extent.</summary>
    internal bool TryRetireUnpinned() => Interlocked.CompareExchange(ref _state, RetiredBit, 0) == 0;

    public override string ToString() => $"{Key} {ETag} ({Length} bytes, {Extent})";
}

/// <summary>
/// A pin on a cache entry: its bytes stay valid, even if a newer version replaces it or it is
/// removed, until the pin is disposed. Disposing twice is harmless.
/// </summary>
public sealed class PinHandle : IDisposable
{
    private CacheEntry? _entry;

    internal PinHandle(CacheEntry entry)
    {
        _entry = entry;
        Entry = entry;
    }

    public CacheEntry Entry { get; }

    public Extent Extent => Entry.Extent;

    public bool IsReleased => Volatile.Read(ref _entry) is null;

    public void Dispose() => Interlocked.Exchange(ref _entry, null)?.Unpin();
}
