using System.Collections.Concurrent;
using System.Runtime.InteropServices;

namespace FaaST.FlashBackend.Engine;

/// <summary>What a read submitted to <see cref="IoUring"/> calls back when it ends (on the ring's thread).</summary>
internal interface IUringCompletion
{
    /// <summary>First, for every completion of a batch before any <see cref="Completed"/> of it: the device is done with
    /// the read (its buffer still holds the bytes). Hand back what the read held at the device (the scheduler's unit),
    /// so the reads that frees are submitted before this batch's checks and copies run. Never block.</summary>
    void DeviceDone(int result);

    /// <summary>After <see cref="DeviceDone"/>. <paramref name="result"/>: bytes read, or a negative errno. Runs on the
    /// ring's thread: do little (check, copy, hand on) and never block.</summary>
    void Completed(int result);
}

/// <summary>Told once after a batch of completions in which it asked to be (<see cref="IoUring.AtBatchEnd"/>): a
/// stream answers all of a batch's reads with one message instead of one per read.</summary>
internal interface IUringBatchEnd
{
    void BatchDone();
}

/// <summary>
/// Linux io_uring (io_uring_setup/io_uring_enter, rings mapped with mmap) for the device reads of small gets: one
/// thread owns the submission and completion queues, so many reads are submitted and reaped with one system call
/// and no thread blocks per read. Why, measured on this 2-core VM (docs/flash.md, "The server's read path"): with a
/// blocking <c>pread</c> per unit, each 4 KiB get cost the server ~45 µs of CPU at QD 32, most of it in context
/// switches and thread-pool wake-ups around the blocked threads (perf: finish_task_switch, sched_yield); fio's own
/// io_uring job reads the same file at 87–95K IOPS on 43 % of one core. The layout (io_uring_params, the ring offsets,
/// the 64-byte SQE and 16-byte CQE) is the kernel's uapi header's, written from its documentation
/// (io_uring_setup(2), io_uring_enter(2)); liburing is not used (no package here, and the handful of fields needed
/// does not warrant a native dependency).
/// Wake-up: producers queue reads lock-free; when the ring thread sleeps in io_uring_enter waiting for completions,
/// a producer writes an eventfd on which the ring always keeps one read outstanding, so the thread wakes and
/// submits. Only sleeping costs a producer that system call.
/// </summary>
internal sealed unsafe partial class IoUring : IDisposable
{
    private const int SysIoUringSetup = 425, SysIoUringEnter = 426;     // x86-64 and arm64 (asm-generic) alike
    private const uint EnterGetEvents = 1;
    private const uint SetupCoopTaskrun = 1u << 8;                      // IORING_SETUP_COOP_TASKRUN (Linux 5.19)
    private const int EInval = 22;
    private const byte OpRead = 22;                                     // IORING_OP_READ (Linux 5.6)
    private const long OffSqRing = 0, OffCqRing = 0x8000000, OffSqes = 0x10000000;
    private const uint FeatSingleMmap = 1;
    private const int ProtReadWrite = 0x3, MapSharedPopulate = 0x01 | 0x8000;
    private const int EIntr = 4, EAgain = 11, EBusy = 16, ECanceled = 125;
    private const ulong WakeTag = ulong.MaxValue;

    [StructLayout(LayoutKind.Sequential)]
    private struct SqOffsets
    {
        public uint Head, Tail, RingMask, RingEntries, Flags, Dropped, Array, Resv1;
        public ulong UserAddr;
    }

    [StructLayout(LayoutKind.Sequential)]
    private struct CqOffsets
    {
        public uint Head, Tail, RingMask, RingEntries, Overflow, Cqes, Flags, Resv1;
        public ulong UserAddr;
    }

    [StructLayout(LayoutKind.Sequential)]
    private struct Params
    {
        public uint SqEntries, CqEntries, Flags, SqThreadCpu, SqThreadIdle, Features, WqFd, Resv0, Resv1, Resv2;
        public SqOffsets SqOff;
        public CqOffsets CqOff;
    }

    [StructLayout(LayoutKind.Explicit, Size = 64)]
    private struct Sqe
    {
        [FieldOffset(0)] public byte Opcode;
        [FieldOffset(1)] public byte Flags;
        [FieldOffset(2)] public ushort IoPrio;
        [FieldOffset(4)] public int Fd;
        [FieldOffset(8)] public ulong Off;
        [FieldOffset(16)] public ulong Addr;
        [FieldOffset(24)] public uint Len;
        [FieldOffset(28)] public uint RwFlags;
        [FieldOffset(32)] public ulong UserData;
    }

    [StructLayout(LayoutKind.Sequential)]
    private struct Cqe
    {
        public ulong UserData;
        public int Res;
        public uint Flags;
    }

    private readonly struct Pending(IUringCompletion op, int fd, byte* buffer, int length, long offset)
    {
        public readonly IUringCompletion Op = op;
        public readonly int Fd = fd;
        public readonly byte* Buffer = buffer;
        public readonly int Length = length;
        public readonly long Offset = offset;
    }

    private readonly int _ringFd;
    private readonly int _eventFd;
    private readonly byte* _sqRing, _cqRing;
    private readonly nuint _sqRingSize, _cqRingSize, _sqesSize;
    private readonly Sqe* _sqes;
    private readonly uint* _sqHead, _sqTail, _sqArray, _cqHead, _cqTail;
    private readonly uint _sqMask, _sqEntries, _cqMask, _cqEntries;
    private readonly Cqe* _cqes;
    private readonly ulong* _wakeBuffer;
    private readonly ConcurrentQueue<Pending> _queue = new();
    private readonly IUringCompletion?[] _ops;
    private readonly Stack<int> _freeSlots;
    private readonly List<IUringBatchEnd> _batchEnds = [];
    // One batch of completions between its two passes (DeviceDone, then Completed); the ring thread's only.
    private readonly IUringCompletion[] _reaped;
    private readonly int[] _reapedResults;
    private uint _unsubmitted;      // SQEs in the ring the kernel has not taken yet (ring thread only)
    private readonly Thread _thread;
    private int _inFlight;          // reads in the kernel (ring thread only)
    private int _sleeping;
    private volatile bool _stopping;

    /// <summary>Reads the ring can hold in the kernel at once (beyond that they wait in its queue).</summary>
    public int Capacity { get; }

    /// <summary>
    /// How the kernel posts the ring's completions: "coop" (IORING_SETUP_COOP_TASKRUN: at the ring thread's next
    /// system call or wait, without interrupting it) or "default" (a kernel before 5.19 refuses the flag: each read's
    /// end interrupts the ring thread, an IPI, to post its completion). Why, measured on this 2-core VM at QD 256
    /// (`./faast bench flash-server --quick`, 2026-11-29): with the default ~8 % of the ring thread's perf samples were
    /// irqentry_exit_to_user_mode and reschedule IPIs in the middle of a batch's checks and copies, none with coop;
    /// GetMany at QD 256 gave 84.9K and 80.9K gets/s (server CPU 10.1 and 9.3 µs a get) with the default, 92.8K,
    /// 93.4K and 88.1K (8.9–9.2 µs) with coop, runs alternated. DEFER_TASKRUN (completions posted only inside the
    /// waiting io_uring_enter) was tried too: it took the interrupts away as well but the thread woke for fewer
    /// completions at a time, replies carried 19 results instead of ~33 and the server's CPU per get rose to ~11.8 µs.
    /// </summary>
    public string TaskRun { get; }

    private IoUring(int entries)
    {
        Params p = default;
        int fd = -1;
        string taskRun = "default";
        foreach ((uint flags, string name) in new[] { (SetupCoopTaskrun, "coop"), (0u, "default") })
        {
            p = default;
            p.Flags = flags;
            fd = (int)Sys.Syscall(SysIoUringSetup, entries, (nint)(&p), 0, 0, 0, 0);
            taskRun = name;
            if (fd >= 0 || Marshal.GetLastPInvokeError() != EInval)
                break;
        }
        if (fd < 0)
            throw new IOException($"io_uring_setup({entries}) failed: {Marshal.GetPInvokeErrorMessage(Marshal.GetLastPInvokeError())}");
        TaskRun = taskRun;
        _ringFd = fd;
        try
        {
            _sqRingSize = p.SqOff.Array + p.SqEntries * sizeof(uint);
            _cqRingSize = p.CqOff.Cqes + p.CqEntries * (uint)sizeof(Cqe);
            bool single = (p.Features & FeatSingleMmap) != 0;
            if (single)
                _sqRingSize = _cqRingSize = Math.Max(_sqRingSize, _cqRingSize);
            _sqRing = Map(_sqRingSize, OffSqRing);
            _cqRing = single ? _sqRing : Map(_cqRingSize, OffCqRing);
            _sqesSize = p.SqEntries * (uint)sizeof(Sqe);
            _sqes = (Sqe*)Map(_sqesSize, OffSqes);
            _sqHead = (uint*)(_sqRing + p.SqOff.Head);
            _sqTail = (uint*)(_sqRing + p.SqOff.Tail);
            _sqArray = (uint*)(_sqRing + p.SqOff.Array);
            _sqMask = *(uint*)(_sqRing + p.SqOff.RingMask);
            _sqEntries = *(uint*)(_sqRing + p.SqOff.RingEntries);
            _cqHead = (uint*)(_cqRing + p.CqOff.Head);
            _cqTail = (uint*)(_cqRing + p.CqOff.Tail);
            _cqMask = *(uint*)(_cqRing + p.CqOff.RingMask);
            _cqEntries = *(uint*)(_cqRing + p.CqOff.RingEntries);
            _cqes = (Cqe*)(_cqRing + p.CqOff.Cqes);
            _eventFd = Sys.EventFd(0, 0x80000 /* EFD_CLOEXEC */);
            if (_eventFd < 0)
                throw new IOException($"eventfd failed: {Marshal.GetPInvokeErrorMessage(Marshal.GetLastPInvokeError())}");
            _wakeBuffer = (ulong*)NativeMemory.AlignedAlloc(8, 8);
        }
        catch
        {
            Sys.Close(fd);
            throw;
        }
        // One completion slot stays for the wake-up read; never more reads in the kernel than completions fit.
        Capacity = (int)Math.Min(_sqEntries, _cqEntries) - 1;
        _ops = new IUringCompletion?[Capacity];
        _reaped = new IUringCompletion[Capacity];
        _reapedResults = new int[Capacity];
        _freeSlots = new Stack<int>(Enumerable.Range(0, Capacity).Reverse());
        _thread = new Thread(Run) { IsBackground = true, Name = "flash-io-uring" };
        _thread.Start();
    }

    /// <summary>A ring of <paramref name="entries"/> (a power of two), or null with the reason when this kernel or
    /// its sandbox refuses io_uring (then the engine reads with pread, as before).</summary>
    public static IoUring? TryCreate(int entries, out string? why)
    {
        why = null;
        try
        {
            return new IoUring(entries);
        }
        catch (Exception e) when (e is IOException or DllNotFoundException or EntryPointNotFoundException)
        {
            why = e.Message;
            return null;
        }
    }

    private byte* Map(nuint size, long offset)
    {
        void* p = Sys.Mmap(null, size, ProtReadWrite, MapSharedPopulate, _ringFd, offset);
        if ((nint)p == -1)
            throw new IOException($"io_uring: mmap of {size} bytes at 0x{offset:x} failed: {Marshal.GetPInvokeErrorMessage(Marshal.GetLastPInvokeError())}");
        return (byte*)p;
    }

    /// <summary>Queues a read of <paramref name="length"/> bytes at <paramref name="offset"/> of <paramref name="fd"/>
    /// into <paramref name="buffer"/> (which must stay valid until <paramref name="op"/> is called). Lock-free;
    /// after disposal the op is completed at once with -ECANCELED.</summary>
    public void SubmitRead(IUringCompletion op, int fd, byte* buffer, int length, long offset)
    {
        if (_stopping)
        {
            op.DeviceDone(-ECanceled);
            op.Completed(-ECanceled);
            return;
        }
        _queue.Enqueue(new Pending(op, fd, buffer, length, offset));
        if (t_ringThread)
            return;     // the ring's own thread (a completion granted it): it fills the queue before it waits again
        if (t_deferring)
        {
            t_deferred = true;
            return;
        }
        WakeIfSleeping();
    }

    [ThreadStatic] private static bool t_ringThread;
    [ThreadStatic] private static bool t_deferring;
    [ThreadStatic] private static bool t_deferred;

    /// <summary>
    /// Until the scope ends, reads this thread submits do not wake the ring each; the end wakes it once. For a caller
    /// that starts many reads in a row (a GetMany request's items): measured here, waking the sleeping ring thread
    /// per read (an eventfd write, a context switch, an io_uring_enter of one SQE) cost more than the read's own
    /// submission. The scope must not span an await (it is per thread).
    /// </summary>
    public static DeferScope DeferWakes()
    {
        t_deferring = true;
        return default;
    }

    public readonly struct DeferScope : IDisposable
    {
        public void Dispose() => t_deferring = false;
    }

    /// <summary>Ends a <see cref="DeferWakes"/> batch: wakes the ring if a read was queued meanwhile.</summary>
    public void Flush()
    {
        if (t_deferred)
        {
            t_deferred = false;
            WakeIfSleeping();
        }
    }

    private void WakeIfSleeping()
    {
        // Paired with the fence after _sleeping = 1 in Run: either the ring thread sees the read queued, or we see
        // it asleep and wake it.
        Interlocked.MemoryBarrier();
        if (Volatile.Read(ref _sleeping) != 0)
            Wake();
    }

    /// <summary>From a completion callback (the ring's thread only): call <paramref name="listener"/> once this batch
    /// of completions has been handed out.</summary>
    public void AtBatchEnd(IUringBatchEnd listener) => _batchEnds.Add(listener);

    private void Wake()
    {
        ulong one = 1;
        Sys.Write(_eventFd, &one, 8);
    }

    private void Run()
    {
        t_ringThread = true;
        ArmWake();
        _unsubmitted = 1;
        while (true)
        {
            _unsubmitted += Fill();
            if (_stopping && _inFlight == 0 && _queue.IsEmpty)
                break;   // the wake-up read is still outstanding: closing the ring cancels it
            // Wait for a completion unless more reads are queued that free slots could take now.
            uint wait = 1;
            Volatile.Write(ref _sleeping, 1);
            Interlocked.MemoryBarrier();
            if (!_queue.IsEmpty && _freeSlots.Count > 0)
                wait = 0;
            if (wait == 0 && _unsubmitted == 0)
            {
                Volatile.Write(ref _sleeping, 0);
                continue;
            }
            Enter(wait);
            Volatile.Write(ref _sleeping, 0);
            Reap();
        }
    }

    /// <summary>Submits the SQEs not yet taken and, when <paramref name="wait"/> is 1, waits for a completion.</summary>
    private void Enter(uint wait)
    {
        int r = (int)Sys.Syscall(SysIoUringEnter, _ringFd, (nint)_unsubmitted, (nint)wait, (nint)(wait != 0 ? EnterGetEvents : 0), 0, 0);
        if (r >= 0)
            _unsubmitted -= Math.Min((uint)r, _unsubmitted);
        else if (Marshal.GetLastPInvokeError() is not (EIntr or EAgain or EBusy) and var errno)
            throw new IOException($"io_uring_enter failed: {Marshal.GetPInvokeErrorMessage(errno)}");
    }

    /// <summary>Moves queued reads into free SQEs (the ring thread only); returns how many.</summary>
    private uint Fill()
    {
        uint tail = *_sqTail;
        uint head = Volatile.Read(ref *_sqHead);
        uint added = 0;
        while (tail - head < _sqEntries && _freeSlots.Count > 0 && _queue.TryDequeue(out Pending p))
        {
            int slot = _freeSlots.Pop();
            _ops[slot] = p.Op;
            uint index = tail & _sqMask;
            Sqe* sqe = &_sqes[index];
            *sqe = default;
            sqe->Opcode = OpRead;
            sqe->Fd = p.Fd;
            sqe->Off = (ulong)p.Offset;
            sqe->Addr = (ulong)p.Buffer;
            sqe->Len = (uint)p.Length;
            sqe->UserData = (ulong)slot;
            _sqArray[index] = index;
            tail++;
            added++;
            _inFlight++;
        }
        if (added > 0)
            Volatile.Write(ref *_sqTail, tail);   // release: the kernel sees the SQEs before the new tail
        return added;
    }

    /// <summary>The wake-up read on the eventfd, always one outstanding (so a write ends a wait in io_uring_enter).</summary>
    private void ArmWake()
    {
        uint tail = *_sqTail;
        uint index = tail & _sqMask;
        Sqe* sqe = &_sqes[index];
        *sqe = default;
        sqe->Opcode = OpRead;
        sqe->Fd = _eventFd;
        sqe->Off = ulong.MaxValue;   // -1: the file's position (an eventfd has none)
        sqe->Addr = (ulong)_wakeBuffer;
        sqe->Len = 8;
        sqe->UserData = WakeTag;
        _sqArray[index] = index;
        Volatile.Write(ref *_sqTail, tail + 1);
    }

    /// <summary>
    /// Hands every completion to its op in two passes: <see cref="IUringCompletion.DeviceDone"/> for all of them, then
    /// the reads that freed (queued by the scheduler's passes those calls ran) are submitted at once, then
    /// <see cref="IUringCompletion.Completed"/> for each (checks, copies, answers). Why: a batch's checks and copies
    /// (CRC32C and a copy of each 4 KiB) took tens of µs during which the reads it freed waited in the queue and the
    /// device's queue ran down; measured at QD 256 (`./faast bench flash-server --quick`, /proc/diskstats): 71 reads
    /// at the device on average gave 80K reads/s where fio gets ~98K at that depth (docs/flash.md, "The server's read
    /// path"). Re-arms the wake-up read when it was one of the completions.
    /// </summary>
    private void Reap()
    {
        uint head = *_cqHead;
        uint tail = Volatile.Read(ref *_cqTail);   // acquire: the CQEs before the tail are written
        bool rearm = false;
        int n = 0;
        while (head != tail)
        {
            Cqe cqe = _cqes[head & _cqMask];
            head++;
            if (cqe.UserData == WakeTag)
            {
                rearm = true;
                continue;
            }
            int slot = (int)cqe.UserData;
            IUringCompletion op = _ops[slot]!;
            _ops[slot] = null;
            _freeSlots.Push(slot);
            _inFlight--;
            _reaped[n] = op;
            _reapedResults[n++] = cqe.Res;
        }
        Volatile.Write(ref *_cqHead, head);
        for (int i = 0; i < n; i++)
        {
            try
            {
                _reaped[i].DeviceDone(_reapedResults[i]);
            }
            catch (Exception)
            {
                // An op's callback must not take the ring down; ops report their own failures.
            }
        }
        if (rearm && !_stopping)
        {
            ArmWake();
            _unsubmitted++;
        }
        uint added = Fill();
        if (added > 0)
        {
            _unsubmitted += added;
            Enter(0);
        }
        for (int i = 0; i < n; i++)
        {
            IUringCompletion op = _reaped[i];
            _reaped[i] = null!;
            try
            {
                op.Completed(_reapedResults[i]);
            }
            catch (Exception)
            {
                // As above.
            }
        }
        foreach (IUringBatchEnd listener in _batchEnds)
        {
            try
            {
                listener.BatchDone();
            }
            catch (Exception)
            {
                // As with ops: a listener must not take the ring down.
            }
        }
        _batchEnds.Clear();
    }

    /// <summary>Stops taking reads, waits for those in the kernel (their buffers stay valid until then), fails the
    /// queued ones with -ECANCELED, and unmaps the rings.</summary>
    public void Dispose()
    {
        if (_stopping)
            return;
        _stopping = true;
        Wake();
        _thread.Join();
        while (_queue.TryDequeue(out Pending p))
        {
            p.Op.DeviceDone(-ECanceled);
            p.Op.Completed(-ECanceled);
        }
        Sys.Munmap(_sqes, _sqesSize);
        if (_cqRing != _sqRing)
            Sys.Munmap(_cqRing, _cqRingSize);
        Sys.Munmap(_sqRing, _sqRingSize);
        Sys.Close(_ringFd);
        Sys.Close(_eventFd);
        NativeMemory.AlignedFree(_wakeBuffer);
    }

    private static partial class Sys
    {
        [LibraryImport("libc", EntryPoint = "syscall", SetLastError = true)]
        public static partial long Syscall(long number, nint a1, nint a2, nint a3, nint a4, nint a5, nint a6);

        [LibraryImport("libc", EntryPoint = "mmap", SetLastError = true)]
        public static partial void* Mmap(void* addr, nuint length, int prot, int flags, int fd, long offset);

        [LibraryImport("libc", EntryPoint = "munmap")]
        public static partial int Munmap(void* addr, nuint length);

        [LibraryImport("libc", EntryPoint = "eventfd", SetLastError = true)]
        public static partial int EventFd(uint initval, int flags);

        [LibraryImport("libc", EntryPoint = "write")]
        public static partial nint Write(int fd, void* buffer, nuint count);

        [LibraryImport("libc", EntryPoint = "close")]
        public static partial int Close(int fd);
    }
}
