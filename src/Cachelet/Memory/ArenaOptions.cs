namespace FaaST.Cachelet.Memory;

/// <summary>
/// How a <see cref="SharedMemoryArena"/> lays out its memory. Every default is documented here and
/// nowhere else.
/// </summary>
public sealed record ArenaOptions
{
    /// <summary>Bytes the arena may hold in /dev/shm at once: slabs assigned to size classes plus
    /// large-object files (page-rounded). Required. Never exceeded.</summary>
    public required long Capacity { get; init; }

    /// <summary>Size of one slab segment file, default 64 MiB. Segments are created only when a
    /// size class needs room and none of the existing ones has a free run of pages; the file is
    /// sparse, so an unused part of it costs no memory. A multiple of <see cref="PageSize"/>.</summary>
    public long SlabSegmentSize { get; init; } = 64L << 20;

    /// <summary>Objects longer than this, default 256 KiB, get a file of their own, exactly sized
    /// and deleted when freed, so their memory goes back to the OS at once. Objects up to this
    /// length live in slots of slab segments.</summary>
    public int LargeObjectThreshold { get; init; } = 256 << 10;

    /// <summary>Unit in which segments are handed to size classes, default 16 KiB (a power of two, at
    /// least the OS page size). A size class takes slabs of the fewest pages that hold a slot with an
    /// unusable tail of at most 1/8 of the slab (a 640-byte class: 1 page, 25 slots; a 144 KiB class:
    /// 9 pages, 1 slot). Small slabs keep few free slots stranded per class: under the production
    /// mix, 16 KiB pages strand about a quarter of what 64 KiB pages do.</summary>
    public int PageSize { get; init; } = 16 << 10;

    /// <summary>Share of <see cref="Capacity"/> kept for free slots that sit in slabs still holding
    /// live objects, and for slab tails (external fragmentation), default 1/16. Slots are handed out
    /// only while the bytes in use (slots plus large objects) stay within Capacity × (1 − this); the
    /// reserve absorbs half-empty slabs so that an allocation does not fail for want of a slab while
    /// the budget has room. 0 to 0.5. Under the production mix with a 128 MiB cache kept full by
    /// random eviction, 1/16 had no such failure and the cache held 93% of its capacity; 1/32 held
    /// 95% but 2.7% of allocations failed for fragmentation (each costing extra evictions); 1/8 held
    /// 87.5%. Stranded bytes do not grow with the capacity, so a large cache may lower it.</summary>
    public double FragmentationReserve { get; init; } = 1.0 / 16;

    /// <summary>Owner of the directory and of every file the arena creates (the user the app's workers
    /// run as), default none: they stay the creating process's. Setting it needs root.</summary>
    public FileOwner? Owner { get; init; }

    /// <summary>Test hook: called before the arena reserves file space (file name, offset, bytes);
    /// returning true makes the reservation fail as if /dev/shm were full (ENOSPC).</summary>
    internal Func<string, long, long, bool>? SimulateNoSpace { get; init; }
}
