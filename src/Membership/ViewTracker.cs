using FaaST.Storage;
using Microsoft.Extensions.Logging;

namespace FaaST.Membership;

/// <summary>
/// The view of an app's instances as one reader builds it from listings of "{app}/instances/" — shared by the members
/// (<see cref="MembershipService"/>) and by observers (the tests' MembershipObserver), so both judge liveness alike.
/// A peer whose ETag has not changed for <see cref="MembershipOptions.MissedHeartbeats"/> intervals of the reader's
/// clock is dead, provided the reader's own yardstick (a member's heartbeats, an observer's listings) advanced as
/// many times meanwhile: storage too slow or down for the reader was so for the peer too, and proves nothing.
/// States come from the listed content types (no read); records are read when first seen, and, for readers that
/// want loads, whenever their ETag changed. Only the listing loop calls <see cref="RefreshAsync"/>.
/// </summary>
internal sealed class ViewTracker
{
    private const int DownloadParallelism = 8;

    // Ids are new for every instance, so what is known of records not listed for this long is dropped.
    private static readonly TimeSpan ForgetAfter = TimeSpan.FromMinutes(10);

    private readonly IBlobStore _store;
    private readonly string _app;
    private readonly string _prefix;
    private readonly string? _selfId;
    private readonly string _reader;       // for logs: the member id, or "an observer"
    private readonly MembershipOptions _options;
    private readonly TimeProvider _time;
    private readonly ILogger _logger;
    private readonly bool _deleteDead;
    private readonly bool _readLoads;
    private readonly Dictionary<string, Peer> _peers = new(StringComparer.Ordinal);

    public ViewTracker(IBlobStore store, string app, string? selfId, MembershipOptions options, TimeProvider time, ILogger logger,
        bool deleteDead, bool readLoads)
    {
        _store = store;
        _app = app;
        _prefix = Prefix(app);
        _selfId = selfId;
        _reader = selfId ?? "an observer";
        _options = options;
        _time = time;
        _logger = logger;
        _deleteDead = deleteDead;
        _readLoads = readLoads;
    }

    public static string Prefix(string app) => app + "/instances/";

    /// <summary>One listing: notes whose ETags and states changed, reads what it must, drops (and maybe deletes) dead
    /// peers. Returns the live peers (without the reader itself).</summary>
    /// <param name="yardstick">The reader's own progress count, taken before the listing.</param>
    public async Task<List<Member>> RefreshAsync(long yardstick, CancellationToken ct)
    {
        var listed = new Dictionary<string, (string ETag, MemberState? State)>(StringComparer.Ordinal);
        await foreach (var item in _store.ListAsync(_options.Container, _prefix, ct).ConfigureAwait(false))
        {
            var id = item.Name[_prefix.Length..];
            if (id != _selfId && InstanceRecord.IsValidName(id))
            {
                listed[id] = (item.Properties.ETag, InstanceRecord.StateOf(item.Properties.ContentType));
            }
        }

        var now = _time.GetTimestamp();
        var missed = _options.MissedHeartbeats;
        var unseen = new List<(string Id, string ETag)>();
        var dead = new List<(string Id, string ETag)>();
        foreach (var peer in _peers.Values)
        {
            peer.Listed = false;
        }

        foreach (var (id, (etag, state)) in listed)
        {
            if (!_peers.TryGetValue(id, out var peer) || (peer.Member is null && peer.ETag != etag))
            {
                unseen.Add((id, etag));
                continue;
            }

            (peer.Listed, peer.LastListed) = (true, now);
            if (peer.ETag != etag)
            {
                (peer.ETag, peer.SeenChange, peer.YardstickAtChange, peer.Dead) = (etag, now, yardstick, false);
                if (peer.Member is not null && state is { } s && s != peer.Member.State)
                {
                    peer.Member = peer.Member with { State = s };
                }

                if (_readLoads && peer.Member is not null)
                {
                    unseen.Add((id, etag));
                }
            }
            else if (peer.Member is not null
                && (peer.Dead || (_time.GetElapsedTime(peer.SeenChange, now) >= _options.HeartbeatInterval * missed
                    && yardstick - peer.YardstickAtChange >= missed)))
            {
                peer.Dead = true;
                dead.Add((id, etag)); // again each listing until the delete works
            }
        }

        foreach (var (id, _) in _peers.Where(p => !p.Value.Listed && _time.GetElapsedTime(p.Value.LastListed, now) > ForgetAfter).ToList())
        {
            _peers.Remove(id);
        }

        var read = new Peer?[unseen.Count];
        await Parallel.ForAsync(0, unseen.Count, new ParallelOptions { MaxDegreeOfParallelism = DownloadParallelism, CancellationToken = ct },
            async (i, token) => read[i] = await ReadPeerAsync(unseen[i].Id, unseen[i].ETag, token).ConfigureAwait(false)).ConfigureAwait(false);
        foreach (var peer in read.OfType<Peer>())
        {
            if (_peers.TryGetValue(peer.Id, out var known) && known.Member is not null && peer.Member is not null)
            {
                // A re-read for its load: the liveness bookkeeping of the listing above stands.
                known.Member = peer.Member;
                continue;
            }

            // A newly seen instance gets the same grace as one whose ETag just changed.
            (peer.Listed, peer.LastListed, peer.SeenChange, peer.YardstickAtChange) = (true, now, now, yardstick);
            _peers[peer.Id] = peer;
        }

        var live = _peers.Values.Where(p => p is { Member: not null, Listed: true, Dead: false }).Select(p => p.Member!).ToList();
        if (_deleteDead)
        {
            await DeleteDeadAsync(dead, ct).ConfigureAwait(false);
        }

        return live;
    }

    private async Task DeleteDeadAsync(List<(string Id, string ETag)> dead, CancellationToken ct)
    {
        foreach (var (id, etag) in dead)
        {
            try
            {
                if (await _store.DeleteAsync(_options.Container, _prefix + id, etag, ct).ConfigureAwait(false))
                {
                    Log.RemovedDead(_logger, id, _app, _options.MissedHeartbeats, _reader);
                }
            }
            catch (BlobConditionFailedException)
            {
                // It wrote again after all: it stays, and the next listing sees its new ETag.
            }
        }
    }

    private async Task<Peer?> ReadPeerAsync(string id, string listedETag, CancellationToken ct)
    {
        BlobContent? content;
        try
        {
            content = await _store.DownloadAsync(_options.Container, _prefix + id, ct).ConfigureAwait(false);
        }
        catch (Exception ex) when (ex is BlobStorageException or StorageUnavailableException)
        {
            // One unreadable peer must not cost the whole view; the next listing tries it again.
            Log.RecordUnreadable(_logger, ex, _prefix + id, _app);
            return null;
        }

        if (content is null)
        {
            return null; // gone since the listing
        }

        var member = InstanceRecord.Parse(content.Data);
        if (member is null || member.Id != id)
        {
            // Remembered by ETag, so an unreadable record is read again only when it changes.
            Log.RecordInvalid(_logger, _prefix + id, _app);
            return new Peer(id, null, listedETag);
        }

        return new Peer(id, member, content.Properties.ETag);
    }

    /// <summary>What this reader knows of one peer's blob. Member is null for an unreadable record.</summary>
    private sealed class Peer(string id, Member? member, string etag)
    {
        public string Id { get; } = id;

        public Member? Member { get; set; } = member;

        public string ETag { get; set; } = etag;

        public bool Listed { get; set; }              // in the latest listing (else deleted: it left or was found dead)

        public long LastListed { get; set; }          // timestamp (the reader's TimeProvider) of the latest listing it was in

        public long SeenChange { get; set; }          // timestamp of the listing that last saw its ETag change

        public long YardstickAtChange { get; set; }   // the reader's own progress count then

        public bool Dead { get; set; }
    }
}
