using System.Diagnostics.CodeAnalysis;

namespace FaaST.Policy;

/// <summary>Where a write must arrive, or where a read takes its version from (Faa$T Table 3).</summary>
public enum DataTarget
{
    /// <summary>Remote blob storage.</summary>
    Storage,

    /// <summary>The object's owner cachelet (by consistent hashing).</summary>
    Owner,

    /// <summary>This instance's own cachelet.</summary>
    Local,
}

/// <summary>Whether an invocation's write waits for its target.</summary>
public enum WriteMode
{
    /// <summary>The write completes once the target has it.</summary>
    Sync,

    /// <summary>The write completes at once; the target gets it in the background.</summary>
    Async,
}

/// <summary>
/// One of the six read/write settings of Faa$T Table 3, written <c>write-target/write-mode/read-target</c>
/// in <c>cache.consistency</c>. The write target is where a write must have arrived before it counts
/// as done (sync) or is sent to (async); the read target is where a read takes the current version from.
/// What happens beyond the target (the owner writing behind to storage, for example) is the
/// cachelet's business, not promised by the preset.
/// </summary>
public sealed class ConsistencyPreset
{
    /// <summary><c>storage/sync/storage</c>, the default: strong consistency, highest fault tolerance.</summary>
    public static ConsistencyPreset StorageSyncStorage { get; } = new(DataTarget.Storage, WriteMode.Sync, DataTarget.Storage);

    /// <summary><c>owner/sync/owner</c>: strong consistency through the owner.</summary>
    public static ConsistencyPreset OwnerSyncOwner { get; } = new(DataTarget.Owner, WriteMode.Sync, DataTarget.Owner);

    /// <summary><c>owner/async/owner</c>: eventual consistency.</summary>
    public static ConsistencyPreset OwnerAsyncOwner { get; } = new(DataTarget.Owner, WriteMode.Async, DataTarget.Owner);

    /// <summary><c>owner/sync/local</c>: weak consistency; reads any locally cached version.</summary>
    public static ConsistencyPreset OwnerSyncLocal { get; } = new(DataTarget.Owner, WriteMode.Sync, DataTarget.Local);

    /// <summary><c>local/sync/local</c>: no consistency between instances.</summary>
    public static ConsistencyPreset LocalSyncLocal { get; } = new(DataTarget.Local, WriteMode.Sync, DataTarget.Local);

    /// <summary><c>local/async/local</c>: no consistency between instances; fastest.</summary>
    public static ConsistencyPreset LocalAsyncLocal { get; } = new(DataTarget.Local, WriteMode.Async, DataTarget.Local);

    /// <summary>The default preset, <see cref="StorageSyncStorage"/>.</summary>
    public static ConsistencyPreset Default => StorageSyncStorage;

    /// <summary>The six presets in Table 3's order.</summary>
    public static IReadOnlyList<ConsistencyPreset> All { get; } =
        [StorageSyncStorage, OwnerSyncOwner, OwnerAsyncOwner, OwnerSyncLocal, LocalSyncLocal, LocalAsyncLocal];

    private ConsistencyPreset(DataTarget writeTarget, WriteMode writeMode, DataTarget readTarget)
    {
        WriteTarget = writeTarget;
        WriteMode = writeMode;
        ReadTarget = readTarget;
        Name = $"{Lower(writeTarget)}/{(writeMode == WriteMode.Sync ? "sync" : "async")}/{Lower(readTarget)}";
    }

    /// <summary>The preset as written in <c>faast.json</c>, e.g. <c>owner/async/owner</c>.</summary>
    public string Name { get; }

    /// <summary>Where a write goes.</summary>
    public DataTarget WriteTarget { get; }

    /// <summary>Whether the invocation waits for the write to reach <see cref="WriteTarget"/>.</summary>
    public WriteMode WriteMode { get; }

    /// <summary>Where a read takes the current version from.</summary>
    public DataTarget ReadTarget { get; }

    /// <summary>The read target is storage: a cache hit first checks the blob's ETag with a HEAD
    /// request and refetches on a mismatch.</summary>
    public bool ValidatesWithStorage => ReadTarget == DataTarget.Storage;

    /// <summary>A write completes only once storage has it (write target storage, mode sync).</summary>
    public bool WritesStorageSynchronously => WriteTarget == DataTarget.Storage && WriteMode == WriteMode.Sync;

    /// <summary>
    /// Strong through the owner (<c>owner/sync/owner</c>): every acknowledged write is in storage and
    /// normally at the owner, and reads take the owner's version. An owner then serves its copy without
    /// asking storage only while it knows nothing can have reached storage past it (see BlobCache).
    /// </summary>
    public bool StrongThroughOwner => WriteTarget == DataTarget.Owner && WriteMode == WriteMode.Sync && ReadTarget == DataTarget.Owner;

    /// <summary>Finds a preset by its exact (lower-case) name.</summary>
    public static bool TryParse(string? name, [NotNullWhen(true)] out ConsistencyPreset? preset)
    {
        foreach (var p in All)
        {
            if (string.Equals(p.Name, name, StringComparison.Ordinal))
            {
                preset = p;
                return true;
            }
        }
        preset = null;
        return false;
    }

    /// <inheritdoc/>
    public override string ToString() => Name;

    private static string Lower(DataTarget target) => target switch
    {
        DataTarget.Storage => "storage",
        DataTarget.Owner => "owner",
        _ => "local",
    };
}
