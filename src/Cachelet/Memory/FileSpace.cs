using System.Runtime.InteropServices;
using Microsoft.Win32.SafeHandles;

namespace FaaST.Cachelet.Memory;

/// <summary>
/// Reserving and returning tmpfs space. A mapping of a sparse tmpfs file takes SIGBUS, not an
/// error code, when /dev/shm fills up while a page is first written; so every range the arena
/// hands out is allocated up front with fallocate(2), where a full /dev/shm is a plain ENOSPC, and
/// a range that falls empty is punched out so its memory returns to the OS at once.
/// </summary>
internal static partial class FileSpace
{
    private const int FallocPunchHole = 0x02;
    private const int FallocKeepSize = 0x01;
    private const int EINTR = 4;
    private const int ENOSPC = 28;
    private const int EOPNOTSUPP = 95;

    /// <summary>Allocates [offset, offset+length) of the file, extending it if needed.</summary>
    /// <exception cref="IOException">The OS refused (ENOSPC when /dev/shm is full).</exception>
    public static void Reserve(SafeFileHandle file, string name, long offset, long length, Func<string, long, long, bool>? simulateNoSpace)
    {
        if (length == 0)
            return;
        if (simulateNoSpace?.Invoke(name, offset, length) == true)
            throw new IOException($"cannot reserve {length} bytes in {name}: no space left on device (simulated)", ENOSPC);
        int error;
        do
        {
            if (Fallocate(file, 0, offset, length) == 0)
                return;
            error = Marshal.GetLastPInvokeError();
        }
        while (error == EINTR);
        if (error == EOPNOTSUPP)
        {
            // Not tmpfs (no fallocate): at least make the file long enough; space is not guaranteed.
            if (RandomAccess.GetLength(file) < offset + length)
                RandomAccess.SetLength(file, offset + length);
            return;
        }
        throw new IOException($"cannot reserve {length} bytes in {name}: {Marshal.GetPInvokeErrorMessage(error)}", error);
    }

    /// <summary>Returns [offset, offset+length) to the OS; the file keeps its size and reads zeros there.
    /// Best effort: a file system without hole punching keeps the pages.</summary>
    public static void Release(SafeFileHandle file, long offset, long length)
    {
        if (length == 0)
            return;
        while (Fallocate(file, FallocPunchHole | FallocKeepSize, offset, length) != 0 && Marshal.GetLastPInvokeError() == EINTR)
        {
        }
    }

    [LibraryImport("libc", EntryPoint = "fallocate", SetLastError = true)]
    private static partial int Fallocate(SafeFileHandle fd, int mode, long offset, long length);
}
