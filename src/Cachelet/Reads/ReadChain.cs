using System.Collections.Concurrent;
using System.Diagnostics;
using FaaST.Cachelet.Consistency;
using FaaST.Cachelet.Index;
using FaaST.Cachelet.Peers;
using FaaST.Cachelet.Sources;
using FaaST.Cachelet.Telemetry;
using FaaST.Storage;

namespace FaaST.Cachelet.Reads;

/// <summary>
/// The read path, as one chain: the local index first (a hit, checked as the preset's
/// <see cref="ConsistencyStrategy"/> says), then on a miss the sources in order (the key's owner,
/// added tiers, storage), one fetch per key at a time (<see cref="SingleFlight{TKey, TValue}"/>).
/// Which of Faa$T's four paths a read took is decided here and in <see cref="ReadPaths"/>, nowhere else.
/// </summary>
internal sealed class ReadChain
{
    private readonly CacheCore _core;
    private readonly SingleFlight<BlobKey, CachedRead?> _fetches;
    private readonly IBlobSource[] _sources;
    private readonly IBlobSource _ownerSource;
    private readonly IBlobSource _storageSource;
    // Per-read warnings, at most one a second each (a full cache fails every read alike).
    private readonly LogGate _uncachedLog = LogGate.PerSecond();
    // Background fetches running, each with the signal that promotes it when a reader joins it.
    private readonly ConcurrentDictionary<BlobKey, TaskCompletionSource> _background = new();
    private int _backgroundCount;

    public ReadChain(CacheCore core, IBlobSource ownerSource, IEnumerable<IBlobSource>? tiers, IBlobSource storageSource, StorageReadScheduler scheduler)
    {
        _core = core;
        _ownerSource = ownerSource;
        _storageSource = storageSource;
        _sources = [ownerSource, .. tiers ?? [], storageSource];
        Scheduler = scheduler;
        _fetches = new SingleFlight<BlobKey, CachedRead?>(core.Stopping, static (_, read) => read?.Dispose(),
            (key, e) => Log.AbandonedFetchFailed(core.Logger, key.Container, key.Blob, e.Message));
    }

    /// <summary>The sources a miss asks, in order: the owner, the added tiers, storage.</summary>
    public IReadOnlyList<IBlobSource> Sources => _sources;

    public StorageReadScheduler Scheduler { get; }

    /// <summary>Fetches in flight (tests, diagnostics).</summary>
    public int FetchesInFlight => _fetches.Count;

    /// <summary>See <see cref="BlobCache.ReadAsync"/>.</summary>
    /// <param name="stream">The reader can take a large miss while it downloads (<see cref="CachedRead.Fill"/>; cache.streamThreshold).</param>
    public async ValueTask<CachedRead?> ReadAsync(IBlobStore store, string container, string blob, CancellationToken ct, bool stream = false)
    {
        using var span = CacheletMetrics.Activities.StartActivity("cachelet.read");
        span?.SetTag("blob", container + "/" + blob);
        if (!_core.Caches(container, blob))
            return await PassthroughAsync(store, container, blob, ct);

        var key = new BlobKey(store.Endpoint.AbsoluteUri, container, blob);
        var consistency = _core.Consistency;
        Peer? owner = null;
        var ownerKnown = false; // hashing the key onto the ring only when the owner matters
        if (_core.Index.TryGet(key, out var entry))
        {
            if (consistency.OwnerDecidesHit)
            {
                // Looked up before the epoch is read (see CacheOwnership.OnChanged).
                owner = _core.Ownership.OwnerOf(key);
                ownerKnown = true;
            }
            var current = true;
            switch (consistency.HitCheckFor(ownedHere: owner is null))
            {
                case HitCheck.AskOwner:
                {
                    // The owner holds the current version: ask it, sending our version (no bytes if it matches).
                    var (outcome, fresh, _) = await AskAsync(_ownerSource, new SourceRequest(store, key, owner, entry.ETag, Validate: false), countAccess: true, ct);
                    if (outcome == SourceOutcome.NotFound)
                    {
                        _core.Index.Remove(key);
                        return null;
                    }
                    if (fresh is { } read)
                        return Tag(span, read);
                    // Not modified, or the owner is unreachable: then storage decides.
                    current = outcome == SourceOutcome.NotModified || await MatchesStorageAsync(store, key, entry, ct) is true;
                    break;
                }
                case HitCheck.StorageHead:
                {
                    var matches = await MatchesStorageAsync(store, key, entry, ct);
                    if (matches is null)
                        return null;
                    current = matches.Value;
                    break;
                }
                case HitCheck.StorageHeadOncePerEpoch when !_core.Epoch.Trusts(entry):
                {
                    // This instance owns the key but has not seen storage hold this version since it
                    // became the owner or since a write bypassed it: one HEAD first.
                    var matches = await RevalidateAsync(store, key, entry, ct);
                    if (matches is null)
                        return null;
                    current = matches.Value;
                    break;
                }
            }
            if (current && _core.Index.TryPin(entry, out var pin))
            {
                ReadPaths.Count(_core, key, ReadPath.LocalHit, entry.Length, fromEntry: true);
                span?.SetTag("path", "local_hit");
                return CachedRead.FromEntry(entry, pin, ReadPath.LocalHit);
            }
        }

        // A miss: one fetch per key at a time; concurrent readers share it and pin what it cached.
        if (!ownerKnown)
            owner = _core.Ownership.OwnerOf(key);
        if (stream && _core.Policy.StreamThreshold > 0)
        {
            var streamed = await StreamMissAsync(store, key, owner, ct);
            if (streamed.Read is { } early)
                return Tag(span, early);
            if (streamed.Mine || streamed.Result is null)
                return streamed.Result is { } r ? Tag(span, r) : null;
            // Joined another reader's fetch: as below, pin what it cached.
            if (streamed.Result.Value.Entry is { } joined && (owner is not null || !consistency.TrustsEpoch || _core.Epoch.Trusts(joined))
                && _core.Index.TryPin(joined, out var joinedPin))
            {
                ReadPaths.Count(_core, key, ReadPath.LocalHit, joined.Length, fromEntry: true);
                return CachedRead.FromEntry(joined, joinedPin, ReadPath.LocalHit);
            }
            if (streamed.Result.Value.Entry is null && streamed.Result.Value.File is null)
                return streamed.Result;
            _fetches.Forget(key, streamed.Flight!);
        }
        while (true)
        {
            var joining = _fetches.JoinAsync(key, token => FetchAsync(store, key, owner, ReadPriority.OnDemand, countAccess: true, token), ct);
            Promote(key); // after joining: a background fetch we joined has registered by now
            var (result, fetch, mine) = await joining;
            if (mine || result is null)
                return result is { } r ? Tag(span, r) : result;
            if (result.Value.Entry is null && result.Value.File is null)
                return result; // not cached: the bytes are shared read-only
            if (result.Value.Entry is null)
            {
                // Its file belongs to the reader that fetched it: drop that finished fetch (its
                // owner may not have yet) and fetch our own.
                _fetches.Forget(key, fetch);
                continue;
            }
            // A fetch we joined may have read storage before the epoch moved (before a write that
            // bypassed this owner reached storage): then it is not ours to serve as the owner's version.
            if (result.Value.Entry is { } shared && (owner is not null || !consistency.TrustsEpoch || _core.Epoch.Trusts(shared))
                && _core.Index.TryPin(shared, out var pin))
            {
                ReadPaths.Count(_core, key, ReadPath.LocalHit, shared.Length, fromEntry: true);
                return CachedRead.FromEntry(shared, pin, ReadPath.LocalHit);
            }
            // Evicted, replaced or unvalidated before we could pin it: fetch again.
            _fetches.Forget(key, fetch);
        }
    }

    /// <summary>
    /// A miss that may reach the reader while it downloads: this reader's fetch (if it starts one) hands over the
    /// fill as soon as storage's first response fixed the length and version and the extent is allocated. Returns
    /// either that early read (<c>Read</c>), or the flight's result as <see cref="SingleFlight{TKey, TValue}.JoinAsync"/>
    /// gives it (a small or uncacheable object, a fetch from another source, or another reader's fetch, which a
    /// joiner waits for whole: only the reader that started the fetch streams it).
    /// </summary>
    private async Task<(CachedRead? Read, CachedRead? Result, Lazy<Task<CachedRead?>>? Flight, bool Mine)> StreamMissAsync(IBlobStore store, BlobKey key,
        Peer? owner, CancellationToken ct)
    {
        var opened = new TaskCompletionSource<StreamingFill>(TaskCreationOptions.RunContinuationsAsynchronously);
        // Not the reader's token: once the fill is handed over, the reader's invocation owns the fetch's result
        // (the entry's pin) until it ends, whatever happens to the request.
        var joining = _fetches.JoinAsync(key, token => FetchAsync(store, key, owner, ReadPriority.OnDemand, countAccess: true, token, opened), CancellationToken.None);
        Promote(key);
        try
        {
            await Task.WhenAny(joining, opened.Task).WaitAsync(ct);
        }
        catch (OperationCanceledException) when (ct.IsCancellationRequested)
        {
            ReleaseWhenDone(joining, opened.Task);
            throw;
        }
        if (!joining.IsCompleted && opened.Task.IsCompletedSuccessfully)
            return (CachedRead.FromFill(opened.Task.Result, new FlightLease(joining)), null, null, true);
        // From here the read is served whole: a fill handed over (the download ended before we looked) is let go.
        if (!opened.TrySetCanceled())
            opened.Task.Result.ReleaseReader();
        var (result, flight, mine) = await joining;
        return (null, result, flight, mine);
    }

    /// <summary>A reader that gave up: what its fetch hands it later (a fill, the entry's pin) is let go when it comes.</summary>
    private static void ReleaseWhenDone(Task<(CachedRead? Result, Lazy<Task<CachedRead?>> Flight, bool Mine)> joining, Task<StreamingFill> opened)
    {
        _ = opened.ContinueWith(static t => t.Result.ReleaseReader(), CancellationToken.None, TaskContinuationOptions.OnlyOnRanToCompletion, TaskScheduler.Default);
        new FlightLease(joining).Dispose();
    }

    /// <summary>Holds the result of a streamed read's fetch (the entry's pin, once the fill completes) until the reader lets go.</summary>
    private sealed class FlightLease(Task<(CachedRead? Result, Lazy<Task<CachedRead?>> Flight, bool Mine)> joining) : IDisposable
    {
        public void Dispose() =>
            _ = joining.ContinueWith(static t =>
            {
                if (t.Result.Mine)
                    t.Result.Result?.Dispose();
            }, CancellationToken.None, TaskContinuationOptions.OnlyOnRanToCompletion | TaskContinuationOptions.ExecuteSynchronously, TaskScheduler.Default);
    }

    /// <summary>
    /// A miss fetched on the owner's behalf (this instance owns the key): for a peer's Get, or a
    /// prefetch. Joins a fetch of the key already running; the answer's Mine says whether this
    /// caller started it (then the result is its own to hand out or dispose).
    /// </summary>
    public async Task<(CachedRead? Result, Lazy<Task<CachedRead?>> Flight, bool Mine)> FetchAsOwnerAsync(IBlobStore store, BlobKey key,
        ReadPriority priority, bool countAccess, CancellationToken ct)
    {
        var joining = _fetches.JoinAsync(key, token => FetchAsync(store, key, owner: null, priority, countAccess, token), ct);
        if (priority == ReadPriority.OnDemand)
            Promote(key);
        return await joining;
    }

    /// <summary>Drops a finished fetch whose result could not be used (the next caller starts a new one).</summary>
    public void Forget(BlobKey key, Lazy<Task<CachedRead?>> flight) => _fetches.Forget(key, flight);

    /// <summary>
    /// An on-demand reader waits for <paramref name="key"/>: a background fetch of it stops yielding.
    /// Called after <see cref="SingleFlight{TKey, TValue}.JoinAsync"/> returned its task: by then the
    /// flight's fetch has run up to its first await (a Lazy runs it once, the first joiner that asks),
    /// which is after it registered its promotion signal, so no join goes unseen.
    /// </summary>
    private void Promote(in BlobKey key)
    {
        if (Volatile.Read(ref _backgroundCount) > 0 && _background.TryGetValue(key, out var promote))
            promote.TrySetResult();
    }

    /// <summary>
    /// A miss: the sources in order until one finds the object or says it does not exist. Runs under
    /// the cache's lifetime token (<paramref name="ct"/>), shared by the readers of the key.
    /// </summary>
    private async Task<CachedRead?> FetchAsync(IBlobStore store, BlobKey key, Peer? owner, ReadPriority priority, bool countAccess, CancellationToken ct,
        TaskCompletionSource<StreamingFill>? streaming = null)
    {
        // Registered before the first await (see Promote).
        TaskCompletionSource? promoted = null;
        if (priority == ReadPriority.Background)
        {
            promoted = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
            _background[key] = promoted;
            Interlocked.Increment(ref _backgroundCount);
        }
        try
        {
            await Task.Yield();
            var request = new SourceRequest(store, key, owner, IfVersion: null, _core.Consistency.MissesValidated);
            foreach (var source in _sources)
            {
                if (ReferenceEquals(source, _ownerSource) && (owner is null || _core.Peers.Client is null))
                    continue;
                SourceOutcome outcome;
                CachedRead? read;
                bool validated;
                if (ReferenceEquals(source, _storageSource))
                {
                    using var admission = await Scheduler.AdmitAsync(priority, promoted?.Task, ct);
                    (outcome, read, validated) = await AskAsync(source, request, countAccess, ct, streaming);
                }
                else
                {
                    (outcome, read, validated) = await AskAsync(source, request, countAccess, ct);
                }
                if (outcome == SourceOutcome.NotFound)
                    return null;
                if (read is not { } found)
                    continue;
                // A copy from a tier is checked with storage unless storage vouched for its version during the fetch
                // (SourceResult.Validated: the flash tier's HEAD runs beside its get, after this read's epoch was taken),
                // which a second HEAD here would only repeat: one storage round trip per flash hit.
                if (source.Authoritative || validated || await StillCurrentAsync(store, key, owner, found, ct))
                    return found;
            }
            throw new InvalidOperationException($"no source of {key.Container}/{key.Blob} answered (the chain must end with storage)");
        }
        finally
        {
            if (promoted is not null)
            {
                _background.TryRemove(new KeyValuePair<BlobKey, TaskCompletionSource>(key, promoted));
                Interlocked.Decrement(ref _backgroundCount);
            }
        }
    }

    /// <summary>
    /// An object from a source that is not authoritative (a tier holding copies) and that storage did not vouch for
    /// during the fetch is checked against storage where the preset checks reads (every read, or the owner's first
    /// read in an epoch); one that storage no longer holds is dropped and the next source asked.
    /// </summary>
    private async ValueTask<bool> StillCurrentAsync(IBlobStore store, BlobKey key, Peer? owner, CachedRead read, CancellationToken ct)
    {
        if (!_core.Consistency.ChecksCopiesWithStorage(ownedHere: owner is null))
            return true;
        var epoch = _core.Epoch.Current;
        var head = await store.GetPropertiesAsync(key.Container, key.Blob, ct);
        if (head is not null && head.ETag == read.ETag)
        {
            read.Entry?.MarkValidated(epoch);
            return true;
        }
        if (read.Entry is { } stale)
            _core.Index.Remove(stale);
        read.Dispose();
        return false;
    }

    /// <summary>
    /// Asks one source, into a new target: the object (cached when there was room, pinned) if found,
    /// with the source's outcome. Whatever a failed or unanswered fetch had received is discarded.
    /// </summary>
    private async ValueTask<(SourceOutcome Outcome, CachedRead? Read, bool Validated)> AskAsync(IBlobSource source, SourceRequest request, bool countAccess, CancellationToken ct,
        TaskCompletionSource<StreamingFill>? streaming = null)
    {
        var epoch = _core.Epoch.Current; // before the fetch: a bypassing write that lands during it moves the epoch
        var target = new FetchTarget(_core, request.Key, countAccess, _uncachedLog, streaming);
        try
        {
            var result = await source.FetchAsync(request, target, ct);
            if (result.Outcome != SourceOutcome.Found)
                return (result.Outcome, null, false);
            return (SourceOutcome.Found, target.Complete(result, result.Validated ? epoch : CacheEntry.NotValidated), result.Validated);
        }
        catch (Exception e)
        {
            target.Discard(e.Message);
            throw;
        }
        finally
        {
            target.Discard();
        }
    }

    private static CachedRead Tag(Activity? span, CachedRead read)
    {
        span?.SetTag("path", CacheletMetrics.PathName(read.Path));
        return read;
    }

    /// <summary><see cref="MatchesStorageAsync"/>, recording a match as a validation in the epoch it started in.</summary>
    public async ValueTask<bool?> RevalidateAsync(IBlobStore store, BlobKey key, CacheEntry entry, CancellationToken ct)
    {
        var epoch = _core.Epoch.Current;
        var matches = await MatchesStorageAsync(store, key, entry, ct);
        if (matches is true)
            entry.MarkValidated(epoch);
        return matches;
    }

    /// <summary>One HEAD: true if storage still has the cached version, false if not, null if the blob is gone (then uncached).</summary>
    private async ValueTask<bool?> MatchesStorageAsync(IBlobStore store, BlobKey key, CacheEntry entry, CancellationToken ct)
    {
        var head = await store.GetPropertiesAsync(key.Container, key.Blob, ct);
        if (head is null)
        {
            _core.Index.Remove(key);
            return null;
        }
        return head.ETag == entry.ETag;
    }

    private async Task<CachedRead?> PassthroughAsync(IBlobStore store, string container, string blob, CancellationToken ct)
    {
        var content = await store.DownloadAsync(container, blob, ct);
        if (content is null)
            return null;
        _core.Metrics.Read(ReadPath.Passthrough, content.Data.Length);
        return CachedRead.FromBytes(content.Properties.ETag, content.Data);
    }
}
