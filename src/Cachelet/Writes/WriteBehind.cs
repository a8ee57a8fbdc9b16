using System.Threading.Channels;
using FaaST.Cachelet.Index;
using FaaST.Cachelet.Memory;
using FaaST.Storage;

namespace FaaST.Cachelet.Writes;

/// <summary>
/// Write-behind (the async presets): the cache holds the new version at once under a provisional
/// version, pinned until one background uploader has put it in storage (retrying with backoff);
/// storage's ETag then replaces the provisional one. At shutdown, pending uploads get a bounded wait.
/// </summary>
internal sealed class WriteBehind
{
    private readonly CacheCore _core;
    private readonly Channel<PendingWrite> _queue = Channel.CreateUnbounded<PendingWrite>(new UnboundedChannelOptions { SingleReader = true });
    private readonly Task _uploader;

    // A write-behind to storage, pinned until it is uploaded.
    private sealed record PendingWrite(IBlobStore Store, BlobKey Key, CacheEntry Entry, PinHandle Pin);

    public WriteBehind(CacheCore core)
    {
        _core = core;
        _uploader = Task.Run(UploadAsync);
    }

    /// <summary>Caches <paramref name="extent"/> now (the cache owns it) and queues its upload; the provisional version.</summary>
    public string Commit(IBlobStore store, BlobKey key, Extent extent, bool owned)
    {
        var provisional = StorageUpload.ProvisionalVersion();
        // Pinned as it is added: a concurrent write of the key may retire it at once, and the upload
        // must still read these bytes, not a freed extent.
        var pin = _core.Index.AddOrReplacePinned(key, provisional, extent, owned);
        _core.Index.RecordWrite(key);
        _queue.Writer.TryWrite(new PendingWrite(store, key, pin.Entry, pin));
        return provisional;
    }

    /// <summary>
    /// <see cref="Commit"/> only while <paramref name="expected"/> is still the key's entry (a conditional write
    /// the cache decides: see <see cref="CacheIndex.TryReplacePinned"/>); null, the extent still the caller's, when
    /// another version got there first.
    /// </summary>
    public string? TryCommit(IBlobStore store, BlobKey key, Extent extent, bool owned, CacheEntry expected)
    {
        var provisional = StorageUpload.ProvisionalVersion();
        if (_core.Index.TryReplacePinned(key, expected, provisional, extent, owned) is not { } pin)
            return null;
        _core.Index.RecordWrite(key);
        _queue.Writer.TryWrite(new PendingWrite(store, key, pin.Entry, pin));
        return provisional;
    }

    private async Task UploadAsync()
    {
        var stop = _core.Stopping;
        var logger = _core.Logger;
        await foreach (var write in _queue.Reader.ReadAllAsync(CancellationToken.None))
        {
            using (write.Pin)
            {
                for (var attempt = 1; ; attempt++)
                {
                    try
                    {
                        var written = await StorageUpload.FromExtentAsync(write.Store, write.Key, write.Entry.Extent, CancellationToken.None);
                        _core.Index.UpdateVersion(write.Entry, written.ETag);
                        break;
                    }
                    catch (Exception e) when (e is StorageUnavailableException or BlobStorageException or IOException)
                    {
                        Log.WriteBehindFailed(logger, write.Key.Container, write.Key.Blob, attempt, e.Message);
                        if (stop.IsCancellationRequested && attempt >= 3)
                        {
                            Log.WriteBehindAbandoned(logger, write.Key.Container, write.Key.Blob);
                            break;
                        }
                        await Task.Delay(TimeSpan.FromMilliseconds(Math.Min(5000, 100 << Math.Min(attempt, 6))), CancellationToken.None);
                    }
                }
            }
        }
    }

    /// <summary>Takes no more writes and waits (at most <paramref name="bound"/>) for the queued ones; call after the cache's lifetime token is cancelled.</summary>
    public async Task DrainAsync(TimeSpan bound)
    {
        _queue.Writer.TryComplete();
        try
        {
            await _uploader.WaitAsync(bound);
        }
        catch (TimeoutException)
        {
            Log.WriteBehindPending(_core.Logger);
        }
    }

    /// <summary>Stops taking writes (before the lifetime token is cancelled, as the cache's shutdown did).</summary>
    public void Complete() => _queue.Writer.TryComplete();
}
