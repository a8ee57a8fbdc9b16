using System.Collections.Concurrent;
using FaaST.Cachelet.Peers;
using FaaST.Membership;

namespace FaaST.Runtime.Hosting;

/// <summary>Owners by consistent hashing over the membership's current ring (an immutable snapshot per lookup).</summary>
internal sealed class RingOwnerDirectory(MembershipService membership) : IOwnerDirectory
{
    private readonly ConcurrentDictionary<string, Peer> _peers = new(StringComparer.Ordinal);

    public string SelfId => membership.Self.Id;

    public Peer? OwnerOf(string key)
    {
        var ring = membership.Ring;
        if (ring.Members.Count <= 1)
            return null;
        var owner = ring.OwnerOf(key);
        if (owner.Id == membership.Self.Id)
            return null;
        return _peers.TryGetValue(owner.Id, out var peer) && peer.Address == owner.PeerAddress
            ? peer
            : _peers[owner.Id] = new Peer(owner.Id, owner.PeerAddress);
    }
}
