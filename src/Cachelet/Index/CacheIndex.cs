using System.Collections.Concurrent;
using System.Diagnostics;
using System.Diagnostics.CodeAnalysis;
using FaaST.Cachelet.Demotion;
using FaaST.Cachelet.Memory;
using FaaST.Cachelet.Sources;
using Microsoft.Extensions.Logging;
using Microsoft.Extensions.Logging.Abstractions;

namespace FaaST.Cachelet.Index;

/// <summary>How the index behaves; the defaults are documented here.</summary>
public sealed record CacheIndexOptions
{
    /// <summary>Eviction order, default <see cref="EvictionPolicies.LruNonOwnedFirst"/>.</summary>
    public IEvictionPolicy Policy { get; init; } = EvictionPolicies.LruNonOwnedFirst;

    /// <summary>Candidates sampled per evicted object (Redis' maxmemory-samples), default 16.</summary>
    public int SampleSize { get; init; } = 16;

    /// <summary>Keys whose statistics are kept, default 100,000. Statistics of cached keys are always
    /// kept; when the count passes this, those of uncached keys are dropped least recently accessed
    /// first, down to 3/4 of it, in one batch (amortized O(log n) per new key).</summary>
    public int MaxTrackedKeys { get; init; } = 100_000;

    /// <summary>Seed of the sampling; null for a random one (tests fix it).</summary>
    internal int? RandomSeed { get; init; }

    /// <summary>The index's clock, in Stopwatch ticks; tests substitute a manual one.</summary>
    internal Func<long> Clock { get; init; } = CoarseClock.Now;

    /// <summary>Get each object evicted for space or expired, before its bytes are freed, on a background
    /// thread (see <see cref="DemotionQueue"/>); none by default. Without sinks eviction frees at once.</summary>
    public IReadOnlyList<IEvictionSink> EvictionSinks { get; init; } = [];

    /// <summary>The bounded queue between eviction and the sinks (used only with sinks).</summary>
    public DemotionOptions Demotion { get; init; } = new();

    /// <summary>Objects <see cref="CacheIndex.RecentlyEvicted"/> remembers, default 1,024 (about 100 KB); 0 for none.</summary>
    public int RecentlyEvictedCapacity { get; init; } = 1024;

    /// <summary>For dropped demotions and failing sinks; none by default.</summary>
    public ILogger? Logger { get; init; }

    /// <summary>A lookup rewrites an entry's last-access time only if it moved by more than this
    /// (Stopwatch ticks), default 0: at most once per clock tick (1 ms) per entry, so a hot key's
    /// cache line is not written by every core on every hit.</summary>
    internal long TouchGranularity { get; init; }
}

/// <summary>
/// Timestamps in Stopwatch ticks at millisecond resolution (Environment.TickCount64, a coarse
/// monotonic clock). The hit path reads the clock on every lookup; in a VM Stopwatch.GetTimestamp
/// measured 44 ns there, TickCount64 8 ns, and LRU order, TTLs and inter-arrival means need no
/// finer than a millisecond.
/// </summary>
public static class CoarseClock
{
    private static readonly long TicksPerMillisecond = Stopwatch.Frequency / 1000;

    public static long Now() => Environment.TickCount64 * TicksPerMillisecond;
}

/// <summary>Objects and bytes one eviction call removed from the index.</summary>
public readonly record struct EvictionResult(int Objects, long Bytes);

/// <summary>
/// The cachelet's index: key → cached version, over a <see cref="SharedMemoryArena"/>.
/// <para>
/// Hits take no lock: a ConcurrentDictionary lookup and a timestamp write (pins and statistics use
/// Interlocked). Adds, replacements and removals take one short mutation lock, which also guards
/// the eviction tiers.
/// </para>
/// <para>
/// Eviction is Redis-style sampled LRU inside strict policy tiers. Each tier keeps its entries in
/// a dense array (insert at the end, remove by moving the last into the hole: O(1)); to evict, the
/// index samples <see cref="CacheIndexOptions.SampleSize"/> random entries of the lowest non-empty
/// tier and evicts the least recently used unpinned one, and repeats. An evicted object costs
/// O(K), never a scan, and the hit path only stores a timestamp; a tier of at most K entries is
/// examined whole, so small tiers are exact LRU. Chosen over CLOCK because CLOCK's hand would
/// sweep a tier to find the next victim (a reference bit per hit, a scan per eviction when many
/// are set) and over a true LRU list because that needs a lock on every hit. Only when every
/// sample of a tier is pinned (8 rounds in a row) does it scan that tier once, to tell "all
/// pinned" from bad luck. Pinned entries are never evicted: the victim's retirement is a single
/// compare-and-swap from "0 pins" to "retired".
/// </para>
/// <para>
/// Replacing or removing an entry retires it: it leaves the index at once, and its extent is freed
/// when its last pin goes. With a TTL, entries are also kept in insertion order (which is expiry
/// order), so expired ones are found at the head of a queue.
/// </para>
/// </summary>
public sealed partial class CacheIndex : IDisposable
{
    private const int AllPinnedRounds = 8;

    private readonly SharedMemoryArena _arena;
    private readonly CacheIndexOptions _options;
    private readonly IEvictionPolicy _policy;
    private readonly Func<long> _clock;
    private readonly long _ttlTicks;
    private readonly long _touchGranularity;
    private readonly ConcurrentDictionary<BlobKey, CacheEntry> _entries = new();
    private readonly ConcurrentDictionary<BlobKey, ObjectStats> _stats = new();
    private long _evictionsAtQuery;
    private readonly Lock _lock = new();
    private readonly Lock _evictLock = new();
    private readonly Lock _trimLock = new();
    private readonly Tier[] _tiers;
    private readonly Queue<CacheEntry> _byInsertion = new();
    private readonly List<CacheEntry> _expiredPinned = [];
    private readonly Random _random;
    private readonly RecentEvictions? _recent;
    private readonly DemotionQueue? _demotion;
    private readonly long _cachedBudget;
    private int _count;
    private long _bytes;
    private long _pinnedBytes;
    private long _retiredPinnedBytes;
    private long _evictions;
    private long _expirations;
    private int _trackedKeys;
    private bool _disposed;

    public CacheIndex(SharedMemoryArena arena, CacheIndexOptions? options = null)
    {
        ArgumentNullException.ThrowIfNull(arena);
        options ??= new CacheIndexOptions();
        ArgumentNullException.ThrowIfNull(options.Policy);
        ArgumentOutOfRangeException.ThrowIfNegativeOrZero(options.SampleSize);
        ArgumentOutOfRangeException.ThrowIfNegativeOrZero(options.MaxTrackedKeys);
        if (options.Policy.TierCount < 1)
            throw new ArgumentException("an eviction policy has at least one tier", nameof(options));
        ArgumentNullException.ThrowIfNull(options.EvictionSinks);
        ArgumentOutOfRangeException.ThrowIfNegative(options.RecentlyEvictedCapacity);
        if (options.EvictionSinks.Any(s => s is null))
            throw new ArgumentException("an eviction sink is null", nameof(options));
        options.Demotion.Validate();
        _arena = arena;
        _options = options;
        _policy = options.Policy;
        _clock = options.Clock;
        _touchGranularity = options.TouchGranularity;
        _ttlTicks = _policy.TimeToLive is { } ttl ? (long)(ttl.TotalSeconds * Stopwatch.Frequency) : 0;
        _random = options.RandomSeed is { } seed ? new Random(seed) : new Random();
        _tiers = new Tier[_policy.TierCount];
        for (var i = 0; i < _tiers.Length; i++)
            _tiers[i] = new Tier();
        _recent = options.RecentlyEvictedCapacity > 0 ? new RecentEvictions(options.RecentlyEvictedCapacity) : null;
        if (options.EvictionSinks.Count > 0)
        {
            _demotion = new DemotionQueue(options.EvictionSinks, options.Demotion, arena.Capacity,
                e => ReleaseExtent(e, retiredWhilePinned: false), EvictAhead, options.Logger ?? NullLogger.Instance);
            // What the arena hands out (slots stop at its fragmentation reserve) less the room kept for demotions.
            var reserve = Math.Min(options.Demotion.ReserveBytes ?? _demotion.MaxBytes, arena.Capacity / 2);
            _cachedBudget = reserve == 0 ? long.MaxValue : (long)(arena.Capacity * (1 - arena.Options.FragmentationReserve)) - reserve;
        }
    }

    public SharedMemoryArena Arena => _arena;

    public IEvictionPolicy Policy => _policy;

    /// <summary>Entries in the index.</summary>
    public int Count => Volatile.Read(ref _count);

    /// <summary>The cached entries (a moving view: entries may come and go while it is enumerated).</summary>
    public IEnumerable<CacheEntry> Entries => _entries.Values;

    /// <summary>Object bytes of the entries in the index.</summary>
    public long Bytes => Volatile.Read(ref _bytes);

    /// <summary>Object bytes of entries pinned now, in the index or retired.</summary>
    public long PinnedBytes => Volatile.Read(ref _pinnedBytes);

    /// <summary>Bytes of retired (replaced, removed) entries that pins keep from being freed.</summary>
    public long RetiredPinnedBytes => Volatile.Read(ref _retiredPinnedBytes);

    /// <summary>Objects evicted to make room since the index was made (not counting TTL expiry).</summary>
    public long Evictions => Volatile.Read(ref _evictions);

    /// <summary>Objects dropped because their TTL ran out.</summary>
    public long Expirations => Volatile.Read(ref _expirations);

    /// <summary>Keys with statistics (at most about <see cref="CacheIndexOptions.MaxTrackedKeys"/>, or the cached count if larger).</summary>
    public int TrackedKeys => Volatile.Read(ref _trackedKeys);

    /// <summary>Entries queued in insertion order for TTL expiry, including ones already gone (tests).</summary>
    internal int InsertionQueueLength
    {
        get
        {
            lock (_lock)
                return _byInsertion.Count;
        }
    }

    // ---- lookups (no lock) --------------------------------------------------------------

    /// <summary>
    /// The cached version of <paramref name="key"/>, marked as just used; false on a miss, including
    /// an entry past its TTL. To read its bytes, pin it (<see cref="TryPin"/>): an unpinned entry can
    /// be replaced and freed at any moment.
    /// </summary>
    public bool TryGet(in BlobKey key, [NotNullWhen(true)] out CacheEntry? entry)
    {
        if (!_entries.TryGetValue(key, out entry))
            return false;
        var now = _clock();
        if (_ttlTicks > 0 && now - entry.InsertedAt >= _ttlTicks)
        {
            entry = null;
            return false;
        }
        entry.Touch(now, _touchGranularity);
        return true;
    }

    /// <summary>The cached entry without marking it used (no LRU touch); false on a miss or past its TTL.</summary>
    public bool TryPeek(in BlobKey key, [NotNullWhen(true)] out CacheEntry? entry)
    {
        if (_entries.TryGetValue(key, out entry) && (_ttlTicks <= 0 || _clock() - entry.InsertedAt < _ttlTicks))
            return true;
        entry = null;
        return false;
    }

    /// <summary><see cref="TryGet"/> and <see cref="TryPin"/> in one: false on a miss.</summary>
    public bool TryGetPinned(in BlobKey key, [NotNullWhen(true)] out PinHandle? pin)
    {
        while (TryGet(key, out var entry))
        {
            if (TryPin(entry, out pin))
                return true;
            // Replaced or removed between lookup and pin: look again.
        }
        pin = null;
        return false;
    }

    /// <summary>Pins an entry: its bytes stay valid until the handle is disposed. False if it was retired.</summary>
    public bool TryPin(CacheEntry entry, [NotNullWhen(true)] out PinHandle? pin)
    {
        ArgumentNullException.ThrowIfNull(entry);
        pin = entry.TryPin() ? new PinHandle(entry) : null;
        return pin is not null;
    }

    /// <summary>Pins an entry.</summary>
    /// <exception cref="InvalidOperationException">It was replaced, removed or evicted.</exception>
    public PinHandle Pin(CacheEntry entry) =>
        TryPin(entry, out var pin) ? pin : throw new InvalidOperationException($"{entry.Key} ({entry.ETag}) is no longer cached; look it up again");

    // ---- mutations ----------------------------------------------------------------------

    /// <summary>
    /// Caches <paramref name="extent"/> as version <paramref name="etag"/> of the key unless the key is
    /// cached already (then false, and the extent stays the caller's). On success the index owns the extent.
    /// </summary>
    public bool TryAdd(in BlobKey key, string etag, in Extent extent, bool owned, [NotNullWhen(true)] out CacheEntry? entry)
    {
        entry = Install(key, etag, extent, owned, replace: false, CacheEntry.NotValidated, pinned: false);
        return entry is not null;
    }

    /// <summary>
    /// Caches <paramref name="extent"/> as version <paramref name="etag"/>; the index owns the extent.
    /// A previous version leaves the index now and its extent is freed when its pins are gone.
    /// </summary>
    public CacheEntry AddOrReplace(in BlobKey key, string etag, in Extent extent, bool owned = true,
        long validatedEpoch = CacheEntry.NotValidated) =>
        Install(key, etag, extent, owned, replace: true, validatedEpoch, pinned: false)!;

    /// <summary>
    /// <see cref="AddOrReplace"/>, and pinned for the caller in the same step: the pin cannot fail,
    /// whereas a separate <see cref="Pin"/> can, when a concurrent write or removal of the key retires
    /// the new entry first (the caller would then have bytes it can no longer hand out).
    /// </summary>
    public PinHandle AddOrReplacePinned(in BlobKey key, string etag, in Extent extent, bool owned = true,
        long validatedEpoch = CacheEntry.NotValidated) =>
        new(Install(key, etag, extent, owned, replace: true, validatedEpoch, pinned: true)!);

    /// <summary>
    /// <see cref="AddOrReplacePinned"/> only while the key's current entry is still <paramref name="expected"/>: a
    /// conditional write's check (the caller compared <paramref name="expected"/>'s version) and its install in one
    /// step under the index's lock, so two writers that checked the same version cannot both replace it. Null when
    /// another entry (or none) is current by now; the extent then stays the caller's.
    /// </summary>
    public PinHandle? TryReplacePinned(in BlobKey key, CacheEntry expected, string etag, in Extent extent, bool owned)
    {
        ArgumentNullException.ThrowIfNull(expected);
        return Install(key, etag, extent, owned, replace: true, CacheEntry.NotValidated, pinned: true, expected) is { } entry
            ? new PinHandle(entry) : null;
    }

    /// <summary>Records the ETag storage gave the entry's bytes (write-behind). False if the entry is no longer cached.</summary>
    public bool UpdateVersion(CacheEntry entry, string etag)
    {
        ArgumentNullException.ThrowIfNull(entry);
        ArgumentNullException.ThrowIfNull(etag);
        // Kept so that a conditional write (If-Match) from an invocation that read the provisional version
        // is not refused merely because the upload finished in between: they are the same bytes.
        entry.FormerVersion = entry.ETag;
        entry.ETag = etag;
        return !entry.IsRetired;
    }

    /// <summary>Removes the key's entry (its extent is freed when unpinned). False if not cached.</summary>
    public bool Remove(in BlobKey key)
    {
        CacheEntry? removed;
        lock (_lock)
        {
            if (!_entries.TryRemove(key, out removed))
                return false;
            Unlink(removed);
        }
        removed.Retire();
        _recent?.Add(removed, EvictionReason.Invalidated);
        return true;
    }

    /// <summary>Removes this entry if it is still the key's current one.</summary>
    public bool Remove(CacheEntry entry)
    {
        ArgumentNullException.ThrowIfNull(entry);
        lock (_lock)
        {
            if (!_entries.TryRemove(new KeyValuePair<BlobKey, CacheEntry>(entry.Key, entry)))
                return false;
            Unlink(entry);
        }
        entry.Retire();
        _recent?.Add(entry, EvictionReason.Invalidated);
        return true;
    }

    // ---- internals ----------------------------------------------------------------------

    private CacheEntry? Install(in BlobKey key, string etag, in Extent extent, bool owned, bool replace, long validatedEpoch, bool pinned,
        CacheEntry? expected = null)
    {
        ArgumentNullException.ThrowIfNull(etag);
        if (!ReferenceEquals(extent.File?.Owner ?? _arena, _arena))
            throw new ArgumentException($"{extent} belongs to another arena", nameof(extent));
        var now = _clock();
        CacheEntry entry;
        CacheEntry? old;
        var overLimit = false;
        lock (_lock)
        {
            ObjectDisposedException.ThrowIf(_disposed, this);
            var had = _entries.TryGetValue(key, out old);
            if (had && !replace || expected is not null && !(had && ReferenceEquals(old, expected)))
                return null;
            entry = new CacheEntry(this, key, etag, extent, owned, now, had ? old!.Stats : GetOrCreateStats(key, out overLimit),
                validatedEpoch, pinned);
            if (pinned)
                OnPinned(entry);
            _entries[key] = entry;
            if (had)
                Unlink(old!);
            Link(entry);
            if (_ttlTicks > 0)
                EnqueueByInsertion(entry);
        }
        old?.Retire();
        if (overLimit)
            TrimStats();
        return entry;
    }

    /// <summary>
    /// Mutation lock held: appends to the insertion (= expiry) order. Entries that left the index
    /// stay queued until they reach the head; when they outnumber the live ones, the queue is
    /// rebuilt without them (amortized O(1)), so replacements cannot grow it without bound.
    /// </summary>
    private void EnqueueByInsertion(CacheEntry entry)
    {
        _byInsertion.Enqueue(entry);
        if (_byInsertion.Count <= 2 * _count + 64)
            return;
        var live = _byInsertion.Where(e => e.Slot >= 0).ToArray();
        _byInsertion.Clear();
        foreach (var e in live)
            _byInsertion.Enqueue(e);
    }

    /// <summary>Mutation lock held: files a new current entry in its tier and the totals.</summary>
    private void Link(CacheEntry entry)
    {
        entry.Tier = TierOf(entry.Owned, entry.Length);
        _tiers[entry.Tier].Add(entry);
        _count++;
        _bytes += entry.Length;
    }

    /// <summary>Mutation lock held: takes an entry that left the dictionary out of its tier and the totals.</summary>
    private void Unlink(CacheEntry entry)
    {
        if (entry.Slot < 0)
            return;
        _tiers[entry.Tier].Remove(entry);
        _count--;
        _bytes -= entry.Length;
    }

    private int TierOf(bool owned, long length)
    {
        var tier = _policy.Tier(owned, length);
        if ((uint)tier >= (uint)_tiers.Length)
            throw new InvalidOperationException($"the eviction policy put an entry in tier {tier}; it has tiers 0 to {_tiers.Length - 1}");
        return tier;
    }

    internal void SetOwned(CacheEntry entry, bool owned)
    {
        lock (_lock)
        {
            if (entry.Owned == owned)
                return;
            entry.SetOwnedUnderLock(owned);
            if (entry.Slot < 0)
                return;
            var tier = TierOf(owned, entry.Length);
            if (tier == entry.Tier)
                return;
            _tiers[entry.Tier].Remove(entry);
            entry.Tier = tier;
            _tiers[tier].Add(entry);
        }
    }

    internal void OnPinned(CacheEntry entry) => Interlocked.Add(ref _pinnedBytes, entry.Length);

    internal void OnUnpinned(CacheEntry entry) => Interlocked.Add(ref _pinnedBytes, -entry.Length);

    internal void OnRetiredPinned(CacheEntry entry) => Interlocked.Add(ref _retiredPinnedBytes, entry.Length);

    internal void ReleaseExtent(CacheEntry entry, bool retiredWhilePinned)
    {
        if (retiredWhilePinned)
            Interlocked.Add(ref _retiredPinnedBytes, -entry.Length);
        _arena.Free(entry.Extent);
    }

    /// <summary>Removes every entry (extents of pinned ones are freed when unpinned); later adds throw.</summary>
    public void Dispose()
    {
        List<CacheEntry> all;
        lock (_lock)
        {
            if (_disposed)
                return;
            _disposed = true;
            all = [.. _entries.Values];
            _entries.Clear();
            foreach (var e in all)
                Unlink(e);
            _byInsertion.Clear();
            _expiredPinned.Clear();
        }
        foreach (var e in all)
            e.Retire();
        _demotion?.Dispose();
    }

    /// <summary>A tier's entries in a dense array; O(1) add and remove (the last entry fills the hole).</summary>
    private sealed class Tier
    {
        public CacheEntry?[] Items = new CacheEntry?[16];
        public int Count;

        public void Add(CacheEntry entry)
        {
            if (Count == Items.Length)
                Array.Resize(ref Items, Items.Length * 2);
            entry.Slot = Count;
            Items[Count++] = entry;
        }

        public void Remove(CacheEntry entry)
        {
            var slot = entry.Slot;
            var last = Items[--Count]!;
            Items[slot] = last;
            last.Slot = slot;
            Items[Count] = null;
            entry.Slot = -1;
        }
    }
}
