using System.Collections.Concurrent;
using FaaST.Cachelet.Peers;
using FaaST.Membership;

namespace FaaST.Runtime.Hosting;

/// <summary>
/// Owners by consistent hashing over the membership's ring (an immutable snapshot per lookup). The
/// snapshot moves to the membership's latest ring only on <see cref="Refresh"/>, which the cache calls
/// once it has marked what it owns as unvalidated: a lookup that finds this instance the new owner of
/// a key then also finds the cache's copy of it unvalidated, never trusted from the old view.
/// </summary>
internal sealed class RingOwnerDirectory(MembershipService membership) : IOwnerDirectory
{
    private readonly ConcurrentDictionary<string, Peer> _peers = new(StringComparer.Ordinal);
    private volatile HashRing _ring = membership.Ring;

    public string SelfId => membership.Self.Id;

    public void Refresh() => _ring = membership.Ring;

    public IReadOnlyCollection<Peer> Others
    {
        get
        {
            var self = membership.Self.Id;
            return _ring.Members.Where(m => m.Id != self).Select(PeerFor).ToArray();
        }
    }

    public Peer? OwnerOf(string key)
    {
        var ring = _ring;
        if (ring.Members.Count <= 1)
            return null;
        var owner = ring.OwnerOf(key);
        return owner.Id == membership.Self.Id ? null : PeerFor(owner);
    }

    private Peer PeerFor(Member member) =>
        _peers.TryGetValue(member.Id, out var peer) && peer.Address == member.PeerAddress
            ? peer
            : _peers[member.Id] = new Peer(member.Id, member.PeerAddress);
}
