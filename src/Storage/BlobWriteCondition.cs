namespace FaaST.Storage;

/// <summary>
/// What a conditional write requires of the blob it replaces: nothing (<see cref="None"/>), the version
/// (ETag) a reader saw (If-Match), or that there is no blob (If-None-Match: *, the reader found none).
/// A value type, so unconditional writes carry it without an allocation.
/// </summary>
public readonly record struct BlobWriteCondition
{
    private BlobWriteCondition(string? ifMatch, bool ifNoneExists)
    {
        IfMatch = ifMatch;
        IfNoneExists = ifNoneExists;
    }

    /// <summary>An unconditional write.</summary>
    public static BlobWriteCondition None => default;

    /// <summary>Only if the blob's version is still <paramref name="etag"/> (quoted, as storage gives it).</summary>
    public static BlobWriteCondition Matching(string etag)
    {
        ArgumentException.ThrowIfNullOrEmpty(etag);
        return new(etag, false);
    }

    /// <summary>Only if there is still no blob.</summary>
    public static BlobWriteCondition Absent => new(null, true);

    /// <summary>The version the blob must still have; null unless <see cref="Matching"/>.</summary>
    public string? IfMatch { get; }

    /// <summary>There must still be no blob.</summary>
    public bool IfNoneExists { get; }

    /// <summary>The write is unconditional.</summary>
    public bool IsNone => IfMatch is null && !IfNoneExists;

    /// <summary>The If-None-Match header value storage takes ("*"), or null.</summary>
    public string? IfNoneMatch => IfNoneExists ? "*" : null;

    /// <summary>Whether a blob whose current version is <paramref name="version"/> (null: there is none) meets the condition.</summary>
    public bool HeldBy(string? version) => IfNoneExists ? version is null : IfMatch is null || IfMatch == version;

    /// <summary>For messages: "version \"0x8D..\"" or "no blob" (or "any version").</summary>
    public override string ToString() => IfNoneExists ? "no blob" : IfMatch is null ? "any version" : $"version {IfMatch}";
}
