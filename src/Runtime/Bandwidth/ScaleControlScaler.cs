using FaaST.Cachelet.Bandwidth;
using FaaST.Peers;
using FaaST.Protos.Scale;
using Grpc.Core;
using Grpc.Net.Client;

namespace FaaST.Runtime.Bandwidth;

/// <summary>
/// Asks the platform for instances at once (an unrequested bandwidth vote: protos/scale.proto
/// ScaleControl.RequestScaleOut) at the address in <c>FAAST_SCALE_CONTROLLER</c>, with the peer
/// protocol's authorization (the platform holds the app's peer secret: it starts the instances).
/// </summary>
internal sealed class ScaleControlScaler : IInstanceScaler, IDisposable
{
    /// <summary>The environment variable the platform sets to its ScaleControl endpoint; absent: no scale-out from here.</summary>
    public const string Variable = "FAAST_SCALE_CONTROLLER";

    private const string MethodPath = "/faast.scale.v1.ScaleControl/RequestScaleOut";

    /// <summary>How long the platform may take to answer (it only records the request; instances start afterwards).</summary>
    private static readonly TimeSpan AnswerTimeout = TimeSpan.FromSeconds(10);

    private readonly GrpcChannel _channel;
    private readonly ScaleControl.ScaleControlClient _client;
    private readonly string _app;
    private readonly Func<string> _instanceId;
    private readonly PeerAuth _credentials;

    private ScaleControlScaler(Uri address, string app, Func<string> instanceId, PeerAuth credentials)
    {
        _channel = GrpcChannel.ForAddress(address);
        _client = new ScaleControl.ScaleControlClient(_channel);
        _app = app;
        _instanceId = instanceId;
        _credentials = credentials;
        Address = address;
    }

    public Uri Address { get; }

    /// <summary>The scaler for <c>FAAST_SCALE_CONTROLLER</c>, or null when it is not set.</summary>
    /// <exception cref="InvalidOperationException">It is set but not an absolute http:// or https:// URL.</exception>
    public static ScaleControlScaler? FromEnvironment(string? value, string app, Func<string> instanceId, PeerAuth credentials)
    {
        if (string.IsNullOrWhiteSpace(value))
            return null;
        if (!Uri.TryCreate(value.Trim(), UriKind.Absolute, out var address) || address.Scheme is not ("http" or "https"))
            throw new InvalidOperationException($"{Variable}: '{value}' is not an absolute http:// or https:// URL of the platform's ScaleControl endpoint");
        return new ScaleControlScaler(address, app, instanceId, credentials);
    }

    public async Task<int> RequestInstancesAsync(int target, string reason, CancellationToken ct)
    {
        var request = new ScaleOutRequest { App = _app, InstanceId = _instanceId(), TargetInstances = target, Policy = "bandwidth", Reason = reason };
        var headers = new Metadata { { PeerAuth.HeaderName, _credentials.SignCall(MethodPath) } };
        try
        {
            var reply = await _client.RequestScaleOutAsync(request, headers, DateTime.UtcNow + AnswerTimeout, ct);
            return reply.GrantedInstances;
        }
        catch (RpcException e)
        {
            throw new InvalidOperationException($"RequestScaleOut({target}) at {Address} ({Variable}) failed: {e.StatusCode}: {e.Status.Detail}", e);
        }
    }

    public void Dispose() => _channel.Dispose();
}
