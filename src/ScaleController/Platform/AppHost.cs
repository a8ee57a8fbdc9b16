using FaaST.Policy;
using FaaST.Peers;
using FaaST.ScaleController.Control;
using FaaST.ScaleController.Deploy;
using FaaST.ScaleController.Frontend;
using FaaST.ScaleController.Prewarm;
using FaaST.ScaleController.Providers;

namespace FaaST.ScaleController.Platform;

/// <summary>An instance as the platform tracks it.</summary>
public enum InstanceState
{
    Starting,
    Ready,
    Draining,
}

/// <summary>
/// One deployed app on the platform: its current deployment, its instances, its frontend and its scale loop.
/// Changes to the instance set (scale out or in, redeploy, unload, replacing a dead instance) are serialised
/// per app; the request path never waits on them (the frontend reads an immutable snapshot of ready instances).
/// Starting instances is AppHost.Instances.cs, changing the set AppHost.Scaling.cs, the budget's slots and the
/// lifecycle events AppHost.Slots.cs.
/// </summary>
internal sealed partial class AppHost : IScaleTarget, Scaling.IInstanceLoadTime, IAsyncDisposable
{
    private readonly PlatformContext _platform;
    private readonly SemaphoreSlim _changes = new(1, 1);
    private readonly Lock _gate = new();
    private readonly ILogger _logger;
    private List<Slot> _slots = [];
    private int _desired;
    private bool _disposed;
    private DateTimeOffset _loadedAt;
    private ScaleLoop _loop = null!;
    private CancellationTokenSource _loopStop = new();
    private Task _loopTask = Task.CompletedTask;
    private FrontendStats _lastStats;
    // The tail of this app's lifecycle events handed to the handlers (under _gate): each waits for the one before.
    private Task _events = Task.CompletedTask;

    public AppHost(PlatformContext platform, Deployment deployment, string directory, ScalePolicy policy, ILogger logger,
        LoadScheduleOptions? loadSchedule = null, FaaST.Prewarm.Timing.IdleTimeHistogram? learnt = null)
    {
        _platform = platform;
        _logger = logger;
        Deployment = deployment;
        Directory = directory;
        Policy = policy;
        Frontend = new AppFrontend(deployment.App, platform.FrontendOptions(policy), logger, platform.Time)
        {
            ColdStart = ColdStartAsync,
        };
        Frontend.InstanceFailed += OnInstanceFailed;
        InitLoadSchedule(loadSchedule ?? LoadScheduleOptions.Default, learnt);
        _loop = NewLoop(policy);
    }

    private ScaleLoop NewLoop(ScalePolicy policy)
    {
        var secret = _platform.PeerSecretOf(App, Directory);
        // Vote queries are signed with the app's peer secret, as the instances' peer calls are; unrequested votes
        // are accepted only signed with it. The verifier outlives the loop (a policy change makes a new loop): it
        // remembers the nonces it took, and a new one would accept a captured call again for its replay window.
        // Only a changed secret makes a new one (the old secret's calls no longer verify anyway).
        if (_requestAuth is null || !secret.AsSpan().SequenceEqual(_requestSecret))
        {
            _requestAuth = new PeerAuth(secret, App);
            _requestSecret = secret;
        }
        return new ScaleLoop(this, policy, new GrpcVoteClient(new PeerAuth(secret, App), _platform.Time), _platform.Time, _logger,
            new ScaleLoopOptions { RequestCredentials = _requestAuth });
    }

    private PeerAuth? _requestAuth;
    private byte[] _requestSecret = [];

    public string App => Deployment.App;

    public Deployment Deployment { get; private set; }

    /// <summary>The extracted package of <see cref="Deployment"/>.</summary>
    public string Directory { get; private set; }

    public ScalePolicy Policy { get; private set; }

    public AppFrontend Frontend { get; }

    public ScaleLoop Loop => Volatile.Read(ref _loop);

    /// <summary>The frontend's numbers of the controller's last round (in flight and queued now, completed/failed in the interval).</summary>
    public FrontendStats LastStats => _lastStats;

    /// <summary>True between an unload (keep-alive expired) and the next cold start.</summary>
    public bool Unloaded { get; private set; }

    /// <summary>The instance count the platform is working towards.</summary>
    public int Desired => Volatile.Read(ref _desired);

    public IReadOnlyList<(InstanceHandle Handle, InstanceState State)> Instances
    {
        get
        {
            lock (_gate)
                return _slots.Select(s => (s.Handle!, s.State)).Where(s => s.Item1 is not null).ToArray();
        }
    }

    // --- IScaleTarget (the scale loop's view of the app) ---

    public int CurrentInstances
    {
        get
        {
            lock (_gate)
                return _slots.Count(s => s.State != InstanceState.Draining);
        }
    }

    public int StartingInstances
    {
        get
        {
            lock (_gate)
                return _slots.Count(s => s.State == InstanceState.Starting);
        }
    }

    public IReadOnlyList<VoteEndpoint> ReadyInstances
    {
        get
        {
            lock (_gate)
                return _slots.Where(s => s is { State: InstanceState.Ready, Handle.PeerAddress: not null })
                    .Select(s => new VoteEndpoint(s.Handle!.Id, s.Handle.PeerAddress!)).ToArray();
        }
    }

    public DateTimeOffset LastInvocation => Frontend.LastRequest > _loadedAt ? Frontend.LastRequest : _loadedAt;

    public FrontendLoad Load()
    {
        var s = Frontend.TakeStats();
        _lastStats = s;
        return new FrontendLoad(s.InvocationsPerSecond, s.InFlight, s.Queued, s.LatencyP50Ms, s.LatencyP99Ms);
    }

    /// <summary>The mean time an instance of this app took to start (T_Load), 0 before the first start.</summary>
    public double LoadSeconds { get; private set; }

    /// <summary>T_Load for the instances' bandwidth planning: sent with every vote query.</summary>
    public TimeSpan? InstanceLoadTime => LoadSeconds == 0 ? null : TimeSpan.FromSeconds(LoadSeconds);

    private Task _starting = Task.CompletedTask;

    /// <summary>Completes when the instances being started now are ready (or failed to start).</summary>
    public Task WhenStartedAsync(CancellationToken ct) => Volatile.Read(ref _starting).WaitAsync(ct);

    public async ValueTask DisposeAsync()
    {
        await _loopStop.CancelAsync();
        await _loopTask;
        await _changes.WaitAsync();
        try
        {
            _disposed = true;
            // Instances still starting are waited for (bounded by the provider's start timeout), then drained
            // with the rest: none is left running behind a stopped platform.
            await Volatile.Read(ref _starting);
            Slot[] all;
            lock (_gate)
                all = _slots.ToArray();
            lock (_gate)
                foreach (var s in all)
                    s.State = InstanceState.Draining;
            await Task.WhenAll(all.Select(s => DrainAndStopAsync(s, CancellationToken.None)));
        }
        finally
        {
            _changes.Release();
        }
        CancelReload();
        await Frontend.DisposeAsync();
        _loopStop.Dispose();
    }

}
