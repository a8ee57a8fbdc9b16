using System.Collections.Concurrent;
using System.Text.Json;
using System.Text.Json.Serialization;
using FaaST.Cachelet;
using FaaST.Cachelet.Index;
using FaaST.Hosting;
using FaaST.Prewarm.History;
using FaaST.Prewarm.Records;
using FaaST.Prewarm.Selection;
using FaaST.Runtime.Hosting;
using FaaST.Runtime.Hosting.Components;
using FaaST.Runtime.Telemetry;
using Microsoft.Extensions.Options;

namespace FaaST.Runtime.Prewarm;

/// <summary>
/// The instance's side of the Load Daemon (Faa$T §3.3): at unload it records what its cache saw (one
/// <see cref="UnloadRecord"/> in the app's storage, off the request path and bounded in time); at start, after the
/// cache and peers, it reads the app's history, selects (<see cref="ObjectSelector"/>) and loads, in the background,
/// the selected objects this instance owns — only while no invocation runs, at background storage priority, each
/// at its current version (a changed object is loaded as it is now, a deleted one skipped). Off with
/// <c>prewarm.enabled: false</c> or without the cache.
/// </summary>
internal sealed class PrewarmComponent : ILifecycleParticipant, IDisposable
{
    /// <summary>How long the unload record may take: an unload waits for it, and a lost record only costs a colder start.</summary>
    private static readonly TimeSpan RecordTimeout = TimeSpan.FromSeconds(5);

    /// <summary>How often a paused load looks again for running invocations.</summary>
    private static readonly TimeSpan PausePoll = TimeSpan.FromMilliseconds(10);

    private readonly FunctionApp _app;
    private readonly CacheHostOptions _options;
    private readonly CacheComponent _cache;
    private readonly StorageComponent _storage;
    private readonly ServingComponent _web;
    private readonly IHostMembership _membership;
    private readonly ILogger _logger;
    private readonly TimeProvider _time = TimeProvider.System;
    private readonly ConcurrentDictionary<BlobKey, long> _prewarmed = new();
    private readonly CancellationTokenSource _stopping = new();
    private readonly PrewarmMetrics _metrics;
    private Task _loading = Task.CompletedTask;
    private HostMetrics? _hostMetrics;
    private long _pauses;
    private int _done;

    public PrewarmComponent(FunctionApp app, IOptions<CacheHostOptions> options, CacheComponent cache, StorageComponent storage,
        ServingComponent web, IHostMembership membership, ILoggerFactory loggers)
    {
        _app = app;
        _options = options.Value;
        _cache = cache;
        _storage = storage;
        _web = web;
        _membership = membership;
        _logger = loggers.CreateLogger("FaaST.Prewarm");
        _metrics = new PrewarmMetrics(app.Name, Usage);
        // Behind the admin guard like /admin/cache (the master key when keys are checked).
        web.MapEndpoints(routes => routes.MapGet("/admin/prewarm", () => Results.Json(Status(), PrewarmJsonContext.Default.PrewarmStatus)));
    }

    private bool Enabled => _options.Policy.Enabled && _options.Policy.Prewarm.Enabled;

    public void Participate(IHostLifecycle lifecycle)
    {
        // After the cache (3000) and peers (7000): ownership is known; stopped before either.
        lifecycle.Subscribe(nameof(PrewarmComponent), ServiceLifecycleStage.Peers + 100, new LifecycleObserver(StartAsync, StopAsync));
        lifecycle.OnState((state, ct) => state == LifecycleState.Unloading ? RecordAsync(ct) : Task.CompletedTask);
    }

    /// <summary>What prewarm did so far, as /admin/prewarm shows it.</summary>
    public PrewarmStatus Status()
    {
        var (hits, wasted) = Usage();
        return new PrewarmStatus(Enabled, Volatile.Read(ref _done) == 1, _metrics.Objects, _metrics.Bytes, _metrics.Skipped, hits, wasted,
            Interlocked.Read(ref _pauses));
    }

    private Task StartAsync(CancellationToken ct)
    {
        if (Enabled && _cache.Cache is { } cache)
            _loading = Task.Run(() => LoadAsync(cache, _stopping.Token), CancellationToken.None);
        else
            Volatile.Write(ref _done, 1);
        return Task.CompletedTask; // the host serves while the load runs
    }

    private async Task StopAsync(CancellationToken ct)
    {
        await _stopping.CancelAsync();
        try
        {
            await _loading.WaitAsync(ct);
        }
        catch (OperationCanceledException)
        {
            // stopped mid-load: what was loaded stays cached
        }
    }

    private async Task LoadAsync(BlobCache cache, CancellationToken ct)
    {
        var prewarm = _options.Policy.Prewarm;
        try
        {
            IReadOnlyList<UnloadRecord> history;
            try
            {
                history = await History().ReadAsync(_app.Name, prewarm.HistoryMaxAge, prewarm.HistoryMaxRecords, ct);
            }
            catch (Exception e) when (e is not OperationCanceledException)
            {
                Log.HistoryFailed(_logger, e, e.Message);
                return;
            }
            var policy = _options.Policy;
            // Never more than the cache holds: what would not fit would only evict other pre-warmed objects.
            var budget = Math.Min(prewarm.MaxBytes ?? long.MaxValue, cache.CapacityBytes);
            var window = ObjectSelector.WindowFor(history, prewarm.HistoryMaxAge);
            var selected = ObjectSelector.Select(history, _time.GetUtcNow(), window, new SelectionRules(prewarm.HitRateThreshold, budget,
                (container, blob) => prewarm.Exclude.Matches(container, blob) || policy.DoNotCache(container, blob)));
            Log.Selected(_logger, selected.Count, selected.Sum(s => s.Size), history.Count, window);
            foreach (var s in selected)
            {
                await WhileInvocationsRunAsync(ct);
                var loaded = await LoadOneAsync(cache, s, budget, ct);
                if (loaded > 0)
                    budget -= loaded;
                else
                    _metrics.Skip();
            }
            Log.Done(_logger, _metrics.Objects, _metrics.Bytes, _metrics.Skipped, Interlocked.Read(ref _pauses));
        }
        finally
        {
            Volatile.Write(ref _done, 1);
        }
    }

    /// <summary>Loads one selected object if this instance owns it and it still exists; its bytes, or 0 when not loaded.</summary>
    private async Task<long> LoadOneAsync(BlobCache cache, SelectedObject s, long budget, CancellationToken ct)
    {
        if (_storage.Accounts.ForEndpoint(s.Account) is not { } store)
            return Skipped(s, "its storage account is not one this app opened");
        if (cache.OwnerOf(store, s.Container, s.Blob) is not null)
            return Skipped(s, "another instance owns it");
        // The version check: the record's ETag may be old. A changed object is loaded as it is now (if it still fits
        // the budget), a deleted one skipped; the fetch itself reads the current version, so nothing stale is served.
        var now = await store.GetPropertiesAsync(s.Container, s.Blob, ct);
        if (now is null)
            return Skipped(s, "deleted since it was recorded");
        if (now.Length > budget)
            return Skipped(s, $"it is now {now.Length} bytes, more than the {budget} left of the prewarm budget");
        var outcome = await cache.PrefetchAsync(store, s.Container, s.Blob, ReadPriority.Background, ct);
        if (outcome != PrefetchOutcome.Loaded)
            return Skipped(s, outcome.ToString());
        _prewarmed[new BlobKey(store.Endpoint.AbsoluteUri, s.Container, s.Blob)] = now.Length;
        _metrics.Loaded(now.Length);
        return now.Length;
    }

    private long Skipped(SelectedObject s, string reason)
    {
        Log.ObjectSkipped(_logger, s.Container, s.Blob, reason);
        return 0;
    }

    /// <summary>
    /// Prewarm runs only while the app is not executing (issue 21): before each object it waits until no invocation
    /// is in flight. A fetch already under way keeps going at background priority, which yields to on-demand reads.
    /// </summary>
    private async Task WhileInvocationsRunAsync(CancellationToken ct)
    {
        var load = (_hostMetrics ??= _web.Services.GetRequiredService<HostMetrics>()).Load;
        if (load.InFlight == 0)
            return;
        Interlocked.Increment(ref _pauses);
        while (load.InFlight > 0)
            await Task.Delay(PausePoll, _time, ct);
    }

    /// <summary>Pre-warmed objects read since (hits), and the bytes of those not read (wasted, once unloaded). An
    /// object evicted before unload is not in the snapshot and counts as not read.</summary>
    private (long Hits, long WastedBytes) Usage()
    {
        if (_prewarmed.IsEmpty || _cache.Cache is not { } cache)
            return (0, 0);
        var reads = new Dictionary<BlobKey, long>();
        foreach (var e in cache.Snapshot())
            reads[e.Key] = e.Accesses.Reads;
        long hits = 0, wasted = 0;
        foreach (var (key, length) in _prewarmed)
        {
            if (reads.GetValueOrDefault(key) > 0)
                hits++;
            else
                wasted += length;
        }
        return (hits, wasted);
    }

    /// <summary>At unload: one record of everything cached, with its accesses (Faa$T §3.3), then the history trimmed.</summary>
    private async Task RecordAsync(CancellationToken ct)
    {
        if (!Enabled || _cache.Cache is not { } cache)
            return;
        var prewarm = _options.Policy.Prewarm;
        using var bounded = CancellationTokenSource.CreateLinkedTokenSource(ct);
        bounded.CancelAfter(RecordTimeout);
        try
        {
            var snapshot = cache.Snapshot();
            if (snapshot.Count == 0)
                return; // nothing was cached: no record (an empty one would only push an older, useful one out)
            var objects = new List<ObjectRecord>(snapshot.Count);
            foreach (var e in snapshot)
            {
                var a = e.Accesses;
                objects.Add(new ObjectRecord(e.Key.Account, e.Key.Container, e.Key.Blob, e.Length, e.ETag,
                    a.LocalHits, a.RemoteHits, a.LocalMisses, a.RemoteMisses, a.Writes, e.InterArrival.Mean));
            }
            var (hits, wasted) = Usage();
            var record = new UnloadRecord(_app.Name, InstanceName(), _time.GetUtcNow(), objects);
            var history = History();
            await history.WriteAsync(record, bounded.Token);
            Log.Recorded(_logger, objects.Count, hits, wasted);
            await history.TrimAsync(_app.Name, prewarm.HistoryMaxAge, prewarm.HistoryMaxRecords, bounded.Token);
        }
        catch (Exception e) when (e is not OperationCanceledException || bounded.IsCancellationRequested)
        {
            Log.RecordFailed(_logger, e, e is OperationCanceledException ? $"took more than {RecordTimeout}" : e.Message);
        }
    }

    private PrewarmHistory History() => new(_storage.Accounts.Get("AzureWebJobsStorage"), _logger);

    /// <summary>The membership id when there are peers, else host and process: unique among the app's instances.</summary>
    private string InstanceName() =>
        (_membership.Self?.Id ?? $"{Environment.MachineName}-{Environment.ProcessId}").Replace('/', '-');

    public void Dispose()
    {
        _stopping.Dispose();
        _metrics.Dispose();
    }
}

/// <summary>/admin/prewarm: what this instance pre-warmed at start and how it was used.</summary>
internal sealed record PrewarmStatus(bool Enabled, bool Done, long Objects, long Bytes, long Skipped, long Hits, long WastedBytes, long Pauses);

[JsonSourceGenerationOptions(JsonSerializerDefaults.Web)]
[JsonSerializable(typeof(PrewarmStatus))]
internal sealed partial class PrewarmJsonContext : JsonSerializerContext;
