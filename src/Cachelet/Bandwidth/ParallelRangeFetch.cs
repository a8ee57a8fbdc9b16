using System.Diagnostics;
using FaaST.Cachelet.Index;
using FaaST.Cachelet.Peers;
using FaaST.Cachelet.Sources;
using FaaST.Storage;

namespace FaaST.Cachelet.Bandwidth;

/// <summary>
/// Bandwidth scaling's part in the cachelet (Faa$T §4, §6.5 / Fig. 12): one instance's link to blob
/// storage limits how fast it can fetch a large object, so a miss of an object of at least
/// <see cref="BandwidthScalingOptions.MinObjectSize"/> is split over N instances — N from the T_DR rule
/// (<see cref="IBandwidthPlanner"/>), more instances asked for at once if N exceeds the view
/// (<see cref="IInstanceScaler"/>) — each downloading S/N bytes from storage (range_from_storage Gets)
/// and streaming them here, straight into the object's extent at their offsets. Every range is
/// downloaded If-Match on the ETag of the first response, so the object is of one version or not
/// assembled at all. The transfers it observes (and the owner link's remote hits) feed the planner.
/// </summary>
internal sealed class ParallelRangeFetch(CacheCore core)
{
    /// <summary>The smallest range a parallel fetch asks for (1 MiB).</summary>
    internal const long MinRange = 1 << 20;

    private readonly CacheCore _core = core;
    private Settings? _settings;
    private long _parallelFetches;
    private long _parallelRanges;
    private long _parallelRangeFallbacks;
    private long _storageRangesServed;

    public sealed record Settings(IBandwidthPlanner Planner, IInstanceScaler? Scaler, BandwidthScalingOptions Options);

    /// <summary>What it plans with, once turned on (see <see cref="BlobCache.ConnectBandwidthScaling"/>); null while off.</summary>
    public Settings? Current => _settings;

    public void Connect(IBandwidthPlanner planner, IInstanceScaler? scaler, BandwidthScalingOptions? options)
    {
        ArgumentNullException.ThrowIfNull(planner);
        options ??= new BandwidthScalingOptions();
        options.Validate();
        _settings = new Settings(planner, scaler, options);
    }

    /// <summary>The counts a peer's Stats call returns.</summary>
    public ParallelFetchStats Stats => new(ParallelFetches, ParallelRanges, ParallelRangeFallbacks, StorageRangesServed);

    public long ParallelFetches => Interlocked.Read(ref _parallelFetches);
    public long ParallelRanges => Interlocked.Read(ref _parallelRanges);
    public long ParallelRangeFallbacks => Interlocked.Read(ref _parallelRangeFallbacks);
    public long StorageRangesServed => Interlocked.Read(ref _storageRangesServed);

    public void CountStorageRangeServed() => Interlocked.Increment(ref _storageRangesServed);

    /// <summary>A remote hit moved <paramref name="bytes"/> from an owner's memory: BW_Inst for the planner.</summary>
    public void ObserveInstanceTransfer(long bytes, TimeSpan elapsed)
    {
        if (_settings is { } bandwidth && bytes >= bandwidth.Options.ObserveMinBytes)
            bandwidth.Planner.ObserveInstanceTransfer(bytes, elapsed);
    }

    /// <summary>
    /// A large miss in N ranges (see the class remarks). Any range another instance fails to send is
    /// fetched from storage here; a blob that changed between ranges (a failed If-Match anywhere) is
    /// fetched again whole, never assembled from two versions.
    /// </summary>
    public async Task<SourceResult> FetchInRangesAsync(Settings bandwidth, SourceRequest request, BlobProperties properties,
        IFetchTarget target, CancellationToken ct)
    {
        var key = request.Key;
        var size = properties.Length;
        var started = Stopwatch.GetTimestamp();
        var owners = _core.Ownership;
        var running = 1 + owners.Others.Count;
        var planned = Math.Clamp(bandwidth.Planner.PlanInstances(size, running), 1, bandwidth.Options.MaxInstances);
        if (planned > running && bandwidth.Scaler is { } scaler)
            await ScaleOutAsync(bandwidth, scaler, key, size, planned, running, ct);
        // Never ranges below MinRange: their requests would cost more than they move (and a plan larger
        // than the object's size in bytes would leave empty ranges).
        var helpers = owners.Others.Take((int)Math.Min(planned, Math.Max(1, size / MinRange)) - 1).ToArray();
        if (helpers.Length == 0 || target is not Reads.FetchTarget fetchTarget || !fetchTarget.TryOpenExtent(size, out var extent))
        {
            // One instance after all, or no room to cache it: one download of the version seen, as any miss.
            return await DownloadWholeAsync(bandwidth, request, target, properties.ETag, ct) is { } whole ? whole
                : await StorageSource.Instance.FetchAsync(request, target, ct);
        }
        var n = helpers.Length + 1;
        var share = (size + n - 1) / n;
        var ranges = new Task<RangeOutcome>[n];
        using var failed = CancellationTokenSource.CreateLinkedTokenSource(ct);
        for (var i = 0; i < n; i++)
        {
            var offset = i * share;
            var length = Math.Min(share, size - offset);
            ranges[i] = FetchRangeAsync(bandwidth, request.Store, key, properties.ETag, i == 0 ? null : helpers[i - 1],
                new ExtentRangeStream(extent, offset, length), offset, length, failed, ct);
        }
        // Every range must have stopped writing into the extent before it is kept or freed.
        var outcomes = await Task.WhenAll(ranges);
        if (outcomes.Contains(RangeOutcome.Gone))
            return SourceResult.NotFound;
        if (outcomes.Contains(RangeOutcome.Changed))
        {
            Log.ParallelFetchVersionChanged(_core.Logger, key.Container, key.Blob, properties.ETag);
            // Open discards the extent the ranges wrote; the whole object is fetched again, one version.
            return await StorageSource.Instance.FetchAsync(request, target, ct);
        }
        ct.ThrowIfCancellationRequested();
        var fallbacks = outcomes.Count(o => o == RangeOutcome.FellBack);
        Interlocked.Increment(ref _parallelFetches);
        Interlocked.Add(ref _parallelRanges, n - 1 - fallbacks);
        var elapsed = Stopwatch.GetElapsedTime(started);
        Log.ParallelFetch(_core.Logger, key.Container, key.Blob, size, n, elapsed.TotalMilliseconds, fallbacks);
        return new SourceResult(SourceOutcome.Found, properties.ETag, size, ReadPath.LocalMiss, Validated: true);
    }

    private enum RangeOutcome
    {
        Done,
        /// <summary>Another instance failed; this one fetched the range from storage.</summary>
        FellBack,
        /// <summary>Storage no longer holds the version (If-Match failed).</summary>
        Changed,
        /// <summary>The blob was deleted.</summary>
        Gone,
        /// <summary>Stopped because another range failed.</summary>
        Stopped,
    }

    /// <summary>
    /// One range: from storage here (<paramref name="helper"/> null) or from the helper (range_from_storage),
    /// falling back to storage here when the helper fails. A changed or deleted blob, or the fetch's end,
    /// cancels the other ranges through <paramref name="failed"/>.
    /// </summary>
    private async Task<RangeOutcome> FetchRangeAsync(Settings bandwidth, IBlobStore store, BlobKey key, string version, Peer? helper,
        ExtentRangeStream into, long offset, long length, CancellationTokenSource failed, CancellationToken outer)
    {
        await Task.Yield();
        var ct = failed.Token;
        var fellBack = false;
        try
        {
            if (helper is not null)
            {
                try
                {
                    var answer = await _core.Peers.Client!.GetRangeFromStorageAsync(helper, key, version, offset, length, into, ct);
                    if (answer.Status == PeerStatus.NotFound)
                    {
                        await failed.CancelAsync();
                        return RangeOutcome.Gone;
                    }
                    if (answer.Status == PeerStatus.Ok && into.Written == length)
                        return RangeOutcome.Done;
                    throw new PeerException($"{helper.Address} answered {answer.Status} with {into.Written} of {length} bytes");
                }
                catch (PeerException e) when (!ct.IsCancellationRequested)
                {
                    Interlocked.Increment(ref _parallelRangeFallbacks);
                    Log.ParallelRangeFellBack(_core.Logger, key.Container, key.Blob, offset, length, helper.Id, e.Message);
                    into.Restart();
                    fellBack = true;
                }
            }
            var started = Stopwatch.GetTimestamp();
            var got = await store.DownloadToAsync(key.Container, key.Blob, into, new BlobRange(offset, length), ifMatch: version, ct: ct);
            if (got is null)
            {
                await failed.CancelAsync();
                return RangeOutcome.Gone;
            }
            if (into.Written != length)
                throw new IOException($"storage sent {into.Written} of the {length} bytes of {key.Container}/{key.Blob} range {offset}");
            if (length >= bandwidth.Options.ObserveMinBytes)
                bandwidth.Planner.ObserveStorageTransfer(length, Stopwatch.GetElapsedTime(started));
            return fellBack ? RangeOutcome.FellBack : RangeOutcome.Done;
        }
        catch (BlobConditionFailedException)
        {
            await failed.CancelAsync();
            return RangeOutcome.Changed;
        }
        catch (Exception) when (ct.IsCancellationRequested && !outer.IsCancellationRequested)
        {
            // Another range failed first and said why; however this one's transfer ended when it was
            // stopped (a cancellation, or a connection cut as a socket error), it has stopped writing.
            return RangeOutcome.Stopped;
        }
        catch
        {
            await failed.CancelAsync();
            throw;
        }
    }

    /// <summary>The object in one download, If-Match on the version first seen; null if that version is gone (then the caller fetches afresh).</summary>
    private static async Task<SourceResult?> DownloadWholeAsync(Settings bandwidth, SourceRequest request, IFetchTarget target, string version, CancellationToken ct)
    {
        var key = request.Key;
        var started = Stopwatch.GetTimestamp();
        BlobProperties? properties;
        try
        {
            properties = await request.Store.DownloadToAsync(key.Container, key.Blob, props => target.Open(props.Length), ifMatch: version, ct: ct);
        }
        catch (BlobConditionFailedException)
        {
            return null;
        }
        if (properties is null)
            return SourceResult.NotFound;
        if (properties.Length >= bandwidth.Options.ObserveMinBytes)
            bandwidth.Planner.ObserveStorageTransfer(properties.Length, Stopwatch.GetElapsedTime(started));
        return new SourceResult(SourceOutcome.Found, properties.ETag, properties.Length, ReadPath.LocalMiss, Validated: true);
    }

    /// <summary>
    /// Asks for <paramref name="planned"/> instances at once and waits (at most the option's bound) until
    /// the view holds as many as were granted; whatever joined by then is what the fetch uses.
    /// </summary>
    private async Task ScaleOutAsync(Settings bandwidth, IInstanceScaler scaler, BlobKey key, long size, int planned, int running, CancellationToken ct)
    {
        var started = Stopwatch.GetTimestamp();
        int granted;
        try
        {
            granted = await scaler.RequestInstancesAsync(planned, $"bandwidth: {key.Container}/{key.Blob} ({size} bytes) in {planned} ranges", ct);
        }
        catch (Exception e) when (e is not OperationCanceledException || !ct.IsCancellationRequested)
        {
            Log.ScaleOutFailed(_core.Logger, key.Container, key.Blob, planned, e.Message);
            return;
        }
        var wanted = Math.Min(planned, granted);
        var deadline = started + (long)(bandwidth.Options.InstanceWait.TotalSeconds * Stopwatch.Frequency);
        while (1 + _core.Ownership.Others.Count < wanted && Stopwatch.GetTimestamp() < deadline)
            await Task.Delay(TimeSpan.FromMilliseconds(20), ct);
        var have = 1 + _core.Ownership.Others.Count;
        if (have > running)
            bandwidth.Planner.ObserveLoad(Stopwatch.GetElapsedTime(started));
        Log.ScaledOut(_core.Logger, key.Container, key.Blob, planned, granted, have, Stopwatch.GetElapsedTime(started).TotalMilliseconds);
    }
}
