using System.Buffers;
using System.Diagnostics;
using System.Text.Json;
using FaaST.Storage;
using Microsoft.Extensions.Logging;
using Microsoft.Extensions.Logging.Abstractions;

namespace FaaST.Membership;

/// <summary>
/// The view of an app's running instances (Faa$T §5: membership in blob storage, heartbeats, ETag conditions).
/// Every instance owns one blob, "{app}/instances/{memberId}", and rewrites it each heartbeat with If-Match on its
/// previous ETag; nobody else writes it, so there is no hot blob. Each interval the instance also lists the app's
/// instance blobs. A peer whose ETag has not changed for <see cref="MembershipOptions.MissedHeartbeats"/> intervals
/// of this observer's own clock is dead, provided the observer itself managed as many heartbeats meanwhile (storage
/// too slow or down for us was so for the peer too, and proves nothing). A dead peer leaves the view, and the observer
/// deletes its blob If-Match the ETag it saw, so an instance that came back meanwhile is never deleted. An instance
/// that finds its blob gone re-registers. Storage failures keep the last view and are retried with backoff.
/// </summary>
public sealed class MembershipService : IAsyncDisposable
{
    private const int MaxNameLength = 128;
    private const int DownloadParallelism = 8;
    private const int MaxBackoffIntervals = 2; // short, so that a peer is back before observers' grace runs out
    private const string ContainerNotFound = "ContainerNotFound";

    // A member's record never changes, so one that comes back soon (say, after being taken for dead) is not read
    // again; ids are new for every instance, so records not listed for this long are dropped.
    private static readonly TimeSpan ForgetAfter = TimeSpan.FromMinutes(10);

    private static readonly SearchValues<char> NameChars =
        SearchValues.Create("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.");

    private static readonly JsonSerializerOptions Json = new(JsonSerializerDefaults.Web)
    {
        RespectNullableAnnotations = true,
        RespectRequiredConstructorParameters = true,
    };

    private readonly IBlobStore _store;
    private readonly MembershipOptions _options;
    private readonly ILogger _logger;
    private readonly string _prefix;
    private readonly string _selfBlob;
    private readonly Dictionary<string, Peer> _peers = new(StringComparer.Ordinal); // the listing loop's alone
    private CancellationTokenSource _stopping = new();
    private volatile HashRing _ring;
    private string? _etag;       // of this instance's last write
    private long _seq;
    private long _heartbeats;    // successful heartbeats so far: the observer's yardstick for its peers'
    private Task _loops = Task.CompletedTask;
    private int _state;          // NotStarted, Running, Stopped

    private const int NotStarted = 0, Running = 1, Stopped = 2;

    /// <summary>Creates the service; nothing touches storage before <see cref="StartAsync"/>.</summary>
    /// <exception cref="ArgumentException">The app name, the member id or an option is unusable (the message says why).</exception>
    public MembershipService(IBlobStore store, string app, Member self, MembershipOptions? options = null, ILogger? logger = null)
    {
        ArgumentNullException.ThrowIfNull(store);
        ArgumentNullException.ThrowIfNull(self);
        ValidateName(app, "app name", nameof(app));
        ValidateName(self.Id, "member id", nameof(self));
        if (self.PeerAddress is not { IsAbsoluteUri: true })
        {
            throw new ArgumentException($"Member '{self.Id}' needs an absolute PeerAddress.", nameof(self));
        }

        _options = options ?? new MembershipOptions();
        BlobNames.ValidateContainer(_options.Container, nameof(options));
        ArgumentOutOfRangeException.ThrowIfLessThanOrEqual(_options.HeartbeatInterval, TimeSpan.Zero, nameof(options));
        ArgumentOutOfRangeException.ThrowIfLessThan(_options.MissedHeartbeats, 1, nameof(options));
        ArgumentOutOfRangeException.ThrowIfLessThan(_options.VirtualNodes, 1, nameof(options));

        _store = store;
        _logger = logger ?? NullLogger.Instance;
        App = app;
        Self = self;
        _prefix = app + "/instances/";
        _selfBlob = _prefix + self.Id;
        _ring = new HashRing([self], _options.VirtualNodes);
    }

    /// <summary>Raised (on the listing loop) when members join or leave the view.</summary>
    public event Action<MembershipChange>? Changed;

    /// <summary>The app whose instances this service tracks.</summary>
    public string App { get; }

    /// <summary>This instance.</summary>
    public Member Self { get; }

    /// <summary>The ring of the current view; always contains <see cref="Self"/>. A snapshot: hold it for a whole lookup.</summary>
    public HashRing Ring => _ring;

    /// <summary>The current view, ordered by Id.</summary>
    public IReadOnlyList<Member> Members => _ring.Members;

    /// <summary>Test hook: while true the loops neither heartbeat nor list, like a stalled process.</summary>
    internal bool Frozen { get; set; }

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
            _loops = Task.Run(() => RepeatAsync("heartbeat", HeartbeatAsync, yieldWhenSlow: false, token), CancellationToken.None);
            await RefreshViewAsync(ct).ConfigureAwait(false);
        }
        catch
        {
            // A blob already written is left to time out, as after a crash (or adopted by a later StartAsync).
            await EndLoopsAsync().ConfigureAwait(false);
            Volatile.Write(ref _state, NotStarted);
            throw;
        }

        _loops = Task.WhenAll(_loops, Task.Run(() => RepeatAsync("listing", RefreshViewAsync, yieldWhenSlow: true, token), CancellationToken.None));
        _logger.LogInformation("Instance {Member} of app {App} joined; view has {Count} members", Self.Id, App, _ring.Members.Count);
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
            _logger.LogInformation("Instance {Member} of app {App} left", Self.Id, App);
        }
        catch (Exception ex) when (ex is BlobStorageException or StorageUnavailableException)
        {
            _logger.LogWarning("Instance {Member} could not delete its membership blob ({Message}); peers drop it after {Missed} missed heartbeats",
                Self.Id, ex.Message, _options.MissedHeartbeats);
        }
    }

    /// <summary>Same as <see cref="StopAsync"/> if still running.</summary>
    public async ValueTask DisposeAsync()
    {
        await StopAsync().ConfigureAwait(false);
        _stopping.Dispose();
    }

    /// <summary>Test hook: stops the loops without deregistering, as a crash would.</summary>
    internal async Task AbandonAsync() => await HaltAsync().ConfigureAwait(false);

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

    /// <summary>
    /// Runs <paramref name="round"/> every interval until stopped; a failure is logged and retried after a backoff.
    /// With <paramref name="yieldWhenSlow"/>, a round that took longer than the interval (storage overloaded) is
    /// followed by a pause as long, so that listings do not crowd out everyone's heartbeats.
    /// </summary>
    private async Task RepeatAsync(string what, Func<CancellationToken, Task> round, bool yieldWhenSlow, CancellationToken ct)
    {
        var interval = _options.HeartbeatInterval;
        var failures = 0;
        var spent = TimeSpan.Zero;
        while (true)
        {
            // ±10 % jitter keeps many instances started together from hitting storage in lockstep.
            var delay = failures > 0
                ? interval * Math.Min(1 << (failures - 1), MaxBackoffIntervals)
                : yieldWhenSlow && spent > interval
                    ? spent
                    : (interval * (0.9 + (0.2 * Random.Shared.NextDouble()))) - spent;
            try
            {
                await Task.Delay(delay > TimeSpan.Zero ? delay : TimeSpan.Zero, ct).ConfigureAwait(false);
            }
            catch (OperationCanceledException)
            {
                return;
            }

            if (Frozen)
            {
                continue;
            }

            var started = Stopwatch.GetTimestamp();
            try
            {
                await round(ct).ConfigureAwait(false);
                if (failures > 0)
                {
                    _logger.LogInformation("Membership {What} of {Member} works again after {Failures} failures", what, Self.Id, failures);
                }

                failures = 0;
            }
            catch (OperationCanceledException) when (ct.IsCancellationRequested)
            {
                return;
            }
            catch (Exception ex)
            {
                // Never end the loop: keep the last view and try again later.
                failures++;
                _logger.LogWarning("Membership {What} of {Member} (app {App}) failed ({Failures} in a row), keeping the view of {Count} members: {Error}",
                    what, Self.Id, App, failures, _ring.Members.Count, ex.Message);
            }

            spent = Stopwatch.GetElapsedTime(started);
        }
    }

    private async Task HeartbeatAsync(CancellationToken ct)
    {
        if (_etag is null)
        {
            await RegisterAsync(ct).ConfigureAwait(false);
            return;
        }

        try
        {
            _etag = (await WriteAsync(_etag, null, ct).ConfigureAwait(false)).ETag;
            Interlocked.Increment(ref _heartbeats);
        }
        catch (Exception ex) when (ex is BlobConditionFailedException || (ex as BlobStorageException)?.ErrorCode == ContainerNotFound)
        {
            _logger.LogWarning("Membership blob of {Member} (app {App}) was deleted or replaced, probably by a peer that took it for dead; registering again",
                Self.Id, App);
            _etag = null;
            await RegisterAsync(ct).ConfigureAwait(false);
            Interlocked.Increment(ref _heartbeats);
        }
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

                if (Parse(existing.Data) != Self)
                {
                    throw new InvalidOperationException(
                        $"Member id '{Self.Id}' of app '{App}' is already registered by another instance; ids must be unique per instance.");
                }

                _etag = existing.Properties.ETag;
                return;
            }
        }
    }

    private Task<BlobProperties> WriteAsync(string? ifMatch, string? ifNoneMatch, CancellationToken ct)
    {
        var record = new InstanceRecord(Self.Id, Self.PeerAddress, Self.Started, ++_seq);
        var json = JsonSerializer.SerializeToUtf8Bytes(record, Json);
        return _store.UploadAsync(_options.Container, _selfBlob, json, "application/json", ifMatch, ifNoneMatch, ct);
    }

    /// <summary>One listing: notes which peers' ETags changed, reads new peers, drops and deletes dead ones.</summary>
    private async Task RefreshViewAsync(CancellationToken ct)
    {
        var heartbeats = Interlocked.Read(ref _heartbeats); // before the listing: only heartbeats it can reflect count
        var listed = new Dictionary<string, string>(StringComparer.Ordinal);
        await foreach (var item in _store.ListAsync(_options.Container, _prefix, ct).ConfigureAwait(false))
        {
            var id = item.Name[_prefix.Length..];
            if (id != Self.Id && IsValidName(id))
            {
                listed[id] = item.Properties.ETag;
            }
        }

        var now = Stopwatch.GetTimestamp();
        var missed = _options.MissedHeartbeats;
        var unseen = new List<(string Id, string ETag)>();
        var dead = new List<(string Id, string ETag)>();
        foreach (var peer in _peers.Values)
        {
            peer.Listed = false;
        }

        foreach (var (id, etag) in listed)
        {
            if (!_peers.TryGetValue(id, out var peer) || (peer.Member is null && peer.ETag != etag))
            {
                unseen.Add((id, etag));
                continue;
            }

            (peer.Listed, peer.LastListed) = (true, now);
            if (peer.ETag != etag)
            {
                (peer.ETag, peer.SeenChange, peer.HeartbeatsAtChange, peer.Dead) = (etag, now, heartbeats, false);
            }
            else if (peer.Member is not null
                && (peer.Dead || (Stopwatch.GetElapsedTime(peer.SeenChange, now) >= _options.HeartbeatInterval * missed
                    && heartbeats - peer.HeartbeatsAtChange >= missed)))
            {
                peer.Dead = true;
                dead.Add((id, etag)); // again each listing until the delete works
            }
        }

        foreach (var (id, peer) in _peers.Where(p => !p.Value.Listed && Stopwatch.GetElapsedTime(p.Value.LastListed, now) > ForgetAfter).ToList())
        {
            _peers.Remove(id);
        }

        var read = new Peer?[unseen.Count];
        await Parallel.ForAsync(0, unseen.Count, new ParallelOptions { MaxDegreeOfParallelism = DownloadParallelism, CancellationToken = ct },
            async (i, token) => read[i] = await ReadPeerAsync(unseen[i].Id, unseen[i].ETag, token).ConfigureAwait(false)).ConfigureAwait(false);
        foreach (var peer in read.OfType<Peer>())
        {
            // A newly seen instance gets the same grace as one whose ETag just changed.
            (peer.Listed, peer.LastListed, peer.SeenChange, peer.HeartbeatsAtChange) = (true, now, now, heartbeats);
            _peers[peer.Id] = peer;
        }

        PublishView();

        foreach (var (id, etag) in dead)
        {
            try
            {
                if (await _store.DeleteAsync(_options.Container, _prefix + id, etag, ct).ConfigureAwait(false))
                {
                    _logger.LogInformation("Instance {Peer} of app {App} missed {Missed} heartbeats; {Member} removed it", id, App, missed, Self.Id);
                }
            }
            catch (BlobConditionFailedException)
            {
                // It wrote again after all: it stays, and the next listing sees its new ETag.
            }
        }
    }

    private async Task<Peer?> ReadPeerAsync(string id, string listedETag, CancellationToken ct)
    {
        BlobContent? content;
        try
        {
            content = await _store.DownloadAsync(_options.Container, _prefix + id, ct).ConfigureAwait(false);
        }
        catch (Exception ex) when (ex is BlobStorageException or StorageUnavailableException)
        {
            // One unreadable peer must not cost the whole view; the next listing tries it again.
            _logger.LogWarning("Could not read membership blob {Blob} of app {App}: {Error}", _prefix + id, App, ex.Message);
            return null;
        }

        if (content is null)
        {
            return null; // gone since the listing
        }

        var member = Parse(content.Data);
        if (member is null || member.Id != id)
        {
            // Remembered by ETag, so an unreadable record is read again only when it changes.
            _logger.LogWarning("Membership blob {Blob} of app {App} does not hold a valid instance record; ignored", _prefix + id, App);
            return new Peer(id, null, listedETag);
        }

        return new Peer(id, member, content.Properties.ETag);
    }

    private void PublishView()
    {
        var old = _ring;
        var view = new List<Member>(_peers.Count + 1) { Self };
        view.AddRange(_peers.Values.Where(p => p is { Member: not null, Listed: true, Dead: false }).Select(p => p.Member!));
        var oldIds = old.Members.Select(m => m.Id).ToHashSet(StringComparer.Ordinal);
        var newIds = view.Select(m => m.Id).ToHashSet(StringComparer.Ordinal);
        if (oldIds.SetEquals(newIds))
        {
            return;
        }

        var ring = new HashRing(view, _options.VirtualNodes);
        _ring = ring;
        var joined = ring.Members.Where(m => !oldIds.Contains(m.Id)).ToList();
        var left = old.Members.Where(m => !newIds.Contains(m.Id)).ToList();
        _logger.LogInformation("View of {Member} (app {App}): {Count} members; joined [{Joined}], left [{Left}]", Self.Id, App,
            ring.Members.Count, string.Join(", ", joined.Select(m => m.Id)), string.Join(", ", left.Select(m => m.Id)));
        try
        {
            Changed?.Invoke(new MembershipChange(joined, left, ring));
        }
        catch (Exception ex)
        {
            _logger.LogError(ex, "A handler of the membership Changed event of {Member} threw", Self.Id);
        }
    }

    private static Member? Parse(byte[] json)
    {
        try
        {
            var r = JsonSerializer.Deserialize<InstanceRecord>(json, Json);
            return r is { PeerAddress.IsAbsoluteUri: true } && IsValidName(r.Id) ? new Member(r.Id, r.PeerAddress, r.Started) : null;
        }
        catch (JsonException)
        {
            return null;
        }
    }

    private static bool IsValidName(string name) =>
        name.Length is > 0 and <= MaxNameLength && name[0] != '.' && !name.AsSpan().ContainsAnyExcept(NameChars);

    private static void ValidateName(string? name, string what, string paramName)
    {
        ArgumentNullException.ThrowIfNull(name, paramName);
        if (!IsValidName(name))
        {
            throw new ArgumentException(
                $"The {what} '{name}' cannot name a membership blob: use 1 to {MaxNameLength} letters, digits, '-', '_' or '.', not starting with '.'.",
                paramName);
        }
    }

    /// <summary>The JSON of an instance blob: {id, peerAddress, started, seq}.</summary>
    internal sealed record InstanceRecord(string Id, Uri PeerAddress, DateTimeOffset Started, long Seq);

    /// <summary>What this observer knows of one peer's blob. Member is null for an unreadable record.</summary>
    private sealed class Peer(string id, Member? member, string etag)
    {
        public string Id { get; } = id;

        public Member? Member { get; } = member;

        public string ETag { get; set; } = etag;

        public bool Listed { get; set; }              // in the latest listing (else deleted: it left or was found dead)

        public long LastListed { get; set; }          // Stopwatch timestamp of the latest listing it was in

        public long SeenChange { get; set; }          // Stopwatch timestamp of the listing that last saw its ETag change

        public long HeartbeatsAtChange { get; set; }  // this observer's own heartbeat count then

        public bool Dead { get; set; }
    }
}
