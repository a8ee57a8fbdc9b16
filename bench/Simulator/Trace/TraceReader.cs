using System.Text;
using ICSharpCode.SharpZipLib.BZip2;

namespace FaaST.Simulator.Trace;

/// <summary>
/// Streams the rows of a blob-access trace in the schema of the Azure Functions Blob Access Trace 2020 that Faa$T's
/// authors released (Faa$T §2.1; Azure/AzurePublicDataset, AzureFunctionsBlobDataset2020.md): a CSV file with the header
/// <c>Timestamp,AnonRegion,AnonUserId,AnonAppName,AnonFunctionInvocationId,AnonBlobName,BlobType,AnonBlobETag,BlobBytes,Read,Write</c>,
/// plain (<c>.csv</c>) or compressed as the trace is published (<c>.csv.bz2</c>).
/// </summary>
/// <remarks>
/// Columns are found by name, in any order; other columns (BlobType among them: the simulator does not use it) are
/// ignored. Rows come in file order: the reader does not sort them. A malformed line is reported through the callback
/// with its 1-based line number and skipped, so one bad row among millions never stops a replay; a file that cannot be
/// read as a trace at all (no header, a required column missing, a truncated or corrupt .bz2) throws
/// <see cref="TraceFormatException"/>. A quoted field may contain commas and doubled quotes but not a line break.
/// </remarks>
public static partial class TraceReader
{
    /// <summary>The columns a trace must have, as the public trace names them.</summary>
    public static IReadOnlyList<string> RequiredColumns { get; } =
    [
        "Timestamp", "AnonRegion", "AnonUserId", "AnonAppName", "AnonFunctionInvocationId", "AnonBlobName", "AnonBlobETag",
        "BlobBytes", "Read", "Write",
    ];

    private const int FileBufferBytes = 1 << 16;

    /// <summary>
    /// Reads a trace file (<c>.csv</c>, or bzip2-compressed when the name ends in <c>.bz2</c>) or, when
    /// <paramref name="path"/> is a directory, its <c>*.csv</c> and <c>*.csv.bz2</c> files in ordinal name order (a
    /// trace split into one file per day reads in time order).
    /// </summary>
    /// <exception cref="FileNotFoundException">The file does not exist, or the directory holds no trace file (thrown at
    /// once, not on the first row).</exception>
    public static IEnumerable<TraceAccess> Read(string path, Action<TraceProblem> onProblem)
    {
        ArgumentException.ThrowIfNullOrEmpty(path);
        ArgumentNullException.ThrowIfNull(onProblem);
        if (Directory.Exists(path))
        {
            var files = TraceFiles(path);
            if (files.Count == 0)
            {
                throw new FileNotFoundException($"The trace directory {path} holds no *.csv or *.csv.bz2 file.", path);
            }
            return files.SelectMany(file => ReadFile(file, onProblem));
        }
        if (!File.Exists(path))
        {
            throw new FileNotFoundException($"The trace file {path} does not exist.", path);
        }
        return ReadFile(path, onProblem);
    }

    /// <summary>Reads a trace from <paramref name="reader"/>; <paramref name="name"/> is what problems and errors call it.</summary>
    public static IEnumerable<TraceAccess> Read(TextReader reader, string name, Action<TraceProblem> onProblem)
    {
        ArgumentNullException.ThrowIfNull(reader);
        ArgumentNullException.ThrowIfNull(name);
        ArgumentNullException.ThrowIfNull(onProblem);
        return new Parser(reader, name, onProblem).Rows();
    }

    /// <summary>The trace files of a directory, ordinal by name.</summary>
    public static IReadOnlyList<string> TraceFiles(string directory)
    {
        var files = Directory.EnumerateFiles(directory)
            .Where(f => f.EndsWith(".csv", StringComparison.OrdinalIgnoreCase) || f.EndsWith(".csv.bz2", StringComparison.OrdinalIgnoreCase))
            .ToList();
        files.Sort((a, b) => string.CompareOrdinal(Path.GetFileName(a), Path.GetFileName(b)));
        return files;
    }

    /// <summary>Whether a trace file is bzip2-compressed, by its extension.</summary>
    public static bool IsBzip2(string path) => path.EndsWith(".bz2", StringComparison.OrdinalIgnoreCase);

    private static IEnumerable<TraceAccess> ReadFile(string path, Action<TraceProblem> onProblem)
    {
        using var reader = OpenText(path);
        foreach (var access in new Parser(reader, path, onProblem).Rows())
        {
            yield return access;
        }
    }

    private static StreamReader OpenText(string path)
    {
        var file = new FileStream(path, FileMode.Open, FileAccess.Read, FileShare.Read, FileBufferBytes, FileOptions.SequentialScan);
        try
        {
            // The decoder reads the stream's signature as it is made: a file that is not bzip2 fails here.
            Stream stream = IsBzip2(path) ? new BZip2InputStream(file) : file;
            return new StreamReader(stream, Encoding.UTF8, detectEncodingFromByteOrderMarks: true, FileBufferBytes);
        }
        catch (Exception e) when (IsCorruptInput(e))
        {
            file.Dispose();
            throw new TraceFormatException(path, 0, $"is not a readable bzip2 file ({e.Message})", e);
        }
        catch
        {
            file.Dispose();
            throw;
        }
    }

    /// <summary>What a decompressor throws for a truncated or corrupt input (as opposed to a failing disk).</summary>
    private static bool IsCorruptInput(Exception e) =>
        e is ICSharpCode.SharpZipLib.SharpZipBaseException or EndOfStreamException or InvalidDataException;
}
