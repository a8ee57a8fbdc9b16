using Grpc.Core;
using Grpc.Net.Client;
using FaaST.Protos.Scale;

namespace FaaST.Scaling;

/// <summary>
/// An instance's unrequested vote (Faa$T §4: a large object needs N instances at once): a client of the
/// controller's ScaleControl service at the address the platform gives every instance it starts, in
/// <see cref="EnvironmentVariable"/>.
/// </summary>
public sealed class ScaleControlClient : IDisposable
{
    /// <summary>The controller's ScaleControl address, e.g. http://127.0.0.1:7080.</summary>
    public const string EnvironmentVariable = "FAAST_SCALE_CONTROLLER";

    /// <summary>The gRPC path of RequestScaleOut (what a credential is signed for).</summary>
    public const string RequestScaleOutPath = "/faast.scale.v1.ScaleControl/RequestScaleOut";

    private readonly GrpcChannel _channel;
    private readonly ScaleControl.ScaleControlClient _client;
    private readonly Func<string, string>? _authorization;

    /// <param name="address">The controller's address (http or https).</param>
    /// <param name="authorization">Given a method path, the value of the call's authorization header (e.g. a peer credential); none when null.</param>
    public ScaleControlClient(Uri address, Func<string, string>? authorization = null)
    {
        ArgumentNullException.ThrowIfNull(address);
        if (!address.IsAbsoluteUri || address.Scheme is not ("http" or "https"))
            throw new ArgumentException($"the scale controller's address must be an absolute http or https URL, not \"{address}\"", nameof(address));
        Address = address;
        _authorization = authorization;
        _channel = GrpcChannel.ForAddress(address);
        _client = new ScaleControl.ScaleControlClient(_channel);
    }

    public Uri Address { get; }

    /// <summary>The client for the address in <see cref="EnvironmentVariable"/>.</summary>
    /// <param name="environment">Where to look (tests pass their own); default the process's environment.</param>
    /// <exception cref="InvalidOperationException">The variable is unset, or not an absolute http(s) URL.</exception>
    public static ScaleControlClient FromEnvironment(System.Collections.IDictionary? environment = null, Func<string, string>? authorization = null)
    {
        var value = environment is null ? Environment.GetEnvironmentVariable(EnvironmentVariable) : environment[EnvironmentVariable] as string;
        if (string.IsNullOrWhiteSpace(value))
            throw new InvalidOperationException($"{EnvironmentVariable} is not set: this instance was not started by a scale controller, so it cannot ask for instances " +
                "(the platform sets it; set it to the controller's URL, e.g. http://127.0.0.1:7080, to run an instance by hand)");
        if (!Uri.TryCreate(value, UriKind.Absolute, out var address) || address.Scheme is not ("http" or "https"))
            throw new InvalidOperationException($"{EnvironmentVariable} must be the scale controller's absolute http or https URL, not \"{value}\"");
        return new ScaleControlClient(address, authorization);
    }

    /// <summary>Asks the controller for <paramref name="target"/> instances of <paramref name="app"/> now.</summary>
    /// <returns>How many instances the app will have (fewer than asked when the policy's maximum is lower).</returns>
    /// <exception cref="RpcException">The controller refused or could not be reached (its status says why).</exception>
    public async Task<int> RequestScaleOutAsync(string app, string instanceId, int target, string policy, string reason, CancellationToken ct)
    {
        ArgumentException.ThrowIfNullOrEmpty(app);
        ArgumentException.ThrowIfNullOrEmpty(instanceId);
        ArgumentException.ThrowIfNullOrEmpty(policy);
        ArgumentOutOfRangeException.ThrowIfLessThan(target, 1);
        var headers = _authorization is null ? null : new Metadata { { "authorization", _authorization(RequestScaleOutPath) } };
        var reply = await _client.RequestScaleOutAsync(new ScaleOutRequest
        {
            App = app,
            InstanceId = instanceId,
            TargetInstances = target,
            Policy = policy,
            Reason = reason ?? "",
        }, headers, cancellationToken: ct);
        return reply.GrantedInstances;
    }

    public void Dispose() => _channel.Dispose();
}
