using FaaST.Cachelet.Index;
using FaaST.Cachelet.Memory;
using FaaST.Cachelet.Peers;
using FaaST.Cachelet.Sources;
using FaaST.Cachelet.Telemetry;
using FaaST.Storage;
using Microsoft.Extensions.Logging;

namespace FaaST.Cachelet;

/// <summary>
/// The cooperative side of the cachelet (Faa$T §3.2): with other instances of the app, each key has an
/// owner (consistent hashing); a non-owner gets what it misses from the owner and keeps a copy.
/// The owners are reached through an <see cref="IOwnerClient"/> (src/Peers implements it); the peer
/// transport serves other instances through the domain methods below ("serving peers").
/// </summary>
public sealed partial class BlobCache
{
    private IOwnerDirectory? _owners;
    private IOwnerClient? _peers;

    /// <summary>Peer calls that failed, after which the read or write went to storage instead.</summary>
    public long PeerFallbacks => Interlocked.Read(ref _peerFallbacks);

    private long _peerFallbacks;
    private readonly LogGate _ownerReadLog = LogGate.PerSecond();
    private readonly LogGate _ownerWriteLog = LogGate.PerSecond();
    private readonly LogGate _peerNotToldLog = LogGate.PerSecond();

    /// <summary>Joins the app's cooperative cache: owners from <paramref name="owners"/>, reached through <paramref name="peers"/>.</summary>
    public void ConnectPeers(IOwnerDirectory owners, IOwnerClient peers)
    {
        _owners = owners;
        _peers = peers;
        OnOwnershipChanged();
    }

    /// <summary>The string consistent hashing places: the storage namespace of the key.</summary>
    public static string PlacementKey(in BlobKey key) => key.Account + "|" + key.Container + "/" + key.Blob;

    /// <summary>The key's owner, or null when it is this instance (always, without peers).</summary>
    private Peer? OwnerOf(in BlobKey key) => _owners?.OwnerOf(PlacementKey(key));

    // ---- the validation epoch ------------------------------------------------------------------
    //
    // Under owner/sync/owner an owner serves its copy of a key without asking storage, so it must know
    // that no acknowledged write can have reached storage past it. Two things break that: ownership
    // moving (the new owner's copy may be older than writes the old owner took), and a write whose
    // writer could not reach the owner it saw and uploaded itself. Both move the epoch; an entry
    // records the epoch in which storage was last seen to hold its version, and an owner serves it
    // unchecked only while that is the current epoch, else after one HEAD (lazily, on first use).
    // The hit path pays one volatile read and a compare.

    private long _epoch = 1;

    private long Epoch => Volatile.Read(ref _epoch);

    /// <summary>Storage was seen to hold the entry's version in the current epoch.</summary>
    private bool Trusted(CacheEntry entry) => entry.ValidatedEpoch == Epoch;

    /// <summary>Nothing validated so far may be served unchecked any more.</summary>
    private void Distrust() => Interlocked.Increment(ref _epoch);

    /// <summary>
    /// After a membership change: distrusts every copy, then moves the owner lookups to the new view
    /// (in that order: a lookup that sees the new view reads the epoch after it, so a key this instance
    /// just took over is never served from a copy validated under the old owner), then re-marks which
    /// cached objects this instance owns (eviction prefers the others). Connections to instances that
    /// left the view are closed.
    /// </summary>
    public void OnOwnershipChanged()
    {
        Distrust();
        _owners?.Refresh();
        if (_owners is { } owners && _peers is { } peers)
            peers.RetainOnly(owners.Others);
        foreach (var entry in _index.Entries)
        {
            var owned = OwnerOf(entry.Key) is null;
            if (entry.Owned != owned)
                entry.Owned = owned;
        }
    }

    /// <summary>
    /// The owner link of the read chain: asks the key's owner for the object (a remote hit, or a remote
    /// miss if it had to fetch it), streamed into the fetch's target. A failed or timed-out call is
    /// logged and answered Unavailable (the chain goes on to storage); a partial transfer is never cached.
    /// </summary>
    private sealed class OwnerSource(BlobCache cache) : IBlobSource
    {
        public string Name => "owner";

        // The owner's word is the current version under the owner presets (and it validates with
        // storage when asked to).
        public bool Authoritative => true;

        public async ValueTask<SourceResult> FetchAsync(SourceRequest request, IFetchTarget target, CancellationToken ct)
        {
            if (cache._peers is not { } peers || request.Owner is not { } owner)
                return SourceResult.Unavailable;
            var key = request.Key;
            try
            {
                var get = new PeerGet(key, request.IfVersion, Fetch: true, request.Validate);
                var started = System.Diagnostics.Stopwatch.GetTimestamp();
                var answer = await peers.GetAsync(owner, get, h =>
                {
                    if (h.RangeLength != h.Length)
                        throw new PeerException($"{owner.Address} sent {h.RangeLength} of {h.Length} bytes of {key.Container}/{key.Blob} for a whole-object read");
                    return target.Open(h.Length);
                }, ct);
                // A remote hit moved the object from the owner's memory: what bandwidth scaling plans
                // with as BW_Inst (Faa$T §4).
                if (answer is { Status: PeerStatus.Ok, Fetched: false } && cache._bandwidth is { } bandwidth && answer.Length >= bandwidth.Options.ObserveMinBytes)
                    bandwidth.Planner.ObserveInstanceTransfer(answer.Length, System.Diagnostics.Stopwatch.GetElapsedTime(started));
                return answer.Status switch
                {
                    PeerStatus.NotModified => SourceResult.NotModified,
                    PeerStatus.NotFound => SourceResult.NotFound,
                    PeerStatus.Ok => new SourceResult(SourceOutcome.Found, answer.Version, answer.Length,
                        answer.Fetched ? ReadPath.RemoteMiss : ReadPath.RemoteHit),
                    _ => throw new PeerException($"{owner.Address} answered {answer.Status} to a fetching Get of {key.Container}/{key.Blob}"),
                };
            }
            catch (PeerException e)
            {
                Interlocked.Increment(ref cache._peerFallbacks);
                if (cache._logger.IsEnabled(LogLevel.Warning) && cache._ownerReadLog.TryPass(out var suppressed))
                {
                    if (suppressed > 0)
                        Log.Suppressed(cache._logger, suppressed, "owner read failed");
                    Log.OwnerReadFailed(cache._logger, key.Container, key.Blob, owner.Id, e.Message);
                }
                return SourceResult.Unavailable;
            }
        }
    }

    /// <summary>
    /// Writes an extent through to its owner; the owner's version, or null (logged) if the owner could
    /// not take it, in which case the caller writes to storage itself.
    /// </summary>
    private async Task<string?> TryPutToOwnerAsync(IBlobStore store, BlobKey key, Extent extent, Peer owner, bool uploadSync, CancellationToken ct)
    {
        if (_peers is null)
            return null;
        try
        {
            return await _peers.PutAsync(owner, key, extent.Length, uploadSync, (offset, length) => extent.GetMemory(offset, length), ct);
        }
        catch (PeerException e)
        {
            Interlocked.Increment(ref _peerFallbacks);
            if (_logger.IsEnabled(LogLevel.Warning) && _ownerWriteLog.TryPass(out var suppressed))
            {
                if (suppressed > 0)
                    Log.Suppressed(_logger, suppressed, "owner write failed");
                Log.OwnerWriteFailed(_logger, key.Container, key.Blob, owner.Id, e.Message);
            }
            return null;
        }
    }

    /// <summary>Tells the owner (in the background, best effort) that storage has a new version it may not hold.</summary>
    private void InvalidateAtOwner(Peer owner, BlobKey key, string version)
    {
        if (_peers is not { } peers)
            return;
        _ = Task.Run(async () =>
        {
            try
            {
                await peers.InvalidateAsync(owner, key, version, CancellationToken.None);
            }
            catch (PeerException e)
            {
                Log.OwnerInvalidateFailed(_logger, key.Container, key.Blob, owner.Id, e.Message);
            }
        });
    }

    /// <summary>
    /// A write that could not reach the owner it saw went to storage: before it is acknowledged, every
    /// other instance of the view drops its copy and distrusts the rest (InvalidateFromPeer), since
    /// whichever of them serves the key next (the views may already disagree about who owns it) must
    /// see this version. The unreachable owner is told too, in the background, in case it comes back.
    /// An instance that cannot be told either is gone as well or will be once the views agree; logged.
    /// </summary>
    private async Task InvalidateEverywhereAsync(BlobKey key, string version, Peer unreachable)
    {
        if (_peers is not { } peers || _owners is not { } owners)
            return;
        var calls = new List<Task>();
        foreach (var peer in owners.Others)
        {
            var call = InvalidateAsync(peers, peer, key, version);
            if (peer.Id != unreachable.Id)
                calls.Add(call);
        }
        if (!owners.Others.Any(p => p.Id == unreachable.Id))
            _ = InvalidateAsync(peers, unreachable, key, version);
        await Task.WhenAll(calls);
    }

    private async Task InvalidateAsync(IOwnerClient peers, Peer peer, BlobKey key, string version)
    {
        try
        {
            await peers.InvalidateAsync(peer, key, version, CancellationToken.None);
        }
        catch (PeerException e)
        {
            if (_logger.IsEnabled(LogLevel.Warning) && _peerNotToldLog.TryPass(out var suppressed))
            {
                if (suppressed > 0)
                    Log.Suppressed(_logger, suppressed, "peer not told of a write");
                Log.PeerNotTold(_logger, peer.Id, key.Container, key.Blob, e.Message);
            }
        }
    }

    // ---- serving peers ------------------------------------------------------------------------

    /// <summary>The length and version of a cached object, without counting an access (null if not cached).</summary>
    public (long Length, string Version)? PeekForPeer(in BlobKey key) =>
        _index.TryPeek(key, out var entry) ? (entry.Length, entry.ETag) : null;

    /// <summary>Looks up (and if asked, validates or fetches) an object for a peer's Get.</summary>
    public async Task<PeerObject> OpenForPeerAsync(IBlobStore store, BlobKey key, string ifVersion, bool fetch, bool validate, CancellationToken ct)
    {
        if (_index.TryGet(key, out var entry))
        {
            var current = true;
            // Under owner/sync/owner the asker takes our copy as the current version: unchecked only if
            // this instance owns the key in its own view (the asker's view may be newer, and then the
            // copy may predate writes the old owner took) and validated it in the current epoch.
            if (validate || (_policy.Consistency.StrongThroughOwner && (OwnerOf(key) is not null || !Trusted(entry))))
            {
                var matches = await RevalidateAsync(store, key, entry, ct);
                if (matches is null)
                    return new PeerObject(PeerStatus.NotFound, default, false);
                current = matches.Value;
            }
            if (current)
            {
                if (ifVersion.Length > 0 && ifVersion == entry.ETag)
                    return new PeerObject(PeerStatus.NotModified, default, false);
                if (_index.TryPin(entry, out var pin))
                {
                    _index.RecordLocalHit(key);
                    Metrics.Read(ReadPath.LocalHit, entry.Length);
                    return new PeerObject(PeerStatus.Ok, CachedRead.FromEntry(entry, pin, ReadPath.LocalHit), false);
                }
            }
        }
        if (!fetch)
            return new PeerObject(PeerStatus.NotCached, default, false);
        // Fetched the way a local miss is (one fetch per key at a time, through the chain past the
        // owner: this instance is the owner). The fetch is not the requesting peer's to cancel: a peer
        // that gives up (its timeout, e.g. on a large remote miss) will ask again, as will others, so
        // the owner finishes it and caches the object; only shutdown stops it. The peer stops waiting,
        // and what it leaves pinned is released.
        while (true)
        {
            var (result, shared, mine) = await _fetches.JoinAsync(key, token => FetchAsync(store, key, owner: null, token), ct);
            if (result is not { } read)
                return new PeerObject(PeerStatus.NotFound, default, false);
            if (mine || read.Entry is null && read.File is null)
            {
                if (ifVersion.Length > 0 && ifVersion == read.ETag)
                {
                    read.Dispose();
                    return new PeerObject(PeerStatus.NotModified, default, false);
                }
                return new PeerObject(PeerStatus.Ok, read, true);
            }
            if (read.Entry is { } cached && (!_policy.Consistency.StrongThroughOwner || Trusted(cached)) && _index.TryPin(cached, out var pin))
                return new PeerObject(PeerStatus.Ok, CachedRead.FromEntry(cached, pin, ReadPath.LocalMiss), true);
            _fetches.Forget(key, shared);
        }
    }

    /// <summary>
    /// Room for an object a peer is writing through to this owner: an extent, or false when the cache
    /// has no room (the caller then takes the bytes into a <see cref="CreateSpillFile"/> and <see cref="AcceptPeerFileAsync"/>).
    /// </summary>
    public bool TryAllocateForPeer(long length, out Extent extent) => TryAllocate(length, out extent);

    /// <summary>Frees an extent from <see cref="TryAllocateForPeer"/> whose transfer failed.</summary>
    public void ReleaseForPeer(in Extent extent) => _arena.Free(extent);

    /// <summary>
    /// Takes a peer's write as the owner: caches it, uploads it (before answering, or in the background)
    /// and returns the version now held. The cache owns the extent afterwards.
    /// </summary>
    public async Task<string> AcceptPeerPutAsync(IBlobStore store, BlobKey key, Extent extent, bool uploadSync, CancellationToken ct)
    {
        Metrics.Write(extent.Length);
        if (uploadSync)
        {
            var epoch = Epoch; // before the upload, as for a fetch
            BlobProperties written;
            try
            {
                written = await UploadExtentAsync(store, key, extent, ct);
            }
            catch
            {
                _arena.Free(extent);
                throw;
            }
            _index.AddOrReplace(key, written.ETag, extent, owned: OwnerOf(key) is null, validatedEpoch: epoch);
            _index.RecordWrite(key);
            return written.ETag;
        }
        var provisional = ProvisionalVersion();
        // Pinned as it is added (a concurrent write of the key may retire it at once; the upload still needs its bytes).
        var pin = _index.AddOrReplacePinned(key, provisional, extent, owned: OwnerOf(key) is null);
        _index.RecordWrite(key);
        _writeBehind.Writer.TryWrite(new PendingWrite(store, key, pin.Entry, pin));
        return provisional;
    }

    /// <summary>
    /// A file of the segment directory for a peer's write that does not fit in the cache (written,
    /// rewound and uploaded through the one stream, never reopened by name); deleted when disposed.
    /// </summary>
    public TemporaryFile CreateSpillFile() => TemporaryFile.Create(_arena, Interlocked.Increment(ref _temporaryFiles));

    /// <summary>A peer's write that did not fit in the cache: uploaded from <paramref name="content"/> (its current position on).</summary>
    public async Task<string> AcceptPeerFileAsync(IBlobStore store, BlobKey key, Stream content, long length, CancellationToken ct)
    {
        var written = await UploadAsync(store, key, content, length, ct);
        _index.Remove(key); // an older cached version is stale now
        return written.ETag;
    }

    /// <summary>
    /// A peer says storage or the owner has a newer version: drop ours unless it is
    /// <paramref name="keepVersion"/>, and distrust every other copy (a fetch or check of this key
    /// that read storage before the write landed may still be about to cache the old version).
    /// </summary>
    public bool InvalidateFromPeer(in BlobKey key, string keepVersion)
    {
        Distrust();
        return _index.TryGet(key, out var entry) && entry.ETag != keepVersion && _index.Remove(entry);
    }

    /// <summary>This cachelet's numbers for a peer's Stats call.</summary>
    public CacheStats PeerStats()
    {
        var reads = new Dictionary<string, long>(StringComparer.Ordinal);
        foreach (var path in Enum.GetValues<ReadPath>())
            reads[CacheletMetrics.PathName(path)] = Metrics.Reads(path);
        return new CacheStats(_owners?.SelfId ?? "", _index.Count, _arena.Allocated, _index.PinnedBytes, _index.Evictions, reads,
            new ParallelFetchStats(ParallelFetches, ParallelRanges, ParallelRangeFallbacks, StorageRangesServed));
    }
}
