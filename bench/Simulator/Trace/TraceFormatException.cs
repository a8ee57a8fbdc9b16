namespace FaaST.Simulator.Trace;

/// <summary>
/// A trace that cannot be read at all, as opposed to a malformed line (which is reported and skipped): a file with no
/// header, a header without a required column, or a compressed file that is truncated or corrupt. The message names the
/// file, and the line reached when the failure came mid-file.
/// </summary>
public sealed class TraceFormatException : Exception
{
    public TraceFormatException(string file, long line, string message, Exception? inner = null)
        : base(line > 0 ? $"{file}:{line}: {message}" : $"{file}: {message}", inner)
    {
        File = file;
        Line = line;
    }

    /// <summary>The trace file (or the name given for a reader).</summary>
    public string File { get; }

    /// <summary>The 1-based line reached, or 0 when the failure is about the file as a whole.</summary>
    public long Line { get; }
}
