namespace FaaST.FlashBackend.Scheduling;

/// <summary>A tenant's FIFO of queued requests: a ring buffer of structs that doubles when full (the only allocation,
/// amortized; a steady workload stops allocating after warm-up). Single-threaded.</summary>
internal sealed class RequestRing
{
    private IoRequest[] _items;
    private int _head;
    private int _count;

    public RequestRing(int capacity = 16) => _items = new IoRequest[capacity];

    public int Count => _count;

    /// <summary>Sum of the queued requests' costs (the tenant's demand, read by BE borrowing).</summary>
    public double QueuedCost { get; private set; }

    public ref IoRequest Head => ref _items[_head];

    public void Enqueue(in IoRequest request)
    {
        if (_count == _items.Length)
        {
            var grown = new IoRequest[_items.Length * 2];
            for (int i = 0; i < _count; i++)
                grown[i] = _items[(_head + i) % _items.Length];
            _items = grown;
            _head = 0;
        }
        _items[(_head + _count) % _items.Length] = request;
        _count++;
        QueuedCost += request.Cost;
    }

    public IoRequest Dequeue()
    {
        var r = _items[_head];
        _head = (_head + 1) % _items.Length;
        _count--;
        QueuedCost = _count == 0 ? 0 : QueuedCost - r.Cost; // reset at empty so rounding never drifts
        return r;
    }
}

/// <summary>
/// An activation-ordered cyclic active list (En4S §4.3.1): a fixed ring of tenant ids, the tail advancing when a
/// tenant is activated or requeued, the head when the tenant at the front is dequeued. Capacity = tenant slots, so it
/// never overflows (a tenant is in at most one list at a time) and never allocates.
/// </summary>
internal sealed class ActiveList
{
    private readonly int[] _ids;
    private int _head;
    private int _count;

    public ActiveList(int capacity) => _ids = new int[capacity];

    public int Count => _count;

    public int Head => _ids[_head];

    public void PushTail(int tenant)
    {
        if (_count == _ids.Length)
            throw new InvalidOperationException($"active list: full at {_count} tenants while activating tenant {tenant}; a tenant was activated twice");
        _ids[(_head + _count) % _ids.Length] = tenant;
        _count++;
    }

    public int PopHead()
    {
        int t = _ids[_head];
        _head = (_head + 1) % _ids.Length;
        _count--;
        return t;
    }

    /// <summary>Move the head tenant to the tail (blocked: it waits for the next round, §4.3.2).</summary>
    public void Requeue() => PushTail(PopHead());

    /// <summary>The ids front to back, for tests and diagnostics (allocates).</summary>
    public int[] Snapshot()
    {
        var a = new int[_count];
        for (int i = 0; i < _count; i++)
            a[i] = _ids[(_head + i) % _ids.Length];
        return a;
    }
}
