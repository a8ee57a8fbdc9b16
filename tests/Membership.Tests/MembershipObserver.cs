using FaaST.Storage;
using Microsoft.Extensions.Logging;
using Microsoft.Extensions.Logging.Abstractions;

namespace FaaST.Membership.Tests;

/// <summary>
/// Reads an app's view without joining it, as the tests watch the members (nothing in the product does: the platform
/// asks the instances themselves, over scale.proto). It lists the instance blobs
/// every <see cref="MembershipOptions.HeartbeatInterval"/> and judges liveness as the members do (its yardstick is
/// its own successful listings), so it sees joins, leaves, expiries and state changes, and it re-reads a record
/// whenever it changed, so that <see cref="Member.Load"/> is as fresh as the instances' heartbeats. It writes
/// nothing: no blob, no container, no deletion of dead instances' blobs (the members do that).
/// </summary>
public sealed class MembershipObserver : IAsyncDisposable
{
    private const string ContainerNotFound = "ContainerNotFound";

    private readonly MembershipOptions _options;
    private readonly ILogger _logger;
    private readonly ViewTracker _tracker;
    private readonly Rounds _rounds;
    private readonly CancellationTokenSource _stopping = new();
    private MembershipView _view = MembershipView.Empty;
    private long _listings;       // successful listings so far: this reader's yardstick
    private Task _loop = Task.CompletedTask;
    private int _state;           // NotStarted, Running, Stopped

    private const int NotStarted = 0, Running = 1, Stopped = 2;

    /// <summary>Creates the observer; nothing touches storage before <see cref="StartAsync"/>.</summary>
    /// <param name="timeProvider">The clock of listings and expiry (default: the system's).</param>
    /// <exception cref="ArgumentException">The app name or an option is unusable (the message says why).</exception>
    public MembershipObserver(IBlobStore store, string app, MembershipOptions? options = null, ILogger? logger = null, TimeProvider? timeProvider = null)
    {
        ArgumentNullException.ThrowIfNull(store);
        InstanceRecord.ValidateName(app, "app name", nameof(app));
        _options = MembershipService.Validate(options ?? new MembershipOptions(), nameof(options));
        _logger = logger ?? NullLogger.Instance;
        var time = timeProvider ?? TimeProvider.System;
        App = app;
        _tracker = new ViewTracker(store, app, selfId: null, _options, time, _logger, deleteDead: false, readLoads: true);
        _rounds = new Rounds(time, _logger, _options.HeartbeatInterval, "an observer", app, () => Members.Count);
    }

    /// <summary>Raised (on the listing loop) when members join, leave or change state.</summary>
    public event Action<MembershipChange>? Changed;

    /// <summary>The app observed.</summary>
    public string App { get; }

    /// <summary>The live instances, ordered by Id, with their states and latest loads; empty before the first listing.</summary>
    public IReadOnlyList<Member> Members => Volatile.Read(ref _view).Members;

    /// <summary>The ring the instances of this view compute (its active members); <see cref="HashRing.Empty"/> for no instance.</summary>
    public HashRing Ring => Volatile.Read(ref _view).Ring;

    /// <summary>Test hook: the listing loop waits for a round still in the future (a fake clock may step).</summary>
    internal bool Waiting => _rounds.AllWaiting(1);

    /// <summary>Reads the current view (empty if no instance ever registered), then keeps it current.</summary>
    /// <exception cref="InvalidOperationException">Already started.</exception>
    public async Task StartAsync(CancellationToken ct = default)
    {
        if (Interlocked.CompareExchange(ref _state, Running, NotStarted) != NotStarted)
        {
            throw new InvalidOperationException($"The membership observer of app '{App}' was already started.");
        }

        try
        {
            await RefreshViewAsync(ct).ConfigureAwait(false);
        }
        catch (BlobStorageException ex) when (ex.ErrorCode == ContainerNotFound)
        {
            // No instance has registered yet (the first one creates the container): an empty view, not an error.
        }
        catch
        {
            Volatile.Write(ref _state, NotStarted);
            throw;
        }

        var token = _stopping.Token;
        _loop = Task.Run(() => _rounds.RepeatAsync("listing", RefreshViewAsync, yieldWhenSlow: true, token), CancellationToken.None);
        Log.ObserverStarted(_logger, App, Members.Count);
    }

    /// <summary>Stops listing. Nothing to undo in storage: the observer never wrote.</summary>
    public async Task StopAsync()
    {
        if (Interlocked.Exchange(ref _state, Stopped) != Running)
        {
            return;
        }

        await _stopping.CancelAsync().ConfigureAwait(false);
        await _loop.ConfigureAwait(false);
    }

    /// <summary>Same as <see cref="StopAsync"/>.</summary>
    public async ValueTask DisposeAsync()
    {
        await StopAsync().ConfigureAwait(false);
        _stopping.Dispose();
    }

    private async Task RefreshViewAsync(CancellationToken ct)
    {
        var listings = Interlocked.Read(ref _listings); // before the listing: only listings it can reflect count
        var peers = await _tracker.RefreshAsync(listings, ct).ConfigureAwait(false);
        Interlocked.Increment(ref _listings);
        MembershipView.Publish(ref _view, peers, _options.VirtualNodes, Changed, _logger, "an observer", App);
    }
}
