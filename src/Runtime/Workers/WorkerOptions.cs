using FaaST.Runtime.Bindings;

namespace FaaST.Runtime.Workers;

/// <summary>
/// How language workers are started and supervised: everything about the processes that does not
/// depend on the app, so that a pool can start its workers before it knows which app they will run
/// (<see cref="WorkerSpecialization"/> is the app's part).
/// </summary>
public sealed record WorkerOptions
{
    /// <summary>The default of <see cref="MaxMessageSize"/>.</summary>
    public const int DefaultMaxMessageSize = 1 << 30;

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

    /// <summary>Largest message on the worker channel, each way: big enough for a blob inline (vanilla
    /// platform). The workers get it on their command line; the host's gRPC service is limited to it
    /// (<see cref="WorkerChannelService"/>).</summary>
    public int MaxMessageSize { get; init; } = DefaultMaxMessageSize;

    /// <summary>
    /// How often a worker with one event loop (Node) reports the loop's busy and idle time
    /// (<see cref="WorkerCapabilities.EventLoopUtilization"/>), which the compute vote divides over its own
    /// interval (1 s by default): at 0.5 s every vote sees at least one fresh report. Zero: not offered.
    /// </summary>
    public TimeSpan LoadReportInterval { get; init; } = TimeSpan.FromMilliseconds(500);

    /// <summary>
    /// glibc malloc settings for Python workers (unless GLIBC_TUNABLES is already set): one arena, no
    /// mmap per large allocation and no trimming while busy, so the heap a function grew stays mapped
    /// for the next invocation instead of being page-faulted in again (a 256 MB bytes object costs
    /// 65,536 faults); transparent huge pages where the heap does grow. The worker gives the memory
    /// back with malloc_trim once it has been idle for a second. Empty to leave malloc alone.
    /// </summary>
    public string PythonMallocTunables { get; init; } =
        "glibc.malloc.arena_max=1:glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=17179869184:glibc.malloc.hugetlb=1";

    /// <summary>
    /// The user the workers run as; null: the host's user. Fixed for the pool's lifetime: a process
    /// cannot change its uid after it starts (it drops root's rights at exec), so a standby pool runs
    /// as the app user it was started for, and a specialisation must name the same identity
    /// (<see cref="WorkerPool.SpecializeAsync"/> refuses another). A standby pool for an app not yet
    /// known therefore runs without per-app isolation (--isolation off), or is started for that app's user.
    /// </summary>
    public WorkerIdentity? Identity { get; init; }
}

/// <summary>What specialises a pool's workers to one app: the app's functions and settings and what
/// the host offers that app's workers.</summary>
public sealed record WorkerSpecialization
{
    public required FunctionApp App { get; init; }

    /// <summary>Capabilities offered to the app's workers (see <see cref="WorkerCapabilities"/>), e.g.
    /// the app's shared-memory directory.</summary>
    public IReadOnlyDictionary<string, string> Capabilities { get; init; } = new Dictionary<string, string>();

    /// <summary>Environment for the workers on top of the app settings (e.g. the Azurite connection string).</summary>
    public IReadOnlyDictionary<string, string> ExtraEnvironment { get; init; } = new Dictionary<string, string>();

    /// <summary>Reads shared-memory references for workers that declined shared memory and take blobs
    /// inline (set when the cachelet is on).</summary>
    public ISharedMemoryReader? SharedMemoryReader { get; init; }

    /// <summary>The user this app's workers must run as; null: the host's user. Must be the pool's
    /// <see cref="WorkerOptions.Identity"/>.</summary>
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

    /// <summary>"1": a blob input may arrive while it is still read from storage (SharedMemoryRef.progress); accepted
    /// with "1" by workers that read such inputs as they fill (the Python worker). Others get complete inputs.</summary>
    public const string SharedMemoryStreaming = FaaST.Cachelet.Memory.SharedMemoryNames.StreamingCapability;

    /// <summary>Offered at init with the report interval in milliseconds; a worker that accepts ("1") sends
    /// WorkerLoad (its event loop's active and idle time) every interval (protos/worker.proto).</summary>
    public const string EventLoopUtilization = "event_loop_utilization";
}
