using System.Collections.Concurrent;
using System.Diagnostics;
using System.Threading.Tasks.Sources;
using FaaST.FlashBackend.Scheduling;
using Microsoft.Extensions.Logging;

namespace FaaST.FlashBackend.Server;

/// <summary>
/// One I/O unit on its way through the scheduler: pooled (no allocation per unit once the pool has grown to the
/// concurrency), awaited by its handler without a Task (a reusable <see cref="IValueTaskSource{TResult}"/>).
/// </summary>
internal sealed class IoTicket(int index) : IValueTaskSource<bool>
{
    public readonly int Index = index;
    public TenantEntry Tenant = null!;
    public IoRequest Request;

    /// <summary>Told of the grant directly, instead of an awaiter (GetMany's items: no continuation to schedule).</summary>
    public IGrantTarget? Target;
    private ManualResetValueTaskSourceCore<bool> _core = new() { RunContinuationsAsynchronously = true };

    /// <summary>True once the scheduler dispatched the unit: the handler runs its I/O now. False: the tenant was
    /// deregistered meanwhile (nothing may run).</summary>
    public ValueTask<bool> WaitAsync() => new(this, _core.Version);

    public void Signal(bool granted)
    {
        if (Target is { } target)
            target.Granted(this, granted);
        else
            _core.SetResult(granted);
    }

    public void Reset() => _core.Reset();

    public bool GetResult(short token) => _core.GetResult(token);

    public ValueTaskSourceStatus GetStatus(short token) => _core.GetStatus(token);

    public void OnCompleted(Action<object?> continuation, object? state, short token, ValueTaskSourceOnCompletedFlags flags) =>
        _core.OnCompleted(continuation, state, token, flags);
}

/// <summary>What a unit submitted with a target hears when the scheduler decides: called inside the dispatcher's pass
/// (so it must only hand the unit on: queue its I/O, never block). False: the tenant was deregistered; the target then
/// hands the ticket back with <see cref="IoDispatcher.Release"/>.</summary>
internal interface IGrantTarget
{
    void Granted(IoTicket ticket, bool granted);
}

/// <summary>
/// The one thread that owns the <see cref="IIoScheduler"/> (single-threaded by contract, as En4S's per-core scheduler
/// is, §5.3). gRPC handlers hand it units through lock-free queues; it enqueues them, asks the scheduler for batches
/// within the in-flight caps, and signals the handlers whose units were dispatched; the handlers run the I/O on the
/// engine and hand the tickets back, and it reports each completion to the scheduler. Tenant registration, flows and
/// admission also run here, as control items, so the scheduler is never touched by two threads. When there is nothing
/// to do it sleeps on an event the producers set; while requests are held back by their tenants' shares it wakes every
/// millisecond (the En4S reclaim interval, §4.5) to let tokens accrue. A producer that finds no pass running runs one
/// itself (<see cref="TryRunInline"/>): the scheduler is still touched by one thread at a time, the holder of a
/// non-blocking ownership flag, but a unit no longer waits for this thread to wake up.
/// </summary>
internal sealed partial class IoDispatcher : IDisposable
{
    private static readonly double NsPerTick = 1e9 / Stopwatch.Frequency;

    private readonly IIoScheduler _scheduler;
    private readonly int _quietInFlight;
    private readonly ILogger _log;
    private readonly ConcurrentQueue<IoTicket> _submissions = new();
    private readonly ConcurrentQueue<IoTicket> _completions = new();
    private readonly ConcurrentQueue<IoTicket> _free = new();
    private readonly ConcurrentQueue<Func<bool>> _control = new();
    private readonly List<Func<bool>> _retry = [];
    // A short spin before the thread blocks. Tried without (2026-11-28, ./faast bench flash-server --quick, two runs
    // each, machine at load 14-33): the server's best GetMany rate fell from 90.6K / 76.7K to 77.3K / 74.9K gets/s and
    // its CPU per get rose (futex waits and wakes cost more than the spin saved).
    private readonly ManualResetEventSlim _wake = new(false, spinCount: 50);
    private readonly Thread _thread;
    private readonly IoRequest[] _batch = new IoRequest[64];
    private IoTicket?[] _byIndex = new IoTicket?[256];
    private int _tickets;
    private int _sleeping;
    private int _longSleep;   // 1 while the dispatcher thread sleeps up to 100 ms (nothing was queued when it lay down)
    private int _owner;       // 1 while a thread runs a pass over the scheduler (TryRunInline, Run)
    private long _lastNow;
    private volatile bool _stopping;

    /// <summary>Runs every second on this thread (idle flows, admission): set before <see cref="Start"/>.</summary>
    public Action<long>? Housekeeping { get; set; }

    /// <summary>Registered tenants, in registration order; owned by this thread (throttle accounting walks it).</summary>
    public List<TenantEntry> Tenants { get; } = [];

    public IoDispatcher(IIoScheduler scheduler, SchedulerLimits limits, ILogger log)
    {
        _scheduler = scheduler;
        _log = log;
        // Below the lower (BE) in-flight cap neither cap holds requests back: what stays queued is held by its share.
        _quietInFlight = limits.BeInFlightMax;
        _thread = new Thread(Run) { IsBackground = true, Name = "flash-dispatcher" };
    }

    public IIoScheduler Scheduler => _scheduler;

    public int InFlight => Volatile.Read(ref _inFlightSnapshot);

    private int _inFlightSnapshot;

    public void Start() => _thread.Start();

    public static long NowNs() => (long)(Stopwatch.GetTimestamp() * NsPerTick);

    /// <summary>Queues a unit of <paramref name="sizeBytes"/> for <paramref name="tenant"/>; await
    /// <see cref="IoTicket.WaitAsync"/>, run the I/O if granted, then <see cref="Complete"/>.</summary>
    public IoTicket Submit(TenantEntry tenant, int flow, IoType type, int sizeBytes, IGrantTarget? target = null)
    {
        if (!_free.TryDequeue(out IoTicket? t))
            t = new IoTicket(Interlocked.Increment(ref _tickets) - 1);
        t.Tenant = tenant;
        t.Target = target;
        t.Request = new IoRequest(t.Index, -1, type, sizeBytes, NowNs(), flow);
        Interlocked.Increment(ref tenant.Pending);
        _submissions.Enqueue(t);
        TryRunInline();
        return t;
    }

    /// <summary>The granted unit's I/O is done (or failed): the scheduler hears of it, the ticket goes back to the pool.</summary>
    public void Complete(IoTicket ticket)
    {
        _completions.Enqueue(ticket);
        TryRunInline();
    }

    /// <summary>Runs <paramref name="attempt"/> on the dispatcher thread, again on every loop until it answers done.</summary>
    public Task<T> InvokeAsync<T>(Func<(bool Done, T Result)> attempt)
    {
        var done = new TaskCompletionSource<T>(TaskCreationOptions.RunContinuationsAsynchronously);
        _control.Enqueue(() =>
        {
            try
            {
                (bool ok, T result) = attempt();
                if (ok)
                    done.SetResult(result);
                return ok;
            }
            catch (Exception e)
            {
                done.SetException(e);
                return true;
            }
        });
        Wake();
        return done.Task;
    }

    private void Wake()
    {
        // Paired with the full fence after _sleeping = 1 below: either the thread sees the item or we see it asleep.
        if (Volatile.Read(ref _sleeping) != 0)
            _wake.Set();
    }

    private void Run()
    {
        long nextHousekeeping = 0;
        while (!_stopping)
        {
            bool progress;
            if (Interlocked.CompareExchange(ref _owner, 1, 0) == 0)
            {
                long now = Now();
                progress = RunOnce(now);
                if (now >= nextHousekeeping)
                {
                    Housekeeping?.Invoke(now);
                    nextHousekeeping = now + 1_000_000_000;
                }
                Volatile.Write(ref _owner, 0);
            }
            else
            {
                // A handler is running a pass inline. Not a spin (measured: at 80K gets/s this thread's yields were
                // 14 % of the server's CPU): sleep until that pass ends, which wakes this thread if it left work
                // (TryRunInline), or for 1 ms.
                Volatile.Write(ref _sleeping, 1);
                Interlocked.MemoryBarrier();
                if (Volatile.Read(ref _owner) != 0 && !_stopping)
                    _wake.Wait(1);
                _wake.Reset();
                Volatile.Write(ref _sleeping, 0);
                continue;
            }
            if (progress)
                continue;
            Volatile.Write(ref _sleeping, 1);
            // Set before Queued is read, with the fence between: a handler's pass that leaves units queued either is
            // seen here (a short sleep) or sees this flag and wakes this thread (TryRunInline).
            Volatile.Write(ref _longSleep, 1);
            Interlocked.MemoryBarrier();
            if (_submissions.IsEmpty && _completions.IsEmpty && _control.IsEmpty && !_stopping)
            {
                bool shortSleep = HeldByShares || _retry.Count > 0;
                if (shortSleep)
                    Volatile.Write(ref _longSleep, 0);
                _wake.Wait(shortSleep ? 1 : 100);
            }
            Volatile.Write(ref _longSleep, 0);
            _wake.Reset();
            Volatile.Write(ref _sleeping, 0);
        }
    }

    /// <summary>
    /// The handler that just queued a unit or a completion runs one pass itself when no one else is running one (a
    /// non-blocking try: nobody ever waits for the ownership flag, so it is no lock). Measured on this 2-core VM: every
    /// hand-off to a sleeping thread costs a scheduler wake-up, and at QD 1 a get made three of them; inline, a unit
    /// dispatched by its own handler's pass continues synchronously. The scheduler stays single-threaded: only the flag's
    /// holder touches it.
    /// <para>A handler that finds the flag held leaves its item queued and returns: the holder looks at the queues again
    /// after letting go (a full fence between, so either the holder sees the item or the handler sees the flag free) and
    /// runs another pass for it, up to <see cref="InlineRounds"/> passes before it hands the rest to the dispatcher
    /// thread. Units left queued behind the in-flight caps wait for the completions of those in flight, which run passes
    /// of their own; only when the dispatcher thread sleeps its long sleep is it woken for them, so that tokens accruing
    /// with time are looked at every millisecond. Before (woken after every pass that left units queued, and by every
    /// handler that found the flag held): at QD 256 that thread took 28 % of the server's CPU samples, most of it in
    /// wake-ups and the event's spin (perf, 2026-11-28).</para>
    /// </summary>
    private void TryRunInline()
    {
        for (int round = 0; ; round++)
        {
            if (Interlocked.CompareExchange(ref _owner, 1, 0) != 0)
                return;
            RunOnce(Now());
            // A full fence (not a release write): the reads below must not pass this write, or a handler that found the
            // flag held and this thread would each leave the other's item unseen.
            Interlocked.Exchange(ref _owner, 0);
            if (_submissions.IsEmpty && _completions.IsEmpty && _control.IsEmpty)
                break;
            if (round + 1 >= InlineRounds)
            {
                Wake();
                return;
            }
        }
        if (Volatile.Read(ref _longSleep) != 0 && HeldByShares)
            Wake();
    }

    /// <summary>
    /// Units are queued while the device has room: their tenants' shares hold them, and only time (tokens accruing)
    /// lets them go, so the dispatcher thread looks every millisecond. Units queued behind the in-flight caps need no
    /// timer: each completion of the units in flight runs a pass (<see cref="Complete"/>). Before (a 1 ms poll whenever
    /// anything was queued): at QD 256, where the caps always hold units back, the dispatcher thread woke ~1,000 times a
    /// second and its event's spin made ~5,000 sched_yield calls a second, ~6 % of the server's CPU samples (perf and
    /// perf trace on the server, ./faast bench flash-server --quick, 2026-11-29). Only the ownership flag's holder or
    /// the dispatcher thread reads it exactly; TryRunInline reads it after letting go, as a hint (a stale answer costs
    /// one wake-up or leaves the unit to the next completion's pass).
    /// </summary>
    private bool HeldByShares => _scheduler.Queued > 0 && _scheduler.InFlight < _quietInFlight;

    /// <summary>Passes one handler runs in a row for items others queued meanwhile: 4, so a handler (a request loop or
    /// the ring's thread) is not kept from its own work for long; what remains goes to the dispatcher thread.</summary>
    private const int InlineRounds = 4;

    /// <summary>Monotonic across the threads that take turns owning the scheduler (it refuses time going backwards).</summary>
    private long Now()
    {
        long now = NowNs();
        if (now < _lastNow)
            now = _lastNow;
        _lastNow = now;
        return now;
    }

    /// <summary>One pass (only the ownership flag's holder): control items, completions, submissions, a dispatch.</summary>
    private bool RunOnce(long now)
    {
        bool progress = false;
        try
        {
            progress |= RunControl();
            while (_completions.TryDequeue(out IoTicket? t))
            {
                _scheduler.OnCompletion(t.Request, now);
                Interlocked.Decrement(ref t.Tenant.Pending);
                _byIndex[t.Index] = null;
                t.Tenant = null!;
                t.Target = null;
                t.Reset();
                _free.Enqueue(t);
                progress = true;
            }
            while (_submissions.TryDequeue(out IoTicket? t))
            {
                progress = true;
                TenantEntry tenant = t.Tenant;
                if (tenant.Removed || tenant.SchedulerId < 0)
                {
                    Interlocked.Decrement(ref tenant.Pending);
                    t.Signal(false);   // the handler answers NOT_FOUND and hands the ticket back through Release
                    continue;
                }
                t.Request.Tenant = tenant.SchedulerId;
                if (t.Index >= _byIndex.Length)
                    Array.Resize(ref _byIndex, Math.Max(_byIndex.Length * 2, t.Index + 1));
                try
                {
                    _scheduler.Enqueue(t.Request, now);
                }
                catch (Exception e) when (e is ArgumentException or InvalidOperationException)
                {
                    LogEnqueueFailed(_log, tenant.Name, e);
                    Interlocked.Decrement(ref tenant.Pending);
                    t.Signal(false);
                    continue;
                }
                _byIndex[t.Index] = t;
                tenant.Enqueued++;
            }
            if (_scheduler.Queued > 0)
                progress |= DispatchBatch(now);
            Volatile.Write(ref _inFlightSnapshot, _scheduler.InFlight);
        }
        catch (Exception e)
        {
            LogLoopFailed(_log, e);
        }
        return progress;
    }

    private bool RunControl()
    {
        bool any = false;
        for (int i = _retry.Count - 1; i >= 0; i--)
        {
            if (_retry[i]())
                _retry.RemoveAt(i);
        }
        while (_control.TryDequeue(out Func<bool>? item))
        {
            any = true;
            if (!item())
                _retry.Add(item);
        }
        return any;
    }

    private bool DispatchBatch(long now)
    {
        int n = _scheduler.Dispatch(now, _batch);
        for (int k = 0; k < n; k++)
        {
            IoTicket t = _byIndex[(int)_batch[k].Id]!;
            t.Request = _batch[k];   // with its cost, for OnCompletion
            t.Tenant.Granted++;
            t.Signal(true);
        }
        if (n < _batch.Length && _scheduler.Queued > 0 && _scheduler.InFlight < _quietInFlight)
        {
            // The device had room and these stayed queued: held back by their tenants' shares (throttled). Each
            // request is counted once (the per-tenant FIFO's position up to which it was counted).
            foreach (TenantEntry e in Tenants)
            {
                if (e.Enqueued > e.Granted)
                {
                    long from = Math.Max(e.Granted, e.HeldMark);
                    if (e.Enqueued > from)
                    {
                        Interlocked.Add(ref e.Counters.Throttled, e.Enqueued - from);
                        e.HeldMark = e.Enqueued;
                    }
                }
            }
        }
        return n > 0;
    }

    /// <summary>A ticket refused by <see cref="IoTicket.WaitAsync"/> (false) goes back to the pool without reaching the
    /// scheduler.</summary>
    public void Release(IoTicket ticket)
    {
        ticket.Tenant = null!;
        ticket.Target = null;
        ticket.Reset();
        _free.Enqueue(ticket);
    }

    public void Dispose()
    {
        _stopping = true;
        _wake.Set();
        if (_thread.IsAlive)
            _thread.Join();
        _wake.Dispose();
    }

    [LoggerMessage(EventId = 7102, Level = LogLevel.Error, Message = "flash dispatcher: the scheduler refused a unit of tenant {Tenant}")]
    private static partial void LogEnqueueFailed(ILogger log, string tenant, Exception e);

    [LoggerMessage(EventId = 7101, Level = LogLevel.Error, Message = "flash dispatcher: a loop iteration failed; the loop continues")]
    private static partial void LogLoopFailed(ILogger log, Exception e);
}
