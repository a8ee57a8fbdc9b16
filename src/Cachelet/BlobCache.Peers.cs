using FaaST.Cachelet.Index;
using FaaST.Cachelet.Memory;
using FaaST.Cachelet.Peers;
using FaaST.Cachelet.Telemetry;
using FaaST.Protos.Peer;
using FaaST.Storage;
using Microsoft.Extensions.Logging;

namespace FaaST.Cachelet;

/// <summary>
/// The cooperative side of the cachelet (Faa$T §3.2): with other instances of the app, each key has an
/// owner (consistent hashing); a non-owner gets what it misses from the owner and keeps a copy.
/// </summary>
public sealed partial class BlobCache
{
    private IOwnerDirectory? _owners;
    private PeerClient? _peers;

    /// <summary>Peer calls that failed, after which the read or write went to storage instead.</summary>
    public long PeerFallbacks => Interlocked.Read(ref _peerFallbacks);

    private long _peerFallbacks;

    /// <summary>Joins the app's cooperative cache: owners from <paramref name="owners"/>, reached through <paramref name="peers"/>.</summary>
    public void ConnectPeers(IOwnerDirectory owners, PeerClient peers)
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
    /// cached objects this instance owns (eviction prefers the others).
    /// </summary>
    public void OnOwnershipChanged()
    {
        Distrust();
        _owners?.Refresh();
        foreach (var entry in _index.Entries)
        {
            var owned = OwnerOf(entry.Key) is null;
            if (entry.Owned != owned)
                entry.Owned = owned;
        }
    }

    private readonly record struct OwnerAnswer(CachedRead? Read, bool NotModified, bool NotFound);

    /// <summary>
    /// Asks the owner for the object (a remote hit, or a remote miss if it had to fetch it), streamed
    /// into a new extent of ours. A failed or timed-out call is logged and answered with nothing (the
    /// caller goes to storage); a partial transfer is never cached.
    /// </summary>
    private async Task<OwnerAnswer> TryFetchFromOwnerAsync(IBlobStore store, BlobKey key, Peer owner, string? ifVersion, bool validate, CancellationToken ct)
    {
        if (_peers is null)
            return default;
        Extent? extent = null;
        TemporaryFile? temporary = null;
        MemoryStream? fallback = null;
        try
        {
            var request = new GetRequest { Blob = ToRef(key), IfVersion = ifVersion ?? "", Fetch = true, Validate = validate };
            var header = await _peers.GetAsync(owner.Address, request, h =>
            {
                if (h.RangeLength != h.Length)
                    throw new PeerException($"{owner.Address} sent {h.RangeLength} of {h.Length} bytes of {key.Container}/{key.Blob} for a whole-object read");
                if (TryAllocate(h.Length, out var e))
                {
                    extent = e;
                    return e.OpenWriteStream();
                }
                _logger.LogWarning("Blob {Container}/{Blob} ({Length} bytes) is served without caching: no room in the cache", key.Container, key.Blob, h.Length);
                if (h.Length < _policy.InlineThreshold)
                    return fallback = new MemoryStream((int)h.Length);
                temporary = TemporaryFile.Create(_arena, Interlocked.Increment(ref _temporaryFiles));
                return temporary.Stream;
            }, ct);
            switch (header.Status)
            {
                case ObjectHeader.Types.Status.NotModified:
                    return new OwnerAnswer(null, NotModified: true, NotFound: false);
                case ObjectHeader.Types.Status.NotFound:
                    return new OwnerAnswer(null, NotModified: false, NotFound: true);
                case ObjectHeader.Types.Status.Ok:
                    break;
                default:
                    throw new PeerException($"{owner.Address} answered {header.Status} to a fetching Get of {key.Container}/{key.Blob}");
            }
            var path = header.Fetched ? ReadPath.RemoteMiss : ReadPath.RemoteHit;
            Metrics.Read(path, header.Length);
            if (extent is { } stored)
            {
                extent = null;
                // Added and pinned in one step (a concurrent write of the key may retire it at once;
                // a separate pin would then fail). Not validated: the owner's word, not storage's.
                var pin = _index.AddOrReplacePinned(key, header.Version, stored, owned: false);
                if (path == ReadPath.RemoteHit)
                    _index.RecordRemoteHit(key);
                else
                    _index.RecordRemoteMiss(key);
                return new OwnerAnswer(CachedRead.FromEntry(pin.Entry, pin, path), false, false);
            }
            if (temporary is { } file)
            {
                temporary = null;
                file.CloseStream();
                return new OwnerAnswer(CachedRead.FromFile(header.Version, header.Length, file, path), false, false);
            }
            return new OwnerAnswer(CachedRead.FromBytes(header.Version, fallback!.GetBuffer().AsMemory(0, (int)fallback.Length), path), false, false);
        }
        catch (PeerException e)
        {
            Interlocked.Increment(ref _peerFallbacks);
            _logger.LogWarning("Reading {Container}/{Blob} from its owner {Owner} failed, reading storage instead: {Message}",
                key.Container, key.Blob, owner.Id, e.Message);
            return default;
        }
        finally
        {
            if (extent is { } partial)
                _arena.Free(partial);
            temporary?.Dispose();
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
            var header = new PutHeader { Blob = ToRef(key), Length = extent.Length, UploadSync = uploadSync };
            var reply = await _peers.PutAsync(owner.Address, header, (offset, length) => extent.GetMemory(offset, length), ct);
            return reply.Version;
        }
        catch (PeerException e)
        {
            Interlocked.Increment(ref _peerFallbacks);
            _logger.LogWarning("Writing {Container}/{Blob} to its owner {Owner} failed, writing to storage instead: {Message}",
                key.Container, key.Blob, owner.Id, e.Message);
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
                await peers.InvalidateAsync(owner.Address, new InvalidateRequest { Blob = ToRef(key), KeepVersion = version }, CancellationToken.None);
            }
            catch (PeerException e)
            {
                _logger.LogDebug("Invalidating {Container}/{Blob} at {Owner} failed: {Message}", key.Container, key.Blob, owner.Id, e.Message);
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
        var request = new InvalidateRequest { Blob = ToRef(key), KeepVersion = version };
        var calls = new List<Task>();
        foreach (var peer in owners.Others)
        {
            var call = InvalidateAsync(peers, peer, key, request);
            if (peer.Id != unreachable.Id)
                calls.Add(call);
        }
        if (!owners.Others.Any(p => p.Id == unreachable.Id))
            _ = InvalidateAsync(peers, unreachable, key, request);
        await Task.WhenAll(calls);
    }

    private async Task InvalidateAsync(PeerClient peers, Peer peer, BlobKey key, InvalidateRequest request)
    {
        try
        {
            await peers.InvalidateAsync(peer.Address, request, CancellationToken.None);
        }
        catch (PeerException e)
        {
            _logger.LogWarning("Could not tell {Peer} that {Container}/{Blob} was written past its owner: {Message}",
                peer.Id, key.Container, key.Blob, e.Message);
        }
    }

    internal static BlobRef ToRef(in BlobKey key) => new() { Account = key.Account, Container = key.Container, Blob = key.Blob };

    // ---- serving peers ------------------------------------------------------------------------

    /// <summary>
    /// An object a peer asked for, pinned while it is sent. <see cref="Status"/> OK means <see cref="Read"/>
    /// holds it (cached, or in a file or bytes of its own when this cache had no room).
    /// </summary>
    public readonly record struct PeerObject(ObjectHeader.Types.Status Status, CachedRead Read, bool Fetched);

    /// <summary>The length and version of a cached object, without counting an access (null if not cached).</summary>
    public (long Length, string Version)? PeekForPeer(BlobRef blob) =>
        _index.TryPeek(new BlobKey(blob.Account, blob.Container, blob.Blob), out var entry) ? (entry.Length, entry.ETag) : null;

    /// <summary>Looks up (and if asked, validates or fetches) an object for a peer's Get.</summary>
    public async Task<PeerObject> OpenForPeerAsync(IBlobStore store, BlobRef blob, string ifVersion, bool fetch, bool validate, CancellationToken ct)
    {
        var key = new BlobKey(blob.Account, blob.Container, blob.Blob);
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
                    return new PeerObject(ObjectHeader.Types.Status.NotFound, default, false);
                current = matches.Value;
            }
            if (current)
            {
                if (ifVersion.Length > 0 && ifVersion == entry.ETag)
                    return new PeerObject(ObjectHeader.Types.Status.NotModified, default, false);
                if (_index.TryPin(entry, out var pin))
                {
                    _index.RecordLocalHit(key);
                    Metrics.Read(ReadPath.LocalHit, entry.Length);
                    return new PeerObject(ObjectHeader.Types.Status.Ok, CachedRead.FromEntry(entry, pin, ReadPath.LocalHit), false);
                }
            }
        }
        if (!fetch)
            return new PeerObject(ObjectHeader.Types.Status.NotCached, default, false);
        // Fetched the way a local miss is (one fetch per key at a time), from storage: this instance is the owner.
        // The fetch is not the requesting peer's to cancel: a peer that gives up (its timeout, e.g. on a
        // large remote miss) will ask again, as will others, so the owner finishes it and caches the
        // object; only shutdown stops it. The peer stops waiting, and what it leaves pinned is released.
        while (true)
        {
            var (result, shared, mine) = await JoinFetchAsync(key, () => FetchFromStorageAsync(store, key, _stopping.Token), ct);
            if (result is not { } read)
                return new PeerObject(ObjectHeader.Types.Status.NotFound, default, false);
            if (mine || read.Entry is null && read.File is null)
            {
                if (ifVersion.Length > 0 && ifVersion == read.ETag)
                {
                    read.Dispose();
                    return new PeerObject(ObjectHeader.Types.Status.NotModified, default, false);
                }
                return new PeerObject(ObjectHeader.Types.Status.Ok, read, true);
            }
            if (read.Entry is { } cached && (!_policy.Consistency.StrongThroughOwner || Trusted(cached)) && _index.TryPin(cached, out var pin))
                return new PeerObject(ObjectHeader.Types.Status.Ok, CachedRead.FromEntry(cached, pin, ReadPath.LocalMiss), true);
            _fetches.TryRemove(new KeyValuePair<BlobKey, Lazy<Task<CachedRead?>>>(key, shared));
        }
    }

    /// <summary>A fetch whose reader (or requesting peer) left: unpins (or deletes the file of) its result once it ends.</summary>
    private async Task ReleaseAbandonedFetchAsync(BlobKey key, Lazy<Task<CachedRead?>> fetch)
    {
        try
        {
            (await fetch.Value)?.Dispose();
        }
        catch (Exception e)
        {
            _logger.LogDebug("Fetching {Container}/{Blob} for a reader that left failed: {Message}", key.Container, key.Blob, e.Message);
        }
        finally
        {
            _fetches.TryRemove(new KeyValuePair<BlobKey, Lazy<Task<CachedRead?>>>(key, fetch));
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
    public async Task<string> AcceptPeerPutAsync(IBlobStore store, BlobRef blob, Extent extent, bool uploadSync, CancellationToken ct)
    {
        var key = new BlobKey(blob.Account, blob.Container, blob.Blob);
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
    internal TemporaryFile CreateSpillFile() => TemporaryFile.Create(_arena, Interlocked.Increment(ref _temporaryFiles));

    /// <summary>A peer's write that did not fit in the cache: uploaded from <paramref name="content"/> (its current position on).</summary>
    public async Task<string> AcceptPeerFileAsync(IBlobStore store, BlobRef blob, Stream content, long length, CancellationToken ct)
    {
        var key = new BlobKey(blob.Account, blob.Container, blob.Blob);
        var written = await UploadAsync(store, key, content, length, ct);
        _index.Remove(key); // an older cached version is stale now
        return written.ETag;
    }

    /// <summary>
    /// A peer says storage or the owner has a newer version: drop ours unless it is
    /// <paramref name="keepVersion"/>, and distrust every other copy (a fetch or check of this key
    /// that read storage before the write landed may still be about to cache the old version).
    /// </summary>
    public bool InvalidateFromPeer(BlobRef blob, string keepVersion)
    {
        var key = new BlobKey(blob.Account, blob.Container, blob.Blob);
        Distrust();
        return _index.TryGet(key, out var entry) && entry.ETag != keepVersion && _index.Remove(entry);
    }

    /// <summary>This cachelet's numbers for a peer's Stats call.</summary>
    public StatsResponse PeerStats()
    {
        var stats = new StatsResponse
        {
            MemberId = _owners?.SelfId ?? "",
            Objects = _index.Count,
            Bytes = _arena.Allocated,
            PinnedBytes = _index.PinnedBytes,
            Evictions = _index.Evictions,
        };
        foreach (var path in Enum.GetValues<ReadPath>())
            stats.Reads[CacheletMetrics.PathName(path)] = Metrics.Reads(path);
        return stats;
    }
}
