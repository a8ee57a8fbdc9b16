namespace FaaST.Simulator.Simulation;

/// <summary>
/// One simulated cachelet: LRU over an app's objects (Faa$T §3.4's default eviction), by bytes. Objects are an app's
/// dense ids and carry the version the cache holds, so a read of a newer version is a miss (a version check against
/// storage finds it). The list lives in arrays indexed by slot with a free list: a simulation holds tens of thousands of
/// these (apps × configurations) and touches one per access, so no node objects and no allocation per access.
/// </summary>
public sealed class LruCache
{
    private const int None = -1;
    private readonly Dictionary<int, int> _slots = [];
    private int[] _ids = new int[4];
    private long[] _sizes = new long[4];
    private int[] _versions = new int[4];
    private int[] _prev = new int[4];
    private int[] _next = new int[4];
    private int _head = None, _tail = None, _free = None, _used;

    public LruCache(long capacity)
    {
        ArgumentOutOfRangeException.ThrowIfNegative(capacity);
        Capacity = capacity;
    }

    public long Capacity { get; }

    public long Bytes { get; private set; }

    public int Count => _slots.Count;

    /// <summary>Objects evicted to make room (not those dropped by <see cref="Clear"/>).</summary>
    public long Evictions { get; private set; }

    public bool Contains(int id) => _slots.ContainsKey(id);

    /// <summary>A read: true (and most recently used) when the cache holds <paramref name="version"/> of the object;
    /// an older version is dropped.</summary>
    public bool TryHit(int id, int version)
    {
        if (!_slots.TryGetValue(id, out var slot))
            return false;
        if (_versions[slot] != version)
        {
            Remove(id, slot);
            return false;
        }
        MoveToFront(slot);
        return true;
    }

    /// <summary>Puts the object in as the most recently used, evicting from the LRU end until it fits; an object larger
    /// than the whole cache is not cached (and an older version of it is dropped).</summary>
    public void Insert(int id, long size, int version)
    {
        if (_slots.TryGetValue(id, out var old))
            Remove(id, old);
        if (size > Capacity)
            return;
        while (Bytes + size > Capacity && _tail != None)
        {
            Remove(_ids[_tail], _tail);
            Evictions++;
        }
        var slot = Allocate();
        _ids[slot] = id;
        _sizes[slot] = size;
        _versions[slot] = version;
        _prev[slot] = None;
        _next[slot] = _head;
        if (_head != None)
            _prev[_head] = slot;
        _head = slot;
        if (_tail == None)
            _tail = slot;
        _slots[id] = slot;
        Bytes += size;
    }

    /// <summary>The app was unloaded: its cache is gone.</summary>
    public void Clear()
    {
        _slots.Clear();
        _head = _tail = _free = None;
        _used = 0;
        Bytes = 0;
    }

    /// <summary>The ids held, most recently used first.</summary>
    public void CopyIds(List<int> into)
    {
        for (var s = _head; s != None; s = _next[s])
            into.Add(_ids[s]);
    }

    private int Allocate()
    {
        if (_free != None)
        {
            var slot = _free;
            _free = _next[slot];
            return slot;
        }
        if (_used == _ids.Length)
        {
            var n = _ids.Length * 2;
            Array.Resize(ref _ids, n);
            Array.Resize(ref _sizes, n);
            Array.Resize(ref _versions, n);
            Array.Resize(ref _prev, n);
            Array.Resize(ref _next, n);
        }
        return _used++;
    }

    private void Remove(int id, int slot)
    {
        Unlink(slot);
        _slots.Remove(id);
        Bytes -= _sizes[slot];
        _next[slot] = _free;
        _free = slot;
    }

    private void MoveToFront(int slot)
    {
        if (slot == _head)
            return;
        Unlink(slot);
        _prev[slot] = None;
        _next[slot] = _head;
        _prev[_head] = slot;
        _head = slot;
        if (_tail == None)
            _tail = slot;
    }

    private void Unlink(int slot)
    {
        var p = _prev[slot];
        var n = _next[slot];
        if (p != None) _next[p] = n; else _head = n;
        if (n != None) _prev[n] = p; else _tail = p;
    }
}
