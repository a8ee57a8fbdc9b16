using FaaST.Cachelet.Bandwidth;
using FaaST.Cachelet.Index;
using FaaST.Cachelet.Memory;
using FaaST.Cachelet.Peers;
using FaaST.Policy;
using FaaST.Cachelet.Reads;
using FaaST.Cachelet.Sources;
using FaaST.Cachelet.Telemetry;
using FaaST.Cachelet.Writes;
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
/// <remarks>
/// The facade over the cachelet's mechanisms, each a type of its own: the read chain
/// (<see cref="ReadChain"/>, which decides Faa$T's four read paths), the preset's strategy
/// (<see cref="Consistency.ConsistencyStrategy"/>, Table 3 as a table), the write paths
/// (<see cref="WriteThrough"/>, <see cref="WriteBehind"/>), serving peers (<see cref="PeerServing"/>),
/// ownership (<see cref="Ownership.CacheOwnership"/>), parallel range fetch
/// (<see cref="ParallelRangeFetch"/>) and prefetch (<see cref="Prefetcher"/>).
/// </remarks>
public sealed class BlobCache : IAsyncDisposable
{
    public const string ShmRoot = SharedMemoryNames.Root;

    private readonly CachePolicy _policy;
    private readonly SharedMemoryArena _arena;
    private readonly CacheIndex _index;
    private readonly ILogger _logger;
    private readonly CancellationTokenSource _stopping = new();
    private readonly CacheCore _core;
    private readonly ReadChain _reads;
    private readonly Prefetcher _prefetcher;
    private readonly WriteBehind _writeBehind;
    private readonly CacheWriter _writes;
    private readonly PeerServing _serving;
    private readonly ParallelRangeFetch _bandwidth;

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
        _core = new CacheCore(policy, _arena, _index, _logger, Metrics, _stopping.Token);
        _bandwidth = new ParallelRangeFetch(_core);
        _reads = new ReadChain(_core, new OwnerSource(_core.Peers, _bandwidth), tiers, new ScalingStorageSource(_core, _bandwidth), new StorageReadScheduler());
        _prefetcher = new Prefetcher(_core, _reads);
        var through = new WriteThrough(_core);
        _writeBehind = new WriteBehind(_core);
        var conditional = new ConditionalWrites(_core, through, _writeBehind);
        _writes = new CacheWriter(_core, through, _writeBehind, conditional);
        _serving = new PeerServing(_core, _reads, through, _writeBehind, conditional, _bandwidth);
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

    /// <summary>Evicts at least <paramref name="bytes"/> (never pinned objects); returns what it evicted. With eviction sinks the memory returns to the arena once they have taken the objects.</summary>
    public long Evict(long bytes) => _index.Evict(bytes).Bytes;

    internal static IEvictionPolicy EvictionPolicyFor(EvictionOptions options)
    {
        var policy = options.Policy == EvictionPolicy.SizeAware
            ? EvictionPolicies.SizeAware(options.SizeThreshold)
            : EvictionPolicies.LruNonOwnedFirst;
        return options.Ttl is { } ttl ? EvictionPolicies.WithTtl(policy, ttl) : policy;
    }

    // ---- reads ----------------------------------------------------------------------------------

    /// <summary>
    /// Reads a blob for a binding. The result is pinned until disposed (the invocation holds it);
    /// null when the blob does not exist.
    /// </summary>
    /// <remarks>
    /// The read path is a chain (<see cref="ReadChain"/>): the local index first (a hit, checked as the
    /// preset says), then on a miss the sources in order (<see cref="Sources"/>: the key's owner, added
    /// tiers, storage), one fetch per key at a time.
    /// </remarks>
    public ValueTask<CachedRead?> ReadAsync(IBlobStore store, string container, string blob, CancellationToken ct) =>
        _reads.ReadAsync(store, container, blob, ct);

    /// <summary>
    /// As <see cref="ReadAsync"/>, except that a miss of at least <see cref="CachePolicy.StreamThreshold"/> that this
    /// reader fetches from storage returns as soon as the first response gave its length and ETag and its extent is
    /// allocated: <see cref="CachedRead.Fill"/> then says how far the bytes have arrived (a progress record workers
    /// map). The object enters the cache only once complete; a failed fill is never cached. Readers that join the
    /// fetch wait for it whole (single flight, as before). Dispose releases the fill and the entry's pin.
    /// </summary>
    public ValueTask<CachedRead?> ReadStreamingAsync(IBlobStore store, string container, string blob, CancellationToken ct) =>
        _reads.ReadAsync(store, container, blob, ct, stream: true);

    /// <summary>
    /// Waits until the streamed fill whose progress record is <paramref name="progressFile"/> is complete (at once if it
    /// is no longer streaming); throws the fill's <see cref="IOException"/> (naming the blob) if it failed. For a worker
    /// that cannot read a fill as it arrives.
    /// </summary>
    public Task WaitFilledAsync(string progressFile, CancellationToken ct) =>
        _core.Fills.TryGetValue(progressFile, out var fill) ? fill.Completion.WaitAsync(ct) : Task.CompletedTask;

    /// <summary>
    /// Loads a blob this instance owns into the cache without serving it: no access is counted (no hit
    /// or miss, no statistics), no pin is left (eviction may take it like any other object), and its
    /// storage read runs at <paramref name="priority"/> — a <see cref="ReadPriority.Background"/> one
    /// only while no on-demand storage read runs, a few at a time. Never throws for the blob's sake
    /// (a failure is <see cref="PrefetchOutcome.Failed"/>, logged); cancelling <paramref name="ct"/> throws.
    /// </summary>
    public ValueTask<PrefetchOutcome> PrefetchAsync(IBlobStore store, string container, string blob, ReadPriority priority, CancellationToken ct) =>
        _prefetcher.PrefetchAsync(store, container, blob, priority, ct);

    /// <summary>
    /// The sources a miss asks, in order: the owner (when another instance owns the key and peers are
    /// connected), the added tiers, storage.
    /// </summary>
    public IReadOnlyList<IBlobSource> Sources => _reads.Sources;

    /// <summary>Storage reads by priority (tests, diagnostics).</summary>
    internal StorageReadScheduler StorageReads => _reads.Scheduler;

    /// <summary>Misses being fetched, one per key (tests, diagnostics).</summary>
    internal int FetchesInFlight => _reads.FetchesInFlight;

    /// <summary>
    /// Opens a file of the segment directory that a read handed out (<see cref="CachedRead.File"/>)
    /// for reading, only if it is still the cache's own regular file (never through a link a worker
    /// put in its place).
    /// </summary>
    /// <exception cref="IOException">It is not (the message names the file and why).</exception>
    public Microsoft.Win32.SafeHandles.SafeFileHandle OpenFile(string name) => _arena.OpenForReading(name);

    // ---- writes ---------------------------------------------------------------------------------

    /// <summary>
    /// Writes an output binding's bytes through the cache. A <paramref name="condition"/> (If-Match the version an
    /// input read, or that there is no blob) is checked where the preset sends the write: storage for the write-through
    /// presets, the owner under owner/*, this cache under local/async/local (its own view only); a failed one throws
    /// <see cref="BlobConditionFailedException"/> and nothing is written.
    /// </summary>
    public ValueTask<BlobProperties> WriteAsync(IBlobStore store, string container, string blob, ReadOnlyMemory<byte> content, CancellationToken ct,
        BlobWriteCondition condition = default) =>
        _writes.WriteAsync(store, container, blob, content, ct, condition);

    /// <summary>
    /// Writes an output the worker put in a file of the segment directory: the cache adopts the file
    /// (no copy for large objects) or, when it cannot cache it, uploads it from the file and deletes it.
    /// The file is opened once, without following links, and must be the worker's own regular file
    /// (<see cref="SharedMemoryArena.OpenWorkerFile"/>); the upload reads that open file, never the name again.
    /// </summary>
    /// <exception cref="InvalidOperationException">The worker named a file that cannot be its output (the message says why; the entry is deleted).</exception>
    public ValueTask<BlobProperties> WriteFileAsync(IBlobStore store, string container, string blob, string fileName, long length, CancellationToken ct,
        BlobWriteCondition condition = default) =>
        _writes.WriteFileAsync(store, container, blob, fileName, length, ct, condition);

    /// <summary>
    /// Deletes an output file a worker wrote into the segment directory that will not be written (its invocation
    /// failed before the write: a conflict, a null path), so it does not stay until the worker exits.
    /// </summary>
    public void DiscardWorkerFile(string fileName) => _arena.DiscardWorkerFile(fileName);

    // ---- ownership and peers (Faa$T §3.2) -------------------------------------------------------

    /// <summary>Joins the app's cooperative cache: owners from <paramref name="owners"/>, reached through <paramref name="peers"/>.</summary>
    public void ConnectPeers(IOwnerDirectory owners, IOwnerClient peers)
    {
        _core.Ownership.Connect(owners);
        _core.Peers.Connect(peers);
        OnOwnershipChanged();
    }

    /// <summary>The string consistent hashing places: the storage namespace of the key.</summary>
    public static string PlacementKey(in BlobKey key) => Ownership.CacheOwnership.PlacementKey(key);

    /// <summary>The key's owner in this instance's current view, or null when it is this instance (always, without peers).</summary>
    public Peer? OwnerOf(in BlobKey key) => _core.Ownership.OwnerOf(key);

    /// <summary>The owner of a blob of <paramref name="store"/>'s account, or null when it is this instance.</summary>
    public Peer? OwnerOf(IBlobStore store, string container, string blob) => OwnerOf(new BlobKey(store.Endpoint.AbsoluteUri, container, blob));

    /// <summary>
    /// After a membership change: distrusts every copy, moves the owner lookups to the new view,
    /// re-marks which cached objects this instance owns (eviction prefers the others), and closes
    /// connections to instances that left the view.
    /// </summary>
    public void OnOwnershipChanged()
    {
        _core.Ownership.OnChanged();
        _core.Peers.RetainCurrentView();
    }

    /// <summary>Peer calls that failed, after which the read or write went to storage instead.</summary>
    public long PeerFallbacks => _core.Peers.Fallbacks;

    /// <summary>The length and version of a cached object, without counting an access (null if not cached).</summary>
    public (long Length, string Version)? PeekForPeer(in BlobKey key) => _serving.Peek(key);

    /// <summary>Looks up (and if asked, validates or fetches) an object for a peer's Get.</summary>
    public Task<PeerObject> OpenForPeerAsync(IBlobStore store, BlobKey key, string ifVersion, bool fetch, bool validate, CancellationToken ct) =>
        _serving.OpenAsync(store, key, ifVersion, fetch, validate, ct);

    /// <summary>
    /// Room for an object a peer is writing through to this owner: an extent, or false when the cache
    /// has no room (the caller then takes the bytes into a <see cref="CreateSpillFile"/> and <see cref="AcceptPeerFileAsync"/>).
    /// </summary>
    public bool TryAllocateForPeer(long length, out Extent extent) => _core.TryAllocate(length, out extent);

    /// <summary>Frees an extent from <see cref="TryAllocateForPeer"/> whose transfer failed.</summary>
    public void ReleaseForPeer(in Extent extent) => _arena.Free(extent);

    /// <summary>
    /// Takes a peer's write as the owner: caches it, uploads it (before answering, or in the background)
    /// and returns the version now held. The cache owns the extent afterwards.
    /// </summary>
    /// <remarks>A <paramref name="condition"/> is decided here (see <see cref="WriteAsync"/>); a failed one throws
    /// <see cref="BlobConditionFailedException"/> and the extent is freed.</remarks>
    public Task<string> AcceptPeerPutAsync(IBlobStore store, BlobKey key, Extent extent, bool uploadSync, CancellationToken ct,
        BlobWriteCondition condition = default) =>
        _serving.AcceptPutAsync(store, key, extent, uploadSync, ct, condition);

    /// <summary>
    /// A file of the segment directory for a peer's write that does not fit in the cache (written,
    /// rewound and uploaded through the one stream, never reopened by name); deleted when disposed.
    /// </summary>
    public TemporaryFile CreateSpillFile() => _core.TemporaryFiles.Create();

    /// <summary>A peer's write that did not fit in the cache: uploaded from <paramref name="content"/> (its current position on).</summary>
    public Task<string> AcceptPeerFileAsync(IBlobStore store, BlobKey key, Stream content, long length, CancellationToken ct,
        BlobWriteCondition condition = default) =>
        _serving.AcceptFileAsync(store, key, content, length, ct, condition);

    /// <summary>
    /// A peer says storage or the owner has a newer version: drop ours unless it is
    /// <paramref name="keepVersion"/>, and distrust every other copy (a fetch or check of this key
    /// that read storage before the write landed may still be about to cache the old version).
    /// </summary>
    public bool InvalidateFromPeer(in BlobKey key, string keepVersion) => _serving.Invalidate(key, keepVersion);

    /// <summary>This cachelet's numbers for a peer's Stats call.</summary>
    public CacheStats PeerStats() => _serving.Stats();

    // ---- bandwidth scaling (Faa$T §4) -----------------------------------------------------------

    /// <summary>
    /// Turns bandwidth scaling on: misses of large objects are fetched in parallel ranges by the
    /// instances of the view (peers must be connected, <see cref="ConnectPeers"/>); with a
    /// <paramref name="scaler"/>, more instances are asked for when the plan wants more than there are.
    /// </summary>
    public void ConnectBandwidthScaling(IBandwidthPlanner planner, IInstanceScaler? scaler, BandwidthScalingOptions? options = null) =>
        _bandwidth.Connect(planner, scaler, options);

    /// <summary>Misses fetched in parallel ranges by several instances.</summary>
    public long ParallelFetches => _bandwidth.ParallelFetches;

    /// <summary>Ranges of parallel fetches that other instances downloaded and sent here.</summary>
    public long ParallelRanges => _bandwidth.ParallelRanges;

    /// <summary>Ranges another instance failed to send, fetched from storage by this instance instead.</summary>
    public long ParallelRangeFallbacks => _bandwidth.ParallelRangeFallbacks;

    /// <summary>Ranges this instance downloaded from storage for another instance's parallel fetch.</summary>
    public long StorageRangesServed => _bandwidth.StorageRangesServed;

    /// <summary>The peer transport served one range_from_storage Get.</summary>
    public void CountStorageRangeServed() => _bandwidth.CountStorageRangeServed();

    // ---- lifetime -------------------------------------------------------------------------------

    /// <summary>Flushes pending write-behind uploads (bounded wait), then removes the segments.</summary>
    public async ValueTask DisposeAsync()
    {
        _writeBehind.Complete();
        await _stopping.CancelAsync();
        await _writeBehind.DrainAsync(TimeSpan.FromSeconds(30));
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
        _index.Snapshot(key => _core.Ownership.Directory is not { } owners ? null : OwnerOf(key)?.Id ?? owners.SelfId);

    /// <summary>The last objects that left the cache, newest first, with size, ETag and why (see <see cref="CacheIndex.RecentlyEvicted"/>).</summary>
    public IReadOnlyList<EvictedObject> RecentlyEvicted() => _index.RecentlyEvicted();

    /// <summary>What the demotion queue between eviction and the eviction sinks did and holds.</summary>
    public Demotion.DemotionStats Demotions => _index.Demotions;
}
