namespace FaaST.Hosting.Status;

// The JSON contract of the admin endpoints. The host writes these records and every reader (the
// tests, the benchmarks, InstanceGroup, later a scale controller) reads them back with the same
// records through StatusJsonContext, so a renamed field breaks the build instead of a reader.

/// <summary>GET /admin/host/status: what the instance runs and which functions have problems.</summary>
/// <param name="State">"Running" once a worker is ready, else "Initializing" (what clients have always polled).</param>
/// <param name="Lifecycle">Where the host is in its lifecycle (Starting, Started, Draining, ...).</param>
/// <param name="WorkerRuntime">python or node.</param>
/// <param name="ReadyWorkers">Workers that have loaded the app and take invocations.</param>
/// <param name="HostProcessId">The host's process id.</param>
/// <param name="WorkerProcessIds">The language workers' process ids.</param>
/// <param name="Isolation">The user the workers run as.</param>
/// <param name="Instance">This instance in the app's membership; null without peers (or before it joined).</param>
/// <param name="Members">The app's instances in this one's view (empty without peers).</param>
/// <param name="Functions">Every function of the app, with why it does not run, if it does not.</param>
/// <param name="IndexError">A Python v2 / Node v4 app whose worker could not index it (it then has no function): why,
/// naming the file; null otherwise.</param>
public sealed record HostStatus(
    string State,
    LifecycleState Lifecycle,
    string WorkerRuntime,
    int ReadyWorkers,
    int HostProcessId,
    IReadOnlyList<int> WorkerProcessIds,
    IsolationStatus Isolation,
    InstanceStatus? Instance,
    IReadOnlyList<InstanceStatus> Members,
    IReadOnlyList<FunctionStatus> Functions,
    string? IndexError = null)
{
    public const string Running = "Running";
    public const string Initializing = "Initializing";
}

/// <summary>The workers' user: <paramref name="User"/> "none" (and a <paramref name="Reason"/>) when they run as the host's.</summary>
public sealed record IsolationStatus(string User, int? Uid, int? Gid, string? Reason)
{
    public const string None = "none";
}

/// <summary>An instance of the app: its membership id and peer endpoint.</summary>
/// <param name="Lifecycle">This instance's own lifecycle state; null for the other members (their records do not carry it).</param>
public sealed record InstanceStatus(string Id, Uri PeerAddress, LifecycleState? Lifecycle = null);

/// <summary>A function of the app.</summary>
/// <param name="Trigger">The trigger's binding type (httpTrigger, blobTrigger), null if it has none.</param>
/// <param name="Disabled">Whether it does not run: disabled in function.json or by its AzureWebJobs.NAME.Disabled
/// setting, or because of an <paramref name="Error"/>.</param>
/// <param name="Error">Why it cannot run (a bad function.json, the worker's load error), or null.</param>
/// <param name="Reason">Why it is disabled: the error, or what disabled it; null when it runs.</param>
public sealed record FunctionStatus(string Name, string? Trigger, bool Disabled, string? Error, string? Reason);

/// <summary>GET /admin/cache: the cachelet's configuration and counters.</summary>
/// <param name="Enabled">Whether the app has a cachelet; without one every other field is null, zero or empty.</param>
/// <param name="Consistency">The consistency preset, e.g. owner/sync/owner.</param>
/// <param name="MemoryLimit">Bytes the host, its workers and the cache may use together.</param>
/// <param name="MemoryLimitSource">"faast.json", "cgroup FILE" or "default".</param>
/// <param name="Directory">The segment directory under /dev/shm.</param>
/// <param name="Reads">Reads by path (local-hit, remote-hit, ...).</param>
public sealed record CacheStatus(
    bool Enabled,
    string? Consistency,
    long? MemoryLimit,
    string? MemoryLimitSource,
    string? Directory,
    long Objects,
    long Bytes,
    long PinnedBytes,
    IReadOnlyDictionary<string, long> Reads,
    long Writes,
    long Evictions)
{
    public static readonly CacheStatus Disabled = new(false, null, null, null, null, 0, 0, 0, new Dictionary<string, long>(), 0, 0);
}
