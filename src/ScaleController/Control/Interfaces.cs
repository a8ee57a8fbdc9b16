namespace FaaST.ScaleController.Control;

/// <summary>Asks one instance for its vote (production: <see cref="GrpcVoteClient"/>, <c>InstanceScaling.GetVote</c>
/// over the peer protocol's authorization).</summary>
public interface IVoteClient
{
    /// <summary>The instance's answer; throws (or is cancelled through <paramref name="ct"/>, the loop's
    /// per-call deadline) when it gives none.</summary>
    Task<InstanceVote> GetVoteAsync(VoteEndpoint instance, VoteQuery query, CancellationToken ct);
}

/// <summary>What the platform gives the controller for one app: its instances and load, and the two
/// actions the controller takes. Implemented by the platform over its instance provider.</summary>
public interface IScaleTarget
{
    /// <summary>The app's name.</summary>
    string App { get; }

    /// <summary>Instances counted now: ready and starting (not draining).</summary>
    int CurrentInstances { get; }

    /// <summary>Of <see cref="CurrentInstances"/>, those still starting (not ready yet).</summary>
    int StartingInstances { get; }

    /// <summary>The instances that answer invocations now; the ones asked for a vote.</summary>
    IReadOnlyList<VoteEndpoint> ReadyInstances { get; }

    /// <summary>The frontend's measurements over the last interval.</summary>
    FrontendLoad Load();

    /// <summary>When the frontend last forwarded an invocation of the app (or loaded it).</summary>
    DateTimeOffset LastInvocation { get; }

    /// <summary>
    /// When the app, idle with nothing in flight or queued, is unloaded, and why (the platform's reload schedule, Faa$T
    /// §3.3); null: <c>scale.keepAlive</c> after <see cref="LastInvocation"/>.
    /// </summary>
    (DateTimeOffset At, string Why)? UnloadAt => null;

    /// <summary>Starts or drains instances until the app has <paramref name="target"/> (≥ 1).</summary>
    Task ScaleToAsync(int target, string reason, CancellationToken ct);

    /// <summary>Drains and stops every instance: the keep-alive ran out (an explicit unload lifecycle event).</summary>
    Task UnloadAsync(string reason, CancellationToken ct);
}

/// <summary>Finds an app's scale loop (the platform keeps one per deployed app).</summary>
public interface IScaleLoopRegistry
{
    /// <summary>The loop of <paramref name="app"/>, or null for an app the platform does not serve.</summary>
    ScaleLoop? Find(string app);

    /// <summary>
    /// What a RequestScaleOut naming <paramref name="app"/> must be signed with, checked before the app is looked up, so
    /// an unsigned caller learns nothing of which apps exist: a platform answers for an app it does not serve too (with
    /// the secret that app would have). Null: none required. Default: the loop's <see cref="ScaleLoopOptions.RequestCredentials"/>.
    /// </summary>
    Peers.PeerAuth? RequestCredentialsOf(string app) => Find(app)?.RequestCredentials;
}
