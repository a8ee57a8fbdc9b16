namespace FaaST.Peers;

/// <summary>How a cachelet talks to its peers.</summary>
public sealed record PeerOptions
{
    /// <summary>The app's peer credentials: every call is signed afresh, every bulk connection answers a challenge.</summary>
    public required PeerAuth Credentials { get; init; }

    /// <summary>Longest wait for any one message of a peer call (the header, each chunk, the reply);
    /// a peer that dies or hangs mid-transfer is given up after this, and the read goes to storage.
    /// Default faast.json's (<see cref="FaaST.Policy.CachePolicy.DefaultPeerTimeout"/>).</summary>
    public TimeSpan Timeout { get; init; } = FaaST.Policy.CachePolicy.DefaultPeerTimeout;

    /// <summary>Bytes per data message of a transfer, default 1 MiB: large enough for throughput,
    /// small enough that other calls on the connection interleave with a big transfer.</summary>
    public int ChunkSize { get; init; } = 1 << 20;

    /// <summary>Longest a bulk Get waits for an owner that says it is still fetching the object from
    /// storage (a remote miss of a large object at storage speed). Default faast.json's
    /// (<see cref="FaaST.Policy.CachePolicy.DefaultPeerFetchTimeout"/>).</summary>
    public TimeSpan FetchTimeout { get; init; } = FaaST.Policy.CachePolicy.DefaultPeerFetchTimeout;

    /// <summary>Gets that do not fit the Lookup stream go over the peer port's bulk framing (default),
    /// or, if false, over the gRPC Get method.</summary>
    public bool BulkTransfers { get; init; } = true;
}
