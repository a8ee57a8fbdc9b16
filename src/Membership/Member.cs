namespace FaaST.Membership;

/// <summary>
/// One running instance of an app. <paramref name="Id"/> must be unique per instance (a restarted process gets a
/// new one): it names the instance's heartbeat blob, which only that instance ever writes.
/// </summary>
/// <param name="Id">Letters, digits, '-', '_' and '.', 1 to 128 characters, not starting with '.'.</param>
/// <param name="PeerAddress">Where the instance's cachelet serves its peers.</param>
/// <param name="Started">When the instance started (informational: never compared across machines).</param>
public sealed record Member(string Id, Uri PeerAddress, DateTimeOffset Started)
{
    /// <summary>Where the instance is in its life; records written before states existed read as <see cref="MemberState.Active"/>.</summary>
    public MemberState State { get; init; } = MemberState.Active;

    /// <summary>The instance's last load report (as of the record last read; null if it never reported one).</summary>
    public MemberLoad? Load { get; init; }

    /// <summary>True if <paramref name="other"/> is the same instance (id, address and start), whatever its state and load.</summary>
    public bool IsSameInstance(Member other) =>
        other is not null && Id == other.Id && PeerAddress == other.PeerAddress && Started == other.Started;
}

/// <summary>
/// Where an instance is in its life. Only <see cref="Active"/> members own keys on the ring: a joining instance is
/// not ready to serve yet, and a draining one hands its keys over before it stops.
/// </summary>
public enum MemberState
{
    /// <summary>Registered, not serving yet (e.g. a standby starting its workers): in the view, not on the ring.</summary>
    Joining,

    /// <summary>Serving: in the view and on the ring.</summary>
    Active,

    /// <summary>About to stop: in the view (it still answers peers), but no longer owns keys on the ring.</summary>
    Draining,
}

/// <summary>What an instance reports about its load with each heartbeat (for the frontend / scale controller).</summary>
/// <param name="InFlightInvocations">Invocations running now.</param>
/// <param name="QueuedInvocations">Invocations waiting for a worker.</param>
/// <param name="CachedBytes">Bytes the instance's cache holds.</param>
public sealed record MemberLoad(int InFlightInvocations, int QueuedInvocations, long CachedBytes)
{
    /// <summary>When the report was written (the writer's clock; set by the membership service at each heartbeat).</summary>
    public DateTimeOffset At { get; init; }
}

/// <summary>
/// A change of the view: who joined, who left, whose state changed (same id, new <see cref="Member.State"/>), and
/// the ring built from the new view.
/// </summary>
public sealed record MembershipChange(IReadOnlyList<Member> Joined, IReadOnlyList<Member> Left, HashRing Ring)
{
    /// <summary>Members still in the view whose state changed (as they are now).</summary>
    public IReadOnlyList<Member> StateChanged { get; init; } = [];
}

/// <summary>Settings of <see cref="MembershipService"/> (and of the tests' MembershipObserver).</summary>
public sealed record MembershipOptions
{
    /// <summary>The container holding "{app}/instances/{memberId}" blobs (created if missing).</summary>
    public string Container { get; init; } = "faast-membership";

    /// <summary>How often an instance rewrites its blob and lists its peers' (default 1 s).</summary>
    public TimeSpan HeartbeatInterval { get; init; } = TimeSpan.FromSeconds(1);

    /// <summary>A peer whose blob has not changed for this many intervals (observer's clock) is dead (default 3).</summary>
    public int MissedHeartbeats { get; init; } = 3;

    /// <summary>Virtual nodes per member on the ring (default 100, the paper's choice).</summary>
    public int VirtualNodes { get; init; } = HashRing.DefaultVirtualNodes;
}
