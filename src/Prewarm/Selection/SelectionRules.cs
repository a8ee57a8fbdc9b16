namespace FaaST.Prewarm.Selection;

/// <summary>
/// How <see cref="ObjectSelector"/> chooses (faast.json's <c>prewarm</c> section): an object is loaded when its local
/// or remote hit rate exceeds <paramref name="HitRateThreshold"/> or it was reused across the merged records; never
/// when <paramref name="Excluded"/>(container, blob) is true; at most <paramref name="MaxBytes"/> in all (null: no cap).
/// </summary>
public sealed record SelectionRules(double HitRateThreshold, long? MaxBytes = null, Func<string, string, bool>? Excluded = null);

/// <summary>An object to pre-warm: the newest version recorded, and its accesses over the merged records.</summary>
public sealed record SelectedObject(string Account, string Container, string Blob, long Size, string ETag, long Accesses);
