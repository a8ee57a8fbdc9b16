namespace FaaST.Cachelet.Reads;

/// <summary>
/// Storage reads by priority: on-demand before background. An on-demand read is admitted at once,
/// always (two interlocked operations, no lock, no wait); a background read (a prefetch) waits for
/// one of <see cref="MaxBackground"/> slots and then until no on-demand storage read is running.
/// A background read that started keeps going when an on-demand one arrives (its transfer is not
/// torn), so at most <see cref="MaxBackground"/> of them share the link with on-demand reads; and a
/// background read an invocation now waits for (it joined that fetch) is promoted and stops yielding.
/// </summary>
internal sealed class StorageReadScheduler
{
    /// <summary>Background storage reads at a time unless configured (2: a prefetch flood never holds more of the link).</summary>
    public const int DefaultMaxBackground = 2;

    private readonly SemaphoreSlim _backgroundSlots;
    private int _onDemand;
    private int _background;
    private int _waiting;
    private TaskCompletionSource? _idle;

    public StorageReadScheduler(int maxBackground = DefaultMaxBackground)
    {
        ArgumentOutOfRangeException.ThrowIfLessThan(maxBackground, 1);
        MaxBackground = maxBackground;
        _backgroundSlots = new SemaphoreSlim(maxBackground, maxBackground);
    }

    public int MaxBackground { get; }

    /// <summary>On-demand storage reads running now.</summary>
    public int OnDemandRunning => Volatile.Read(ref _onDemand);

    /// <summary>Background storage reads running now (admitted, not yet ended).</summary>
    public int BackgroundRunning => Volatile.Read(ref _background);

    /// <summary>Background storage reads waiting for a slot or for on-demand reads to end.</summary>
    public int BackgroundWaiting => Volatile.Read(ref _waiting);

    /// <summary>Admits a storage read of <paramref name="priority"/>; dispose the admission when the read ends.</summary>
    /// <param name="promoted">Completes when an on-demand reader starts waiting for this background read: it stops yielding.</param>
    public ValueTask<Admission> AdmitAsync(ReadPriority priority, Task? promoted, CancellationToken ct) =>
        priority == ReadPriority.OnDemand ? new ValueTask<Admission>(EnterOnDemand()) : EnterBackgroundAsync(promoted, ct);

    /// <summary>Admits an on-demand read at once.</summary>
    public Admission EnterOnDemand()
    {
        Interlocked.Increment(ref _onDemand);
        return new Admission(this, ReadPriority.OnDemand);
    }

    private async ValueTask<Admission> EnterBackgroundAsync(Task? promoted, CancellationToken ct)
    {
        Interlocked.Increment(ref _waiting);
        try
        {
            await _backgroundSlots.WaitAsync(ct);
        }
        catch
        {
            Interlocked.Decrement(ref _waiting);
            throw;
        }
        try
        {
            while (Volatile.Read(ref _onDemand) > 0 && promoted is not { IsCompleted: true })
            {
                var idle = IdleSignal();
                // Checked again after the signal is published: an on-demand read that ended in between
                // found no signal to complete, and must not leave this one waiting.
                if (Volatile.Read(ref _onDemand) == 0)
                    break;
                await (promoted is null ? idle.Task : Task.WhenAny(idle.Task, promoted)).WaitAsync(ct);
            }
        }
        catch
        {
            _backgroundSlots.Release();
            Interlocked.Decrement(ref _waiting);
            throw;
        }
        Interlocked.Increment(ref _background);
        Interlocked.Decrement(ref _waiting);
        return new Admission(this, ReadPriority.Background);
    }

    private TaskCompletionSource IdleSignal()
    {
        if (Volatile.Read(ref _idle) is { } current)
            return current;
        var fresh = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
        return Interlocked.CompareExchange(ref _idle, fresh, null) ?? fresh;
    }

    private void Exit(ReadPriority priority)
    {
        if (priority == ReadPriority.Background)
        {
            Interlocked.Decrement(ref _background);
            _backgroundSlots.Release();
            return;
        }
        // The last on-demand read wakes waiting background reads (only they create the signal).
        if (Interlocked.Decrement(ref _onDemand) == 0 && Volatile.Read(ref _idle) is not null)
            Interlocked.Exchange(ref _idle, null)?.TrySetResult();
    }

    /// <summary>One admitted storage read; disposing it ends it (once).</summary>
    public sealed class Admission(StorageReadScheduler scheduler, ReadPriority priority) : IDisposable
    {
        private int _ended;

        public ReadPriority Priority => priority;

        public void Dispose()
        {
            if (Interlocked.Exchange(ref _ended, 1) == 0)
                scheduler.Exit(priority);
        }
    }
}
