using FaaST.Cachelet;
using FaaST.Hosting;
using FaaST.Runtime.Hosting;
using FaaST.Runtime.Hosting.Components;
using FaaST.Scaling;
using Microsoft.Extensions.Options;

namespace FaaST.Runtime.Bandwidth;

/// <summary>
/// Bandwidth scaling on this instance (Faa$T §4), in one home: the instance's bandwidth profile (T_Load, BW_BS,
/// BW_Inst), the client that asks the platform for instances at once (<see cref="ScaleControlScaler"/>, when
/// FAAST_SCALE_CONTROLLER is set), and connecting both to the cache once the instance has joined its app's view.
/// The rule itself (T_DR) is src/Scaling's <see cref="BandwidthPlanner"/>, shared with the platform; the mechanism
/// (fetching a large miss in ranges from several instances) is the cachelet's Bandwidth folder.
/// </summary>
/// <remarks>
/// Registered with the peers (no view, no ranges from other instances). It subscribes to the peer-transport stage
/// after <see cref="PeersComponent"/> (the scaler signs its calls with the app's peer credentials, made there), and
/// connects when the peers adopt a membership, which may happen late (storage down at start: the join retries in
/// the background).
/// </remarks>
internal sealed class BandwidthComponent : ILifecycleParticipant
{
    private readonly FunctionApp _app;
    private readonly PeerHostOptions _options;
    private readonly PeersComponent _peers;
    private ScaleControlScaler? _scaler;

    public BandwidthComponent(FunctionApp app, IOptions<PeerHostOptions> options, PeersComponent peers)
    {
        _app = app;
        _options = options.Value;
        _peers = peers;
        peers.Adopted += Connect;
    }

    /// <summary>This instance's bandwidth profile, measured by the cache's transfers: what its planning uses and its
    /// votes report (protos/scale.proto BandwidthProfile).</summary>
    public ProfiledBandwidth Profile { get; } = new();

    public void Participate(IHostLifecycle lifecycle) =>
        lifecycle.Subscribe("BandwidthScaler", ServiceLifecycleStage.PeerTransport, new LifecycleObserver(StartScaler, StopScaler));

    private Task StartScaler(CancellationToken ct)
    {
        _scaler = ScaleControlScaler.FromEnvironment(Environment.GetEnvironmentVariable(ScaleControlScaler.Variable), _app.Name,
            () => _peers.Self?.Id ?? "", _peers.Credentials);
        return Task.CompletedTask;
    }

    private Task StopScaler(CancellationToken ct)
    {
        _scaler?.Dispose();
        return Task.CompletedTask;
    }

    /// <summary>Large misses are fetched by several instances at once; without a scale controller (FAAST_SCALE_CONTROLLER
    /// unset) only by those already in the view.</summary>
    private void Connect(BlobCache cache) =>
        cache.ConnectBandwidthScaling(new ProfiledBandwidthPlanner(Profile, _options.Bandwidth.MaxInstances), _scaler, _options.Bandwidth);
}
