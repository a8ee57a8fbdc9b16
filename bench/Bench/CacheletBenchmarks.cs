using BenchmarkDotNet.Attributes;
using FaaST.Cachelet.Index;
using FaaST.Cachelet.Memory;

namespace FaaST.Bench;

/// <summary>The cachelet index's hot paths, over 10,000 cached 600-byte objects.</summary>
[MemoryDiagnoser]
public class CacheletIndexBenchmarks
{
    private string _directory = null!;
    private SharedMemoryArena _arena = null!;
    private CacheIndex _index = null!;
    private BlobKey _hot;
    private BlobKey _churn;

    [GlobalSetup]
    public void Setup()
    {
        _directory = Path.Combine("/dev/shm", $"faast-bench-{Environment.ProcessId}-{Guid.NewGuid():N}");
        _arena = new SharedMemoryArena(_directory, new ArenaOptions { Capacity = 256L << 20 });
        _index = new CacheIndex(_arena);
        for (var i = 0; i < 10_000; i++)
        {
            if (!_arena.TryAllocate(600, out var e))
                throw new InvalidOperationException("arena full during setup");
            _index.AddOrReplace(new BlobKey("devstoreaccount1", "bench", $"blob-{i}"), "\"v1\"", e);
        }
        _hot = new BlobKey("devstoreaccount1", "bench", "blob-4242");
        _churn = new BlobKey("devstoreaccount1", "bench", "churn");
    }

    [GlobalCleanup]
    public void Cleanup()
    {
        _index.Dispose();
        _arena.Dispose();
    }

    /// <summary>A hit: dictionary lookup and last-access timestamp.</summary>
    [Benchmark]
    public bool TryGetHit() => _index.TryGet(_hot, out _);

    /// <summary>A hit as an invocation takes it: lookup, pin, unpin.</summary>
    [Benchmark]
    public bool TryGetPinnedHit()
    {
        if (!_index.TryGetPinned(_hot, out var pin))
            return false;
        pin.Dispose();
        return true;
    }

    /// <summary>Caching and dropping an object: a 600-byte allocation, TryAdd, Remove (which frees it).
    /// Subtract ArenaAllocateFree(600) for the index's share.</summary>
    [Benchmark]
    public bool TryAddRemove()
    {
        if (!_arena.TryAllocate(600, out var e))
            return false;
        if (!_index.TryAdd(_churn, "\"v1\"", e, owned: true, out var entry))
            return false;
        return _index.Remove(entry);
    }
}

/// <summary>The shared-memory arena: allocate and free one object of a production-typical size.</summary>
[MemoryDiagnoser]
public class CacheletArenaBenchmarks
{
    private string _directory = null!;
    private SharedMemoryArena _arena = null!;

    /// <summary>600 B (a quarter of blobs are smaller), 12 KB (80% are smaller), 1 MB (a large object: a file of its own).</summary>
    [Params(600, 12 * 1024, 1024 * 1024)]
    public int Length { get; set; }

    [GlobalSetup]
    public void Setup()
    {
        _directory = Path.Combine("/dev/shm", $"faast-bench-{Environment.ProcessId}-{Guid.NewGuid():N}");
        _arena = new SharedMemoryArena(_directory, new ArenaOptions { Capacity = 256L << 20 });
    }

    [GlobalCleanup]
    public void Cleanup() => _arena.Dispose();

    [Benchmark]
    public long ArenaAllocateFree()
    {
        if (!_arena.TryAllocate(Length, out var e))
            return -1;
        var offset = e.Offset;
        _arena.Free(e);
        return offset;
    }
}
