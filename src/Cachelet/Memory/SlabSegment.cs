namespace FaaST.Cachelet.Memory;

/// <summary>
/// A slab segment file ("s000001"): fixed size, sparse, cut into pages. A free-page bitmap hands
/// out runs of pages, lowest first (a splintered segment costs only address space, since free
/// pages hold no memory); the page map finds the slab that holds an offset. Guarded by the arena's
/// page lock, except the page map, which <see cref="SharedMemoryArena.Free"/> reads without it (a
/// live slot's slab cannot change).
/// </summary>
internal sealed class SlabSegment : MappedFile
{
    private readonly ulong[] _free;

    public SlabSegment(SharedMemoryArena owner, long id, string name, string path, FileStream stream, long size, int pageSize)
        : base(owner, id, name, path, stream, size, isLarge: false)
    {
        PageSize = pageSize;
        PageCount = (int)(size / pageSize);
        PageMap = new Slab?[PageCount];
        _free = new ulong[(PageCount + 63) / 64];
        for (var p = 0; p < PageCount; p++)
            _free[p >> 6] |= 1UL << (p & 63);
        FreePages = PageCount;
    }

    public int PageSize { get; }

    public int PageCount { get; }

    public int FreePages { get; private set; }

    public Slab?[] PageMap { get; }

    /// <summary>Finds the lowest run of <paramref name="pages"/> free pages (first fit) and takes it.</summary>
    public bool TryTakeRun(int pages, out int first)
    {
        first = -1;
        if (FreePages < pages)
            return false;
        var runStart = 0;
        var runLength = 0;
        for (var w = 0; w < _free.Length; w++)
        {
            var word = _free[w];
            if (word == 0)
            {
                runLength = 0;
                continue;
            }
            if (word == ulong.MaxValue && runLength + 64 < pages)
            {
                if (runLength == 0)
                    runStart = w * 64;
                runLength += 64;
                continue;
            }
            for (var b = 0; b < 64; b++)
            {
                if ((word & (1UL << b)) == 0)
                {
                    runLength = 0;
                    continue;
                }
                if (runLength++ == 0)
                    runStart = w * 64 + b;
                if (runLength == pages)
                {
                    for (var q = runStart; q < runStart + pages; q++)
                        _free[q >> 6] &= ~(1UL << (q & 63));
                    FreePages -= pages;
                    first = runStart;
                    return true;
                }
            }
        }
        return false;
    }

    public void ReturnRun(int first, int pages)
    {
        for (var q = first; q < first + pages; q++)
        {
            _free[q >> 6] |= 1UL << (q & 63);
            PageMap[q] = null;
        }
        FreePages += pages;
    }
}
