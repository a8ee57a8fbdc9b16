using System.Collections.Concurrent;
using FaaST.Cachelet.Index;

namespace FaaST.Runtime.Flash;

/// <summary>
/// The versions this instance knows the flash tier holds: learnt from a hit (the tier served that ETag) or a demotion
/// the tier acknowledged, forgotten when the tier answers a get of the key with nothing or with another version. The
/// demotion sink skips an evicted object whose version is known held: its bytes came from the tier (or went to it) and
/// are unchanged, so writing them again would cost the tier a whole put for nothing. Measured on `./faast bench
/// flash-e2e` (a scan 4× the cache, 1 MiB objects): every flash hit evicted another object the tier already held, and
/// re-demoting it cost the app 1.65× a read's tokens on this disk (the fitted write cost), so a hit paid for a read and
/// a write of 1 MiB under the app's SLO.
/// <para>
/// Only a hint: the tier may have evicted the version since (it is capacity-bound, and this instance cannot see other
/// tenants' pressure). Then a later read misses, the key is forgotten, and the next eviction of it demotes it again —
/// one storage read lost, never a wrong byte served (a flash copy is served only at storage's current ETag). Bounded:
/// at <see cref="Capacity"/> keys the map is cleared rather than aged (the cost of forgetting is a redundant put).
/// Lock-free (ConcurrentDictionary); no allocation on the read path beyond the map's own node when a version is learnt.
/// </para>
/// </summary>
internal sealed class FlashHeldVersions
{
    /// <summary>65,536 keys (~8 MiB at most): more objects than a 1 GiB tier holds at the default 64 KiB minDemoteBytes
    /// could need is a hint not worth more memory.</summary>
    public const int Capacity = 65_536;

    private readonly ConcurrentDictionary<BlobKey, string> _held = new();

    // Kept beside the map, not read from it: ConcurrentDictionary.Count takes every bucket's lock, and Held runs on each
    // flash hit. Approximate under races (a clear racing an add), which only moves when the map is cleared.
    private int _count;

    /// <summary>The tier holds <paramref name="etag"/> of <paramref name="key"/> (it just served or stored it).</summary>
    public void Held(in BlobKey key, string etag)
    {
        if (!_held.TryAdd(key, etag))
        {
            _held[key] = etag;
            return;
        }
        if (Interlocked.Increment(ref _count) > Capacity)
        {
            _held.Clear();
            Volatile.Write(ref _count, 0);
        }
    }

    /// <summary>The tier answered a get of <paramref name="key"/> with nothing current: whatever was known is not.</summary>
    public void Forget(in BlobKey key)
    {
        if (_held.TryRemove(key, out _))
            Interlocked.Decrement(ref _count);
    }

    public bool IsHeld(in BlobKey key, string etag) => _held.TryGetValue(key, out var held) && held == etag;
}
