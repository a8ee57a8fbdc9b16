using FaaST.Storage;
using Microsoft.Extensions.Logging;
using Microsoft.Extensions.Logging.Abstractions;

namespace FaaST.Membership;

/// <summary>
/// The view of an app's running instances (Faa$T §5: membership in blob storage, heartbeats, ETag conditions).
/// Every instance owns one blob, "{app}/instances/{memberId}", and rewrites it each heartbeat with If-Match on its
/// previous ETag, carrying its state and its load report; nobody else writes it, so there is no hot blob. Each
/// interval the instance also lists the app's instance blobs (<see cref="ViewTracker"/> judges liveness). A dead
/// peer leaves the view, and this instance deletes its blob If-Match the ETag it saw, so an instance that came back
/// meanwhile is never deleted. An instance that finds its blob gone re-registers. Storage failures keep the last view
/// and are retried with backoff. Time (heartbeat intervals, expiry) comes from an injected <see cref="TimeProvider"/>.
/// </summary>
public sealed class MembershipService : IAsyncDisposable
{
    private const string ContainerNotFound = "ContainerNotFound";

    private readonly IBlobStore _store;
    private readonly MembershipOptions _options;
    private readonly ILogger _logger;
    private readonly TimeProvider _time;
    private readonly string _selfBlob;
    private readonly ViewTracker _tracker;
    private readonly Rounds _rounds;
    private readonly SemaphoreSlim _writing = new(1, 1); // heartbeats and state changes write the blob one at a time
    private readonly Lock _publishing = new();            // the listing loop and this instance's own changes publish views
    private CancellationTokenSource _stopping = new();
    private MembershipView _view;
    private Member _self;
    private string? _etag;       // of this instance's last write
    private long _seq;
    private long _heartbeats;    // successful heartbeats so far: this reader's yardstick for its peers'
    private Task _loops = Task.CompletedTask;
    private int _state;          // NotStarted, Running, Stopped

    private const int NotStarted = 0, Running = 1, Stopped = 2;

    /// <summary>Creates the service; nothing touches storage before <see cref="StartAsync"/>.</summary>
    /// <param name="self">This instance; its <see cref="Member.State"/> is the state it registers in (say, Joining for a standby).</param>
    /// <param name="timeProvider">The clock of heartbeats and expiry (default: the system's).</param>
    /// <exception cref="ArgumentException">The app name, the member id or an option is unusable (the message says why).</exception>
    public MembershipService(IBlobStore store, string app, Member self, MembershipOptions? options = null, ILogger? logger = null,
        TimeProvider? timeProvider = null)
    {
        ArgumentNullException.ThrowIfNull(store);
        ArgumentNullException.ThrowIfNull(self);
        InstanceRecord.ValidateName(app, "app name", nameof(app));
        InstanceRecord.ValidateName(self.Id, "member id", nameof(self));
        if (self.PeerAddress is not { IsAbsoluteUri: true })
        {
            throw new ArgumentException($"Member '{self.Id}' needs an absolute PeerAddress.", nameof(self));
        }

        if (!Enum.IsDefined(self.State))
        {
            throw new ArgumentException($"Member '{self.Id}' has no valid State ({(int)self.State}).", nameof(self));
        }

        _options = Validate(options ?? new MembershipOptions(), nameof(options));
        _store = store;
        _logger = logger ?? NullLogger.Instance;
        _time = timeProvider ?? TimeProvider.System;
        App = app;
        _self = self with { Load = null };
        _selfBlob = ViewTracker.Prefix(app) + self.Id;
        _view = MembershipView.Of([_self], _options.VirtualNodes);
        _tracker = new ViewTracker(store, app, self.Id, _options, _time, _logger, deleteDead: true, readLoads: false);
        _rounds = new Rounds(_time, _logger, _options.HeartbeatInterval, self.Id, app, () => Members.Count);
    }

    /// <summary>Raised (on the listing loop, or in <see cref="SetStateAsync"/>) when members join, leave or change state.</summary>
    public event Action<MembershipChange>? Changed;

    /// <summary>The app whose instances this service tracks.</summary>
    public string App { get; }

    /// <summary>This instance, in its current state and with the load it last reported.</summary>
    public Member Self => Volatile.Read(ref _self);

    /// <summary>
    /// The ring of the current view: its active members (all members when none is active); contains <see cref="Self"/>
    /// while it is active. A snapshot: hold it for a whole lookup.
    /// </summary>
    public HashRing Ring => Volatile.Read(ref _view).Ring;

    /// <summary>The current view, ordered by Id: every live instance, whatever its state; always contains <see cref="Self"/>.
    /// Peers' loads are as of their records' first reading (members do not re-read records for loads; observers do).</summary>
    public IReadOnlyList<Member> Members => Volatile.Read(ref _view).Members;

    /// <summary>
    /// Called at every heartbeat for the load to report (in-flight and queued invocations, cached bytes); the service
    /// stamps it with the time. Null: no load report. A report that throws is logged and the previous one is sent.
    /// </summary>
    public Func<MemberLoad>? LoadReport { get; set; }

    /// <summary>Test hook: while true the loops neither heartbeat nor list, like a stalled process.</summary>
    internal bool Frozen
    {
        get => _rounds.Frozen;
        set => _rounds.Frozen = value;
    }

    /// <summary>Test hook: both loops wait for a round still in the future (a fake clock may step).</summary>
    internal bool Waiting => _rounds.AllWaiting(2);

    /// <summary>Registers this instance, reads the current view, and starts heartbeating.</summary>
    /// <exception cref="InvalidOperationException">Already started, or another instance holds this member id.</exception>
    public async Task StartAsync(CancellationToken ct = default)
    {
        if (Interlocked.CompareExchange(ref _state, Running, NotStarted) != NotStarted)
        {
            throw new InvalidOperationException($"The membership service of '{Self.Id}' was already started.");
        }

        // Heartbeats and listings are separate loops, so that a slow listing (say, many new peers to read, as on the
        // first one) never delays this instance's own heartbeats and makes peers take it for dead.
        _stopping.Dispose();
        _stopping = new CancellationTokenSource();
        var token = _stopping.Token;
        try
        {
            await _store.CreateContainerIfNotExistsAsync(_options.Container, ct).ConfigureAwait(false);
            await RegisterAsync(ct).ConfigureAwait(false);
            _loops = Task.Run(() => _rounds.RepeatAsync("heartbeat", HeartbeatAsync, yieldWhenSlow: false, token), CancellationToken.None);
            await RefreshViewAsync(ct).ConfigureAwait(false);
        }
        catch
        {
            // A blob already written is left to time out, as after a crash (or adopted by a later StartAsync).
            await EndLoopsAsync().ConfigureAwait(false);
            Volatile.Write(ref _state, NotStarted);
            throw;
        }

        _loops = Task.WhenAll(_loops, Task.Run(() => _rounds.RepeatAsync("listing", RefreshViewAsync, yieldWhenSlow: true, token), CancellationToken.None));
        Log.Joined(_logger, Self.Id, App, Self.State, Members.Count);
    }

    /// <summary>
    /// Moves this instance to <paramref name="state"/> and writes it at once, so that peers see it at their next
    /// listing (say, Draining before a scale-in: peers stop giving it keys while it still answers them). Before
    /// <see cref="StartAsync"/> it sets the state to register in. A failed write is retried by the next heartbeat.
    /// </summary>
    /// <exception cref="ArgumentException">The state is not one of <see cref="MemberState"/>, or is Joining for a started instance.</exception>
    /// <exception cref="ObjectDisposedException">The service was stopped.</exception>
    public async Task SetStateAsync(MemberState state, CancellationToken ct = default)
    {
        if (!Enum.IsDefined(state))
        {
            throw new ArgumentException($"{(int)state} is not a member state.", nameof(state));
        }

        ObjectDisposedException.ThrowIf(Volatile.Read(ref _state) == Stopped, this);
        var changed = false;
        await _writing.WaitAsync(ct).ConfigureAwait(false);
        try
        {
            if (state == MemberState.Joining && Self.State != MemberState.Joining && Volatile.Read(ref _state) == Running)
            {
                throw new ArgumentException($"Instance '{Self.Id}' of app '{App}' is {Self.State}; it cannot go back to Joining.", nameof(state));
            }

            if (state == Self.State)
            {
                return;
            }

            Volatile.Write(ref _self, Self with { State = state });
            changed = true;
            Log.StateSet(_logger, Self.Id, App, state);
            if (Volatile.Read(ref _state) == Running && _etag is not null)
            {
                // A write that fails leaves _etag as it was: the next heartbeat writes the new state (or re-registers).
                _etag = (await WriteAsync(_etag, null, ct).ConfigureAwait(false)).ETag;
            }
        }
        finally
        {
            _writing.Release();
            if (changed)
            {
                PublishSelf(); // this instance's own view and ring follow at once, written or not
            }
        }
    }

    /// <summary>Stops heartbeating and deletes this instance's blob, so peers see the leave at their next listing.</summary>
    public async Task StopAsync()
    {
        if (!await HaltAsync().ConfigureAwait(false))
        {
            return;
        }

        try
        {
            // Unconditional: only this instance writes its blob, and a lost reply may have left us a stale ETag.
            await _store.DeleteAsync(_options.Container, _selfBlob).ConfigureAwait(false);
            Log.Left(_logger, Self.Id, App);
        }
        catch (Exception ex) when (ex is BlobStorageException or StorageUnavailableException)
        {
            Log.LeaveNotWritten(_logger, ex, Self.Id, _options.MissedHeartbeats);
        }
    }

    /// <summary>Same as <see cref="StopAsync"/> if still running.</summary>
    public async ValueTask DisposeAsync()
    {
        await StopAsync().ConfigureAwait(false);
        _stopping.Dispose();
        _writing.Dispose();
    }

    /// <summary>Test hook: stops the loops without deregistering, as a crash would.</summary>
    internal async Task AbandonAsync() => await HaltAsync().ConfigureAwait(false);

    internal static MembershipOptions Validate(MembershipOptions options, string paramName)
    {
        BlobNames.ValidateContainer(options.Container, paramName);
        ArgumentOutOfRangeException.ThrowIfLessThanOrEqual(options.HeartbeatInterval, TimeSpan.Zero, paramName);
        ArgumentOutOfRangeException.ThrowIfLessThan(options.MissedHeartbeats, 1, paramName);
        ArgumentOutOfRangeException.ThrowIfLessThan(options.VirtualNodes, 1, paramName);
        return options;
    }

    /// <summary>Ends the loops; true if this call stopped a running service.</summary>
    private async Task<bool> HaltAsync()
    {
        if (Interlocked.Exchange(ref _state, Stopped) != Running)
        {
            return false;
        }

        await EndLoopsAsync().ConfigureAwait(false);
        return true;
    }

    private async Task EndLoopsAsync()
    {
        await _stopping.CancelAsync().ConfigureAwait(false);
        try
        {
            await _loops.ConfigureAwait(false);
        }
        catch (OperationCanceledException)
        {
        }

        _stopping.Dispose();
    }

    private async Task HeartbeatAsync(CancellationToken ct)
    {
        await _writing.WaitAsync(ct).ConfigureAwait(false);
        try
        {
            // Under the write lock, so that a state change cannot be lost between reading Self and writing it back.
            if (LoadReport is { } load)
            {
                try
                {
                    var report = load() ?? throw new InvalidOperationException("The load report returned null.");
                    Volatile.Write(ref _self, Self with { Load = report with { At = _time.GetUtcNow() } });
                }
                catch (Exception ex)
                {
                    Log.LoadReportFailed(_logger, ex, Self.Id, App);
                }
            }

            if (_etag is null)
            {
                await RegisterAsync(ct).ConfigureAwait(false);
                return;
            }

            try
            {
                _etag = (await WriteAsync(_etag, null, ct).ConfigureAwait(false)).ETag;
            }
            catch (Exception ex) when (ex is BlobConditionFailedException || (ex as BlobStorageException)?.ErrorCode == ContainerNotFound)
            {
                Log.RegisteringAgain(_logger, Self.Id, App);
                _etag = null;
                await RegisterAsync(ct).ConfigureAwait(false);
            }

            Interlocked.Increment(ref _heartbeats);
        }
        finally
        {
            _writing.Release();
        }

        PublishSelf(); // the view's own member carries the load just reported
    }

    /// <summary>Creates this instance's blob with If-None-Match "*" (and the container, if it is gone).</summary>
    private async Task RegisterAsync(CancellationToken ct)
    {
        for (var attempt = 1; ; attempt++)
        {
            try
            {
                _etag = (await WriteAsync(null, "*", ct).ConfigureAwait(false)).ETag;
                return;
            }
            catch (BlobStorageException ex) when (ex.ErrorCode == ContainerNotFound && attempt < 3)
            {
                await _store.CreateContainerIfNotExistsAsync(_options.Container, ct).ConfigureAwait(false);
            }
            catch (BlobConditionFailedException) when (attempt < 3)
            {
                // The blob exists. If it is our own record (a write whose reply was lost, then retried), carry on from it.
                var existing = await _store.DownloadAsync(_options.Container, _selfBlob, ct).ConfigureAwait(false);
                if (existing is null)
                {
                    continue;
                }

                if (InstanceRecord.Parse(existing.Data) is not { } record || !record.IsSameInstance(Self))
                {
                    throw new InvalidOperationException(
                        $"Member id '{Self.Id}' of app '{App}' is already registered by another instance; ids must be unique per instance.");
                }

                // Our own record, perhaps of another state: the next heartbeat writes the current one over it.
                _etag = existing.Properties.ETag;
                return;
            }
        }
    }

    private Task<BlobProperties> WriteAsync(string? ifMatch, string? ifNoneMatch, CancellationToken ct)
    {
        var self = Self;
        var json = InstanceRecord.Of(self, ++_seq).ToJson();
        return _store.UploadAsync(_options.Container, _selfBlob, json, InstanceRecord.ContentTypeOf(self.State), ifMatch, ifNoneMatch, ct);
    }

    /// <summary>One listing: the tracker's live peers plus this instance make the view.</summary>
    private async Task RefreshViewAsync(CancellationToken ct)
    {
        var heartbeats = Interlocked.Read(ref _heartbeats); // before the listing: only heartbeats it can reflect count
        var peers = await _tracker.RefreshAsync(heartbeats, ct).ConfigureAwait(false);
        lock (_publishing)
        {
            peers.Add(Self);
            MembershipView.Publish(ref _view, peers, _options.VirtualNodes, Changed, _logger, Self.Id, App);
        }
    }

    /// <summary>Republishes the view with this instance as it is now (its state or load changed).</summary>
    private void PublishSelf()
    {
        lock (_publishing)
        {
            var self = Self;
            var members = Members.Select(m => m.Id == self.Id ? self : m).ToList();
            MembershipView.Publish(ref _view, members, _options.VirtualNodes, Changed, _logger, self.Id, App);
        }
    }
}
