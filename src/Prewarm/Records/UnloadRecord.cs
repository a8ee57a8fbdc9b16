namespace FaaST.Prewarm.Records;

/// <summary>
/// The record a cachelet leaves in blob storage when its app is unloaded (Faa$T §3.3): one per instance and unload,
/// stamped with the unload time; the history of an app is the set of these. Stored by
/// <see cref="UnloadRecordFormat"/> as versioned JSON.
/// </summary>
public sealed record UnloadRecord(string App, string Instance, DateTimeOffset UnloadedAt, IReadOnlyList<ObjectRecord> Objects)
{
    /// <summary>The version of the stored format that this code writes and the only one it reads.</summary>
    public const int FormatVersion = 1;
}
