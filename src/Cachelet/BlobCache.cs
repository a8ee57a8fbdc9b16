using System.Diagnostics;
using System.Threading.Channels;
using FaaST.Cachelet.Index;
using FaaST.Cachelet.Memory;
using FaaST.Cachelet.Peers;
using FaaST.Cachelet.Policy;
using FaaST.Cachelet.Sources;
using FaaST.Cachelet.Telemetry;
using FaaST.Storage;
using Microsoft.Extensions.Logging;
using Microsoft.Extensions.Logging.Abstractions;

namespace FaaST.Cachelet;

/// <summary>
/// One application instance's cachelet: blobs that the app's bindings read and write, kept in a
/// shared-memory arena that the workers map too. Reads follow the app's consistency preset (the
/// default checks the ETag with one HEAD before serving cached bytes); writes go through to storage
/// synchronously or in the background, as the preset says. Objects the cache cannot hold (do-not-cache
/// globs, larger than the cache, no memory left) are served straight from storage, never failed.
/// </summary>
public sealed partial class BlobCache : IAsyncDisposable
{
    public const string ShmRoot = SharedMemoryNames.Root;

    private readonly CachePolicy _policy;
    private readonly SharedMemoryArena _arena;
    private readonly CacheIndex _index;
    private readonly ILogger _logger;
    // Per-read warnings, at most one a second each (an owner or a full cache fails every read alike).
    private readonly LogGate _uncachedLog = LogGate.PerSecond();
    private readonly SingleFlight<BlobKey, CachedRead?> _fetches;
    private readonly IBlobSource[] _sources;
    private readonly IBlobSource _ownerSource;
    private readonly Channel<PendingWrite> _writeBehind = Channel.CreateUnbounded<PendingWrite>(new UnboundedChannelOptions { SingleReader = true });
    private readonly Task _writer;
    private readonly CancellationTokenSource _stopping = new();

    // A write-behind to storage, pinned until it is uploaded.
    private sealed record PendingWrite(IBlobStore Store, BlobKey Key, CacheEntry Entry, PinHandle Pin);

    /// <param name="owner">Owner of the segment directory and files (the user the app's workers run as); null keeps this process's.</param>
    /// <param name="tiers">Sources a miss asks after the key's owner and before storage (e.g. a flash tier), in order.</param>
    /// <param name="evictionSink">Where eviction hands the objects it evicts (e.g. to demote them to a tier); none by default.</param>
    /// <param name="evictionSinks">More such sinks (after <paramref name="evictionSink"/>), each called in turn on a background
    /// thread before the object's memory is freed (see <see cref="Demotion.DemotionQueue"/>); none by default.</param>
    public BlobCache(string appName, CachePolicy policy, ILogger? logger = null, string shmRoot = ShmRoot, FileOwner? owner = null,
        IEnumerable<IBlobSource>? tiers = null, IEvictionSink? evictionSink = null, IEnumerable<IEvictionSink>? evictionSinks = null)
    {
        _policy = policy;
        _logger = logger ?? NullLogger.Instance;
        CleanStaleSegments(appName, shmRoot);
        Directory = SharedMemoryArena.InstanceDirectory(shmRoot, SharedMemoryNames.AppPrefix(appName));
        _arena = new SharedMemoryArena(Directory, new ArenaOptions { Capacity = policy.MaxCachedBytes, Owner = owner });
        _index = new CacheIndex(_arena, new CacheIndexOptions
        {
            Policy = EvictionPolicyFor(policy.Eviction),
            // A sink that throws is logged (2001) and counted by the demotion pump, never fails an eviction.
            EvictionSinks = [.. evictionSink is null ? [] : new[] { evictionSink }, .. evictionSinks ?? []],
            Logger = _logger,
        });
        Metrics = new CacheletMetrics(appName, () => _arena.Allocated, () => _index.PinnedBytes, () => _index.Count,
            () => _index.Evictions);
        _fetches = new SingleFlight<BlobKey, CachedRead?>(_stopping.Token, static (_, read) => read?.Dispose(),
            (key, e) => Log.AbandonedFetchFailed(_logger, key.Container, key.Blob, e.Message));
        _ownerSource = new OwnerSource(this);
        _sources = [_ownerSource, .. tiers ?? [], new ScalingStorageSource(this)];
        _writer = Task.Run(WriteBehindAsync);
    }

    /// <summary>The instance's segment directory (workers map files from here).</summary>
    public string Directory { get; }

    public CachePolicy Policy => _policy;

    /// <summary>A file in <see cref="Directory"/> was deleted (see <see cref="SharedMemoryArena.FileDeleted"/>).</summary>
    public event Action<string>? SegmentDeleted
    {
        add => _arena.FileDeleted += value;
        remove => _arena.FileDeleted -= value;
    }

    public CacheletMetrics Metrics { get; }

    public long CachedBytes => _arena.Allocated;

    /// <summary>What the cache holds in /dev/shm (slabs and large files): what the memory daemon counts.</summary>
    public long ReservedBytes => _arena.Reserved;

    public long PinnedBytes => _index.PinnedBytes;

    public long ObjectCount => _index.Count;

    internal CacheIndex Index => _index;

    /// <summary>The cache's activity since the previous call (see <see cref="CacheIndex.TakeActivity"/>): what a vote is made of.</summary>
    public CacheActivity TakeActivity(long largeObjectBytes) => _index.TakeActivity(largeObjectBytes);

    /// <summary>The most the cache may hold (the arena's capacity).</summary>
    public long CapacityBytes => _arena.Capacity;

    /// <summary>Frees at least <paramref name="bytes"/> (never pinned objects); returns what it freed.</summary>
    public long Evict(long bytes) => _index.Evict(bytes).Bytes;

    internal static IEvictionPolicy EvictionPolicyFor(EvictionOptions options)
    {
        var policy = options.Policy == EvictionPolicy.SizeAware
            ? EvictionPolicies.SizeAware(options.SizeThreshold)
            : EvictionPolicies.LruNonOwnedFirst;
        return options.Ttl is { } ttl ? EvictionPolicies.WithTtl(policy, ttl) : policy;
    }

    /// <summary>
    /// Reads a blob for a binding. The result is pinned until disposed (the invocation holds it);
    /// null when the blob does not exist.
    /// </summary>
    /// <remarks>
    /// The read path is a chain: the local index first (a hit, checked as the preset says), then on a
    /// miss the sources in order (<see cref="Sources"/>: the key's owner, added tiers, storage), one
    /// fetch per key at a time (<see cref="SingleFlight{TKey, TValue}"/>).
    /// </remarks>
    public async ValueTask<CachedRead?> ReadAsync(IBlobStore store, string container, string blob, CancellationToken ct)
    {
        using var span = CacheletMetrics.Activities.StartActivity("cachelet.read");
        span?.SetTag("blob", container + "/" + blob);
        if (!_policy.Enabled || _policy.DoNotCache(container, blob))
            return await PassthroughAsync(store, container, blob, ct);

        var key = new BlobKey(store.Endpoint.AbsoluteUri, container, blob);
        Peer? owner = null;
        var ownerKnown = false; // hashing the key onto the ring (~1.5 µs) only when the owner matters
        if (_index.TryGet(key, out var entry))
        {
            var current = true;
            if (_policy.Consistency.ReadTarget == DataTarget.Owner)
            {
                owner = OwnerOf(key);
                ownerKnown = true;
            }
            if (owner is not null)
            {
                // The owner holds the current version: ask it, sending our version (no bytes if it matches).
                var (outcome, fresh) = await AskAsync(_ownerSource, new SourceRequest(store, key, owner, entry.ETag, Validate: false), ct);
                if (outcome == SourceOutcome.NotFound)
                {
                    _index.Remove(key);
                    return null;
                }
                if (fresh is { } read)
                    return Tag(span, read);
                // Not modified, or the owner is unreachable: then storage decides.
                current = outcome == SourceOutcome.NotModified || await MatchesStorageAsync(store, key, entry, ct) is true;
            }
            else if (_policy.Consistency.ValidatesWithStorage)
            {
                var matches = await MatchesStorageAsync(store, key, entry, ct);
                if (matches is null)
                    return null;
                current = matches.Value;
            }
            else if (_policy.Consistency.StrongThroughOwner && !Trusted(entry))
            {
                // This instance owns the key (the owner was looked up above, before the epoch is read:
                // see OnOwnershipChanged), but has not seen storage hold this version since it became
                // the owner or since a write bypassed it: one HEAD first.
                var matches = await RevalidateAsync(store, key, entry, ct);
                if (matches is null)
                    return null;
                current = matches.Value;
            }
            if (current && _index.TryPin(entry, out var pin))
            {
                _index.RecordLocalHit(key);
                Metrics.Read(ReadPath.LocalHit, entry.Length);
                span?.SetTag("path", "local_hit");
                return CachedRead.FromEntry(entry, pin, ReadPath.LocalHit);
            }
        }

        // A miss: one fetch per key at a time; concurrent readers share it and pin what it cached.
        while (true)
        {
            if (!ownerKnown)
            {
                owner = OwnerOf(key);
                ownerKnown = true;
            }
            var (result, fetch, mine) = await _fetches.JoinAsync(key, token => FetchAsync(store, key, owner, token), ct);
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
            if (result.Value.Entry is { } shared && (owner is not null || !_policy.Consistency.StrongThroughOwner || Trusted(shared))
                && _index.TryPin(shared, out var pin))
            {
                _index.RecordLocalHit(key);
                Metrics.Read(ReadPath.LocalHit, shared.Length);
                return CachedRead.FromEntry(shared, pin, ReadPath.LocalHit);
            }
            // Evicted, replaced or unvalidated before we could pin it: fetch again.
            _fetches.Forget(key, fetch);
        }
    }

    /// <summary>
    /// The sources a miss asks, in order: the owner (when another instance owns the key and peers are
    /// connected), the added tiers, storage.
    /// </summary>
    public IReadOnlyList<IBlobSource> Sources => _sources;

    /// <summary>
    /// A miss: the sources in order until one finds the object or says it does not exist. Runs under
    /// the cache's lifetime token (<paramref name="ct"/>), shared by the readers of the key.
    /// </summary>
    private async Task<CachedRead?> FetchAsync(IBlobStore store, BlobKey key, Peer? owner, CancellationToken ct)
    {
        await Task.Yield();
        var request = new SourceRequest(store, key, owner, IfVersion: null, _policy.Consistency.ValidatesWithStorage);
        foreach (var source in _sources)
        {
            if (ReferenceEquals(source, _ownerSource) && (owner is null || _peers is null))
                continue;
            var (outcome, read) = await AskAsync(source, request, ct);
            if (outcome == SourceOutcome.NotFound)
                return null;
            if (read is not { } found)
                continue;
            if (source.Authoritative || await StillCurrentAsync(store, key, owner, found, ct))
                return found;
        }
        throw new InvalidOperationException($"no source of {key.Container}/{key.Blob} answered (the chain must end with storage)");
    }

    /// <summary>
    /// An object from a source that is not authoritative (a tier holding copies) is checked against
    /// storage where the preset checks reads (every read, or the owner's first read in an epoch); one
    /// that storage no longer holds is dropped and the next source asked.
    /// </summary>
    private async ValueTask<bool> StillCurrentAsync(IBlobStore store, BlobKey key, Peer? owner, CachedRead read, CancellationToken ct)
    {
        var consistency = _policy.Consistency;
        if (!consistency.ValidatesWithStorage && !(consistency.StrongThroughOwner && owner is null))
            return true;
        var epoch = Epoch;
        var head = await store.GetPropertiesAsync(key.Container, key.Blob, ct);
        if (head is not null && head.ETag == read.ETag)
        {
            read.Entry?.MarkValidated(epoch);
            return true;
        }
        if (read.Entry is { } stale)
            _index.Remove(stale);
        read.Dispose();
        return false;
    }

    /// <summary>
    /// Asks one source, into a new target: the object (cached when there was room, pinned) if found,
    /// with the source's outcome. Whatever a failed or unanswered fetch had received is discarded.
    /// </summary>
    private async ValueTask<(SourceOutcome Outcome, CachedRead? Read)> AskAsync(IBlobSource source, SourceRequest request, CancellationToken ct)
    {
        var epoch = Epoch; // before the fetch: a bypassing write that lands during it moves the epoch
        var target = new FetchTarget(this, request.Key);
        try
        {
            var result = await source.FetchAsync(request, target, ct);
            if (result.Outcome != SourceOutcome.Found)
                return (result.Outcome, null);
            return (SourceOutcome.Found, target.Complete(result, result.Validated ? epoch : CacheEntry.NotValidated));
        }
        finally
        {
            target.Discard();
        }
    }

    /// <summary>
    /// Where one source writes what it found: a new extent when the cache has room, else (logged) a
    /// buffer or a file of the read's own in the segment directory, which the worker maps and which
    /// goes when the invocation ends.
    /// </summary>
    private sealed class FetchTarget(BlobCache cache, BlobKey key) : IFetchTarget
    {
        private Extent? _extent;
        private MemoryStream? _buffer;
        private TemporaryFile? _file;

        public Stream Open(long length)
        {
            Discard();
            if (cache.TryAllocate(length, out var extent))
            {
                _extent = extent;
                return extent.OpenWriteStream();
            }
            if (cache._logger.IsEnabled(LogLevel.Warning) && cache._uncachedLog.TryPass(out var suppressed))
            {
                if (suppressed > 0)
                    Log.Suppressed(cache._logger, suppressed, "served without caching");
                Log.ServedUncached(cache._logger, key.Container, key.Blob, length);
            }
            if (length < cache._policy.InlineThreshold)
                return _buffer = new MemoryStream((int)length);
            _file = TemporaryFile.Create(cache._arena, Interlocked.Increment(ref cache._temporaryFiles));
            return _file.Stream;
        }

        /// <summary>
        /// A new extent of exactly <paramref name="length"/> bytes for ranges written at their offsets
        /// (bandwidth scaling); false, holding nothing, when the cache has no room.
        /// </summary>
        public bool TryOpenExtent(long length, out Extent extent)
        {
            Discard();
            if (!cache.TryAllocate(length, out extent))
                return false;
            _extent = extent;
            return true;
        }

        /// <summary>The read of a found object; the target holds nothing afterwards.</summary>
        public CachedRead Complete(SourceResult result, long validatedEpoch)
        {
            var path = result.Path;
            if (_extent is { } stored)
            {
                _extent = null;
                // Added and pinned in one step: a concurrent write of the key may retire the new entry at
                // once, and these bytes must still reach the reader that fetched them.
                var pin = cache._index.AddOrReplacePinned(key, result.Version, stored, owned: cache.OwnerOf(key) is null, validatedEpoch);
                switch (path)
                {
                    case ReadPath.RemoteHit:
                        cache._index.RecordRemoteHit(key);
                        break;
                    case ReadPath.RemoteMiss:
                        cache._index.RecordRemoteMiss(key);
                        break;
                    default:
                        cache._index.RecordLocalMiss(key);
                        break;
                }
                cache.Metrics.Read(path, result.Length);
                return CachedRead.FromEntry(pin.Entry, pin, path);
            }
            // Not cached: a storage read is counted as passing through, an owner's by its own path.
            if (path == ReadPath.LocalMiss)
                path = ReadPath.Passthrough;
            cache.Metrics.Read(path, result.Length);
            if (_file is { } file)
            {
                _file = null;
                file.CloseStream();
                return CachedRead.FromFile(result.Version, result.Length, file, path);
            }
            var bytes = _buffer is { } buffer ? buffer.GetBuffer().AsMemory(0, (int)buffer.Length) : ReadOnlyMemory<byte>.Empty;
            _buffer = null;
            return CachedRead.FromBytes(result.Version, bytes, path);
        }

        /// <summary>Frees what an open received that no read took (a failed, cancelled or unanswered fetch).</summary>
        public void Discard()
        {
            if (_extent is { } partial)
                cache._arena.Free(partial);
            _extent = null;
            _file?.Dispose();
            _file = null;
            _buffer = null;
        }
    }

    private static CachedRead Tag(Activity? span, CachedRead read)
    {
        span?.SetTag("path", CacheletMetrics.PathName(read.Path));
        return read;
    }

    /// <summary><see cref="MatchesStorageAsync"/>, recording a match as a validation in the epoch it started in.</summary>
    private async ValueTask<bool?> RevalidateAsync(IBlobStore store, BlobKey key, CacheEntry entry, CancellationToken ct)
    {
        var epoch = Epoch;
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
            _index.Remove(key);
            return null;
        }
        return head.ETag == entry.ETag;
    }

    private long _temporaryFiles;

    /// <summary>
    /// Opens a file of the segment directory that a read handed out (<see cref="CachedRead.File"/>)
    /// for reading, only if it is still the cache's own regular file (never through a link a worker
    /// put in its place).
    /// </summary>
    /// <exception cref="IOException">It is not (the message names the file and why).</exception>
    public Microsoft.Win32.SafeHandles.SafeFileHandle OpenFile(string name) => _arena.OpenForReading(name);

    private async Task<CachedRead?> PassthroughAsync(IBlobStore store, string container, string blob, CancellationToken ct)
    {
        var content = await store.DownloadAsync(container, blob, ct);
        if (content is null)
            return null;
        Metrics.Read(ReadPath.Passthrough, content.Data.Length);
        return CachedRead.FromBytes(content.Properties.ETag, content.Data);
    }

    private bool TryAllocate(long length, out Extent extent)
    {
        extent = default;
        return length <= _policy.MaxCachedBytes && _index.TryAllocate(length, out extent);
    }

    /// <summary>Writes an output binding's bytes through the cache.</summary>
    public ValueTask<BlobProperties> WriteAsync(IBlobStore store, string container, string blob, ReadOnlyMemory<byte> content, CancellationToken ct)
    {
        if (!_policy.Enabled || _policy.DoNotCache(container, blob) || !TryAllocate(content.Length, out var extent))
            return new ValueTask<BlobProperties>(store.UploadAsync(container, blob, content, ct: ct));
        content.Span.CopyTo(extent.Span);
        return CommitAsync(store, new BlobKey(store.Endpoint.AbsoluteUri, container, blob), extent, ct);
    }

    /// <summary>
    /// Writes an output the worker put in a file of the segment directory: the cache adopts the file
    /// (no copy for large objects) or, when it cannot cache it, uploads it from the file and deletes it.
    /// The file is opened once, without following links, and must be the worker's own regular file
    /// (<see cref="SharedMemoryArena.OpenWorkerFile"/>); the upload reads that open file, never the name again.
    /// </summary>
    /// <exception cref="InvalidOperationException">The worker named a file that cannot be its output (the message says why; the entry is deleted).</exception>
    public async ValueTask<BlobProperties> WriteFileAsync(IBlobStore store, string container, string blob, string fileName, long length, CancellationToken ct)
    {
        WorkerFile file;
        try
        {
            file = _arena.OpenWorkerFile(fileName, length);
        }
        catch (Exception e) when (e is ArgumentException or FileNotFoundException)
        {
            throw new InvalidOperationException($"output for {container}/{blob}: the worker named an unusable shared-memory file: {e.Message}", e);
        }
        using (file)
        {
            if (_policy.Enabled && !_policy.DoNotCache(container, blob) && length <= _policy.MaxCachedBytes &&
                (_arena.TryAdopt(file, out var adopted) || (Evict(length) > 0 && _arena.TryAdopt(file, out adopted))))
                return await CommitAsync(store, new BlobKey(store.Endpoint.AbsoluteUri, container, blob), adopted, ct);
            await using var content = file.OpenRead();
            return await store.UploadAsync(container, blob, content, length, ct: ct);
        }
    }

    /// <summary>
    /// Caches a written object and sends it where the preset says: to the owner (owner/* presets, when
    /// the owner is another instance), else to storage; synchronously or in the background.
    /// </summary>
    private async ValueTask<BlobProperties> CommitAsync(IBlobStore store, BlobKey key, Extent extent, CancellationToken ct)
    {
        using var span = CacheletMetrics.Activities.StartActivity("cachelet.write");
        span?.SetTag("blob", key.Container + "/" + key.Blob);
        Metrics.Write(extent.Length);
        var owner = OwnerOf(key);
        var toOwner = _policy.Consistency.WriteTarget == DataTarget.Owner && owner is not null;
        if (_policy.Consistency.WriteMode == WriteMode.Sync)
        {
            var epoch = Epoch; // before the upload, as for a fetch
            string? ownerVersion = null;
            string version;
            try
            {
                if (toOwner)
                    ownerVersion = await TryPutToOwnerAsync(store, key, extent, owner!, uploadSync: true, ct);
                version = ownerVersion ?? (await UploadExtentAsync(store, key, extent, ct)).ETag;
            }
            catch
            {
                _arena.Free(extent);
                throw;
            }
            // Validated here only if this instance uploaded it; the owner's version is the owner's word.
            _index.AddOrReplace(key, version, extent, owned: owner is null, validatedEpoch: ownerVersion is null ? epoch : CacheEntry.NotValidated);
            _index.RecordWrite(key);
            if (owner is not null && !toOwner)
                InvalidateAtOwner(owner, key, version);
            else if (toOwner && ownerVersion is null)
                await InvalidateEverywhereAsync(key, version, owner!);
            return new BlobProperties(version, extent.Length, DateTimeOffset.UtcNow, null);
        }
        if (toOwner)
        {
            // owner/async: written through to the owner's cache before returning (so a read at the
            // owner sees it), which uploads it in the background. If the owner cannot take it,
            // storage gets it in the background from here.
            string? version;
            try
            {
                version = await TryPutToOwnerAsync(store, key, extent, owner!, uploadSync: false, ct);
            }
            catch
            {
                _arena.Free(extent);
                throw;
            }
            if (version is not null)
            {
                _index.AddOrReplace(key, version, extent, owned: false);
                _index.RecordWrite(key);
                return new BlobProperties(version, extent.Length, DateTimeOffset.UtcNow, null);
            }
        }
        // Write-behind: the cache has the new version now; storage gets it in the background.
        var provisional = ProvisionalVersion();
        // Pinned as it is added: a concurrent write of the key may retire it at once, and the upload
        // must still read these bytes, not a freed extent.
        var pin = _index.AddOrReplacePinned(key, provisional, extent, owned: owner is null);
        _index.RecordWrite(key);
        _writeBehind.Writer.TryWrite(new PendingWrite(store, key, pin.Entry, pin));
        return new BlobProperties(provisional, extent.Length, DateTimeOffset.UtcNow, null);
    }

    /// <summary>The version of a write storage has not acknowledged yet.</summary>
    private static string ProvisionalVersion() => $"\"faast-pending-{Guid.NewGuid():N}\"";

    private static async Task<BlobProperties> UploadExtentAsync(IBlobStore store, BlobKey key, Extent extent, CancellationToken ct)
    {
        await using var source = extent.OpenReadStream();
        return await UploadAsync(store, key, source, extent.Length, ct);
    }

    private static async Task<BlobProperties> UploadAsync(IBlobStore store, BlobKey key, Stream source, long length, CancellationToken ct)
    {
        try
        {
            return await store.UploadAsync(key.Container, key.Blob, source, length, ct: ct);
        }
        catch (BlobStorageException e) when (e.Status == 404)
        {
            await store.CreateContainerIfNotExistsAsync(key.Container, ct);
            source.Position = 0;
            return await store.UploadAsync(key.Container, key.Blob, source, length, ct: ct);
        }
    }

    private async Task WriteBehindAsync()
    {
        var stop = _stopping.Token;
        await foreach (var write in _writeBehind.Reader.ReadAllAsync(CancellationToken.None))
        {
            using (write.Pin)
            {
                for (var attempt = 1; ; attempt++)
                {
                    try
                    {
                        var written = await UploadExtentAsync(write.Store, write.Key, write.Entry.Extent, CancellationToken.None);
                        _index.UpdateVersion(write.Entry, written.ETag);
                        break;
                    }
                    catch (Exception e) when (e is StorageUnavailableException or BlobStorageException or IOException)
                    {
                        Log.WriteBehindFailed(_logger, write.Key.Container, write.Key.Blob, attempt, e.Message);
                        if (stop.IsCancellationRequested && attempt >= 3)
                        {
                            Log.WriteBehindAbandoned(_logger, write.Key.Container, write.Key.Blob);
                            break;
                        }
                        await Task.Delay(TimeSpan.FromMilliseconds(Math.Min(5000, 100 << Math.Min(attempt, 6))), CancellationToken.None);
                    }
                }
            }
        }
    }

    /// <summary>Flushes pending write-behind uploads (bounded wait), then removes the segments.</summary>
    public async ValueTask DisposeAsync()
    {
        _writeBehind.Writer.TryComplete();
        await _stopping.CancelAsync();
        try
        {
            await _writer.WaitAsync(TimeSpan.FromSeconds(30));
        }
        catch (TimeoutException)
        {
            Log.WriteBehindPending(_logger);
        }
        Metrics.Dispose();
        _index.Dispose();
        _arena.Dispose();
        _stopping.Dispose();
    }

    /// <summary>
    /// Deletes the segment directories of this app's instances whose host process is gone (a crash
    /// leaves them): done at start, and by a supervisor that saw an instance die.
    /// </summary>
    public static int CleanStaleSegments(string appName, string shmRoot = ShmRoot) =>
        SharedMemoryArena.CleanStale(shmRoot, SharedMemoryNames.AppPrefix(appName));

    // ---- index APIs for the components above the cache (issue 20: prewarm, a flash tier) ----

    /// <summary>
    /// Every cached object with its size, ETag, owner (the owning instance's id; null without
    /// membership), accesses by kind and inter-arrival histogram: an immutable copy taken without
    /// stopping readers (see <see cref="CacheIndex.Snapshot"/>).
    /// </summary>
    public IReadOnlyList<CacheEntrySnapshot> Snapshot() =>
        _index.Snapshot(key => _owners is null ? null : OwnerOf(key)?.Id ?? _owners.SelfId);

    /// <summary>The last objects that left the cache, newest first, with size, ETag and why (see <see cref="CacheIndex.RecentlyEvicted"/>).</summary>
    public IReadOnlyList<EvictedObject> RecentlyEvicted() => _index.RecentlyEvicted();

    /// <summary>What the demotion queue between eviction and the eviction sinks did and holds.</summary>
    public Demotion.DemotionStats Demotions => _index.Demotions;
}

/// <summary>
/// A blob served to a binding: cached (a pinned extent), or not cached (plain bytes, or a file of its
/// own in the segment directory for large ones). Dispose unpins, or deletes the file.
/// </summary>
public readonly struct CachedRead : IDisposable
{
    private readonly IDisposable? _pin;

    private CachedRead(ReadPath path, string etag, long length, CacheEntry? entry, ReadOnlyMemory<byte> bytes, IDisposable? pin, string? file = null)
    {
        Path = path;
        ETag = etag;
        Length = length;
        Entry = entry;
        Bytes = bytes;
        _pin = pin;
        File = file;
    }

    /// <summary>An uncached object's file in the segment directory (its name is its segment), or null.</summary>
    public string? File { get; }

    internal static CachedRead FromFile(string etag, long length, TemporaryFile file, ReadPath path = ReadPath.Passthrough) =>
        new(path, etag, length, null, default, file, file.Name);

    public ReadPath Path { get; }
    public string ETag { get; }
    public long Length { get; }

    /// <summary>The cached object (its extent names the segment, offset and length); null when not cached.</summary>
    public CacheEntry? Entry { get; }

    /// <summary>The bytes, when the read was not cached.</summary>
    public ReadOnlyMemory<byte> Bytes { get; }

    internal static CachedRead FromEntry(CacheEntry entry, IDisposable pin, ReadPath path) =>
        new(path, entry.ETag, entry.Length, entry, default, pin);

    internal static CachedRead FromBytes(string etag, ReadOnlyMemory<byte> bytes, ReadPath path = ReadPath.Passthrough) =>
        new(path, etag, bytes.Length, null, bytes, null);

    public void Dispose() => _pin?.Dispose();
}

/// <summary>A file in the segment directory holding one uncached object for one invocation.</summary>
public sealed class TemporaryFile : IDisposable
{
    private readonly SharedMemoryArena _arena;

    private TemporaryFile(SharedMemoryArena arena, string name, FileStream stream)
    {
        _arena = arena;
        Name = name;
        Stream = stream;
    }

    /// <summary>The segment name workers map ("t" + a number never reused by this instance).</summary>
    public string Name { get; }

    public FileStream Stream { get; }

    /// <summary>Created and later deleted by the arena, relative to its directory descriptor (the
    /// workers' user may have replaced the directory's path by then).</summary>
    internal static TemporaryFile Create(SharedMemoryArena arena, long number)
    {
        var name = SharedMemoryNames.HostFile(SharedMemoryNames.Temporary, number);
        return new TemporaryFile(arena, name, arena.CreateSideFile(name));
    }

    public void CloseStream() => Stream.Dispose();

    public void Dispose()
    {
        Stream.Dispose();
        _arena.DeleteSideFile(Name);
    }
}
