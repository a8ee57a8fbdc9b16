namespace FaaST.FlashBackend.Engine;

/// <summary>What the store does with the log it finds when it opens.</summary>
public enum StartupMode
{
    /// <summary>The default: scan the log and rebuild the index, so a restarted flash server keeps serving what it
    /// held (the point of a flash tier under a cache: a restart must not send every miss to blob storage at once).
    /// Records whose checksum fails are torn and never indexed. Costs one sequential read of the used log at start.</summary>
    Recover,

    /// <summary>Start empty and overwrite whatever the file holds: for tests and for operators who would rather
    /// skip the scan; correct because the flash tier is a cache (blob storage holds every object).</summary>
    Ephemeral,
}

/// <summary>Where and how large the log is. Defaults are justified beside each.</summary>
public sealed record FlashStoreOptions
{
    /// <summary>A file on a filesystem that supports O_DIRECT (not tmpfs), or a block device under /dev.</summary>
    public required string Path { get; init; }

    /// <summary>Bytes preallocated for the log. 1 GiB: the size docs/flash.md measured on; a server sets it from
    /// faast.json for the device it has.</summary>
    public long Capacity { get; init; } = 1L << 30;

    /// <summary>The reclamation unit: when the log is full, the oldest segment's records are evicted and it is
    /// rewritten. 64 MiB keeps 16 segments in the default 1 GiB, so one reclaim drops 1/16 (6 %) of the cached bytes,
    /// and still holds any value up to 64 MiB less the header block (the largest value the store takes).</summary>
    public int SegmentSize { get; init; } = 64 << 20;

    /// <summary>The size of each pooled aligned I/O buffer, so the most one request moves per syscall. 256 KiB: large
    /// enough that a big value streams in few syscalls (64 per 16 MiB), small enough that many concurrent requests
    /// (the scheduler's in-flight caps) hold little memory, and 64 of En4S's 4 KiB cost units.</summary>
    public int IoBufferSize { get; init; } = 256 << 10;

    public StartupMode Startup { get; init; } = StartupMode.Recover;

    /// <summary>Small reads (<see cref="FlashStore.BeginRead"/>: the server's GetMany items) go through Linux io_uring
    /// when the kernel allows it: true by default, because on this 2-core VM a blocking pread per read cost the server
    /// most of its CPU in context switches (docs/flash.md, "The server's read path"). False, or a kernel or sandbox
    /// that refuses io_uring (<see cref="FlashStore.IoUringUnavailable"/> says why), reads with pread.</summary>
    public bool UseIoUring { get; init; } = true;
}

/// <summary>Counters since the store opened.</summary>
public sealed record FlashStoreStats(long LiveObjects, long Puts, long Deletes, long ReclaimedSegments, long EvictedObjects, long RecoveredObjects, long TornRecordsSkipped);

/// <summary>The result of a read: a <see cref="Hit"/> only when the bytes are this (tenant, key, ETag)'s.</summary>
public enum ReadStatus
{
    Hit,

    /// <summary>Not stored, a different ETag stored (an old version is never served), or evicted (also mid-read).</summary>
    Miss,

    /// <summary>The whole-value checksum failed: the bytes must not be used (the key is dropped from the index).</summary>
    Corrupt,
}
