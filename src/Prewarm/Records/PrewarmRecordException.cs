namespace FaaST.Prewarm.Records;

/// <summary>
/// A stored unload record cannot be used: not JSON, not UTF-8, another format version, or a key missing or of the
/// wrong type. The message reads <c>SOURCE: reason</c>, SOURCE being the blob (or file) it was read from. The caller
/// skips the record (a missing or bad record never blocks loading, issue 21).
/// </summary>
public sealed class PrewarmRecordException : Exception
{
    public PrewarmRecordException(string source, string reason, Exception? inner = null)
        : base($"{source}: {reason}", inner)
    {
        RecordSource = source;
        Reason = reason;
    }

    /// <summary>Where the record was read from (a blob name).</summary>
    public string RecordSource { get; }

    /// <summary>What is wrong, without the source.</summary>
    public string Reason { get; }
}
