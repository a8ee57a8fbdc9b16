using System.Diagnostics;
using FaaST.Cachelet.Index;
using FaaST.Cachelet.Memory;

namespace FaaST.Cachelet.Tests;

/// <summary>A directory of its own under /dev/shm for one test, deleted with everything in it.</summary>
internal sealed class ShmScope : IDisposable
{
    public ShmScope()
    {
        Root = Path.Combine("/dev/shm", "faast-test-" + Guid.NewGuid().ToString("N"));
        Directory.CreateDirectory(Root);
    }

    public string Root { get; }

    /// <summary>Where the test's arena lives (created by the arena).</summary>
    public string ArenaDirectory => Path.Combine(Root, "arena");

    public SharedMemoryArena NewArena(ArenaOptions options) => new(ArenaDirectory, options);

    public void Dispose()
    {
        if (Directory.Exists(Root))
            Directory.Delete(Root, recursive: true);
    }
}

/// <summary>A clock the test moves by hand, in Stopwatch ticks.</summary>
internal sealed class ManualClock
{
    private long _now = 1_000_000_000;

    public long Now => Volatile.Read(ref _now);

    public Func<long> Read => () => Volatile.Read(ref _now);

    public void Advance(TimeSpan by) => Interlocked.Add(ref _now, (long)(by.TotalSeconds * Stopwatch.Frequency));
}

/// <summary>An arena and an index over it in a test directory.</summary>
internal sealed class IndexFixture : IDisposable
{
    private readonly ShmScope _scope = new();

    public IndexFixture(CacheIndexOptions? options = null, long capacity = 64L << 20)
    {
        Arena = _scope.NewArena(new ArenaOptions { Capacity = capacity, SlabSegmentSize = 8L << 20 });
        Index = new CacheIndex(Arena, (options ?? new CacheIndexOptions()) with { Clock = Clock.Read });
    }

    public ManualClock Clock { get; } = new();

    public SharedMemoryArena Arena { get; }

    public CacheIndex Index { get; }

    public static BlobKey Key(string blob) => new("devstoreaccount1", "c", blob);

    /// <summary>Caches <paramref name="length"/> bytes of <paramref name="fill"/> under blob <paramref name="blob"/>, one second after the last add (so adds are in LRU order).</summary>
    public CacheEntry Add(string blob, long length = 100, bool owned = true, string etag = "\"v1\"", byte fill = 0)
    {
        Assert.True(Arena.TryAllocate(length, out var extent), $"allocating {length} bytes");
        if (length <= int.MaxValue)
            extent.Span.Fill(fill);
        Clock.Advance(TimeSpan.FromSeconds(1));
        var entry = Index.AddOrReplace(Key(blob), etag, extent, owned);
        Entries[blob] = entry;
        return entry;
    }

    /// <summary>The last entry <see cref="Add"/> made per blob.</summary>
    public Dictionary<string, CacheEntry> Entries { get; } = [];

    /// <summary>Blobs added and neither replaced, removed nor evicted, found without touching them.</summary>
    public HashSet<string> Cached() => Entries.Where(e => !e.Value.IsRetired).Select(e => e.Key).ToHashSet();

    /// <summary>Moves the clock, then looks the key up (so it becomes the most recently used).</summary>
    public void Touch(string blob)
    {
        Clock.Advance(TimeSpan.FromSeconds(1));
        Assert.True(Index.TryGet(Key(blob), out _), $"{blob} should be cached");
    }

    public void Dispose()
    {
        Index.Dispose();
        Arena.Dispose();
        _scope.Dispose();
    }
}
