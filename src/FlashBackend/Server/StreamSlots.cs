namespace FaaST.FlashBackend.Server;

/// <summary>
/// A GetMany stream's bound on items in flight: taken per item on the request loop, given back per item where its
/// answer is queued (the ring's thread on the io_uring path), waited for only at the bound. Why not a SemaphoreSlim:
/// its Wait(0) and Release each take its lock, so every item crossed a lock twice from two threads (the request loop
/// and the ring's thread), and perf on the server at QD 256 showed the lock's enter and its spin (sched_yield in
/// Lock.TryEnterSlow) on both. Here taking and giving back are one interlocked operation each; only a request loop
/// that finds no slot parks, on a semaphore that a give-back releases once.
/// <para>One waiter at a time: the stream's request loop (<see cref="WaitAsync"/> is not safe for two).</para>
/// </summary>
internal sealed class StreamSlots(int count)
{
    private readonly SemaphoreSlim _wake = new(0);
    private readonly int _count = count;
    private int _free = count;
    private int _waiting;

    /// <summary>The bound this was made with.</summary>
    public int Count => _count;

    /// <summary>Takes a slot if one is free.</summary>
    public bool TryTake()
    {
        while (true)
        {
            int free = Volatile.Read(ref _free);
            if (free == 0)
                return false;
            if (Interlocked.CompareExchange(ref _free, free - 1, free) == free)
                return true;
        }
    }

    /// <summary>Takes a slot, waiting for a give-back when none is free.</summary>
    public async ValueTask WaitAsync(CancellationToken ct)
    {
        while (!TryTake())
        {
            Volatile.Write(ref _waiting, 1);
            // A full fence between announcing the wait and looking again, paired with the one in Release between
            // giving back and looking for a waiter: either this sees the slot or Release sees the waiter.
            Interlocked.MemoryBarrier();
            if (TryTake())
            {
                Volatile.Write(ref _waiting, 0);
                return;
            }
            await _wake.WaitAsync(ct).ConfigureAwait(false);
        }
    }

    /// <summary>Gives a slot back; wakes the waiter if there is one.</summary>
    public void Release()
    {
        if (Interlocked.Increment(ref _free) > _count)
            throw new InvalidOperationException($"GetMany stream slots: more given back than the {_count} there are");
        if (Volatile.Read(ref _waiting) != 0 && Interlocked.Exchange(ref _waiting, 0) != 0)
            _wake.Release();
    }

    /// <summary>Waits until every slot is back (every item's answer is queued).</summary>
    public async ValueTask WaitAllAsync(CancellationToken ct)
    {
        for (int i = 0; i < _count; i++)
            await WaitAsync(ct).ConfigureAwait(false);
    }
}
