using System.Globalization;

namespace FaaST.Cachelet.Memory;

/// <summary>
/// The shared-memory naming protocol between the host and its workers, in one place: the instance
/// directory, the host's own files (slab segments, large objects, temporary and peer spill files),
/// the files workers write their outputs to, and the capability names of the handshake. The Python
/// (faast_worker.shm_names) and Node (lib/shm-names.js) workers define the same names; all three
/// are checked against protos/shared-memory.json by a test in each language.
/// </summary>
public static class SharedMemoryNames
{
    /// <summary>Where instance directories live.</summary>
    public const string Root = "/dev/shm";

    /// <summary>Instance directories are ROOT/faast-APP-PID.</summary>
    public const string InstanceDirectoryPrefix = "faast-";

    /// <summary>Slab segments: "s" + number.</summary>
    public const char SlabSegment = 's';

    /// <summary>Large objects (and adopted worker outputs): "l" + number.</summary>
    public const char LargeObject = 'l';

    /// <summary>Temporary files (objects larger than the cache, peer transfers spilled to a file): "t" + number.</summary>
    public const char Temporary = 't';

    /// <summary>Progress records of inputs streamed to a worker while they download: "p" + number (see
    /// <see cref="StreamingCapability"/>).</summary>
    public const char Progress = 'p';

    /// <summary>Worker outputs: "w" + the worker's pid + "-" + its counter.</summary>
    public const char WorkerOutput = 'w';

    /// <summary>The host's file numbers have at least this many digits (zero-padded).</summary>
    public const int HostNumberDigits = 6;

    /// <summary>"1": blob data may travel as references into shared-memory segments.</summary>
    public const string SharedMemoryCapability = "shared_memory";

    /// <summary>The absolute directory holding the app instance's segments.</summary>
    public const string DirectoryCapability = "shared_memory_dir";

    /// <summary>Values at least this long use shared memory; smaller ones stay inline.</summary>
    public const string MinBytesCapability = "shared_memory_min_bytes";

    /// <summary>"1": the host sends SharedMemoryReleased for each file it deletes.</summary>
    public const string ReleaseCapability = "shared_memory_release";

    /// <summary>"1": a blob input may reach the worker while it is still being read from storage; its
    /// <c>SharedMemoryRef.progress</c> names a progress record (protos/shared-memory.json, "progressRecord").</summary>
    public const string StreamingCapability = "shared_memory_streaming";

    /// <summary>The prefix of an app's instance directories: "faast-" + the app name made safe for a file name.</summary>
    public static string AppPrefix(string appName)
    {
        ArgumentNullException.ThrowIfNull(appName);
        var chars = appName.ToLowerInvariant().Select(c => char.IsAsciiLetterOrDigit(c) ? c : '-').ToArray();
        return InstanceDirectoryPrefix + (new string(chars).Trim('-') is { Length: > 0 } s ? s : "app");
    }

    /// <summary>The directory of an app instance: ROOT/PREFIX-PID (e.g. /dev/shm/faast-myapp-1234).</summary>
    public static string InstanceDirectory(string root, string prefix, int pid) =>
        Path.Combine(root, prefix + "-" + pid.ToString(CultureInfo.InvariantCulture));

    /// <summary>A host file name: <paramref name="kind"/> (s, l, t or p) + <paramref name="number"/>, zero-padded.</summary>
    public static string HostFile(char kind, long number)
    {
        if (kind is not (SlabSegment or LargeObject or Temporary or Progress))
            throw new ArgumentOutOfRangeException(nameof(kind), kind, "a host file is a slab segment (s), a large object (l), a temporary file (t) or a progress record (p)");
        ArgumentOutOfRangeException.ThrowIfNegative(number);
        return kind + number.ToString("D6", CultureInfo.InvariantCulture);
    }

    /// <summary>True for the host's own names: s, l, t or p followed by digits only.</summary>
    public static bool IsHostFile(ReadOnlySpan<char> name) =>
        name.Length > 1 && name[0] is SlabSegment or LargeObject or Temporary or Progress && !name[1..].ContainsAnyExceptInRange('0', '9');

    /// <summary>The file a worker writes its <paramref name="counter"/>-th large output to.</summary>
    public static string WorkerOutputFile(int pid, long counter) =>
        string.Create(CultureInfo.InvariantCulture, $"{WorkerOutput}{pid}-{counter}");

    /// <summary>The glob of every output file of the worker <paramref name="pid"/>.</summary>
    public static string WorkerOutputGlob(int pid) => string.Create(CultureInfo.InvariantCulture, $"{WorkerOutput}{pid}-*");

    /// <summary>
    /// True for a worker's output name: "w", the writer's pid (digits), "-", then at least one
    /// character, none of them '/' or NUL. Anything else a worker hands over is refused.
    /// </summary>
    public static bool IsWorkerOutputFile(ReadOnlySpan<char> name)
    {
        if (name.Length < 4 || name[0] != WorkerOutput || name.ContainsAny('/', '\0'))
            return false;
        var dash = name.IndexOf('-');
        return dash > 1 && dash < name.Length - 1 && !name[1..dash].ContainsAnyExceptInRange('0', '9');
    }
}
