namespace FaaST.Policy;

/// <summary>
/// <c>faast.json</c> is not valid. The message reads <c>FILE: KEY.PATH: reason</c>, or
/// <c>FILE: not valid JSON (line L, position P): reason</c> for a syntax error.
/// </summary>
public sealed class PolicyFileException : Exception
{
    internal PolicyFileException(string fileName, string? keyPath, string reason, Exception? inner = null)
        : base($"{fileName}: {(keyPath is null ? "" : keyPath + ": ")}{reason}", inner)
    {
        FileName = fileName;
        KeyPath = keyPath;
        Reason = reason;
    }

    /// <summary>The file, as named to the parser.</summary>
    public string FileName { get; }

    /// <summary>The JSON key path of the offending value (<c>cache.eviction.policy</c>,
    /// <c>cache.doNotCache[2]</c>), or null for a syntax error or an unreadable file.</summary>
    public string? KeyPath { get; }

    /// <summary>What is wrong, without the file and key.</summary>
    public string Reason { get; }
}
