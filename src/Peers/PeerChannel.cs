using System.Net;
using FaaST.Protos.Peer;
using Grpc.Core;
using Grpc.Net.Client;

namespace FaaST.Peers;

/// <summary>
/// The gRPC channel to one peer (Grpc.Net.Client over a SocketsHttpHandler of its own, so dropping
/// the peer closes its connections): HTTP/2 cleartext, large stream windows so a transfer is not
/// throttled by flow control, more than one connection when one's streams are all taken, the
/// protocol's message limits set explicitly, and no retries (a failed peer call goes to storage).
/// </summary>
internal sealed class PeerChannel : IDisposable
{
    private readonly GrpcChannel _channel;
    private readonly PeerAuth _credentials;

    public PeerChannel(Uri address, PeerAuth credentials)
    {
        _credentials = credentials;
        _channel = GrpcChannel.ForAddress(address, new GrpcChannelOptions
        {
            HttpHandler = NewHandler(),
            DisposeHttpClient = true,
            MaxReceiveMessageSize = PeerMethods.MaxMessageSize,
            MaxSendMessageSize = PeerMethods.MaxMessageSize,
            MaxRetryAttempts = 0,
            ThrowOperationCanceledOnCancellation = true,
        });
        Invoker = _channel.CreateCallInvoker();
        Client = new CacheletPeer.CacheletPeerClient(Invoker);
    }

    /// <summary>The settings every peer channel shares.</summary>
    private static SocketsHttpHandler NewHandler() => new()
    {
        EnableMultipleHttp2Connections = true,
        UseCookies = false,
        AutomaticDecompression = DecompressionMethods.None,
        InitialHttp2StreamWindowSize = 16 * 1024 * 1024,
        PooledConnectionIdleTimeout = TimeSpan.FromMinutes(5),
    };

    public CallInvoker Invoker { get; }

    /// <summary>The generated client (Stats, Invalidate, Lookup); Get and Put go through <see cref="Invoker"/>
    /// with the hand marshallers of <see cref="PeerMethods"/>.</summary>
    public CacheletPeer.CacheletPeerClient Client { get; }

    /// <summary>A call's options: a fresh signed credential for <paramref name="path"/> (see <see cref="PeerAuth"/>) and the token.</summary>
    public CallOptions Options(string path, CancellationToken ct) =>
        new(headers: new Metadata { { PeerAuth.HeaderName, _credentials.SignCall(path) } }, cancellationToken: ct);

    public void Dispose() => _channel.Dispose();
}
