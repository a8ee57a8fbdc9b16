namespace FaaST.Hosting;

/// <summary>
/// The numbered stages of a host's lifecycle (the model is Orleans' <c>ServiceLifecycleStage</c>).
/// Components subscribe to a stage; stages start in ascending order and stop in descending order,
/// so whatever a stage needs is started before it and stopped after it. The gaps leave room for a
/// later component to slot in between two stages (e.g. a flash tier at <c>Cache - 100</c>).
/// </summary>
public static class ServiceLifecycleStage
{
    public const int First = int.MinValue;

    /// <summary>Metric and trace exporters: first up, so every later stage is observed; last down.</summary>
    public const int Telemetry = 1000;

    /// <summary>Storage: the Azurite the host starts when the app has none, and the app's storage accounts.</summary>
    public const int Storage = 2000;

    /// <summary>The peer transport (credentials, client); stopped after the cache, whose write-behind flush may use it.</summary>
    public const int PeerTransport = 2500;

    /// <summary>The cachelet and its memory daemon; stopped after everything that reads through it, while storage is still up.</summary>
    public const int Cache = 3000;

    /// <summary>The invocation pipeline is built (worker pool, function invoker), no processes yet.</summary>
    public const int Invocation = 4000;

    /// <summary>Kestrel listens: the workers' channel, the peer port, HTTP (function requests wait for <see cref="Active"/>).</summary>
    public const int Endpoints = 5000;

    /// <summary>Language worker processes start and load the app.</summary>
    public const int Workers = 6000;

    /// <summary>
    /// Membership: this instance registers and other instances send it reads. Before any invocation
    /// runs, so nothing is cached by an instance that is not yet in the others' view. The first stage
    /// that takes work from outside: stopping the stages from here up is draining (see <see cref="HostLifecycle"/>).
    /// </summary>
    public const int Peers = 7000;

    /// <summary>Blob triggers scan and fire; stopping it waits for the triggered invocations in flight.</summary>
    public const int Triggers = 8000;

    /// <summary>HTTP functions are admitted; stopping it refuses new requests and waits for those in flight.</summary>
    public const int Active = 10000;

    public const int Last = int.MaxValue;
}
