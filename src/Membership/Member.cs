namespace FaaST.Membership;

/// <summary>
/// One running instance of an app. <paramref name="Id"/> must be unique per instance (a restarted process gets a
/// new one): it names the instance's heartbeat blob, which only that instance ever writes.
/// </summary>
/// <param name="Id">Letters, digits, '-', '_' and '.', 1 to 128 characters, not starting with '.'.</param>
/// <param name="PeerAddress">Where the instance's cachelet serves its peers.</param>
/// <param name="Started">When the instance started (informational: never compared across machines).</param>
public sealed record Member(string Id, Uri PeerAddress, DateTimeOffset Started);

/// <summary>A change of the view: who joined, who left, and the ring built from the new view.</summary>
public sealed record MembershipChange(IReadOnlyList<Member> Joined, IReadOnlyList<Member> Left, HashRing Ring);

/// <summary>Settings of <see cref="MembershipService"/>.</summary>
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
