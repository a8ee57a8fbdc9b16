using System.Collections.Concurrent;
using System.Threading.Channels;
using FaaST.Protos.Worker;
using FaaST.Runtime.Bindings;
using FaaST.Runtime.Invocation;
using FaaST.Storage;
using Google.Protobuf;

namespace FaaST.Runtime.Triggers;

/// <summary>
/// Fires blobTrigger functions for new or changed blobs, once per blob version across every instance of the app.
/// Blobs this runtime writes through an output binding are offered at once on the writing instance (no polling
/// delay in a pipeline); everything else is found by scanning the watched containers every pollingInterval.
/// Every instance scans; what keeps the work from repeating is the receipt shared in storage
/// (<see cref="BlobReceipts"/>): a blob version runs only under the lease on its receipt, and one whose receipt is
/// complete, or whose lease another instance holds, is skipped without invoking. Receipts known complete are
/// remembered, so a scan costs one listing plus, per blob version this instance has not seen finish, one receipt read.
/// </summary>
internal sealed class BlobTriggerListener : IBlobWriteObserver, IAsyncDisposable
{
    /// <summary>The setting whose account holds the receipts, as in Azure Functions.</summary>
    private const string HostStorage = "AzureWebJobsStorage";

    private readonly FunctionApp _app;
    private readonly FunctionInvoker _invoker;
    private readonly StorageAccounts _accounts;
    private readonly IBlobBindingProvider _blobs;
    private readonly ILogger _logger;

    /// <summary>Per-blob receipt warnings pass through it: storage that refuses one receipt refuses them all.</summary>
    private readonly LogGate _receiptLog = LogGate.PerSecond();
    private readonly BlobReceipts _receipts;
    private readonly Watch[] _watches;
    private readonly Channel<Work> _queue = Channel.CreateUnbounded<Work>();

    /// <summary>Blob versions whose receipt is final (complete or poison): never offered again.</summary>
    private readonly ConcurrentDictionary<string, byte> _done = new(StringComparer.Ordinal);

    /// <summary>Blob versions queued or running here.</summary>
    private readonly ConcurrentDictionary<string, byte> _pending = new(StringComparer.Ordinal);

    /// <summary>Blob versions another instance holds the lease of, with the tick (ms) its lease could have lapsed by:
    /// scans skip them until then instead of asking storage every interval.</summary>
    private readonly ConcurrentDictionary<string, long> _busyUntil = new(StringComparer.Ordinal);

    private readonly CancellationTokenSource _stopping = new();
    private readonly List<Task> _loops = [];

    private sealed record Watch(FunctionDefinition Function, BindingMetadata Trigger, string Container, string Prefix, string? Account);

    /// <param name="Fresh">Written by this runtime just now: its receipt is created without reading it first.</param>
    private sealed record Work(Watch Watch, string BlobName, string ETag, long Length, ReadOnlyMemory<byte>? Content, bool Fresh);

    public BlobTriggerListener(FunctionApp app, FunctionInvoker invoker, StorageAccounts accounts,
        IBlobBindingProvider blobs, ILogger logger)
    {
        _app = app;
        _invoker = invoker;
        _accounts = accounts;
        _blobs = blobs;
        _logger = logger;
        // One host id for every instance of the app (the folder's name unless set), so their receipts are the same blobs.
        var hostId = Sanitize(app.Settings["AzureFunctionsWebHost__hostid"] ?? app.Name);
        var lease = TimeSpan.FromSeconds(app.Settings.BlobLeaseSeconds ?? 60);
        _watches = app.Runnable
            .Where(f => f.Trigger is { Type: BindingMetadata.BlobTrigger })
            .Select(f =>
            {
                var t = f.Trigger!;
                var literal = t.Path!.LiteralPrefix;
                var slash = literal.IndexOf('/');
                return new Watch(f, t, literal[..slash], literal[(slash + 1)..], accounts.AccountOf(t.Connection));
            })
            .ToArray();
        // An app without blob triggers never touches receipts (nor opens the host storage for them).
        _receipts = new BlobReceipts(_watches.Length > 0 ? accounts.Get(HostStorage) : null!, hostId, lease, app.Host.BlobMaxDequeueCount, logger);
    }

    public bool HasTriggers => _watches.Length > 0;

    /// <summary>Invocations this instance ran to an end (successful or given up as poison), for tests and metrics.</summary>
    public long Completed => Interlocked.Read(ref _completed);

    private long _completed;

    /// <summary>Starts scanning; receipts load in the background first, so a slow storage never delays start-up.</summary>
    public void Start()
    {
        if (_watches.Length == 0)
            return;
        var stop = _stopping.Token;
        var receipts = Task.WhenAll(_watches.Select(w => LoadReceiptsAsync(w, stop)));
        for (var i = 0; i < _app.Host.BlobMaxDegreeOfParallelism; i++)
            _loops.Add(Task.Run(() => ConsumeAsync(stop), CancellationToken.None));
        foreach (var group in _watches.GroupBy(w => (w.Account, w.Container)))
        {
            var watches = group.ToArray();
            _loops.Add(Task.Run(async () =>
            {
                await receipts;
                await PollAsync(watches, stop);
            }, CancellationToken.None));
        }
    }

    public void OnBlobWritten(BlobAddress blob, BlobProperties properties, BlobOutput output)
    {
        // Inline bytes travel with the trigger; an adopted shared-memory value is read back through the cache.
        // (Cast: a bare null would convert to an empty array, i.e. empty content.)
        var content = output.IsSharedMemory ? (ReadOnlyMemory<byte>?)null : output.Bytes;
        var connection = _accounts.AccountOf(blob.Connection);
        foreach (var watch in _watches)
        {
            if (watch.Container == blob.Container && watch.Account == connection && blob.Name.StartsWith(watch.Prefix, StringComparison.Ordinal))
                Offer(watch, blob.Name, properties.ETag, properties.Length, content, fresh: true);
        }
    }

    private void Offer(Watch watch, string name, string etag, long length, ReadOnlyMemory<byte>? content, bool fresh)
    {
        var key = ReceiptKey(watch, name, etag);
        if (_done.ContainsKey(key) || !watch.Trigger.Path!.TryMatch(watch.Container + "/" + name, new Dictionary<string, string>()))
            return;
        if (_busyUntil.TryGetValue(key, out var until))
        {
            if (Environment.TickCount64 < until)
                return;
            _busyUntil.TryRemove(key, out _);
        }
        if (_pending.TryAdd(key, 0))
            _queue.Writer.TryWrite(new Work(watch, name, etag, length, content, fresh));
    }

    private async Task PollAsync(Watch[] watches, CancellationToken stop)
    {
        var first = watches[0];
        var store = _accounts.Get(first.Trigger.Connection);
        var prefix = CommonPrefix(watches.Select(w => w.Prefix));
        var interval = _app.Host.BlobPollingInterval;
        var failures = 0;
        var scanned = false;
        while (!stop.IsCancellationRequested)
        {
            try
            {
                var listed = 0;
                await foreach (var item in store.ListAsync(first.Container, prefix.Length > 0 ? prefix : null, stop))
                {
                    listed++;
                    foreach (var watch in watches)
                        if (item.Name.StartsWith(watch.Prefix, StringComparison.Ordinal))
                            Offer(watch, item.Name, item.Properties.ETag, item.Properties.Length, null, fresh: false);
                }
                failures = 0;
                if (!scanned)
                {
                    // Once per container, so an operator (and a test) can tell when blobs already present are known.
                    scanned = true;
                    Log.BlobTriggerFirstScan(_logger, first.Container, listed, interval);
                }
            }
            catch (BlobStorageException e) when (e.Status == 404)
            {
                // The container does not exist yet: nothing to trigger on.
                if (!scanned)
                {
                    scanned = true;
                    Log.BlobTriggerFirstScan(_logger, first.Container, 0, interval);
                }
            }
            catch (Exception e) when (e is StorageUnavailableException or BlobStorageException or HttpRequestException)
            {
                if (failures++ == 0)
                    Log.BlobTriggerScanFailed(_logger, e, first.Container, LogText.Escape(e.Message));
            }
            catch (OperationCanceledException) when (stop.IsCancellationRequested)
            {
                break;
            }
            try
            {
                await Task.Delay(interval, stop);
            }
            catch (OperationCanceledException)
            {
                break;
            }
        }
    }

    private async Task ConsumeAsync(CancellationToken stop)
    {
        try
        {
            await foreach (var work in _queue.Reader.ReadAllAsync(stop))
                await RunAsync(work, stop);
        }
        catch (OperationCanceledException) when (stop.IsCancellationRequested)
        {
            // shutting down
        }
    }

    private async Task RunAsync(Work work, CancellationToken stop)
    {
        var watch = work.Watch;
        var function = watch.Function;
        var key = ReceiptKey(watch, work.BlobName, work.ETag);
        var receipt = _receipts.NameOf(function.Name, work.ETag, watch.Container, work.BlobName);
        // Blob names and messages may come from a request (an HTTP function's output path): escaped.
        var blobText = LogText.Escape(work.BlobName);

        ClaimResult claimed;
        try
        {
            claimed = await _receipts.TryClaimAsync(receipt, work.Fresh, stop);
        }
        catch (OperationCanceledException) when (stop.IsCancellationRequested)
        {
            return;
        }
        catch (Exception e) when (e is StorageUnavailableException or BlobStorageException)
        {
            if (Log.Pass(_logger, _receiptLog, LogLevel.Warning, "receipt not stored"))
                Log.BlobReceiptClaimFailed(_logger, e, function.Name, watch.Container, blobText, LogText.Escape(e.Message));
            _pending.TryRemove(key, out _);
            return;
        }
        catch (ArgumentException e)
        {
            // The receipt's name is not a valid blob name (the blob's own name is near the 1,024-character limit):
            // no instance can take it, so it is logged once here and never offered again, instead of at every scan.
            Log.BlobReceiptImpossible(_logger, e, function.Name, watch.Container, blobText, LogText.Escape(e.Message));
            MarkDone(key, ranHere: false);
            return;
        }
        switch (claimed.Outcome)
        {
            case ClaimOutcome.Done:
                MarkDone(key, ranHere: false);
                return;
            case ClaimOutcome.Busy:
                _busyUntil[key] = Environment.TickCount64 + (long)_receipts.LeaseDuration.TotalMilliseconds;
                _pending.TryRemove(key, out _);
                return;
            case ClaimOutcome.Poisoned:
                Log.BlobTriggerPoison(_logger, function.Name, watch.Container, blobText, work.ETag, claimed.Attempts, LogText.Escape(receipt),
                    "every attempt's instance stopped before the function finished");
                MarkDone(key, ranHere: false);
                return;
        }

        var claim = claimed.Claim!;
        await using var invocation = new InvocationContext(function.Name);
        string? error = null;
        try
        {
            var path = watch.Container + "/" + work.BlobName;
            watch.Trigger.Path!.TryMatch(path, invocation.BindingData);
            var address = new BlobAddress(watch.Trigger.Connection, watch.Container, work.BlobName);
            var store = _accounts.Get(watch.Trigger.Connection);
            var uri = store.GetBlobUri(watch.Container, work.BlobName).ToString();
            invocation.BindingData["BlobTrigger"] = path;
            invocation.BindingData["Uri"] = uri;
            BlobData? blob;
            if (work.Content is { } content)
                blob = new BlobData { Name = path, Uri = uri, Length = content.Length, Etag = work.ETag, Bytes = UnsafeByteOperations.UnsafeWrap(content) };
            else
                blob = await _blobs.ReadAsync(address, invocation, stop);
            if (blob is null)
            {
                Log.BlobTriggerBlobDeleted(_logger, watch.Container, blobText, function.Name);
            }
            else
            {
                Log.BlobTriggerExecuting(_logger, function.Name, invocation.InvocationId, watch.Container, blobText, claim.Attempt, _receipts.MaxAttempts);
                await _invoker.InvokeAsync(function, invocation, new TypedData { Blob = blob }, stop);
                Log.BlobTriggerExecuted(_logger, function.Name, invocation.InvocationId, watch.Container, blobText);
            }
        }
        catch (OperationCanceledException) when (stop.IsCancellationRequested)
        {
            // Shutting down mid-attempt: the lease is released, the attempt stays counted, and an instance takes it up again.
            await claim.StopRenewingAsync();
            await _receipts.AbandonAsync(claim);
            return;
        }
        catch (Exception e)
        {
            error = e is FunctionFailedException f ? $"{LogText.Escape(f.Message)}\n{LogText.EscapeKeepingLines(f.WorkerStackTrace)}" : LogText.Escape(e.Message);
        }

        await claim.StopRenewingAsync();
        if (claim.Lost)
            Log.BlobReceiptLeaseLost(_logger, null, LogText.Escape(receipt), function.Name, watch.Container, blobText);
        if (error is null)
        {
            try
            {
                await _receipts.CompleteAsync(claim);
            }
            catch (Exception e) when (e is StorageUnavailableException or BlobStorageException)
            {
                if (Log.Pass(_logger, _receiptLog, LogLevel.Warning, "receipt not stored"))
                    Log.BlobReceiptCompleteFailed(_logger, e, LogText.Escape(receipt), function.Name, LogText.Escape(e.Message));
            }
            MarkDone(key, ranHere: true);
            return;
        }

        bool poisoned;
        try
        {
            poisoned = await _receipts.FailAsync(claim);
        }
        catch (Exception e) when (e is StorageUnavailableException or BlobStorageException)
        {
            if (Log.Pass(_logger, _receiptLog, LogLevel.Warning, "receipt not stored"))
                Log.BlobReceiptFailFailed(_logger, e, function.Name, watch.Container, blobText, LogText.Escape(receipt), LogText.Escape(e.Message));
            poisoned = claim.Attempt >= _receipts.MaxAttempts;
        }
        if (poisoned)
        {
            Log.BlobTriggerPoison(_logger, function.Name, watch.Container, blobText, work.ETag, claim.Attempt, LogText.Escape(receipt), error);
            MarkDone(key, ranHere: true);
            return;
        }
        Log.BlobTriggerFailed(_logger, function.Name, invocation.InvocationId, watch.Container, blobText, claim.Attempt, _receipts.MaxAttempts, error);
        _ = RetryLaterAsync(work with { Content = null, Fresh = false }, claim.Attempt, stop);
    }

    private void MarkDone(string key, bool ranHere)
    {
        _done[key] = 0;
        _pending.TryRemove(key, out _);
        _busyUntil.TryRemove(key, out _);
        if (ranHere)
            Interlocked.Increment(ref _completed);
    }

    private async Task RetryLaterAsync(Work work, int attempt, CancellationToken stop)
    {
        try
        {
            await Task.Delay(TimeSpan.FromMilliseconds(250 * attempt), stop);
            _queue.Writer.TryWrite(work);
        }
        catch (OperationCanceledException)
        {
            // shutting down
        }
    }

    private async Task LoadReceiptsAsync(Watch watch, CancellationToken ct)
    {
        var prefix = _receipts.PrefixOf(watch.Function.Name);
        try
        {
            await foreach (var item in _accounts.Get(HostStorage).ListAsync(BlobReceipts.Container, prefix, ct))
            {
                // Only an empty receipt is complete; pending and poison ones hold a small document and are read when their blob is offered.
                if (item.Properties.Length != 0)
                    continue;
                // blobreceipts/{host}/{function}/{etag}/{container}/{blob}
                var rest = item.Name[prefix.Length..];
                var slash = rest.IndexOf('/');
                if (slash < 0)
                    continue;
                var etag = '"' + rest[..slash] + '"';
                var path = rest[(slash + 1)..];
                if (path.StartsWith(watch.Container + "/", StringComparison.Ordinal))
                    _done[ReceiptKey(watch, path[(watch.Container.Length + 1)..], etag)] = 0;
            }
        }
        catch (BlobStorageException e) when (e.Status == 404)
        {
            // No receipts yet.
        }
        catch (Exception e) when (e is StorageUnavailableException or BlobStorageException)
        {
            Log.BlobReceiptsLoadFailed(_logger, e, watch.Function.Name, LogText.Escape(e.Message));
        }
    }

    private static string ReceiptKey(Watch watch, string blob, string etag) => $"{watch.Function.Name}|{etag}|{blob}";

    private static string CommonPrefix(IEnumerable<string> prefixes)
    {
        string? common = null;
        foreach (var p in prefixes)
        {
            if (common is null)
            {
                common = p;
                continue;
            }
            var n = 0;
            while (n < common.Length && n < p.Length && common[n] == p[n])
                n++;
            common = common[..n];
        }
        return common ?? "";
    }

    private static string Sanitize(string id)
    {
        var chars = id.ToLowerInvariant().Select(c => char.IsAsciiLetterOrDigit(c) || c == '-' ? c : '-').ToArray();
        return new string(chars).Trim('-') is { Length: > 0 } s ? s : "faast";
    }

    public async ValueTask DisposeAsync()
    {
        await _stopping.CancelAsync();
        _queue.Writer.TryComplete();
        try
        {
            await Task.WhenAll(_loops);
        }
        catch (OperationCanceledException)
        {
            // stopping
        }
        _stopping.Dispose();
    }
}
