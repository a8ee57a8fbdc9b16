using Microsoft.Extensions.Logging;

namespace FaaST.Membership;

/// <summary>
/// One published view: its members (every live instance, any state, ordered by id) and the ring built from them.
/// The ring holds only the <see cref="MemberState.Active"/> members, so joining and draining instances are never given
/// keys; when no member is active (all starting, or the last ones draining) it holds them all, so that every key
/// still has an owner and every instance with the same view still picks the same one. Immutable: readers take one
/// snapshot for a whole operation.
/// </summary>
internal sealed class MembershipView
{
    public static readonly MembershipView Empty = new([], HashRing.Empty);

    private MembershipView(IReadOnlyList<Member> members, HashRing ring)
    {
        Members = members;
        Ring = ring;
    }

    public IReadOnlyList<Member> Members { get; }

    public HashRing Ring { get; }

    public static MembershipView Of(IEnumerable<Member> members, int virtualNodes)
    {
        var sorted = members.ToArray();
        Array.Sort(sorted, static (a, b) => string.CompareOrdinal(a.Id, b.Id));
        var active = sorted.Where(m => m.State == MemberState.Active).ToArray();
        return new MembershipView(sorted, new HashRing(active.Length > 0 ? active : sorted, virtualNodes));
    }

    /// <summary>
    /// Replaces <paramref name="current"/> with the view of <paramref name="members"/> if who is in it, or anyone's
    /// state, changed (loads alone change the members silently), and raises <paramref name="changed"/>.
    /// </summary>
    public static void Publish(ref MembershipView current, IEnumerable<Member> members, int virtualNodes, Action<MembershipChange>? changed,
        ILogger logger, string reader, string app)
    {
        var old = Volatile.Read(ref current);
        var next = Of(members, virtualNodes);
        var oldById = old.Members.ToDictionary(m => m.Id, StringComparer.Ordinal);
        var newIds = next.Members.Select(m => m.Id).ToHashSet(StringComparer.Ordinal);
        var joined = next.Members.Where(m => !oldById.ContainsKey(m.Id)).ToList();
        var left = old.Members.Where(m => !newIds.Contains(m.Id)).ToList();
        var stateChanged = next.Members.Where(m => oldById.TryGetValue(m.Id, out var was) && was.State != m.State).ToList();
        if (joined.Count == 0 && left.Count == 0 && stateChanged.Count == 0)
        {
            // Same members in the same states: the ring stays (holders of it keep their snapshot), the loads refresh.
            if (!old.Members.SequenceEqual(next.Members))
            {
                Volatile.Write(ref current, new MembershipView(next.Members, old.Ring));
            }

            return;
        }

        Volatile.Write(ref current, next);
        if (logger.IsEnabled(LogLevel.Information))
        {
            Log.ViewChanged(logger, reader, app, next.Members.Count, next.Ring.Members.Count, Ids(joined), Ids(left),
                string.Join(", ", stateChanged.Select(m => $"{m.Id}: {m.State}")));
        }

        try
        {
            changed?.Invoke(new MembershipChange(joined, left, next.Ring) { StateChanged = stateChanged });
        }
        catch (Exception ex)
        {
            Log.HandlerFailed(logger, ex, reader);
        }
    }

    private static string Ids(List<Member> members) => string.Join(", ", members.Select(m => m.Id));
}
