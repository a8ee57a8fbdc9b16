using System.Buffers;
using System.Diagnostics;
using FaaST.FlashBackend.Engine;
using FaaST.FlashBackend.Scheduling;
using FaaST.Protos.Flash;
using Google.Protobuf;
using Grpc.Core;

namespace FaaST.FlashBackend.Server;

/// <summary>
/// GetMany (protos/flash.proto): many small gets on one bidirectional stream. Measured on this 2-core VM (docs/flash.md,
/// "Measured: the real server against fio"): a 4 KiB Get costs one HTTP/2 stream with headers, two messages and
/// trailers each way, and calls that never touch the device top out near 9,800/s, so the per-call cost, not the device,
/// bounded the server at 33 % of fio. Here that cost is paid once per stream: items arrive in batches, each runs as the
/// same admitted read unit a Get uses (scheduler, stats and checksums alike), off the request loop so up to
/// <see cref="MaxInFlight"/> device reads of one stream run at once, and results leave in batches of whatever is ready.
/// </summary>
internal sealed partial class FlashTierService
{
    /// <summary>Items of one stream in flight: 256, twice the LC in-flight cap (SchedulerLimits), so a stream can
    /// keep the device's queue full while its results are written; at the bound no further request is read
    /// (HTTP/2 flow control then holds the client).</summary>
    public const int MaxInFlight = 256;

    /// <summary>Results per reply message at most: 64 (4 KiB each, 256 KiB a message).</summary>
    private const int ResultsPerReply = 64;

    public override async Task GetMany(IAsyncStreamReader<GetManyRequest> requestStream, IServerStreamWriter<GetManyReply> responseStream, ServerCallContext context)
    {
        TenantEntry tenant = Auth.Tenant(core, context, "GetMany");
        // Items still running when the stream ends early give their slots back into it (it holds nothing to dispose).
        var slots = new StreamSlots(MaxInFlight);
        var stream = new ManyStream(this, tenant, slots);
        Task writer = stream.WriteAsync(responseStream, context.CancellationToken);
        try
        {
            while (await requestStream.MoveNext(context.CancellationToken).ConfigureAwait(false))
            {
                GetManyRequest request = requestStream.Current;
                FlowEntry flow = FlowOf(tenant, request.Flow, "GetMany");
                if (_store.UsesIoUring)
                    await StartAllAsync(stream, flow, request, slots, context.CancellationToken).ConfigureAwait(false);
                else
                {
                    foreach (GetManyItem item in request.Items)
                    {
                        await slots.WaitAsync(context.CancellationToken).ConfigureAwait(false);
                        // On the pool: an item's read is a synchronous pread, and the next items must not wait behind it.
                        _ = Task.Run(() => RunItemAsync(tenant, flow, item, stream));
                    }
                }
            }
            // Every slot back: every item's result is queued (each is queued before its slot is released).
            await slots.WaitAllAsync(context.CancellationToken).ConfigureAwait(false);
        }
        finally
        {
            stream.Complete();
        }
        await writer.ConfigureAwait(false);
    }

    /// <summary>A request's items on the io_uring path: started in a row with the ring woken once (not per item),
    /// waiting for a slot only when all are taken (and waking the ring for what was started before that wait).</summary>
    private async Task StartAllAsync(ManyStream stream, FlowEntry flow, GetManyRequest request, StreamSlots slots, CancellationToken ct)
    {
        int i = 0;
        while (i < request.Items.Count)
        {
            using (FlashStore.DeferReadWakes())
            {
                while (i < request.Items.Count && slots.TryTake())
                    stream.Start(flow, request.Items[i++]);
            }
            _store.FlushReads();
            if (i < request.Items.Count)
            {
                await slots.WaitAsync(ct).ConfigureAwait(false);
                stream.Start(flow, request.Items[i++]);
            }
        }
    }

    private async Task RunItemAsync(TenantEntry tenant, FlowEntry flow, GetManyItem item, ManyStream stream)
    {
        GetManyResult result;
        try
        {
            result = await GetItemAsync(tenant, flow, item).ConfigureAwait(false);
        }
        catch (RpcException e)
        {
            result = new GetManyResult { Id = item.Id, ErrorCode = e.StatusCode.ToString(), Error = e.Status.Detail };
        }
        catch (Exception e) when (e is IOException or ArgumentException)
        {
            result = new GetManyResult { Id = item.Id, ErrorCode = nameof(StatusCode.Internal), Error = $"GetMany item {item.Id}: {e.Message}" };
        }
        stream.Post(result, onRing: false);
    }

    /// <summary>
    /// An item up to its read, the same on both paths: the key and range checked, the value looked up. Returns the
    /// item's answer when it needs no read (a miss, an empty range), else null with what to read; throws an
    /// RpcException (INVALID_ARGUMENT) naming the item for bad input. The call's name is built only for an error.
    /// </summary>
    private GetManyResult? PrepareItem(TenantEntry tenant, GetManyItem item, out string key, out FlashStore.ValueReader reader,
        out long offset, out long length, out GetHeader header)
    {
        key = item.Key is { Container.Length: > 0, Blob.Length: > 0 } k && !k.Container.Contains('/')
            ? k.Container + "/" + k.Blob : KeyOf(item.Key, $"GetMany item {item.Id}");
        (offset, length, header) = (0, 0, null!);
        if (item.Offset < 0 || item.Length < 0)
            throw Invalid($"GetMany item {item.Id} of '{key}': offset {item.Offset} and length {item.Length} must not be negative");
        Interlocked.Increment(ref tenant.Counters.Gets);
        try
        {
            if (!_store.TryOpenRead(tenant.Name, key, item.Etag.Length == 0 ? null : item.Etag, out reader))
                return MissOf(tenant, item.Id);
        }
        catch (ArgumentException e)
        {
            throw Invalid($"GetMany item {item.Id} of '{key}': {e.Message}");
        }
        offset = Math.Min(item.Offset, reader.Length);
        length = item.Length == 0 ? reader.Length - offset : Math.Min(item.Length, reader.Length - offset);
        if (length > FlashServerCore.MessageBytes)
            throw Invalid($"GetMany item {item.Id} of '{key}': {length} bytes; GetMany carries at most {FlashServerCore.MessageBytes} bytes an item (read larger ranges with Get)");
        header = new GetHeader { Found = true, Etag = reader.Etag, ObjectLength = reader.Length, Offset = offset, Length = length };
        if (length > 0)
            return null;
        Interlocked.Increment(ref tenant.Counters.Hits);
        return new GetManyResult { Id = item.Id, Header = header };
    }

    private async Task<GetManyResult> GetItemAsync(TenantEntry tenant, FlowEntry flow, GetManyItem item)
    {
        long started = Stopwatch.GetTimestamp();
        if (PrepareItem(tenant, item, out string key, out FlashStore.ValueReader reader, out long offset, out long length, out GetHeader header) is { } done)
            return done;
        if (offset > 0)
            reader.Seek(offset);
        string call = $"GetMany item {item.Id}";
        byte[] buffer = ArrayPool<byte>.Shared.Rent((int)length);
        try
        {
            IoTicket ticket = await Admit(tenant, flow, IoType.Read, (int)length, "GetMany", key).ConfigureAwait(false);
            ReadStatus status = ReadGranted(tenant, ticket, ref reader, buffer.AsSpan(0, (int)length), call, key, out int n);
            if (status == ReadStatus.Miss)
                return MissOf(tenant, item.Id);
            Interlocked.Increment(ref tenant.Counters.Hits);
            Interlocked.Add(ref tenant.Counters.BytesRead, n);
            long now = Stopwatch.GetTimestamp();
            tenant.Counters.Record(now, now - started, Blocks(n), isRead: true, tenant.Spec.P95LatencyUs);
            // Copied: the message leaves after this buffer goes back to the pool.
            return new GetManyResult { Id = item.Id, Header = header, Data = ByteString.CopyFrom(buffer, 0, n) };
        }
        finally
        {
            ArrayPool<byte>.Shared.Return(buffer);
        }
    }

    private static GetManyResult MissOf(TenantEntry tenant, ulong id)
    {
        Interlocked.Increment(ref tenant.Counters.Misses);
        return new GetManyResult { Id = id, Header = new GetHeader { Found = false } };
    }
}
