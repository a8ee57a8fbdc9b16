using FaaST.Policy;

namespace FaaST.Cachelet.Consistency;

/// <summary>What a local hit does before its cached bytes are served.</summary>
internal enum HitCheck
{
    /// <summary>Serve the cached copy as it is.</summary>
    None,

    /// <summary>One HEAD on every hit: storage must still hold the cached version.</summary>
    StorageHead,

    /// <summary>
    /// One HEAD on the first hit of an epoch (<see cref="ValidationEpoch"/>): an owner serves unchecked
    /// only while nothing can have reached storage past it.
    /// </summary>
    StorageHeadOncePerEpoch,

    /// <summary>Ask the key's owner, sending the cached version (no bytes come back if it is current).</summary>
    AskOwner,
}

/// <summary>Where a write goes first (the cachelet's choice beyond the preset's write target).</summary>
internal enum WriteDestination
{
    /// <summary>Storage, from this instance (also the local presets: the copy here plus storage).</summary>
    Storage,

    /// <summary>The key's owner when another instance owns it (its cache, and storage from there); storage if it cannot take it.</summary>
    Owner,
}

/// <summary>How an invocation's write reaches its destination.</summary>
internal enum WritePath
{
    /// <summary>The write completes once the destination has it (<see cref="Writes.WriteThrough"/>).</summary>
    Through,

    /// <summary>The write completes at once; the destination gets it in the background (<see cref="Writes.WriteBehind"/>).</summary>
    Behind,
}

/// <summary>
/// One consistency preset as the cachelet enforces it (Faa$T Table 3): the only place that turns a
/// preset's three words into behaviour. The read chain, the write paths and peer serving ask it;
/// none of them branches on the preset itself.
/// </summary>
/// <param name="OwnedElsewhereHit">What a hit does when another instance owns the key.</param>
/// <param name="OwnedHereHit">What a hit does when this instance owns the key (always, without peers).</param>
/// <param name="MissesValidated">A miss asks the owner (or a tier) to check its copy with storage before answering.</param>
/// <param name="WriteTo">Where a write goes.</param>
/// <param name="Write">Whether the invocation waits for it.</param>
internal sealed record ConsistencyStrategy(ConsistencyPreset Preset, HitCheck OwnedElsewhereHit, HitCheck OwnedHereHit,
    bool MissesValidated, WriteDestination WriteTo, WritePath Write)
{
    /// <summary>Faa$T Table 3, as this cachelet enforces each row.</summary>
    public static IReadOnlyList<ConsistencyStrategy> Table { get; } =
    [
        //                                           hit, another owns it    hit, this instance owns it          misses validated  write to                   write path
        new(ConsistencyPreset.StorageSyncStorage, HitCheck.StorageHead, HitCheck.StorageHead,              true,  WriteDestination.Storage, WritePath.Through),
        new(ConsistencyPreset.OwnerSyncOwner,     HitCheck.AskOwner,    HitCheck.StorageHeadOncePerEpoch,  false, WriteDestination.Owner,   WritePath.Through),
        new(ConsistencyPreset.OwnerAsyncOwner,    HitCheck.AskOwner,    HitCheck.None,                     false, WriteDestination.Owner,   WritePath.Behind),
        new(ConsistencyPreset.OwnerSyncLocal,     HitCheck.None,        HitCheck.None,                     false, WriteDestination.Owner,   WritePath.Through),
        new(ConsistencyPreset.LocalSyncLocal,     HitCheck.None,        HitCheck.None,                     false, WriteDestination.Storage, WritePath.Through),
        new(ConsistencyPreset.LocalAsyncLocal,    HitCheck.None,        HitCheck.None,                     false, WriteDestination.Storage, WritePath.Behind),
    ];

    /// <summary>The row of <paramref name="preset"/>.</summary>
    public static ConsistencyStrategy For(ConsistencyPreset preset)
    {
        foreach (var row in Table)
        {
            if (ReferenceEquals(row.Preset, preset))
                return row;
        }
        throw new ArgumentException($"no consistency strategy for the preset {preset}", nameof(preset));
    }

    /// <summary>
    /// The hit check depends on who owns the key: only then is the key hashed onto the ring (~1.5 µs)
    /// before a hit is served.
    /// </summary>
    public bool OwnerDecidesHit => OwnedElsewhereHit != OwnedHereHit;

    /// <summary>The check a hit makes, given whether this instance owns the key.</summary>
    public HitCheck HitCheckFor(bool ownedHere) => ownedHere ? OwnedHereHit : OwnedElsewhereHit;

    /// <summary>
    /// An owner serves its copy without asking storage only in the epoch it validated it in
    /// (owner/sync/owner): what makes ownership moves and writes that bypassed the owner safe.
    /// </summary>
    public bool TrustsEpoch => OwnedHereHit == HitCheck.StorageHeadOncePerEpoch;

    /// <summary>
    /// A copy from a source that is not authoritative (a tier) is checked against storage before it is
    /// served: wherever a hit would check storage itself.
    /// </summary>
    public bool ChecksCopiesWithStorage(bool ownedHere) => HitCheckFor(ownedHere) is HitCheck.StorageHead or HitCheck.StorageHeadOncePerEpoch;

    /// <summary>A write goes to the key's owner (when <paramref name="ownedElsewhere"/>: another instance owns the key).</summary>
    public bool WritesToOwner(bool ownedElsewhere) => WriteTo == WriteDestination.Owner && ownedElsewhere;
}
