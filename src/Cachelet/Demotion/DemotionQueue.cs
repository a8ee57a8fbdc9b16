using FaaST.Cachelet.Index;
using FaaST.Cachelet.Sources;
using Microsoft.Extensions.Logging;

namespace FaaST.Cachelet.Demotion;

/// <summary>How evicted objects reach the eviction sinks; the defaults are documented here.</summary>
public sealed record DemotionOptions
{
    /// <summary>Objects waiting for the sinks or being handed to them, at most; default 256. One more is dropped.</summary>
    public int Capacity { get; init; } = 256;

    /// <summary>Bytes of those objects, at most; default null: 1/8 of the arena's capacity. These bytes
    /// stay allocated in the arena until the sinks are done, and the cache keeps this much of the arena
    /// (at most half of it) free for them by evicting ahead (see <see cref="DemotionQueue"/>).</summary>
    public long? MaxBytes { get; init; }

    /// <summary>Room the cache keeps free for demotions by evicting ahead; default null: the queue's
    /// bytes (<see cref="MaxBytes"/>); at most half the arena; 0 turns evicting ahead off (a miss's
    /// victims are then mostly dropped: they are taken back for the miss).</summary>
    public long? ReserveBytes { get; init; }

    internal void Validate()
    {
        if (ReserveBytes is < 0)
            throw new ArgumentException($"Demotion.ReserveBytes must not be negative, not {ReserveBytes}");
        if (Capacity <= 0)
            throw new ArgumentException($"Demotion.Capacity must be positive, not {Capacity}");
        if (MaxBytes is <= 0)
            throw new ArgumentException($"Demotion.MaxBytes must be positive, not {MaxBytes}");
    }
}

/// <summary>What the demotion queue did since the index was made, and holds now.</summary>
/// <param name="Pending">Objects queued or being handed to the sinks now.</param>
/// <param name="PendingBytes">Their bytes (still allocated in the arena).</param>
/// <param name="Demoted">Objects every sink was called for (whether or not a sink threw).</param>
/// <param name="Dropped">Objects evicted without reaching the sinks: the queue was full, a miss needed the memory, or the cache stopped.</param>
/// <param name="SinkFailures">Calls of a sink that threw.</param>
public readonly record struct DemotionStats(int Pending, long PendingBytes, long Demoted, long Dropped, long SinkFailures);

/// <summary>
/// The seam between eviction and the eviction sinks (Faa$T's demotion to a lower tier): eviction only
/// queues; a background thread (the pump) hands each object to every sink in turn and then frees it.
/// <para>
/// <b>Ownership.</b> An object offered here has left the index and was retired with no pins, so no
/// reader can pin it and nothing else frees it: the queue owns its extent, and its bytes stay readable
/// until the queue frees it — after the last sink returned, or when it is dropped.
/// </para>
/// <para>
/// <b>Never on the read path.</b> Eviction on a miss (CacheIndex.TryAllocate) offers its victims and
/// returns; it never waits for a sink. The queue is bounded (<see cref="DemotionOptions.Capacity"/>
/// objects and <see cref="DemotionOptions.MaxBytes"/> bytes, counting the one being handed over); an
/// offer beyond that is dropped: counted, logged at most once a second, and freed at once. Dropping a
/// demotion loses no data: an object with a write-behind pending is pinned until storage has it, so it
/// is never evicted, expired or offered here.
/// </para>
/// <para>
/// <b>Memory.</b> Queued bytes are still allocated in the arena, inside its capacity: the cache never
/// holds more than its capacity, the queue's bytes count against it. Two rules keep that from
/// costing reads:
/// <list type="number">
/// <item><b>Evicting ahead.</b> With sinks, the index keeps <see cref="DemotionOptions.ReserveBytes"/>
/// (by default the queue's bytes, at most half the arena) free for demotions: when an
/// allocation leaves the cached bytes (the arena's in use minus what waits here) above capacity
/// minus that reserve, it asks the pump (<see cref="RequestRoom"/>), which evicts the excess by
/// policy on its own thread, and those victims are demoted. A miss then finds free memory and a
/// steady stream of misses demotes what it pushes out. The price: with sinks, the cache holds up to
/// the reserve less than its capacity.</item>
/// <item><b>Taking back.</b> When the pump falls behind and a miss finds the arena full anyway, it
/// evicts inline; its victims are offered here, and when the allocation still fails, the newest
/// demotions not yet started are dropped one by one (freed now) until it succeeds
/// (<see cref="TryReclaimNewest"/>). The one object being handed to a sink is never taken back, so
/// the memory a miss cannot get at once is at most one object (plus size-class waste): no
/// dead-lock, no over-commit, no waiting.</item>
/// </list>
/// A sink that keeps up demotes everything; one that does not loses demotions, never reads.
/// </para>
/// </summary>
internal sealed class DemotionQueue : IDisposable
{
    private static readonly TimeSpan ShutdownWait = TimeSpan.FromSeconds(30);

    private readonly IEvictionSink[] _sinks;
    private readonly Action<CacheEntry> _free;
    private readonly Action _makeRoom;
    private readonly ILogger _logger;
    private readonly int _capacity;
    private readonly long _maxBytes;
    private readonly Lock _lock = new();
    private readonly Item[] _ring;
    private readonly SemaphoreSlim _signal = new(0);
    private readonly CancellationTokenSource _stop = new();
    private readonly Thread _pump;
    private readonly LogGate _dropLog = LogGate.PerSecond();
    private readonly LogGate _failLog = LogGate.PerSecond();
    private int _head;
    private int _count;
    private bool _busy;
    private long _pendingBytes;
    private long _demoted;
    private long _dropped;
    private long _sinkFailures;
    private bool _closed;
    private int _roomWanted;

    private readonly record struct Item(EvictedObject Evicted, CacheEntry Entry);

    /// <param name="free">Frees an entry's extent (the index's).</param>
    /// <param name="makeRoom">Evicts ahead, by policy (the index's; called on the pump's thread).</param>
    public DemotionQueue(IReadOnlyList<IEvictionSink> sinks, DemotionOptions options, long arenaCapacity, Action<CacheEntry> free, Action makeRoom,
        ILogger logger)
    {
        options.Validate();
        _sinks = [.. sinks];
        _free = free;
        _makeRoom = makeRoom;
        _logger = logger;
        _capacity = options.Capacity;
        _maxBytes = options.MaxBytes ?? Math.Max(1, arenaCapacity / 8);
        _ring = new Item[_capacity];
        // A thread of its own: sinks are synchronous and may block on I/O; that must not hold a pool thread.
        _pump = new Thread(Pump) { IsBackground = true, Name = "faast-demotion" };
        _pump.Start();
    }

    /// <summary>The bytes the queue may hold (<see cref="DemotionOptions.MaxBytes"/> or its default).</summary>
    public long MaxBytes => _maxBytes;

    /// <summary>Bytes queued or with a sink now, read without the lock (a moment's view).</summary>
    public long PendingBytes => Volatile.Read(ref _pendingBytes);

    /// <summary>Asks the pump to evict ahead (see the class remarks). Cheap to call often: one flag.</summary>
    public void RequestRoom()
    {
        if (Interlocked.CompareExchange(ref _roomWanted, 1, 0) == 0)
            _signal.Release();
    }

    public DemotionStats Stats
    {
        get
        {
            lock (_lock)
                return new DemotionStats(_count + (_busy ? 1 : 0), _pendingBytes, Volatile.Read(ref _demoted), Volatile.Read(ref _dropped),
                    Volatile.Read(ref _sinkFailures));
        }
    }

    /// <summary>Queues an evicted entry for the sinks, or drops (frees) it when the queue is full. Never blocks.</summary>
    public void Offer(EvictedObject evicted, CacheEntry entry)
    {
        var queued = false;
        lock (_lock)
        {
            if (!_closed && _count + (_busy ? 1 : 0) < _capacity && _pendingBytes + entry.Length <= _maxBytes)
            {
                _ring[(_head + _count) % _capacity] = new Item(evicted, entry);
                _count++;
                _pendingBytes += entry.Length;
                queued = true;
            }
        }
        if (queued)
            _signal.Release();
        else
            Drop(entry, _closed ? "the cache is stopping" : "the demotion queue is full");
    }

    /// <summary>Drops the newest demotion not yet started, freeing its memory now (a miss needs it). False if none is queued.</summary>
    public bool TryReclaimNewest()
    {
        CacheEntry entry;
        lock (_lock)
        {
            if (_count == 0)
                return false;
            var slot = (_head + _count - 1) % _capacity;
            entry = _ring[slot].Entry;
            _ring[slot] = default;
            _count--;
            _pendingBytes -= entry.Length;
        }
        Drop(entry, "a miss needed its memory");
        return true;
    }

    private void Drop(CacheEntry entry, string why)
    {
        Interlocked.Increment(ref _dropped);
        _free(entry);
        if (_dropLog.TryPass(out var suppressed))
        {
            if (suppressed > 0)
                Log.Suppressed(_logger, suppressed, "demotion dropped");
            Log.DemotionDropped(_logger, entry.Key.Container, entry.Key.Blob, entry.Length, why);
        }
    }

    private void Pump()
    {
        var stop = _stop.Token;
        while (true)
        {
            try
            {
                _signal.Wait(stop);
            }
            catch (OperationCanceledException)
            {
                return;
            }
            if (Interlocked.Exchange(ref _roomWanted, 0) == 1)
            {
                try
                {
                    _makeRoom(); // its victims come back here through Offer
                }
                catch (Exception e) when (e is not OutOfMemoryException)
                {
                    Log.EvictAheadFailed(_logger, e);
                }
            }
            Item item;
            lock (_lock)
            {
                if (_count == 0)
                    continue; // taken back by a miss, or dropped at shutdown
                item = _ring[_head];
                _ring[_head] = default;
                _head = (_head + 1) % _capacity;
                _count--;
                _busy = true;
            }
            foreach (var sink in _sinks)
            {
                try
                {
                    sink.OnEvicted(item.Evicted, item.Entry.Extent);
                }
                catch (Exception e)
                {
                    Interlocked.Increment(ref _sinkFailures);
                    if (_failLog.TryPass(out var suppressed))
                    {
                        if (suppressed > 0)
                            Log.Suppressed(_logger, suppressed, "eviction sink failed");
                        Log.EvictionSinkFailed(_logger, e, item.Evicted.Key.Container, item.Evicted.Key.Blob);
                    }
                }
            }
            lock (_lock)
            {
                _busy = false;
                _pendingBytes -= item.Entry.Length;
            }
            _free(item.Entry);
            Interlocked.Increment(ref _demoted);
        }
    }

    /// <summary>Drops what is queued (freed now) and waits for the object being handed over (bounded).</summary>
    public void Dispose()
    {
        var left = new List<CacheEntry>();
        lock (_lock)
        {
            if (_closed)
                return;
            _closed = true;
            for (; _count > 0; _count--)
            {
                left.Add(_ring[_head].Entry);
                _pendingBytes -= _ring[_head].Entry.Length;
                _ring[_head] = default;
                _head = (_head + 1) % _capacity;
            }
        }
        foreach (var entry in left)
        {
            Interlocked.Increment(ref _dropped);
            _free(entry);
        }
        _stop.Cancel();
        // The arena is disposed after the index: a sink still reading then would read unmapped memory.
        if (!_pump.Join(ShutdownWait))
            Log.DemotionSinkHung(_logger, (int)ShutdownWait.TotalSeconds);
        else
            _stop.Dispose();
    }
}
