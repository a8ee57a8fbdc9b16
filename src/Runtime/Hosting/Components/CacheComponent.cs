using System.Globalization;
using FaaST.Cachelet;
using FaaST.Cachelet.Daemon;
using FaaST.Policy;
using FaaST.Cachelet.Sources;
using FaaST.Hosting;
using FaaST.Runtime.Bindings;
using Microsoft.Extensions.Options;

namespace FaaST.Runtime.Hosting.Components;

/// <summary>
/// The cachelet and its memory daemon (stage <see cref="ServiceLifecycleStage.Cache"/>), and the blob
/// bindings the invocations use: through the cache when the policy enables it, else straight to
/// storage. Stopped after everything that reads through it and before storage, so write-behind
/// uploads are flushed while storage is still up. The cache's extra read sources (tiers, asked after the key's
/// owner and before storage) and its eviction sinks are whatever the registry holds as <see cref="IBlobSource"/>
/// and <see cref="IEvictionSink"/>: a flash tier registers one of each and edits nothing here.
/// </summary>
internal sealed class CacheComponent(FunctionApp app, IOptions<CacheHostOptions> cacheOptions, IOptions<WorkerHostOptions> workers,
    StorageComponent storage, IEnumerable<IBlobSource> tiers, IEnumerable<IEvictionSink> evictionSinks, ILoggerFactory loggers)
    : ILifecycleParticipant, IHostCache
{
    private readonly CacheHostOptions _options = cacheOptions.Value;
    private readonly WorkerIdentity? _owner = workers.Value.Identity;
    private readonly ILogger _logger = loggers.CreateLogger("FaaST.Host");
    private MemoryDaemon? _memoryDaemon;
    private IBlobBindingProvider? _bindings;
    private Func<IEnumerable<int>> _workerProcessIds = () => [];

    /// <summary>The cachelet, once started, when the policy enables it.</summary>
    public BlobCache? Cache { get; private set; }

    /// <summary>The cachelet, for what runs only with it (peers, their endpoints): from the cache stage on, when the policy enables it.</summary>
    public BlobCache Started => Cache ?? throw new InvalidOperationException(_options.Policy.Enabled
        ? "the cache stage has not started" : "the cache is off (faast.json's cache.enabled, or --no-cache)");

    /// <summary>The blob bindings of invocations and triggers, once started.</summary>
    public IBlobBindingProvider Bindings => _bindings ?? throw new InvalidOperationException("the cache stage has not started");

    /// <summary>What the workers are offered at init: the shared-memory capabilities when the cache is on.</summary>
    public IReadOnlyDictionary<string, string> WorkerCapabilities { get; private set; } = new Dictionary<string, string>();

    /// <summary>
    /// Tells the cache about the workers: the memory daemon adds up their memory, and a segment the
    /// cache deletes is released from their mappings.
    /// </summary>
    public void AttachWorkers(Func<IEnumerable<int>> processIds, Action<string> releaseSegment)
    {
        _workerProcessIds = processIds;
        if (Cache is { } cache)
            cache.SegmentDeleted += releaseSegment;
    }

    public void Participate(IHostLifecycle lifecycle) =>
        lifecycle.Subscribe(nameof(CacheComponent), ServiceLifecycleStage.Cache, new LifecycleObserver(Start, StopAsync));

    private Task Start(CancellationToken ct)
    {
        var policy = _options.Policy;
        if (!policy.Enabled)
        {
            _bindings = new StorageBlobBindingProvider(storage.Accounts);
            return Task.CompletedTask;
        }
        var cache = Cache = new BlobCache(app.Name, policy, loggers.CreateLogger("FaaST.Cachelet"), owner: _owner?.Owner,
            tiers: tiers.ToArray(), evictionSinks: evictionSinks.ToArray());
        _bindings = new CachingBlobBindingProvider(storage.Accounts, cache);
        WorkerCapabilities = new Dictionary<string, string>
        {
            [Workers.WorkerCapabilities.SharedMemory] = "1",
            [Workers.WorkerCapabilities.SharedMemoryDirectory] = cache.Directory,
            [Workers.WorkerCapabilities.SharedMemoryMinBytes] = policy.InlineThreshold.ToString(CultureInfo.InvariantCulture),
            [Workers.WorkerCapabilities.SharedMemoryRelease] = "1",
            [Workers.WorkerCapabilities.SharedMemoryStreaming] = "1",
        };
        if (_options.Warning is not null)
            Log.CachePolicyWarning(_logger, Path.Combine(app.Directory, CachePolicyFile.FileName), _options.Warning);
        Log.CacheletOn(_logger, policy.Consistency, policy.MaxCachedBytes, cache.Directory, policy.MemoryLimit,
            policy.MemoryLimitSource == MemoryLimitSource.Cgroup ? _options.Cgroup!.File : policy.MemoryLimitSource.ToString());
        // The workers' processes are read through the delegate, so the daemon counts them once they exist.
        if (!policy.MemoryDaemon)
        {
            Log.MemoryDaemonOff(_logger, Path.Combine(app.Directory, CachePolicyFile.FileName));
            return Task.CompletedTask;
        }
        _memoryDaemon = new MemoryDaemon(() => _workerProcessIds().Append(Environment.ProcessId),
            policy.MemoryLimit, policy.Headroom, () => cache.ReservedBytes, cache.Evict);
        _memoryDaemon.Start(policy.MemoryDaemonInterval);
        return Task.CompletedTask;
    }


    private async Task StopAsync(CancellationToken ct)
    {
        if (_memoryDaemon is not null)
            await _memoryDaemon.DisposeAsync();
        // Flushes write-behind uploads (storage is still up), then drops the segments.
        if (Cache is not null)
            await Cache.DisposeAsync();
    }
}
