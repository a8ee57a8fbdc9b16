using System.Buffers;
using System.Collections.Concurrent;
using System.Diagnostics;
using FaaST.FlashBackend.Engine;
using FaaST.FlashBackend.Scheduling;
using FaaST.Protos.Flash;
using Google.Protobuf;
using Grpc.Core;

namespace FaaST.FlashBackend.Server;

/// <summary>
/// GetMany's items when the store reads through io_uring: no task, no awaiter and no blocked thread per item. An item
/// is looked up on the request loop, handed to the dispatcher with itself as the grant target, started on the ring by
/// the scheduler's pass that grants it, and answered on the ring's thread when its read ends. Why: with a Task.Run and
/// a blocking pread per item, the server spent ~45 µs of CPU per 4 KiB item at QD 32 on this 2-core VM, most of it in
/// context switches and thread-pool wake-ups (perf; docs/flash.md, "The server's read path"). Same admission, stats,
/// checks and per-item errors as the pread path (<see cref="FlashTierService.GetItemAsync"/>).
/// </summary>
internal sealed partial class FlashTierService
{
    /// <summary>
    /// One GetMany stream's answers: results queue here and one writer sends them, up to <see cref="ResultsPerReply"/>
    /// a message. A result answered on the ring's thread does not wake the writer itself: the stream asks the ring to
    /// tell it when the batch of completions ends (<see cref="IUringBatchEnd"/>), so a batch's results leave in one
    /// message (measured: docs/flash.md, "The server's read path").
    /// </summary>
    private sealed class ManyStream(FlashTierService service, TenantEntry tenant, StreamSlots slots) : IUringBatchEnd
    {
        private readonly ConcurrentQueue<ManyItem> _free = new();
        private readonly ConcurrentQueue<Queued> _results = new();
        // Data results and their bytes come back here once their message is written: a 4 KiB item then allocates
        // ~0.2 KiB instead of ~4.5 KiB, and gen0 collections were a third of the server's CPU per get (perf at QD 256).
        private readonly ConcurrentQueue<GetManyResult> _spare = new();
        private readonly SemaphoreSlim _signal = new(0);
        private int _kicked;
        private bool _atBatchEnd;       // the ring's thread only
        private volatile bool _completed;

        public FlashTierService Service => service;
        public TenantEntry Tenant => tenant;

        /// <summary>On the request loop, with a slot held: answers at once (a miss, an error, an empty range) or
        /// submits the item's read unit.</summary>
        public void Start(FlowEntry flow, GetManyItem item)
        {
            long started = Stopwatch.GetTimestamp();
            try
            {
                if (service.PrepareItem(tenant, item, out string key, out FlashStore.ValueReader reader, out long offset, out long length, out GetHeader header) is { } done)
                {
                    Post(done, onRing: false);
                    return;
                }
                if (!_free.TryDequeue(out ManyItem? op))
                    op = new ManyItem(this);
                op.Set(item.Id, key, header, reader, offset, (int)length, started);
                // The grant may come inside this call (the dispatcher's inline pass): op is ready before it.
                service._dispatcher.Submit(tenant, flow.Id, IoType.Read, (int)length, op);
            }
            catch (RpcException e)
            {
                Post(new GetManyResult { Id = item.Id, ErrorCode = e.StatusCode.ToString(), Error = e.Status.Detail }, onRing: false);
            }
        }

        /// <summary>Queues an item's answer and gives its slot back; <paramref name="onRing"/>: called on the ring's
        /// thread (from a read's completion), where the writer is woken once at the batch's end.</summary>
        public void Post(GetManyResult result, bool onRing, byte[]? rented = null)
        {
            _results.Enqueue(new Queued(result, rented));
            slots.Release();
            if (!onRing)
                Kick();
            else if (!_atBatchEnd)
            {
                _atBatchEnd = true;
                service._store.AtReadBatchEnd(this);
            }
        }

        public void BatchDone()
        {
            _atBatchEnd = false;
            Kick();
        }

        /// <summary>Every item is answered (or the stream failed): the writer ends once the queue is empty.</summary>
        public void Complete()
        {
            _completed = true;
            Kick();
        }

        public void Return(ManyItem op) => _free.Enqueue(op);

        /// <summary>A data result whose bytes live in <paramref name="rented"/> (ArrayPool), wrapped without a copy;
        /// both come back to the stream once the reply carrying them is written.</summary>
        public GetManyResult DataResult(ulong id, GetHeader header, byte[] rented, int length)
        {
            if (!_spare.TryDequeue(out GetManyResult? result))
                result = new GetManyResult();
            result.Id = id;
            result.Header = header;
            result.Data = UnsafeByteOperations.UnsafeWrap(new ReadOnlyMemory<byte>(rented, 0, length));
            return result;
        }

        private void Kick()
        {
            if (Interlocked.Exchange(ref _kicked, 1) == 0)
                _signal.Release();
        }

        public async Task WriteAsync(IServerStreamWriter<GetManyReply> responseStream, CancellationToken ct)
        {
            // One reply reused: WriteAsync has serialized it when its task ends (grpc-dotnet writes the message into
            // the response pipe before it flushes), so its results and their bytes may be reused after that.
            var reply = new GetManyReply();
            var rented = new byte[]?[ResultsPerReply];
            while (true)
            {
                await _signal.WaitAsync(ct).ConfigureAwait(false);
                Volatile.Write(ref _kicked, 0);
                // Read before draining: once set, every result is already queued.
                bool last = _completed;
                while (!_results.IsEmpty)
                {
                    int n = 0;
                    while (n < ResultsPerReply && _results.TryDequeue(out Queued a))
                    {
                        reply.Results.Add(a.Result);
                        rented[n++] = a.Rented;
                    }
                    await responseStream.WriteAsync(reply, ct).ConfigureAwait(false);
                    for (int i = 0; i < n; i++)
                    {
                        if (rented[i] is not { } bytes)
                            continue;
                        GetManyResult r = reply.Results[i];
                        r.Data = ByteString.Empty;
                        r.Header = null;
                        _spare.Enqueue(r);
                        ArrayPool<byte>.Shared.Return(bytes);
                        rented[i] = null;
                    }
                    reply.Results.Clear();
                }
                if (last)
                    return;
            }
        }
    }

    /// <summary>A queued answer and the pooled array its data lives in (null: nothing to give back).</summary>
    private readonly record struct Queued(GetManyResult Result, byte[]? Rented);

    /// <summary>One item's read unit: the dispatcher's grant target and the ring's completion.</summary>
    private sealed class ManyItem(ManyStream stream) : PendingRead, IGrantTarget
    {
        private ulong _id;
        private string _key = "";
        private GetHeader _header = null!;
        private FlashStore.ValueReader _reader;
        private long _offset;
        private int _length;
        private long _started;
        private IoTicket? _ticket;
        private bool _onRing;

        public void Set(ulong id, string key, GetHeader header, FlashStore.ValueReader reader, long offset, int length, long started)
        {
            _id = id;
            _key = key;
            _header = header;
            _reader = reader;
            _offset = offset;
            _length = length;
            _started = started;
        }

        /// <summary>In the dispatcher's pass: start the read on the ring (it only queues), or answer a refusal.</summary>
        public void Granted(IoTicket ticket, bool granted)
        {
            FlashTierService service = stream.Service;
            _onRing = false;
            if (!granted)
            {
                service._dispatcher.Release(ticket);
                Answer(new GetManyResult { Id = _id, ErrorCode = nameof(StatusCode.NotFound), Error = $"GetMany item {_id} of '{_key}': tenant '{stream.Tenant.Name}' was deregistered" });
                return;
            }
            _ticket = ticket;
            try
            {
                service._store.BeginRead(in _reader, _offset, _length, this);
            }
            catch (Exception e) when (e is ArgumentException or InvalidOperationException)
            {
                _ticket = null;
                service._dispatcher.Complete(ticket);
                Answer(new GetManyResult { Id = _id, ErrorCode = nameof(StatusCode.Internal), Error = $"GetMany item {_id} of '{_key}': {e.Message}" });
            }
        }

        /// <summary>On the ring's thread, before any of its batch is checked: the unit is done at the device, so the
        /// scheduler hears of it now and the reads its pass grants go out with the ring's next submission
        /// (<see cref="IoUring"/>'s Reap).</summary>
        protected override void DeviceDone()
        {
            stream.Service._dispatcher.Complete(_ticket!);
            _ticket = null;
        }

        /// <summary>On the ring's thread, after <see cref="DeviceDone"/>: the answer.</summary>
        protected override void ReadDone(ReadStatus status, ReadOnlySpan<byte> bytes, string? error)
        {
            TenantEntry tenant = stream.Tenant;
            _onRing = true;
            GetManyResult result;
            if (error is not null)
                result = new GetManyResult { Id = _id, ErrorCode = nameof(StatusCode.Internal), Error = $"GetMany item {_id} of '{_key}' for tenant '{tenant.Name}': {error}" };
            else if (status == ReadStatus.Corrupt)
            {
                Interlocked.Increment(ref tenant.Counters.ChecksumFailures);
                result = new GetManyResult { Id = _id, ErrorCode = nameof(StatusCode.DataLoss), Error = $"GetMany item {_id} of '{_key}' for tenant '{tenant.Name}': the stored value failed its checksum; it is dropped, discard any bytes received" };
            }
            else if (status == ReadStatus.Miss)
                result = MissOf(tenant, _id);
            else
            {
                Interlocked.Increment(ref tenant.Counters.Hits);
                Interlocked.Add(ref tenant.Counters.BytesRead, bytes.Length);
                long now = Stopwatch.GetTimestamp();
                tenant.Counters.Record(now, now - _started, Blocks(bytes.Length), isRead: true, tenant.Spec.P95LatencyUs);
                // Copied out of the ring's aligned buffer, which the next read reuses, into a pooled array.
                byte[] rented = ArrayPool<byte>.Shared.Rent(bytes.Length);
                bytes.CopyTo(rented);
                Answer(stream.DataResult(_id, _header, rented, bytes.Length), rented);
                return;
            }
            Answer(result);
        }

        private void Answer(GetManyResult result, byte[]? rented = null)
        {
            _header = null!;
            _reader = default;
            bool onRing = _onRing;   // read before Return: the op may be reused at once
            stream.Return(this);
            stream.Post(result, onRing, rented);
        }
    }
}
