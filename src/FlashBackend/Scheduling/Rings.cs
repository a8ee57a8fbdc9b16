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

/// <summary>
/// Tenants parked until a virtual time (a min-heap of (wake time, park order, tenant), preallocated at the tenant
/// slots): a tenant blocked for want of tokens leaves its active list and returns when its refill makes it eligible, so
/// a scheduling round visits only tenants that can dispatch (§4.3.2's requeue, without re-visiting a blocked tenant every
/// round — the cost that otherwise grows with the number of blocked tenants). Ties wake in park order. Never allocates.
/// </summary>
internal sealed class WakeHeap
{
    private readonly long[] _wake;
    private readonly long[] _order;
    private readonly int[] _tenant;
    private int _count;
    private long _next;

    public WakeHeap(int capacity)
    {
        _wake = new long[capacity];
        _order = new long[capacity];
        _tenant = new int[capacity];
    }

    public int Count => _count;

    /// <summary>The earliest wake time, or <see cref="long.MaxValue"/> when empty.</summary>
    public long NextWakeNs => _count == 0 ? long.MaxValue : _wake[0];

    public void Push(int tenant, long wakeNs)
    {
        if (_count == _wake.Length)
            throw new InvalidOperationException($"wake heap: full at {_count} tenants while parking tenant {tenant}; a tenant was parked twice");
        int i = _count++;
        _wake[i] = wakeNs;
        _order[i] = _next++;
        _tenant[i] = tenant;
        while (i > 0)
        {
            int p = (i - 1) >> 1;
            if (!Less(i, p))
                break;
            Swap(i, p);
            i = p;
        }
    }

    /// <summary>Pops the earliest tenant due at or before <paramref name="nowNs"/>.</summary>
    public bool TryPopDue(long nowNs, out int tenant)
    {
        if (_count == 0 || _wake[0] > nowNs)
        {
            tenant = -1;
            return false;
        }
        tenant = _tenant[0];
        _count--;
        if (_count > 0)
        {
            Swap(0, _count);
            int i = 0;
            while (true)
            {
                int l = 2 * i + 1, r = l + 1, m = i;
                if (l < _count && Less(l, m)) m = l;
                if (r < _count && Less(r, m)) m = r;
                if (m == i)
                    break;
                Swap(i, m);
                i = m;
            }
        }
        return true;
    }

    private bool Less(int a, int b) => _wake[a] < _wake[b] || (_wake[a] == _wake[b] && _order[a] < _order[b]);

    private void Swap(int a, int b)
    {
        (_wake[a], _wake[b]) = (_wake[b], _wake[a]);
        (_order[a], _order[b]) = (_order[b], _order[a]);
        (_tenant[a], _tenant[b]) = (_tenant[b], _tenant[a]);
    }
}
