using FaaST.Runtime.Http;
using System.Collections.Concurrent;
using System.Threading.Channels;
using FaaST.Protos.Worker;
using FaaST.Runtime.App;
using FaaST.Runtime.Bindings;
using FaaST.Runtime.Invocation;
using FaaST.Storage;
using Google.Protobuf;

namespace FaaST.Runtime.Triggers;

/// <summary>
/// Fires blobTrigger functions for new or changed blobs. Blobs this runtime writes through an
/// output binding fire at once (no polling delay in a pipeline); everything else is found by
/// scanning the watched containers every pollingInterval and comparing ETags with receipts.
/// Receipts are kept in storage (azure-webjobs-hosts/blobreceipts/...) so a restart does not
/// run a function twice for the same blob version.
/// </summary>
internal sealed class BlobTriggerListener : IBlobWriteObserver, IAsyncDisposable
{
    public const string ReceiptContainer = "azure-webjobs-hosts";

    private readonly FunctionApp _app;
    private readonly FunctionInvoker _invoker;
    private readonly StorageAccounts _accounts;
    private readonly IBlobBindingProvider _blobs;
    private readonly ILogger _logger;
    private readonly Cachelet.LogGate _receiptLog = Cachelet.LogGate.PerSecond();
    private readonly string _hostId;
    private readonly Watch[] _watches;
    private readonly Channel<Work> _queue = Channel.CreateUnbounded<Work>();
    private readonly ConcurrentDictionary<string, byte> _receipts = new(StringComparer.Ordinal);
    private readonly ConcurrentDictionary<string, byte> _pending = new(StringComparer.Ordinal);
    private readonly CancellationTokenSource _stopping = new();
    private readonly List<Task> _loops = [];

    private sealed record Watch(FunctionDefinition Function, BindingMetadata Trigger, string Container, string Prefix, string? Account);

    private sealed record Work(Watch Watch, string BlobName, string ETag, long Length, ReadOnlyMemory<byte>? Content, int Attempt);

    public BlobTriggerListener(FunctionApp app, FunctionInvoker invoker, StorageAccounts accounts,
        IBlobBindingProvider blobs, ILogger logger)
    {
        _app = app;
        _invoker = invoker;
        _accounts = accounts;
        _blobs = blobs;
        _logger = logger;
        _hostId = Sanitize(app.Settings["AzureFunctionsWebHost__hostid"] ?? app.Name);
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
    }

    public bool HasTriggers => _watches.Length > 0;

    /// <summary>Invocations completed by this listener (successful or given up), for tests and metrics.</summary>
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
                Offer(watch, blob.Name, properties.ETag, properties.Length, content);
        }
    }

    private void Offer(Watch watch, string name, string etag, long length, ReadOnlyMemory<byte>? content)
    {
        var key = ReceiptKey(watch, name, etag);
        if (_receipts.ContainsKey(key) || !watch.Trigger.Path!.TryMatch(watch.Container + "/" + name, new Dictionary<string, string>()))
            return;
        if (_pending.TryAdd(key, 0))
            _queue.Writer.TryWrite(new Work(watch, name, etag, length, content, 1));
    }

    private async Task PollAsync(Watch[] watches, CancellationToken stop)
    {
        var first = watches[0];
        var store = _accounts.Get(first.Trigger.Connection);
        var prefix = CommonPrefix(watches.Select(w => w.Prefix));
        var interval = _app.Host.BlobPollingInterval;
        var failures = 0;
        while (!stop.IsCancellationRequested)
        {
            try
            {
                await foreach (var item in store.ListAsync(first.Container, prefix.Length > 0 ? prefix : null, stop))
                    foreach (var watch in watches)
                        if (item.Name.StartsWith(watch.Prefix, StringComparison.Ordinal))
                            Offer(watch, item.Name, item.Properties.ETag, item.Properties.Length, null);
                failures = 0;
            }
            catch (BlobStorageException e) when (e.Status == 404)
            {
                // The container does not exist yet: nothing to trigger on.
            }
            catch (Exception e) when (e is StorageUnavailableException or BlobStorageException or HttpRequestException)
            {
                if (failures++ == 0)
                    Log.BlobScanFailed(_logger, e, first.Container, e.Message);
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
        await using var invocation = new InvocationContext(function.Name);
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
                Log.BlobDeletedBeforeRun(_logger, LogText.Escape(path), function.Name);
            }
            else
            {
                Log.BlobExecuting(_logger, function.Name, invocation.InvocationId, LogText.Escape(path));
                await _invoker.InvokeAsync(function, invocation, new TypedData { Blob = blob }, stop);
                Log.BlobExecuted(_logger, function.Name, invocation.InvocationId, LogText.Escape(path));
            }
            await WriteReceiptAsync(watch, work.BlobName, work.ETag, key, stop);
        }
        catch (OperationCanceledException) when (stop.IsCancellationRequested)
        {
            return;
        }
        catch (Exception e)
        {
            // Blob names and messages may come from a request (an HTTP function's output path): escaped.
            var detail = e is FunctionFailedException f ? $"{LogText.Escape(f.Message)}\n{LogText.EscapeKeepingLines(f.WorkerStackTrace)}" : LogText.Escape(e.Message);
            if (work.Attempt < _app.Host.BlobMaxDequeueCount)
            {
                Log.BlobInvocationFailed(_logger, function.Name, invocation.InvocationId, LogText.Escape(work.BlobName), work.Attempt, _app.Host.BlobMaxDequeueCount, detail);
                _ = RetryLaterAsync(work with { Attempt = work.Attempt + 1, Content = null }, stop);
                return;
            }
            Log.BlobGivingUp(_logger, function.Name, LogText.Escape(work.BlobName), work.Attempt, detail);
            await WriteReceiptAsync(watch, work.BlobName, work.ETag, key, stop);
        }
    }

    private async Task RetryLaterAsync(Work work, CancellationToken stop)
    {
        try
        {
            await Task.Delay(TimeSpan.FromMilliseconds(250 * work.Attempt), stop);
            _queue.Writer.TryWrite(work);
        }
        catch (OperationCanceledException)
        {
            // shutting down
        }
    }

    private async Task WriteReceiptAsync(Watch watch, string blobName, string etag, string key, CancellationToken stop)
    {
        _receipts[key] = 0;
        _pending.TryRemove(key, out _);
        Interlocked.Increment(ref _completed);
        try
        {
            var store = _accounts.Get(watch.Trigger.Connection);
            var name = ReceiptPrefix(watch) + etag.Trim('"') + "/" + watch.Container + "/" + blobName;
            try
            {
                await store.UploadAsync(ReceiptContainer, name, ReadOnlyMemory<byte>.Empty, ct: stop);
            }
            catch (BlobStorageException e) when (e.Status == 404)
            {
                await store.CreateContainerIfNotExistsAsync(ReceiptContainer, stop);
                await store.UploadAsync(ReceiptContainer, name, ReadOnlyMemory<byte>.Empty, ct: stop);
            }
        }
        catch (Exception e) when (e is StorageUnavailableException or BlobStorageException)
        {
            // Once per blob while storage is down: gated. The name may come from a request, so the escaped
            // message is logged, not the exception (storage's own give-up line carries its stack).
            if (Log.Pass(_logger, _receiptLog, LogLevel.Warning, "receipt not stored"))
                Log.ReceiptNotStored(_logger, LogText.Escape(blobName), LogText.Escape(e.Message), watch.Function.Name);
        }
    }

    private async Task LoadReceiptsAsync(Watch watch, CancellationToken ct)
    {
        var prefix = ReceiptPrefix(watch);
        try
        {
            var store = _accounts.Get(watch.Trigger.Connection);
            await foreach (var item in store.ListAsync(ReceiptContainer, prefix, ct))
            {
                // blobreceipts/{host}/{function}/{etag}/{container}/{blob}
                var rest = item.Name[prefix.Length..];
                var slash = rest.IndexOf('/');
                if (slash < 0)
                    continue;
                var etag = '"' + rest[..slash] + '"';
                var path = rest[(slash + 1)..];
                if (path.StartsWith(watch.Container + "/", StringComparison.Ordinal))
                    _receipts[ReceiptKey(watch, path[(watch.Container.Length + 1)..], etag)] = 0;
            }
        }
        catch (BlobStorageException e) when (e.Status == 404)
        {
            // No receipts yet.
        }
        catch (Exception e) when (e is StorageUnavailableException or BlobStorageException)
        {
            Log.ReceiptsNotRead(_logger, e, watch.Function.Name, e.Message);
        }
    }

    private string ReceiptPrefix(Watch watch) => $"blobreceipts/{_hostId}/{watch.Function.Name}/";

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
