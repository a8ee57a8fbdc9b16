using System.Numerics;

namespace FaaST.Cachelet.Memory;

/// <summary>
/// A run of pages of a segment, assigned to one size class while it holds a live slot. A
/// bitmap (one bit per slot, 1 = in use) finds free slots; the word hint makes the search
/// amortized O(1). Guarded by its size class's lock.
/// </summary>
internal sealed class Slab
{
    private readonly ulong[] _used;
    private int _hint;

    public Slab(SlabSegment segment, int firstPage, int pages, SizeClass sizeClass)
    {
        Segment = segment;
        FirstPage = firstPage;
        Pages = pages;
        Class = sizeClass;
        Offset = (long)firstPage * segment.PageSize;
        Bytes = (long)pages * segment.PageSize;
        SlotCount = (int)(Bytes / sizeClass.SlotSize);
        _used = new ulong[(SlotCount + 63) / 64];
        // Bits past the last slot count as used, so Take never returns them.
        var tail = SlotCount % 64;
        if (tail != 0)
            _used[^1] = ~((1UL << tail) - 1);
    }

    public SlabSegment Segment { get; }

    public int FirstPage { get; }

    public int Pages { get; }

    public SizeClass Class { get; }

    /// <summary>Byte offset of the slab in its segment.</summary>
    public long Offset { get; }

    public long Bytes { get; }

    public int SlotCount { get; }

    public int Live { get; private set; }

    public bool IsFull => Live == SlotCount;

    /// <summary>Takes a free slot; the caller has checked that the slab is not full.</summary>
    public int Take()
    {
        for (int i = _hint, n = 0; n < _used.Length; i = i + 1 == _used.Length ? 0 : i + 1, n++)
        {
            var word = _used[i];
            if (word == ulong.MaxValue)
                continue;
            var bit = BitOperations.TrailingZeroCount(~word);
            _used[i] = word | (1UL << bit);
            _hint = i;
            Live++;
            return i * 64 + bit;
        }
        throw new InvalidOperationException("internal error: Take on a full slab");
    }

    /// <summary>Frees a slot; false if it was not in use (a double free).</summary>
    public bool Release(int slot)
    {
        var i = slot >> 6;
        var mask = 1UL << (slot & 63);
        if ((_used[i] & mask) == 0)
            return false;
        _used[i] &= ~mask;
        Live--;
        if (i < _hint)
            _hint = i;
        return true;
    }
}

/// <summary>Orders slabs by "address": segment creation order, then offset.</summary>
internal sealed class SlabAddressOrder : IComparer<Slab>
{
    public static readonly SlabAddressOrder Instance = new();

    public int Compare(Slab? x, Slab? y)
    {
        if (ReferenceEquals(x, y))
            return 0;
        if (x is null)
            return -1;
        if (y is null)
            return 1;
        var c = x.Segment.Id.CompareTo(y.Segment.Id);
        return c != 0 ? c : x.Offset.CompareTo(y.Offset);
    }
}
