using System.Runtime.InteropServices;

namespace FaaST.Cachelet.Memory;

/// <summary>
/// Wakes processes waiting on a 32-bit word of a shared file mapping (Linux futex, FUTEX_WAKE without
/// FUTEX_PRIVATE_FLAG, so a waiter in another process mapping the same file is found by inode and offset).
/// </summary>
/// <remarks>
/// Used by a streamed fill's progress record (protos/shared-memory.json, "progressRecord.wake"): a worker that
/// polled the record every 0.1–1 ms made a 256 MiB download take 690–940 ms instead of 370–400 ms with 20 ms
/// polling (bench/streamed-inputs, quiet machine, 2026-11-29): on two cores each wake-up takes the core from the
/// download. Waking the reader only when enough has arrived removes the polling.
/// </remarks>
internal static unsafe partial class Futex
{
    private const int FutexWake = 1;

    /// <summary>The syscall number on this architecture, 0 where this code does not know it.</summary>
    private static readonly long SysFutex = !OperatingSystem.IsLinux() ? 0 : RuntimeInformation.ProcessArchitecture switch
    {
        Architecture.X64 => 202,
        Architecture.Arm64 or Architecture.RiscV64 or Architecture.LoongArch64 => 98,
        _ => 0,
    };

    /// <summary>Whether <see cref="WakeAll"/> wakes anyone (Linux on an architecture whose futex number is known).</summary>
    public static bool Supported => SysFutex != 0;

    /// <summary>Wakes every waiter on <paramref name="word"/>; a no-op where futexes are not <see cref="Supported"/>.</summary>
    public static void WakeAll(int* word)
    {
        if (SysFutex != 0)
            _ = Syscall(SysFutex, word, FutexWake, int.MaxValue, 0, 0, 0);
    }

    [LibraryImport("libc", EntryPoint = "syscall")]
    private static partial long Syscall(long number, int* address, int op, int value, nint timeout, nint address2, int value3);
}
