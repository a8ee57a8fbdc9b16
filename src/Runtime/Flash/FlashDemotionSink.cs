using FaaST.Cachelet.Index;
using FaaST.Cachelet.Memory;
using FaaST.Cachelet.Sources;
using FaaST.Protos.Flash;
using Google.Protobuf;
using Grpc.Core;

namespace FaaST.Runtime.Flash;

/// <summary>
/// Demotes what the cache evicts for space to the flash tier (issue 22), so a later miss of it is a flash read instead
/// of a storage GET. Called on the cache's demotion pump (a background task, never a reader's thread): the object's
/// bytes are readable only until the call returns, so they are streamed to the tier from the extent itself (64 KiB
/// chunks, no copy into a buffer) before it returns. Objects that expired (their TTL says they should be fetched
/// again), that are under <see cref="Policy.FlashPolicy.MinDemoteBytes"/> or over the tier's largest value, or that
/// leave while the tier is down are skipped and counted. A put that fails or stalls (<see cref="MinTimeout"/>) marks the
/// tier down as a read would; the eviction itself goes on (an evicted object is never the only copy). A version the tier
/// is known to hold already (<see cref="FlashHeldVersions"/>) is not written again.
/// </summary>
internal sealed class FlashDemotionSink(FlashClient client, FlashMetrics metrics, FlashHeldVersions held) : IEvictionSink
{
    /// <summary>flash.proto's largest data message: values travel in chunks of at most 64 KiB.</summary>
    private const int ChunkBytes = 64 * 1024;

    /// <summary>
    /// The least a demotion waits for the tier to take its next message: 2 s, not flash.timeoutMs. A demotion is off
    /// every read's path (the pump's own thread), and a server that schedules writes behind reads (En4S prices them
    /// above reads, §4.1) may hold a put far longer than a read's 10 ms without being down; a put that fails marks
    /// the tier down for reads as well, so only a server that is really gone should fail one.
    /// </summary>
    private static readonly TimeSpan MinTimeout = TimeSpan.FromSeconds(2);

    private TimeSpan Timeout => client.Policy.Timeout > MinTimeout ? client.Policy.Timeout : MinTimeout;

    public void OnEvicted(in BlobKey key, string version, in Extent bytes) =>
        OnEvicted(new EvictedObject(key, bytes.Length, version, EvictionReason.Space, DateTimeOffset.UtcNow), bytes);

    public void OnEvicted(EvictedObject evicted, in Extent bytes)
    {
        var length = bytes.Length;
        if (evicted.Reason != EvictionReason.Space || length < client.Policy.MinDemoteBytes || !client.Usable
            || client.MaxValueBytes is var max && max > 0 && length > max || string.IsNullOrEmpty(evicted.ETag))
        {
            metrics.DemotionSkipped();
            return;
        }
        if (held.IsHeld(evicted.Key, evicted.ETag))
        {
            metrics.DemotionHeld(); // the tier served or stored this very version: nothing to write (FlashHeldVersions)
            return;
        }
        // The pump is a background task and the bytes must be written before returning: waiting here is the seam's
        // contract (a slow sink holds the pump, which then drops demotions rather than readers' work).
        var extent = bytes;
        PutAsync(evicted, extent).AsTask().GetAwaiter().GetResult();
    }

    private async ValueTask PutAsync(EvictedObject evicted, Extent bytes)
    {
        using var timeout = new CancellationTokenSource(Timeout);
        try
        {
            if (await client.FlowAsync(timeout.Token) is not { } flow)
            {
                metrics.DemotionSkipped();
                return;
            }
            if (client.MaxValueBytes is var max && max > 0 && bytes.Length > max)
            {
                metrics.DemotionSkipped(); // learnt only now, with the first flow
                return;
            }
            using var call = client.Put(timeout.Token);
            await call.RequestStream.WriteAsync(new PutRequest
            {
                Header = new PutHeader { Flow = flow, Key = FlashKeys.Of(evicted.Key), Etag = evicted.ETag, Length = bytes.Length },
            }, timeout.Token);
            for (long offset = 0; offset < bytes.Length; offset += ChunkBytes)
            {
                var n = (int)Math.Min(ChunkBytes, bytes.Length - offset);
                // Wrapped, not copied: the message is serialised into the HTTP/2 stream before WriteAsync completes,
                // and the extent stays readable until this method returns.
                await call.RequestStream.WriteAsync(new PutRequest { Data = UnsafeByteOperations.UnsafeWrap(bytes.GetMemory(offset, n)) }, timeout.Token);
                timeout.CancelAfter(Timeout); // per chunk: a large value takes its time
            }
            await call.RequestStream.CompleteAsync();
            await call.ResponseAsync.WaitAsync(timeout.Token);
            metrics.Demoted(bytes.Length);
            held.Held(evicted.Key, evicted.ETag);
        }
        catch (RpcException e) when (e.StatusCode is StatusCode.InvalidArgument or StatusCode.ResourceExhausted)
        {
            // The tier refused this value (too large, or full with nothing to reclaim): its own answer, not a failure.
            metrics.DemotionFailed();
            Log.DemotionRefused(client.Logger, evicted.Key.Container, evicted.Key.Blob, e.Status.Detail);
        }
        catch (Exception e) when (e is RpcException or HttpRequestException or IOException or OperationCanceledException)
        {
            metrics.DemotionFailed();
            client.Failed($"Put {evicted.Key.Container}/{evicted.Key.Blob}", e);
        }
    }
}
