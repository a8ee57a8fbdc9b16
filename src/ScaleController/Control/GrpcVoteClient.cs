using System.Collections.Concurrent;
using System.Net;
using FaaST.Peers;
using FaaST.Protos.Scale;
using Grpc.Core;
using Grpc.Net.Client;

namespace FaaST.ScaleController.Control;

/// <summary>
/// Asks an instance for its vote over <c>InstanceScaling.GetVote</c> (protos/scale.proto) on its peer
/// endpoint, HTTP/2 cleartext, each call signed like a peer call (<see cref="PeerAuth"/>: the platform holds
/// the app's peer secret because it starts the instances). One channel per instance, kept while the
/// instance is ready (<see cref="RetainOnly"/>); no retries: a missing vote is a 0 vote, the next round asks again.
/// </summary>
public sealed class GrpcVoteClient(PeerAuth credentials, TimeProvider time) : IVoteClient, IDisposable
{
    /// <summary>The method path a call signs (and the instance verifies).</summary>
    public const string GetVotePath = "/faast.scale.v1.InstanceScaling/GetVote";

    private readonly ConcurrentDictionary<Uri, Channel> _channels = new();

    public async Task<InstanceVote> GetVoteAsync(VoteEndpoint instance, VoteQuery query, CancellationToken ct)
    {
        ArgumentNullException.ThrowIfNull(instance);
        ArgumentNullException.ThrowIfNull(query);
        var channel = _channels.GetOrAdd(instance.PeerAddress, static address => new Channel(address));
        var request = new VoteRequest { App = query.App, Instances = query.Instances, InstanceLoadSeconds = query.InstanceLoadSeconds };
        var headers = new Metadata { { PeerAuth.HeaderName, credentials.SignCall(GetVotePath) } };
        var reply = await channel.Client.GetVoteAsync(request, new CallOptions(headers, cancellationToken: ct));
        return Map(instance, reply, time.GetUtcNow());
    }

    /// <summary>The reply as the controller keeps it. The endpoint's id names the instance (the one the
    /// platform knows it by); the votes and reasons are the instance's own.</summary>
    internal static InstanceVote Map(VoteEndpoint instance, VoteReply reply, DateTimeOffset at)
    {
        var votes = new PolicyVoteEntry[reply.Votes.Count];
        for (var i = 0; i < votes.Length; i++)
            votes[i] = new PolicyVoteEntry(reply.Votes[i].Policy, reply.Votes[i].Delta, reply.Votes[i].Reason);
        var load = reply.Load is { } l
            ? new InstanceLoadSummary(l.InvocationsPerSecond, l.InFlight, l.Utilization, l.LatencyP50Ms, l.Evictions, l.CacheAccesses)
            : null;
        return new InstanceVote(instance.InstanceId, true, votes, reply.State, load, null, at);
    }

    /// <summary>Closes the channels of instances no longer in <paramref name="ready"/>.</summary>
    public void RetainOnly(IReadOnlyList<VoteEndpoint> ready)
    {
        ArgumentNullException.ThrowIfNull(ready);
        foreach (var address in _channels.Keys)
        {
            if (!ready.Any(r => r.PeerAddress == address) && _channels.TryRemove(address, out var gone))
                gone.Dispose();
        }
    }

    public void Dispose()
    {
        foreach (var address in _channels.Keys)
        {
            if (_channels.TryRemove(address, out var channel))
                channel.Dispose();
        }
    }

    private sealed class Channel : IDisposable
    {
        private readonly GrpcChannel _channel;

        public Channel(Uri address)
        {
            _channel = GrpcChannel.ForAddress(address, new GrpcChannelOptions
            {
                HttpHandler = new SocketsHttpHandler
                {
                    UseCookies = false,
                    AutomaticDecompression = DecompressionMethods.None,
                    PooledConnectionIdleTimeout = TimeSpan.FromMinutes(5),
                },
                DisposeHttpClient = true,
                MaxRetryAttempts = 0,
                ThrowOperationCanceledOnCancellation = true,
            });
            Client = new InstanceScaling.InstanceScalingClient(_channel);
        }

        public InstanceScaling.InstanceScalingClient Client { get; }

        public void Dispose() => _channel.Dispose();
    }
}
