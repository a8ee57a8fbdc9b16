namespace FaaST.Runtime.Workers;

/// <summary>How language workers are started and supervised.</summary>
public sealed record WorkerOptions
{
    /// <summary>python or node.</summary>
    public required string Runtime { get; init; }

    /// <summary>Worker processes per instance (FUNCTIONS_WORKER_PROCESS_COUNT, default 1).</summary>
    public int ProcessCount { get; init; } = 1;

    /// <summary>The folder holding python/worker.py and node/worker.js.</summary>
    public required string WorkersDirectory { get; init; }

    /// <summary>The interpreter for Python workers (Debian's, where python3-grpcio lives).</summary>
    public string PythonExecutable { get; init; } = File.Exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3";

    public string NodeExecutable { get; init; } = "node";

    /// <summary>How long a new worker has to connect, initialise and load its functions.</summary>
    public TimeSpan StartupTimeout { get; init; } = TimeSpan.FromSeconds(30);

    /// <summary>First delay before restarting a worker that died; doubles up to <see cref="MaxRestartDelay"/>.</summary>
    public TimeSpan RestartDelay { get; init; } = TimeSpan.FromMilliseconds(200);

    public TimeSpan MaxRestartDelay { get; init; } = TimeSpan.FromSeconds(10);

    /// <summary>A worker that stayed up this long restarts with the first delay again.</summary>
    public TimeSpan StableAfter { get; init; } = TimeSpan.FromSeconds(30);

    public TimeSpan ShutdownGrace { get; init; } = TimeSpan.FromSeconds(5);

    /// <summary>Largest message on the worker channel: big enough for a blob inline (vanilla platform).</summary>
    public int MaxMessageSize { get; init; } = 1 << 30;

    /// <summary>
    /// glibc malloc settings for Python workers (unless GLIBC_TUNABLES is already set): one arena, no
    /// mmap per large allocation and no trimming while busy, so the heap a function grew stays mapped
    /// for the next invocation instead of being page-faulted in again (a 256 MB bytes object costs
    /// 65,536 faults); transparent huge pages where the heap does grow. The worker gives the memory
    /// back with malloc_trim once it has been idle for a second. Empty to leave malloc alone.
    /// </summary>
    public string PythonMallocTunables { get; init; } =
        "glibc.malloc.arena_max=1:glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=17179869184:glibc.malloc.hugetlb=1";

    /// <summary>Capabilities offered to every worker at init (see <see cref="WorkerCapabilities"/>).</summary>
    public IReadOnlyDictionary<string, string> Capabilities { get; init; } = new Dictionary<string, string>();

    /// <summary>Environment for workers on top of the app settings (e.g. the Azurite connection string).</summary>
    public IReadOnlyDictionary<string, string> ExtraEnvironment { get; init; } = new Dictionary<string, string>();

    /// <summary>The app's user, which the workers run as; null: the host's user.</summary>
    public WorkerIdentity? Identity { get; init; }
}

/// <summary>Names of the capabilities host and workers negotiate at init (defined with the rest of the
/// shared-memory naming protocol in <see cref="FaaST.Cachelet.Memory.SharedMemoryNames"/>).</summary>
public static class WorkerCapabilities
{
    /// <summary>"1": blob data may travel as references into shared-memory segments.</summary>
    public const string SharedMemory = FaaST.Cachelet.Memory.SharedMemoryNames.SharedMemoryCapability;

    /// <summary>The absolute directory holding the app instance's segments.</summary>
    public const string SharedMemoryDirectory = FaaST.Cachelet.Memory.SharedMemoryNames.DirectoryCapability;

    /// <summary>Values at least this long use shared memory; smaller ones stay inline.</summary>
    public const string SharedMemoryMinBytes = FaaST.Cachelet.Memory.SharedMemoryNames.MinBytesCapability;

    /// <summary>"1": the host sends SharedMemoryReleased for each file it deletes, so a worker may keep
    /// its mappings between invocations (accepted with "1" by workers that do).</summary>
    public const string SharedMemoryRelease = FaaST.Cachelet.Memory.SharedMemoryNames.ReleaseCapability;
}
