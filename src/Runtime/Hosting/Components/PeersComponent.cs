using FaaST.Cachelet;
using FaaST.Hosting;
using FaaST.Membership;
using FaaST.Peers;
using FaaST.Storage;
using Microsoft.AspNetCore.Server.Kestrel.Core;
using Microsoft.Extensions.Options;

namespace FaaST.Runtime.Hosting.Components;

/// <summary>
/// The cooperative cache's side of the host, in two stages. <see cref="ServiceLifecycleStage.PeerTransport"/>:
/// the app's peer credentials and the client (stopped after the cache, whose flush may write through an
/// owner). <see cref="ServiceLifecycleStage.Peers"/>: registers in the app's membership and connects the
/// cache to the other instances; stopping it leaves the view first thing when the host drains.
/// </summary>
/// <remarks>
/// Storage that is down at start does not stop the host: it serves as a cache of its own and keeps
/// trying to join in the background. That retry belongs to this component: stopping it cancels the
/// loop and waits for it, and a join that completes after the stop began is left at once (its record
/// deleted) instead of being adopted, so a stopped host never heartbeats.
/// </remarks>
internal sealed class PeersComponent : ILifecycleParticipant, IHostMembership
{
    private readonly FunctionApp _app;
    private readonly PeerHostOptions _options;
    private readonly StorageComponent _storage;
    private readonly CacheComponent _cache;
    private readonly ILoggerFactory _loggers;
    private readonly ILogger _logger;
    private readonly PeerBulkListener _bulk = new(); // large peer Gets, on the peer port next to HTTP/2
    private readonly Lock _lock = new();
    private readonly CancellationTokenSource _stopping = new();
    private ListenOptions? _listen;
    private PeerClient? _client;
    private PeerAuth? _credentials;
    private MembershipService? _membership;

    /// <summary>Raised (under the component's lock, so never after the host began to stop) when this instance has joined
    /// its app's view and connected the cache to its peers: what builds on the view connects to the cache here.</summary>
    public event Action<BlobCache>? Adopted;

    private Task _joining = Task.CompletedTask;
    private bool _stopped;

    public PeersComponent(FunctionApp app, IOptions<PeerHostOptions> peerOptions, StorageComponent storage, CacheComponent cache,
        ServingComponent serving, ILoggerFactory loggers)
    {
        var options = peerOptions.Value;
        _app = app;
        _options = options;
        _storage = storage;
        _cache = cache;
        _loggers = loggers;
        _logger = loggers.CreateLogger("FaaST.Host");
        serving.Listen(options.ListenAddress, options.Port, l =>
        {
            l.Protocols = HttpProtocols.Http2;
            _bulk.Attach(l);
            _listen = l;
        });
        serving.ConfigureServices(builder => builder.Services.AddPeerServices());
        serving.MapEndpoints(MapPeerEndpoints);
    }

    /// <summary>The app's instances in this one's current view (just itself before it joined).</summary>
    public IReadOnlyList<Member> Members => Volatile.Read(ref _membership)?.Members ?? [];

    /// <summary>This instance's membership id and peer endpoint, once joined.</summary>
    public Member? Self => Volatile.Read(ref _membership)?.Self;

    /// <summary>This instance's membership, once joined (null before, and while storage keeps it from joining).</summary>
    public MembershipService? Membership => Volatile.Read(ref _membership);

    /// <summary>The app's peer credentials, from the peer-transport stage on.</summary>
    public PeerAuth Credentials => _credentials ?? throw new InvalidOperationException("the peer transport has not started");

    /// <summary>Whether a request came in on the peer port (other services there admit only those).</summary>
    public bool OnPeerPort(HttpContext context) => context.Connection.LocalPort == PeerPort;

    /// <summary>The peer port Kestrel bound (a free one for --peer-port 0), from the endpoints stage on.</summary>
    private int PeerPort => _listen?.IPEndPoint?.Port ?? throw new InvalidOperationException("the peer port is not bound yet (Kestrel starts at the endpoints stage)");

    private PeerClient Client => _client ?? throw new InvalidOperationException("the peer transport has not started");

    public void Participate(IHostLifecycle lifecycle)
    {
        lifecycle.Subscribe("PeerTransport", ServiceLifecycleStage.PeerTransport, new LifecycleObserver(StartTransport, StopTransport));
        lifecycle.Subscribe("Membership", ServiceLifecycleStage.Peers, new LifecycleObserver(JoinAsync, LeaveAsync));
    }

    private Task StartTransport(CancellationToken ct)
    {
        _credentials = new PeerAuth(PeerSecret.Resolve(_app, _storage.Accounts.ConnectionString("AzureWebJobsStorage")), _app.Name);
        _client = new PeerClient(new PeerOptions { Credentials = _credentials, Timeout = _options.Timeout, FetchTimeout = _options.FetchTimeout });
        return Task.CompletedTask;
    }

    private Task StopTransport(CancellationToken ct)
    {
        _client?.Dispose();
        return Task.CompletedTask;
    }

    private void MapPeerEndpoints(WebApplication web)
    {
        var accounts = _storage.Accounts;
        web.MapPeerEndpoints(_cache.Started, new PeerServerOptions
        {
            Credentials = Credentials,
            StoreFor = account => accounts.ForEndpoint(account),
            // The port is bound once Kestrel started (a free one for --peer-port 0); read per call.
            Accepts = OnPeerPort,
        }, _loggers.CreateLogger("FaaST.Peers"), _bulk);
    }

    private async Task JoinAsync(CancellationToken ct)
    {
        // Never 0.0.0.0: other instances must be able to dial what this one advertises.
        var address = PeerSecret.PeerUri(PeerSecret.Advertised(_options.ListenAddress), PeerPort);
        var id = _options.InstanceId ?? $"{Environment.MachineName}-{Environment.ProcessId}-{Guid.NewGuid().ToString("N")[..6]}".ToLowerInvariant();
        var self = new Member(id, address, DateTimeOffset.UtcNow);
        try
        {
            Adopt(await TryJoinAsync(self, ct));
        }
        catch (Exception e) when (e is StorageUnavailableException or BlobStorageException)
        {
            Log.JoinDeferred(_logger, e, e.Message);
            _joining = RetryJoinAsync(self, _stopping.Token);
        }
    }

    private async Task RetryJoinAsync(Member self, CancellationToken ct)
    {
        for (var delay = TimeSpan.FromSeconds(1); ; delay = TimeSpan.FromSeconds(Math.Min(30, delay.TotalSeconds * 2)))
        {
            MembershipService joined;
            try
            {
                await Task.Delay(delay, ct);
                joined = await TryJoinAsync(self, ct);
            }
            catch (Exception e) when (e is StorageUnavailableException or BlobStorageException)
            {
                Log.JoinRetryFailed(_logger, e, e.Message);
                continue;
            }
            catch (OperationCanceledException) when (ct.IsCancellationRequested)
            {
                return;
            }
            if (!Adopt(joined))
            {
                // The host began stopping while this join was under way: leave at once.
                await joined.DisposeAsync();
            }
            return;
        }
    }

    /// <summary>Registers this instance; the service is started but not yet the host's (see <see cref="Adopt"/>).</summary>
    private async Task<MembershipService> TryJoinAsync(Member self, CancellationToken ct)
    {
        var store = _storage.Accounts.Get("AzureWebJobsStorage");
        var membership = new MembershipService(store, _app.Name, self, _options.Membership, _loggers.CreateLogger("FaaST.Membership"));
        var cache = _cache.Started;
        membership.Changed += change =>
        {
            cache.OnOwnershipChanged();
            Log.MembershipChanged(_logger, change.Ring.Members.Count,
                change.Joined.Count > 0 ? "; joined " + string.Join(", ", change.Joined.Select(m => m.Id)) : "",
                change.Left.Count > 0 ? "; left " + string.Join(", ", change.Left.Select(m => m.Id)) : "");
        };
        try
        {
            await membership.StartAsync(ct);
        }
        catch
        {
            await membership.DisposeAsync();
            throw;
        }
        return membership;
    }

    /// <summary>Makes a started membership the host's and connects the cache, unless the host is stopping.</summary>
    private bool Adopt(MembershipService membership)
    {
        lock (_lock)
        {
            if (_stopped)
                return false;
            Volatile.Write(ref _membership, membership);
            var cache = _cache.Started;
            cache.ConnectPeers(new RingOwnerDirectory(membership), Client);
            Adopted?.Invoke(cache);
        }
        Log.InstanceServing(_logger, membership.Self.Id, membership.Self.PeerAddress, membership.Members.Count);
        return true;
    }

    /// <summary>Leaves the view, so peers stop sending this instance work; ends a background join first.</summary>
    private async Task LeaveAsync(CancellationToken ct)
    {
        lock (_lock)
            _stopped = true;
        await _stopping.CancelAsync();
        await _joining;
        if (Volatile.Read(ref _membership) is { } membership)
            await membership.DisposeAsync();
        _stopping.Dispose();
    }
}
