using System.Collections.Concurrent;
using FaaST.Cachelet.Index;
using FaaST.Cachelet.Memory;
using FaaST.Cachelet.Sources;

namespace FaaST.Cachelet.Tests;

/// <summary>What a sink saw of one object: its description, a copy of its bytes, and the arena's allocated bytes during the call.</summary>
internal sealed record Demoted(EvictedObject Evicted, byte[] Bytes, long AllocatedDuringCall);

/// <summary>Copies every object it is handed; can hold the pump at a gate (a slow flash tier), and can throw.</summary>
internal sealed class RecordingSink(SharedMemoryArena? arena = null) : IEvictionSink
{
    public ConcurrentQueue<Demoted> Received { get; } = new();

    /// <summary>While set, a call waits here until the test opens it.</summary>
    public ManualResetEventSlim? Gate { get; init; }

    /// <summary>Set when a call has started (before the gate).</summary>
    public ManualResetEventSlim Entered { get; } = new();

    public bool Throws { get; init; }

    public void OnEvicted(in BlobKey key, string version, in Extent bytes) =>
        throw new InvalidOperationException("the pump calls the overload with the reason");

    public void OnEvicted(EvictedObject evicted, in Extent bytes)
    {
        Entered.Set();
        if (Gate is { } gate && !gate.Wait(TimeSpan.FromMinutes(2)))
            throw new TimeoutException("the test never opened the gate");
        if (Throws)
            throw new InvalidOperationException("this sink always fails");
        Received.Enqueue(new Demoted(evicted, bytes.Span.ToArray(), arena?.Allocated ?? -1));
    }

    public IEnumerable<string> Blobs => Received.Select(r => r.Evicted.Key.Blob);
}
