using System.Globalization;

namespace FaaST.Cachelet.Daemon;

/// <summary>
/// Faa$T's memory daemon (§3.4): every interval it adds up the anonymous resident memory of the
/// host and the workers (their heaps; cached objects live in shared-memory files and are counted
/// once, as the cache's size) and, when heap + cache comes within the headroom of the instance's
/// memory limit, evicts enough to get back under it. A function that grows its heap therefore
/// pushes the cache out instead of running out of memory.
/// </summary>
public sealed class MemoryDaemon : IAsyncDisposable
{
    private readonly Func<IEnumerable<int>> _processes;
    private readonly Func<long> _cachedBytes;
    private readonly Func<long, long> _evict;
    private readonly long _limit;
    private readonly double _headroom;
    private readonly CancellationTokenSource _stop = new();
    private Task _loop = Task.CompletedTask;

    /// <param name="processes">Process ids whose heaps count (the host and its workers).</param>
    /// <param name="evict">Frees at least the given number of cached bytes; returns how many it freed.</param>
    public MemoryDaemon(Func<IEnumerable<int>> processes, long memoryLimit, double headroom, Func<long> cachedBytes, Func<long, long> evict)
    {
        ArgumentOutOfRangeException.ThrowIfNegativeOrZero(memoryLimit);
        if (headroom is <= 0 or >= 1)
            throw new ArgumentOutOfRangeException(nameof(headroom), "headroom is a fraction between 0 and 1");
        _processes = processes;
        _limit = memoryLimit;
        _headroom = headroom;
        _cachedBytes = cachedBytes;
        _evict = evict;
    }

    /// <summary>Heap bytes seen by the last check.</summary>
    public long LastHeapBytes { get; private set; }

    /// <summary>Bytes evicted by the daemon since it started.</summary>
    public long EvictedBytes => Interlocked.Read(ref _evicted);

    private long _evicted;

    /// <summary>Heap + cache may grow to this; above it the daemon evicts.</summary>
    public long Threshold => (long)(_limit * (1 - _headroom));

    public void Start(TimeSpan interval)
    {
        var stop = _stop.Token;
        _loop = Task.Run(async () =>
        {
            using var timer = new PeriodicTimer(interval);
            try
            {
                while (await timer.WaitForNextTickAsync(stop))
                    Check();
            }
            catch (OperationCanceledException)
            {
                // stopping
            }
        }, CancellationToken.None);
    }

    /// <summary>One check; returns the bytes it evicted.</summary>
    public long Check()
    {
        long heap = 0;
        foreach (var pid in _processes())
            heap += ReadAnonymousRss(pid);
        LastHeapBytes = heap;
        var over = heap + _cachedBytes() - Threshold;
        if (over <= 0)
            return 0;
        var freed = _evict(over);
        Interlocked.Add(ref _evicted, freed);
        return freed;
    }

    /// <summary>RssAnon of a process (its private, anonymous resident memory), or 0 if it is gone.</summary>
    public static long ReadAnonymousRss(int pid)
    {
        try
        {
            foreach (var line in File.ReadLines($"/proc/{pid.ToString(CultureInfo.InvariantCulture)}/status"))
            {
                if (!line.StartsWith("RssAnon:", StringComparison.Ordinal))
                    continue;
                var kb = line.AsSpan("RssAnon:".Length).Trim();
                var space = kb.IndexOf(' ');
                return long.Parse(space > 0 ? kb[..space] : kb, NumberStyles.None, CultureInfo.InvariantCulture) * 1024;
            }
        }
        catch (Exception e) when (e is IOException or UnauthorizedAccessException)
        {
            // the process ended between listing and reading
        }
        return 0;
    }

    public async ValueTask DisposeAsync()
    {
        await _stop.CancelAsync();
        await _loop;
        _stop.Dispose();
    }
}
