using System.Buffers;
using System.Diagnostics;
using FaaST.FlashBackend.Engine;
using FaaST.FlashBackend.Scheduling;
using FaaST.Protos.Flash;
using Google.Protobuf;
using Grpc.Core;

namespace FaaST.FlashBackend.Server;

/// <summary>
/// FlashTier (protos/flash.proto): every call takes a tenant token (<see cref="Auth.Tenant"/>) and acts in that tenant's
/// namespace only. Gets and puts move in I/O units of at most <see cref="FlashServerCore.UnitBytes"/>, each admitted by
/// the scheduler on its own; a unit holds its scheduler slot only while its device I/O runs (never while waiting on
/// the network), and values stream through one unit-sized pooled buffer whatever their size.
/// </summary>
internal sealed partial class FlashTierService(FlashServerCore core) : FlashTier.FlashTierBase
{
    private readonly FlashStore _store = core.Store;
    private readonly IoDispatcher _dispatcher = core.Dispatcher;

    public override async Task<OpenFlowReply> OpenFlow(OpenFlowRequest request, ServerCallContext context)
    {
        TenantEntry tenant = Auth.Tenant(core, context, "OpenFlow");
        FlowEntry flow = await core.OpenFlowAsync(tenant, request.Instance).ConfigureAwait(false);
        return new OpenFlowReply { Flow = flow.Id, MaxValueBytes = _store.MaxValueSize };
    }

    public override async Task<CloseFlowReply> CloseFlow(CloseFlowRequest request, ServerCallContext context)
    {
        TenantEntry tenant = Auth.Tenant(core, context, "CloseFlow");
        await core.CloseFlowAsync(FlowOf(tenant, request.Flow, "CloseFlow")).ConfigureAwait(false);
        return new CloseFlowReply();
    }

    public override async Task Get(GetRequest request, IServerStreamWriter<GetReply> responseStream, ServerCallContext context)
    {
        long started = Stopwatch.GetTimestamp();
        TenantEntry tenant = Auth.Tenant(core, context, "Get");
        FlowEntry flow = FlowOf(tenant, request.Flow, "Get");
        string key = KeyOf(request.Key, "Get");
        if (request.Offset < 0 || request.Length < 0)
            throw Invalid($"Get of '{key}': offset {request.Offset} and length {request.Length} must not be negative");
        Interlocked.Increment(ref tenant.Counters.Gets);
        FlashStore.ValueReader reader;
        try
        {
            if (!_store.TryOpenRead(tenant.Name, key, request.Etag.Length == 0 ? null : request.Etag, out reader))
            {
                await Miss(tenant, responseStream).ConfigureAwait(false);
                return;
            }
        }
        catch (ArgumentException e)
        {
            throw Invalid($"Get of '{key}': {e.Message}");
        }
        long offset = Math.Min(request.Offset, reader.Length);
        long length = request.Length == 0 ? reader.Length - offset : Math.Min(request.Length, reader.Length - offset);
        if (offset > 0)
            reader.Seek(offset);
        var header = new GetReply { Header = new GetHeader { Found = true, Etag = reader.Etag, ObjectLength = reader.Length, Offset = offset, Length = length } };
        if (length == 0)
        {
            await responseStream.WriteAsync(header).ConfigureAwait(false);
            Interlocked.Increment(ref tenant.Counters.Hits);
            return;
        }
        byte[] buffer = ArrayPool<byte>.Shared.Rent((int)Math.Min(FlashServerCore.UnitBytes, length));
        try
        {
            for (long done = 0; done < length;)
            {
                int unit = (int)Math.Min(FlashServerCore.UnitBytes, length - done);
                IoTicket ticket = await Admit(tenant, flow, IoType.Read, unit, "Get", key).ConfigureAwait(false);
                ReadStatus status = ReadGranted(tenant, ticket, ref reader, buffer.AsSpan(0, unit), "Get", key, out int n);
                if (status == ReadStatus.Miss)
                {
                    if (done == 0)
                    {
                        await Miss(tenant, responseStream).ConfigureAwait(false);
                        return;
                    }
                    // Reclaimed between two units: the rest is gone, so the get cannot complete.
                    throw new RpcException(new Status(StatusCode.Aborted, $"Get of '{key}' for tenant '{tenant.Name}': the value was evicted while it streamed ({done} of {length} bytes sent); discard them and read from storage"));
                }
                if (done == 0)
                    await responseStream.WriteAsync(header).ConfigureAwait(false);
                for (int o = 0; o < n; o += FlashServerCore.MessageBytes)
                {
                    // The buffer is reused only after WriteAsync returns, by which time the message is serialized.
                    var data = UnsafeByteOperations.UnsafeWrap(buffer.AsMemory(o, Math.Min(FlashServerCore.MessageBytes, n - o)));
                    await responseStream.WriteAsync(new GetReply { Data = data }).ConfigureAwait(false);
                }
                done += n;
            }
        }
        finally
        {
            ArrayPool<byte>.Shared.Return(buffer);
        }
        Interlocked.Increment(ref tenant.Counters.Hits);
        Interlocked.Add(ref tenant.Counters.BytesRead, length);
        long now = Stopwatch.GetTimestamp();
        tenant.Counters.Record(now, now - started, Blocks(length), isRead: true, tenant.Spec.P95LatencyUs);
    }

    /// <summary>
    /// The I/O of a read unit the scheduler granted: reads into <paramref name="into"/>, hands the slot back whatever
    /// happens, and turns a device error into INTERNAL and a checksum failure into DATA_LOSS (counted; the store has
    /// dropped the key). A miss (the value reclaimed since it was looked up) is the caller's to answer.
    /// </summary>
    private ReadStatus ReadGranted(TenantEntry tenant, IoTicket ticket, ref FlashStore.ValueReader reader, Span<byte> into, string call, string key, out int n)
    {
        ReadStatus status;
        try
        {
            status = reader.Read(into, out n);
        }
        catch (IOException e)
        {
            throw new RpcException(new Status(StatusCode.Internal, $"{call} of '{key}' for tenant '{tenant.Name}': device read failed: {e.Message}"));
        }
        finally
        {
            _dispatcher.Complete(ticket);
        }
        if (status == ReadStatus.Corrupt)
        {
            Interlocked.Increment(ref tenant.Counters.ChecksumFailures);
            throw new RpcException(new Status(StatusCode.DataLoss, $"{call} of '{key}' for tenant '{tenant.Name}': the stored value failed its checksum; it is dropped, discard any bytes received"));
        }
        return status;
    }

    private static async Task Miss(TenantEntry tenant, IServerStreamWriter<GetReply> responseStream)
    {
        Interlocked.Increment(ref tenant.Counters.Misses);
        await responseStream.WriteAsync(new GetReply { Header = new GetHeader { Found = false } }).ConfigureAwait(false);
    }

    public override async Task<PutReply> Put(IAsyncStreamReader<PutRequest> requestStream, ServerCallContext context)
    {
        long started = Stopwatch.GetTimestamp();
        TenantEntry tenant = Auth.Tenant(core, context, "Put");
        using var idle = CancellationTokenSource.CreateLinkedTokenSource(context.CancellationToken);
        idle.CancelAfter(core.Options.PutIdleTimeout);
        if (!await requestStream.MoveNext(idle.Token).ConfigureAwait(false) || requestStream.Current.PartCase != PutRequest.PartOneofCase.Header)
            throw Invalid("Put: the first message must be the header (flow, key, etag, length)");
        PutHeader h = requestStream.Current.Header;
        FlowEntry flow = FlowOf(tenant, h.Flow, "Put");
        string key = KeyOf(h.Key, "Put");
        if (h.Etag.Length == 0)
            throw Invalid($"Put of '{key}': the etag is required (the blob's ETag the bytes are)");
        if (h.Length < 0 || h.Length > _store.MaxValueSize)
            throw Invalid($"Put of '{key}': the value is {h.Length} bytes; the largest this server stores is {_store.MaxValueSize}");
        FlashStore.PutStream put;
        try
        {
            put = _store.BeginPut(tenant.Name, key, h.Etag, h.Length);
        }
        catch (ArgumentException e)
        {
            throw Invalid($"Put of '{key}': {e.Message}");
        }
        byte[] stage = ArrayPool<byte>.Shared.Rent((int)Math.Clamp(h.Length, 1, FlashServerCore.UnitBytes));
        int fill = 0;
        long received = 0;
        try
        {
            while (await requestStream.MoveNext(idle.Token).ConfigureAwait(false))
            {
                idle.CancelAfter(core.Options.PutIdleTimeout);
                PutRequest m = requestStream.Current;
                if (m.PartCase != PutRequest.PartOneofCase.Data)
                    throw Invalid($"Put of '{key}': a second header; after the header only data messages may follow");
                ReadOnlyMemory<byte> data = m.Data.Memory;
                if (received + data.Length > h.Length)
                    throw Invalid($"Put of '{key}': more than the {h.Length} bytes the header declared arrived; nothing is stored");
                received += data.Length;
                while (data.Length > 0)
                {
                    int n = Math.Min(data.Length, stage.Length - fill);
                    data.Span[..n].CopyTo(stage.AsSpan(fill));
                    fill += n;
                    data = data[n..];
                    if (fill == stage.Length && (data.Length > 0 || received < h.Length))   // full, and more bytes follow
                    {
                        await WriteUnit(tenant, flow, put, stage, fill, commit: false, key).ConfigureAwait(false);
                        fill = 0;
                    }
                }
            }
            if (received != h.Length)
                throw Invalid($"Put of '{key}': {received} bytes arrived, the header declared {h.Length}; nothing is stored");
            await WriteUnit(tenant, flow, put, stage, fill, commit: true, key).ConfigureAwait(false);
        }
        catch (OperationCanceledException) when (!context.CancellationToken.IsCancellationRequested)
        {
            throw new RpcException(new Status(StatusCode.DeadlineExceeded, $"Put of '{key}': no message for {core.Options.PutIdleTimeout.TotalSeconds:0} s; nothing is stored"));
        }
        finally
        {
            ArrayPool<byte>.Shared.Return(stage);
            put.Dispose();   // without a commit: abandoned, nothing visible
        }
        Interlocked.Increment(ref tenant.Counters.Puts);
        Interlocked.Add(ref tenant.Counters.BytesWritten, h.Length);
        long now = Stopwatch.GetTimestamp();
        tenant.Counters.Record(now, now - started, Blocks(h.Length), isRead: false, tenant.Spec.P95LatencyUs);
        return new PutReply { Evicted = put.Evicted };
    }

    /// <summary>One put unit: admitted by the scheduler, then written (and, for the last, committed) inside the grant.</summary>
    private async Task WriteUnit(TenantEntry tenant, FlowEntry flow, FlashStore.PutStream put, byte[] stage, int fill, bool commit, string key)
    {
        IoTicket ticket = await Admit(tenant, flow, IoType.Write, fill, "Put", key).ConfigureAwait(false);
        try
        {
            put.Write(stage.AsSpan(0, fill));
            if (commit)
                put.Commit();
        }
        catch (IOException e)
        {
            throw new RpcException(new Status(StatusCode.Internal, $"Put of '{key}' for tenant '{tenant.Name}': device write failed: {e.Message}"));
        }
        finally
        {
            _dispatcher.Complete(ticket);
        }
    }

    public override async Task<DeleteReply> Delete(DeleteRequest request, ServerCallContext context)
    {
        TenantEntry tenant = Auth.Tenant(core, context, "Delete");
        FlowEntry flow = FlowOf(tenant, request.Flow, "Delete");
        string key = KeyOf(request.Key, "Delete");
        // The tombstone is one 4 KiB block written: priced as a write unit.
        IoTicket ticket = await Admit(tenant, flow, IoType.Write, CostTable.BlockBytes, "Delete", key).ConfigureAwait(false);
        bool deleted;
        try
        {
            deleted = _store.Delete(tenant.Name, key);
        }
        catch (ArgumentException e)
        {
            throw Invalid($"Delete of '{key}': {e.Message}");
        }
        finally
        {
            _dispatcher.Complete(ticket);
        }
        Interlocked.Increment(ref tenant.Counters.Deletes);
        return new DeleteReply { Deleted = deleted };
    }

    public override Task<TenantStats> Stats(TenantStatsRequest request, ServerCallContext context)
    {
        TenantEntry tenant = Auth.Tenant(core, context, "Stats");
        return Task.FromResult(StatsOf(core, tenant));
    }

    internal static TenantStats StatsOf(FlashServerCore core, TenantEntry t)
    {
        TenantCounters c = t.Counters;
        (double iops, double p95, double goodput) = c.Window(Stopwatch.GetTimestamp(), t.Class == "LC" ? t.Spec.IopsSlo : 0);
        return new TenantStats
        {
            Tenant = t.Name,
            Class = t.Class,
            IopsSlo = t.Spec.IopsSlo,
            P95LatencySloUs = t.Spec.P95LatencyUs,
            Flows = core.Flows.CountOf(t),
            Gets = Interlocked.Read(ref c.Gets),
            Hits = Interlocked.Read(ref c.Hits),
            Misses = Interlocked.Read(ref c.Misses),
            Puts = Interlocked.Read(ref c.Puts),
            Deletes = Interlocked.Read(ref c.Deletes),
            BytesRead = Interlocked.Read(ref c.BytesRead),
            BytesWritten = Interlocked.Read(ref c.BytesWritten),
            Iops = iops,
            ReadP95Us = p95,
            GoodputFrac = goodput,
            Throttled = Interlocked.Read(ref c.Throttled),
            ChecksumFailures = Interlocked.Read(ref c.ChecksumFailures),
        };
    }

    /// <summary>Hands a unit to the dispatcher and waits until the scheduler dispatches it.</summary>
    private async ValueTask<IoTicket> Admit(TenantEntry tenant, FlowEntry flow, IoType type, int bytes, string call, string key)
    {
        IoTicket ticket = _dispatcher.Submit(tenant, flow.Id, type, bytes);
        if (await ticket.WaitAsync().ConfigureAwait(false))
            return ticket;
        _dispatcher.Release(ticket);
        throw new RpcException(new Status(StatusCode.NotFound, $"{call} of '{key}': tenant '{tenant.Name}' was deregistered"));
    }

    private FlowEntry FlowOf(TenantEntry tenant, int id, string call)
    {
        FlowEntry flow = core.Flows.Find(id, tenant)
            ?? throw new RpcException(new Status(StatusCode.NotFound, $"{call}: flow {id} is not open for tenant '{tenant.Name}' (OpenFlow first; idle flows are closed after {core.Options.FlowIdleTimeout.TotalMinutes:0} min)"));
        Volatile.Write(ref flow.LastUsedTicks, Stopwatch.GetTimestamp());
        return flow;
    }

    /// <summary>The engine's key: container and blob joined by '/', unambiguous since a container name has no '/'.</summary>
    private static string KeyOf(ObjectKey? key, string call)
    {
        if (key is null || key.Container.Length == 0 || key.Blob.Length == 0)
            throw Invalid($"{call}: the key needs a container and a blob name");
        if (key.Container.Contains('/'))
            throw Invalid($"{call}: container '{key.Container}' contains '/'");
        return key.Container + "/" + key.Blob;
    }

    private static long Blocks(long bytes) => Math.Max(1, (bytes + CostTable.BlockBytes - 1) / CostTable.BlockBytes);

    private static RpcException Invalid(string message) => new(new Status(StatusCode.InvalidArgument, message));
}
