using System.Collections.Concurrent;
using System.Threading.Channels;
using FaaST.Cachelet.Peers;
using FaaST.Protos.Peer;
using Grpc.Core;

namespace FaaST.Peers;

/// <summary>
/// The requesting side of Lookup: one long-lived bidirectional stream to a peer that carries many
/// small Gets at once, so a small remote hit costs one message each way instead of an HTTP/2 call.
/// A broken stream fails what was waiting on it (the callers fall back) and the next lookup opens
/// a new one.
/// </summary>
internal sealed class LookupChannel(PeerChannel channel, Uri peer) : IDisposable
{
    public const string Path = PeerMethods.LookupPath;

    private readonly Lock _gate = new();
    private Session? _session;
    private long _nextId;

    /// <summary>Sends one lookup and waits for its reply.</summary>
    public async Task<LookupReply> LookupAsync(GetRequest get, long inlineLimit, CancellationToken ct)
    {
        var session = Current();
        var id = (ulong)Interlocked.Increment(ref _nextId);
        var reply = new TaskCompletionSource<LookupReply>(TaskCreationOptions.RunContinuationsAsynchronously);
        session.Pending[id] = reply;
        if (!session.Outbox.Writer.TryWrite(new LookupRequest { Id = id, Get = get, InlineLimit = inlineLimit }))
            throw new PeerException($"the lookup stream to {peer} is closed");
        try
        {
            return await reply.Task.WaitAsync(ct);
        }
        finally
        {
            session.Pending.TryRemove(id, out _);
        }
    }

    private Session Current()
    {
        lock (_gate)
        {
            if (_session is { Failed: false } live)
                return live;
            _session = new Session();
            _ = RunAsync(_session);
            return _session;
        }
    }

    private async Task RunAsync(Session session)
    {
        try
        {
            var stop = session.Stop.Token;
            using var call = channel.Client.Lookup(channel.Options(Path, stop));
            _ = WriteAsync(session, call.RequestStream);
            var replies = call.ResponseStream;
            while (await replies.MoveNext(stop))
            {
                var reply = replies.Current;
                if (session.Pending.TryRemove(reply.Id, out var waiter))
                    waiter.TrySetResult(reply);
            }
            throw new PeerException($"{peer} ended the lookup stream");
        }
        catch (Exception e)
        {
            session.Fail(e is PeerException ? e.Message : $"the lookup stream to {peer} failed: {PeerClient.Reason(e)}");
        }
    }

    /// <summary>One writer (a call takes one write at a time): the requests in the order they were queued.</summary>
    private static async Task WriteAsync(Session session, IClientStreamWriter<LookupRequest> requests)
    {
        try
        {
            var reader = session.Outbox.Reader;
            while (await reader.WaitToReadAsync(session.Stop.Token))
            {
                while (reader.TryRead(out var request))
                    await requests.WriteAsync(request, session.Stop.Token);
            }
        }
        catch (Exception e)
        {
            session.Fail($"writing to the lookup stream failed: {PeerClient.Reason(e)}");
        }
    }

    public void Dispose()
    {
        lock (_gate)
            _session?.Fail("the peer client was disposed");
    }

    private sealed class Session
    {
        public ConcurrentDictionary<ulong, TaskCompletionSource<LookupReply>> Pending { get; } = new();
        public Channel<LookupRequest> Outbox { get; } = Channel.CreateUnbounded<LookupRequest>(new UnboundedChannelOptions { SingleReader = true });
        public CancellationTokenSource Stop { get; } = new();
        public bool Failed { get; private set; }

        public void Fail(string reason)
        {
            Failed = true;
            Outbox.Writer.TryComplete();
            Stop.Cancel();
            foreach (var id in Pending.Keys)
                if (Pending.TryRemove(id, out var waiter))
                    waiter.TrySetException(new PeerException(reason));
        }
    }
}
