namespace FaaST.Simulator.Trace;

/// <summary>
/// One row of a blob-access trace in the schema of the Azure Functions Blob Access Trace 2020
/// (Azure/AzurePublicDataset, AzureFunctionsBlobDataset2020.md): who (region, user, app, invocation) accessed which
/// blob (name, type, ETag, size) when, reading or writing it. <see cref="App"/> is the region, user and app joined, since
/// app names are anonymised per user. A row can both read and write; one that does neither is malformed.
/// </summary>
/// <param name="TimestampMs">Milliseconds since the Unix epoch.</param>
/// <param name="Bytes">The blob's size in bytes (the trace's BlobBytes, a float, rounded).</param>
public readonly record struct TraceAccess(long TimestampMs, string App, string Invocation, string Blob, string ETag, long Bytes, bool Read, bool Write);

/// <summary>A line of a trace that could not be read: its 1-based line number and what is wrong with it.</summary>
public readonly record struct TraceProblem(string File, long Line, string Reason)
{
    public override string ToString() => $"{File}:{Line}: {Reason}";
}
