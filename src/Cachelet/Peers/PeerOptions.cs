namespace FaaST.Cachelet.Peers;

/// <summary>Another instance of the same app: its membership id and peer endpoint.</summary>
public sealed record Peer(string Id, Uri Address);

/// <summary>Who owns a key (consistent hashing over the current membership view).</summary>
public interface IOwnerDirectory
{
    /// <summary>This instance's membership id.</summary>
    string SelfId { get; }

    /// <summary>The owner of <paramref name="key"/>, or null when it is this instance.</summary>
    Peer? OwnerOf(string key);

    /// <summary>The other instances of the current view: those a write that could not reach its owner
    /// tells (any of them may be serving the key by now).</summary>
    IReadOnlyCollection<Peer> Others => [];

    /// <summary>
    /// Moves to the membership's latest view. The cache calls this after it has started distrusting
    /// what it owns, so that no lookup sees the new owners before the cache is ready for them.
    /// </summary>
    void Refresh()
    {
    }
}

/// <summary>How a cachelet talks to its peers.</summary>
public sealed record PeerOptions
{
    /// <summary>The app's peer credentials: every call is signed afresh, every bulk connection answers a challenge.</summary>
    public required PeerAuth Credentials { get; init; }

    /// <summary>Longest wait for any one message of a peer call (the header, each chunk, the reply);
    /// a peer that dies or hangs mid-transfer is given up after this, and the read goes to storage.
    /// Default faast.json's (<see cref="Policy.CachePolicy.DefaultPeerTimeout"/>).</summary>
    public TimeSpan Timeout { get; init; } = Policy.CachePolicy.DefaultPeerTimeout;

    /// <summary>Bytes per data message of a transfer, default 1 MiB: large enough for throughput,
    /// small enough that other calls on the connection interleave with a big transfer.</summary>
    public int ChunkSize { get; init; } = 1 << 20;

    /// <summary>Longest a bulk Get waits for an owner that says it is still fetching the object from
    /// storage (a remote miss of a large object at storage speed). Default faast.json's
    /// (<see cref="Policy.CachePolicy.DefaultPeerFetchTimeout"/>).</summary>
    public TimeSpan FetchTimeout { get; init; } = Policy.CachePolicy.DefaultPeerFetchTimeout;

    /// <summary>Gets that do not fit the Lookup stream go over the peer port's bulk framing (default),
    /// or, if false, over the gRPC Get method.</summary>
    public bool BulkTransfers { get; init; } = true;
}

/// <summary>A peer call failed (unreachable, timed out, refused, or answered nonsense).</summary>
public sealed class PeerException(string message, Exception? inner = null) : Exception(message, inner)
{
    /// <summary>The peer and this instance do not share the app's credentials (asking it another way is no use).</summary>
    internal bool CredentialsRefused { get; init; }
}
