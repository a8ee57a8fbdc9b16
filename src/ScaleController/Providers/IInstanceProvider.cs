namespace FaaST.ScaleController.Providers;

/// <summary>What to start: one instance of one version of an app.</summary>
/// <param name="App">The app's name (also its folder's name, which the runtime names the app and its worker user after).</param>
/// <param name="Version">The deployment version the instance runs.</param>
/// <param name="AppDirectory">The app's extracted package on this machine.</param>
/// <param name="Environment">Settings the instance gets as environment variables (AzureWebJobsStorage, FAAST_PEER_SECRET, FAAST_SCALE_CONTROLLER, ...).</param>
/// <param name="Arguments">More runtime arguments (--workers N, --no-cache, --isolation MODE, ...).</param>
public sealed record InstanceSpec(
    string App,
    int Version,
    string AppDirectory,
    IReadOnlyDictionary<string, string> Environment,
    IReadOnlyList<string> Arguments);

/// <summary>A started instance: where its HTTP functions and its peer endpoint are.</summary>
/// <param name="Id">Its membership id (the platform chooses it, so it can match the instance in the membership view).</param>
/// <param name="ProcessId">The local process, where the provider knows one; 0 otherwise.</param>
public sealed record InstanceHandle(string Id, string App, int Version, Uri BaseAddress, Uri? PeerAddress, int ProcessId, DateTimeOffset Started)
{
    /// <summary>How long the instance took from start to its first ready answer (Faa$T's T_Load).</summary>
    public TimeSpan LoadTime { get; init; }
}

/// <summary>
/// Where instances come from. The default runs them as local processes (<see cref="LocalProcessProvider"/>);
/// an orchestrator implements the same seam (on Kubernetes, KEDA scales a Deployment from the controller's
/// decisions through the external-scaler endpoint instead, see docs/scaling.md).
/// </summary>
public interface IInstanceProvider : IAsyncDisposable
{
    /// <summary>Starts one instance and returns once it answers (its functions loaded, in the membership view).</summary>
    Task<InstanceHandle> StartAsync(InstanceSpec spec, CancellationToken ct);

    /// <summary>
    /// Stops an instance gracefully: it stops taking invocations, finishes those in flight (up to
    /// <paramref name="deadline"/>), leaves membership and exits; killed if it has not exited by then.
    /// </summary>
    Task StopAsync(InstanceHandle instance, TimeSpan deadline, CancellationToken ct);

    /// <summary>
    /// Takes over an instance a previous platform process started and left running (it crashed): returns the
    /// handle when the instance is still there and proves to be the app's instance (it answers a call signed with
    /// <paramref name="credentials"/>, the app's peer credentials), null otherwise. The record itself must already be
    /// verified (signed by the platform): a null answer leaves the process alone.
    /// </summary>
    Task<InstanceHandle?> AdoptAsync(InstanceHandle recorded, FaaST.Peers.PeerAuth credentials, CancellationToken ct);

    /// <summary>Raised when an instance exits without being asked to (a crash, a kill): id and a reason.</summary>
    event Action<InstanceHandle, string>? Exited;
}
