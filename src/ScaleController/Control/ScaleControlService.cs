using FaaST.Peers;
using FaaST.Protos.Scale;
using Grpc.Core;

namespace FaaST.ScaleController.Control;

/// <summary>
/// The server side of <c>ScaleControl.RequestScaleOut</c>: an instance's unrequested vote (it needs
/// instances now, e.g. to download a large object in ranges, Faa$T §4) goes to the app's
/// <see cref="ScaleLoop"/>, which acts at once or collapses it into its next decision. The reply says how
/// many instances the app will have. The signature is checked first (<see cref="IScaleLoopRegistry.RequestCredentialsOf"/>:
/// an unsigned or wrongly signed call is <see cref="StatusCode.Unauthenticated"/>, whether the app exists or not, so
/// the answer names no app to a caller without its secret); then an unknown app is <see cref="StatusCode.NotFound"/>,
/// a bad request <see cref="StatusCode.InvalidArgument"/>, both naming what is wrong.
/// </summary>
public sealed class ScaleControlService(IScaleLoopRegistry registry, ILogger<ScaleControlService> logger) : ScaleControl.ScaleControlBase
{
    /// <summary>The method path a signed request signs.</summary>
    public const string RequestScaleOutPath = "/faast.scale.v1.ScaleControl/RequestScaleOut";

    public override async Task<ScaleOutReply> RequestScaleOut(ScaleOutRequest request, ServerCallContext context)
    {
        ArgumentNullException.ThrowIfNull(request);
        ArgumentNullException.ThrowIfNull(context);
        if (string.IsNullOrEmpty(request.App))
            throw Refuse(StatusCode.InvalidArgument, "the request names no app");
        if (registry.RequestCredentialsOf(request.App) is { } credentials
            && !credentials.VerifyCall(context.RequestHeaders.GetValue(PeerAuth.HeaderName), RequestScaleOutPath, out var why))
        {
            throw Refuse(StatusCode.Unauthenticated, $"scale-out request for app \"{request.App}\" refused: {why}");
        }
        var loop = registry.Find(request.App);
        if (loop is null)
            throw Refuse(StatusCode.NotFound, $"no app \"{request.App}\" is deployed on this platform");
        if (request.TargetInstances < 1)
            throw Refuse(StatusCode.InvalidArgument, $"target_instances {request.TargetInstances} for app \"{request.App}\" is not a number of instances (at least 1)");
        var who = string.IsNullOrEmpty(request.InstanceId) ? "an unnamed instance" : request.InstanceId;
        var policy = string.IsNullOrEmpty(request.Policy) ? "unspecified" : request.Policy;
        var reason = $"instance {who} {policy}: {(string.IsNullOrEmpty(request.Reason) ? "no reason given" : request.Reason)}";
        var decision = await loop.RequestImmediateAsync(request.TargetInstances, reason, context.CancellationToken);
        Log.Unrequested(logger, request.App, request.TargetInstances, who, policy, decision.Target, decision.Reason);
        return new ScaleOutReply { GrantedInstances = decision.Target, Reason = decision.Reason };
    }

    private RpcException Refuse(StatusCode code, string detail)
    {
        Log.UnrequestedRefused(logger, detail);
        return new RpcException(new Status(code, detail));
    }
}
