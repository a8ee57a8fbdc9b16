using BenchmarkDotNet.Attributes;
using FaaST.Membership;

namespace FaaST.Bench;

/// <summary>Ownership lookups on the consistent-hash ring: 64 members × 100 virtual nodes (Faa$T §5).</summary>
[MemoryDiagnoser]
public class RingBenchmarks
{
    private const int Keys = 1024; // cycled, so that the search does not hit one cached path

    private HashRing _ring = null!;
    private ulong[] _positions = null!;
    private string[] _keys = null!;
    private int _next;

    [GlobalSetup]
    public void Setup()
    {
        var started = DateTimeOffset.UtcNow;
        _ring = new HashRing(Enumerable.Range(0, 64)
            .Select(i => new Member(Guid.NewGuid().ToString("N"), new Uri($"http://10.0.0.{i + 1}:7071/"), started)));
        _keys = Enumerable.Range(0, Keys).Select(i => $"devstoreaccount1/pipeline-raw/batch-{i % 37}/object-{i:D6}.json").ToArray();
        _positions = _keys.Select(HashRing.Position).ToArray();
    }

    /// <summary>Binary search over 6,400 virtual nodes for a precomputed position.</summary>
    [Benchmark]
    public Member OwnerOfPosition() => _ring.OwnerOf(_positions[_next++ & (Keys - 1)]);

    /// <summary>SHA-256 of a 60-character key (UTF-8 on the stack), first 8 bytes.</summary>
    [Benchmark]
    public ulong Position() => HashRing.Position(_keys[_next++ & (Keys - 1)]);

    /// <summary>Both: what a cachelet pays to find a blob's owner.</summary>
    [Benchmark]
    public Member OwnerOfKey() => _ring.OwnerOf(_keys[_next++ & (Keys - 1)]);
}
