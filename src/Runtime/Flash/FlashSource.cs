using System.Diagnostics;
using FaaST.Cachelet;
using FaaST.Cachelet.Index;
using FaaST.Cachelet.Sources;
using FaaST.Protos.Flash;
using FaaST.Storage;
using Grpc.Core;

namespace FaaST.Runtime.Flash;

/// <summary>
/// The flash tier as a read source of the cache (issue 22), asked after the key's owner and before storage. Not
/// authoritative: a flash copy is served only when its ETag is the blob's current one, so strong consistency holds and a
/// copy of an old version is never served. The current ETag comes from storage by a HEAD started in parallel with the
/// flash get (a hit costs max(HEAD, flash), not their sum); the reader's <see cref="SourceRequest.IfVersion"/> is not
/// used, since it is the version the reader holds, which may itself be stale. Bytes stream from the gRPC stream into
/// the cache's target as they arrive (no whole-object buffer) and are discarded when the versions differ.
/// <para>
/// A tier that fails or has not started (or continued) answering within <see cref="Policy.FlashPolicy.Timeout"/> is
/// given up: the read answers <see cref="SourceOutcome.Unavailable"/>, storage serves it, and the tier is skipped for
/// <see cref="Policy.FlashPolicy.RetryAfter"/>.
/// </para>
/// </summary>
internal sealed class FlashSource(FlashClient client, FlashMetrics metrics, FlashHeldVersions held) : IBlobSource
{
    public string Name => "flash";

    public async ValueTask<SourceResult> FetchAsync(SourceRequest request, IFetchTarget target, CancellationToken ct)
    {
        if (!client.Usable)
        {
            metrics.Skipped();
            return SourceResult.Unavailable;
        }
        var started = Stopwatch.GetTimestamp();
        // HEAD first, so it runs while the flash get does; its epoch is the read's (taken before the source was asked).
        var head = request.Store.GetPropertiesAsync(request.Key.Container, request.Key.Blob, ct);
        using var timeout = CancellationTokenSource.CreateLinkedTokenSource(ct);
        timeout.CancelAfter(client.Policy.Timeout);
        try
        {
            var outcome = await FromFlashAsync(request, target, head, timeout, ct);
            if (outcome.Outcome == SourceOutcome.Found)
                metrics.Hit(outcome.Length, Stopwatch.GetElapsedTime(started));
            return outcome;
        }
        catch (RpcException e) when (e.StatusCode == StatusCode.DataLoss)
        {
            // The tier found its record corrupt and dropped it (flash.proto): a miss, not a tier failure.
            metrics.Miss();
            held.Forget(request.Key);
            return SourceResult.Unavailable;
        }
        catch (Exception e) when (!ct.IsCancellationRequested && IsTierFailure(e))
        {
            metrics.Fallback();
            client.Failed($"Get {request.Key.Container}/{request.Key.Blob}", e);
            return SourceResult.Unavailable;
        }
        finally
        {
            // A HEAD still running when flash missed is not waited for (storage's GET comes next and would wait behind
            // it); its failure is observed here, never left unobserved, and is storage's to report on that GET.
            if (head.IsCompleted)
                _ = head.Exception;
            else
                _ = head.ContinueWith(static t => _ = t.Exception, CancellationToken.None, TaskContinuationOptions.OnlyOnFaulted | TaskContinuationOptions.ExecuteSynchronously,
                    TaskScheduler.Default);
        }
    }

    private async ValueTask<SourceResult> FromFlashAsync(SourceRequest request, IFetchTarget target, Task<BlobProperties?> head,
        CancellationTokenSource timeout, CancellationToken ct)
    {
        if (await client.FlowAsync(timeout.Token) is not { } flow)
        {
            metrics.Fallback();
            return SourceResult.Unavailable;
        }
        // No ETag asked: the tier answers with whichever version it holds, and the comparison with storage's is ours.
        // (Asking for storage's ETag would make the get wait for the HEAD: their sum instead of their max.)
        using var call = client.Get(new GetRequest { Flow = flow, Key = FlashKeys.Of(request.Key) }, timeout.Token);
        var stream = call.ResponseStream;
        if (!await stream.MoveNext(timeout.Token) || stream.Current.PartCase != GetReply.PartOneofCase.Header)
            throw new RpcException(new Status(StatusCode.Internal, $"the flash tier's Get of {request.Key.Container}/{request.Key.Blob} did not start with a header"));
        var header = stream.Current.Header;
        if (!header.Found)
        {
            metrics.Miss();
            held.Forget(request.Key);
            return SourceResult.Unavailable;
        }
        // If storage has answered already, a stale copy is not even streamed.
        if (head.IsCompleted)
        {
            var (answered, early) = await CurrentAsync(head, ct);
            if (!answered)
                return SourceResult.Unavailable;
            if (early?.ETag != header.Etag)
                return Stale(request.Key, early);
        }
        var length = header.ObjectLength;
        var into = target.Open(length);
        long received = 0;
        while (await stream.MoveNext(timeout.Token))
        {
            if (stream.Current.PartCase != GetReply.PartOneofCase.Data)
                throw new RpcException(new Status(StatusCode.Internal, $"the flash tier sent a second header for {request.Key.Container}/{request.Key.Blob}"));
            var data = stream.Current.Data;
            if (received + data.Length > length)
                throw new RpcException(new Status(StatusCode.Internal, $"the flash tier sent more than the {length} bytes of {request.Key.Container}/{request.Key.Blob}"));
            await into.WriteAsync(data.Memory, ct);
            received += data.Length;
            // The timeout bounds each wait for the next chunk, not the whole transfer (a large value takes its time).
            timeout.CancelAfter(client.Policy.Timeout);
        }
        if (received != length)
            throw new RpcException(new Status(StatusCode.Internal, $"the flash tier's stream of {request.Key.Container}/{request.Key.Blob} ended after {received} of {length} bytes"));
        // The bytes are in; storage decides whether they may be served (the HEAD is not bounded by the flash timeout).
        timeout.CancelAfter(Timeout.InfiniteTimeSpan);
        var (known, current) = await CurrentAsync(head, ct);
        if (!known)
            return SourceResult.Unavailable;
        if (current?.ETag != header.Etag)
            return Stale(request.Key, current);
        held.Held(request.Key, header.Etag);
        return new SourceResult(SourceOutcome.Found, header.Etag, length, ReadPath.LocalMiss, Validated: true);
    }

    /// <summary>The tier's copy is not storage's current version (or the blob is gone): never served. A deleted blob is
    /// answered as storage would (not found); a changed one by storage itself, next in the chain.</summary>
    private SourceResult Stale(in BlobKey key, BlobProperties? current)
    {
        metrics.StaleCopy();
        held.Forget(key); // the tier's version is not storage's: an eviction of the current one must be demoted
        return current is null ? SourceResult.NotFound : SourceResult.Unavailable;
    }

    /// <summary>Storage's answer to the HEAD: (true, its properties, null when the blob is gone), or (false, null) when
    /// the HEAD failed; then the read goes on to storage, whose GET reports storage's error.</summary>
    private static async ValueTask<(bool Answered, BlobProperties? Current)> CurrentAsync(Task<BlobProperties?> head, CancellationToken ct)
    {
        try
        {
            return (true, await head.WaitAsync(ct));
        }
        catch (Exception) when (!ct.IsCancellationRequested)
        {
            return (false, null);
        }
    }

    /// <summary>What makes the tier down or slow, as opposed to the read's own cancellation or a storage error.</summary>
    private static bool IsTierFailure(Exception e) =>
        e is RpcException or HttpRequestException or IOException or OperationCanceledException;
}
