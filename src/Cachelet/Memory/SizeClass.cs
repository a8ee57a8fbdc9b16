namespace FaaST.Cachelet.Memory;

/// <summary>
/// One size class: its slot size, the slab it allocates from now, and the other slabs with free
/// slots, lowest address first. Its lock guards all of them and the slabs' bitmaps.
/// </summary>
internal sealed class SizeClass(int index, int slotSize, int slabPages)
{
    public readonly Lock Lock = new();

    public int Index { get; } = index;

    public int SlotSize { get; } = slotSize;

    /// <summary>Pages per slab: the fewest that hold a slot with a tail of at most 1/8 of the slab.</summary>
    public int SlabPages { get; } = slabPages;

    /// <summary>The slab allocations go to; kept even when it falls empty (until another class needs the room).</summary>
    public Slab? Current;

    /// <summary>Slabs other than <see cref="Current"/> that have a free slot and a live one.</summary>
    public readonly SortedSet<Slab> Partial = new(SlabAddressOrder.Instance);

    public int Slabs;

    public long LiveSlots;

    public long LiveBytes;

    public long SlotsPerSlab(int pageSize) => (long)SlabPages * pageSize / SlotSize;
}
