using System.Diagnostics;
using FaaST.Hosting;
using FaaST.Membership;
using FaaST.Peers;
using FaaST.Protos.Scale;
using FaaST.Runtime.Bandwidth;
using FaaST.Runtime.Scaling;
using FaaST.Runtime.Telemetry;
using FaaST.Scaling;
using Grpc.Core;
using Microsoft.Extensions.Options;

namespace FaaST.Runtime.Hosting.Components;

/// <summary>
/// The instance side of scaling (Faa$T §4): the InstanceScaling service (protos/scale.proto) on the peer
/// endpoint, admitted exactly like the peer protocol. GetVote answers this instance's votes over the
/// interval since the previous query; Drain marks it Draining in membership, then stops the host the way
/// SIGTERM does (new invocations get 503 with Retry-After, those in flight finish up to the drain's
/// deadline, membership is left) and lets the process exit.
/// </summary>
/// <remarks>
/// The controller reaches the instance only through this service (Pocket §4: drain, do not migrate).
/// Without peers (no cache, or --no-peers) there is no peer endpoint, so nothing to serve it on.
/// </remarks>
internal sealed class ScalingComponent : ILifecycleParticipant, IInstanceLoadTime
{
    private readonly FunctionApp _app;
    private readonly ScalingHostOptions _options;
    private readonly ServingOptions _serving;
    private readonly ServingComponent _web;
    private readonly PeersComponent _peers;
    private readonly BandwidthComponent _bandwidth;
    private readonly CacheComponent _cache;
    private readonly HttpFunctionsComponent _functions;
    private readonly ILogger _logger;
    private readonly HostLifecycle _hostLifecycle;
    private readonly EventLoopLoad _eventLoops;
    private IHostLifecycle? _lifecycle;
    private HostMetrics? _metrics;
    private double _loadSeconds;
    private int _draining;
    private TimeSpan _drainDeadline;

    /// <param name="lifecycle">Stopped after a drain when <see cref="ScalingHostOptions.StopRequested"/> is null (a host in a test's process).</param>
    public ScalingComponent(FunctionApp app, IOptions<ScalingHostOptions> options, IOptions<ServingOptions> serving, ServingComponent web, PeersComponent peers, BandwidthComponent bandwidth,
        CacheComponent cache, HttpFunctionsComponent functions, WorkersComponent workers, HostLifecycle lifecycle, ILoggerFactory loggers)
    {
        _eventLoops = new EventLoopLoad(() => workers.Pool?.EventLoops() ?? []);
        _functions = functions;
        _hostLifecycle = lifecycle;
        _app = app;
        _options = options.Value;
        _serving = serving.Value;
        _web = web;
        _peers = peers;
        _bandwidth = bandwidth;
        _cache = cache;
        _logger = loggers.CreateLogger("FaaST.Scaling");
        var service = new InstanceScalingService(this);
        web.ConfigureServices(builder => builder.Services.AddSingleton(service));
        web.MapEndpoints(routes => routes.MapGrpcService<InstanceScalingService>()
            .RequirePeerCredentials(() => _peers.Credentials, _peers.OnPeerPort, loggers.CreateLogger("FaaST.Peers")));
    }

    /// <summary>T_Load as the controller last sent it (0 until it measured one).</summary>
    public double LoadSeconds => Volatile.Read(ref _loadSeconds);

    /// <summary>T_Load as the controller last sent it; null until it sent a measured one.</summary>
    public TimeSpan? InstanceLoadTime => LoadSeconds > 0 ? TimeSpan.FromSeconds(LoadSeconds) : null;

    public void Participate(IHostLifecycle lifecycle)
    {
        _lifecycle = lifecycle;
        // After the HTTP functions' own callback (registered before this one) closed their gate.
        lifecycle.OnState((state, ct) => state == LifecycleState.Draining ? WaitForInFlightAsync(ct) : Task.CompletedTask);
    }

    private HostMetrics Metrics => _metrics ??= _web.Services.GetRequiredService<HostMetrics>();

    /// <summary>GetVote: the load since the previous query, the three policies' votes, the profile and the state.</summary>
    internal VoteReply Vote(VoteRequest request)
    {
        if (request.App.Length > 0 && !string.Equals(request.App, _app.Name, StringComparison.Ordinal))
            throw new RpcException(new Status(StatusCode.FailedPrecondition, $"GetVote for app \"{LogText.Escape(request.App)}\": this instance serves app \"{_app.Name}\""));
        if (!(request.InstanceLoadSeconds >= 0) || double.IsInfinity(request.InstanceLoadSeconds))
            throw new RpcException(new Status(StatusCode.InvalidArgument, $"GetVote: instance_load_seconds must be 0 (not measured) or a positive number of seconds, not {request.InstanceLoadSeconds}"));
        if (request.Instances < 0)
            throw new RpcException(new Status(StatusCode.InvalidArgument, $"GetVote: instances must be 0 or more, not {request.Instances}"));
        // The controller repeats its latest T_Load in every vote; a new value is a new measurement, which the
        // bandwidth planner's profile takes as one observation (a repeat is not one, or the average would
        // be pulled towards whatever the controller happened to repeat most).
        if (request.InstanceLoadSeconds > 0 && Interlocked.Exchange(ref _loadSeconds, request.InstanceLoadSeconds) != request.InstanceLoadSeconds)
            _bandwidth.Profile.ObserveLoad(TimeSpan.FromSeconds(request.InstanceLoadSeconds));

        var votes = _options.Votes;
        var metrics = Metrics;
        var sample = metrics.Load.TakeSample(Stopwatch.GetTimestamp());
        var cache = _cache.Cache;
        var activity = cache?.TakeActivity(votes.LargeObjectBytes) ?? default;
        var load = new InstanceLoad
        {
            InvocationsPerSecond = sample.InvocationsPerSecond,
            InFlight = (int)Math.Min(int.MaxValue, sample.InFlight),
            Queued = (int)Math.Min(int.MaxValue, metrics.Queued),
            LatencyP50Ms = sample.LatencyP50Ms,
            // One event loop per worker (Node): its busy share; threads (Python): invocations per slot.
            Utilization = _eventLoops.TakeSample() ?? sample.BusySlots / _options.WorkerSlots,
            CachedBytes = cache?.CachedBytes ?? 0,
            CacheCapacityBytes = cache?.CapacityBytes ?? 0,
            Evictions = activity.Evictions,
            ObjectsEvictedTwice = activity.ObjectsEvictedTwice,
            CacheAccesses = activity.Accesses,
            IntervalSeconds = sample.IntervalSeconds,
        };
        var compute = VoteRules.ComputeVote(load, request.Instances, votes);
        var cacheSize = VoteRules.CacheSizeVote(load, votes);
        var bandwidth = VoteRules.BandwidthVote(activity.LargeObjectAccesses, sample.IntervalSeconds, votes);
        Log.Voted(_logger, compute.Delta, cacheSize.Delta, bandwidth.Delta, compute.Reason, cacheSize.Reason, bandwidth.Reason);
        var membership = _peers.Membership;
        return new VoteReply
        {
            InstanceId = membership?.Self.Id ?? "",
            Votes = { compute, cacheSize, bandwidth },
            Load = load,
            Profile = CurrentProfile(),
            State = StateName(membership),
        };
    }

    /// <summary>
    /// T_Load as the controller sent it; BW_BS and BW_Inst as the read path profiled them (the planner's own
    /// values), 0 while not observed yet (the planner then uses the paper's seed, which is not a measurement).
    /// </summary>
    private BandwidthProfile CurrentProfile()
    {
        var profile = _bandwidth.Profile;
        var (_, storage, instance) = profile.Observations;
        return new BandwidthProfile
        {
            LoadSeconds = LoadSeconds,
            StorageBytesPerSecond = storage > 0 ? profile.StorageBytesPerSecond : 0,
            InstanceBytesPerSecond = instance > 0 ? profile.InstanceBytesPerSecond : 0,
        };
    }

    /// <summary>What the controller sees: draining from the moment a drain began, else the membership record's state.</summary>
    private string StateName(MembershipService? membership)
    {
        if (Volatile.Read(ref _draining) == 1 || _lifecycle?.State is LifecycleState.Draining or LifecycleState.Unloading or LifecycleState.Stopped)
            return "draining";
        return membership?.Self.State switch
        {
            MemberState.Active => "active",
            MemberState.Draining => "draining",
            _ => "joining",
        };
    }

    /// <summary>Drain: Draining in membership, then the host's stop (on another thread: this call answers first).</summary>
    internal async Task<DrainReply> DrainAsync(DrainRequest request, CancellationToken ct)
    {
        if (request.DeadlineMs < 0)
            throw new RpcException(new Status(StatusCode.InvalidArgument, $"Drain: deadline_ms must be 0 (the host's drain timeout) or more, not {request.DeadlineMs}"));
        var inFlight = Metrics.Load.InFlight;
        if (Interlocked.CompareExchange(ref _draining, 1, 0) != 0)
            return new DrainReply { InFlight = (int)Math.Min(int.MaxValue, inFlight) }; // already draining: the first deadline holds
        _drainDeadline = request.DeadlineMs > 0 ? TimeSpan.FromMilliseconds(request.DeadlineMs) : _serving.DrainTimeout;
        Log.DrainRequested(_logger, request.Reason.Length > 0 ? LogText.Escape(request.Reason) : "no reason given", inFlight, _drainDeadline);
        // From the reply on, new function requests get 503 with Retry-After (the frontend retries them on
        // another instance), without waiting for the host's stop to get that far.
        _functions.Close();
        if (_peers.Membership is { } membership)
        {
            try
            {
                // Peers stop giving it keys at their next listing while it still answers them (Faa$T §4).
                await membership.SetStateAsync(MemberState.Draining, ct);
            }
            catch (Exception e) when (e is not OperationCanceledException)
            {
                Log.DrainStateNotWritten(_logger, e, e.Message);
            }
        }
        // Not inline: the stop waits for Kestrel, which waits for this call.
        _ = Task.Run(StopHostAsync, CancellationToken.None);
        return new DrainReply { InFlight = (int)Math.Min(int.MaxValue, inFlight) };
    }

    private async Task StopHostAsync()
    {
        try
        {
            if (_options.StopRequested is { } stop)
                stop();
            else
                await _hostLifecycle.StopAsync();
        }
        catch (Exception e)
        {
            Log.DrainStopFailed(_logger, e);
        }
    }

    /// <summary>
    /// While the host drains after a Drain call: waits for the invocations in flight (every trigger's)
    /// up to the call's deadline, which may be longer than the host's own drain timeout.
    /// </summary>
    private async Task WaitForInFlightAsync(CancellationToken ct)
    {
        if (Volatile.Read(ref _draining) == 0 || _metrics is not { } metrics || metrics.Load.InFlight == 0)
            return;
        var deadline = Stopwatch.GetTimestamp() + (long)(_drainDeadline.TotalSeconds * Stopwatch.Frequency);
        // Polled: this runs once, at the end of the instance's life; the hot path keeps no waiters.
        while (metrics.Load.InFlight > 0)
        {
            if (Stopwatch.GetTimestamp() >= deadline)
            {
                Log.DrainDeadlinePassed(_logger, _drainDeadline, metrics.Load.InFlight);
                return;
            }
            await Task.Delay(TimeSpan.FromMilliseconds(20), ct);
        }
        Log.DrainedInFlight(_logger);
    }
}

/// <summary>InstanceScaling (protos/scale.proto), served on the peer endpoint behind the peer credentials.</summary>
internal sealed class InstanceScalingService(ScalingComponent component) : InstanceScaling.InstanceScalingBase
{
    public override Task<VoteReply> GetVote(VoteRequest request, ServerCallContext context) => Task.FromResult(component.Vote(request));

    public override Task<DrainReply> Drain(DrainRequest request, ServerCallContext context) => component.DrainAsync(request, context.CancellationToken);
}
