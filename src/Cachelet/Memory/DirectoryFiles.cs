using System.Globalization;
using System.Runtime.InteropServices;
using Microsoft.Win32.SafeHandles;

namespace FaaST.Cachelet.Memory;

/// <summary>What fstat says about an open file (the fields the arena checks).</summary>
internal readonly record struct OpenFileStatus(bool IsRegular, uint Links, uint UserId, long Size);

/// <summary>
/// File operations relative to an open directory (openat, unlinkat, linkat, statx on a descriptor).
/// The arena's directory belongs to the workers' user, who may rename it or swap any name in it for
/// a symbolic link at any moment; every name is therefore resolved once, relative to the directory
/// descriptor the arena opened when it created the directory, never through a path string.
/// </summary>
internal static partial class DirectoryFiles
{
    private const int AtFdCwd = -100;
    private const int AtSymlinkFollow = 0x400;
    private const int AtEmptyPath = 0x1000;
    private const uint StatxBasicStats = 0x7ff;
    private const ushort TypeMask = 0xF000; // S_IFMT
    private const ushort RegularType = 0x8000; // S_IFREG
    private const int OCreat = 0x40;
    private const int OExcl = 0x80;
    private const int ONoCtty = 0x100;
    private const int ONonBlock = 0x800;
    private const int OCloExec = 0x80000;

    public const int EEXIST = 17;
    public const int ENOENT = 2;
    public const int ELOOP = 40;
    public const int EINTR = 4;

    // The two flags whose values differ between the architectures .NET runs Linux on.
    private static readonly (int NoFollow, int Directory) ArchFlags = RuntimeInformation.ProcessArchitecture switch
    {
        Architecture.X64 or Architecture.X86 => (0x20000, 0x10000),
        Architecture.Arm64 or Architecture.Arm => (0x8000, 0x4000),
        var other => throw new PlatformNotSupportedException($"the shared-memory arena does not know the open(2) flags of {other}"),
    };

    /// <summary>Opens a directory (not a symbolic link to one) for use as the base of the other calls.</summary>
    public static SafeFileHandle OpenDirectory(string path)
    {
        int fd;
        do
            fd = Open(AtFdCwd, path, ArchFlags.Directory | ArchFlags.NoFollow | OCloExec, 0);
        while (Interrupted(fd));
        if (fd < 0)
            throw Failure($"cannot open directory {path}");
        return new SafeFileHandle(fd, ownsHandle: true);
    }

    /// <summary>
    /// Opens NAME in the directory without following a symbolic link (ELOOP if it is one) and
    /// without blocking on a FIFO or taking a terminal; -errno on failure.
    /// </summary>
    public static SafeFileHandle? OpenNoFollow(SafeFileHandle directory, string name, bool write, out int error)
    {
        var flags = (write ? 2 /* O_RDWR */ : 0 /* O_RDONLY */) | ArchFlags.NoFollow | ONonBlock | ONoCtty | OCloExec;
        int fd;
        do
            fd = Open(directory, name, flags, 0);
        while (Interrupted(fd));
        if (fd < 0)
        {
            error = Marshal.GetLastPInvokeError();
            return null;
        }
        error = 0;
        return new SafeFileHandle(fd, ownsHandle: true);
    }

    /// <summary>Creates NAME in the directory (O_EXCL: never an existing file or link), read-write, with MODE.</summary>
    /// <exception cref="IOException">The OS refused (errno in HResult).</exception>
    public static SafeFileHandle CreateNew(SafeFileHandle directory, string name, UnixFileMode mode)
    {
        int fd;
        do
            fd = Open(directory, name, 2 | OCreat | OExcl | ArchFlags.NoFollow | OCloExec, (int)mode);
        while (Interrupted(fd));
        if (fd < 0)
            throw Failure($"cannot create {name}");
        return new SafeFileHandle(fd, ownsHandle: true);
    }

    /// <summary>The open file's type, link count, owner and size, from the descriptor itself.</summary>
    public static unsafe OpenFileStatus Status(SafeFileHandle file, string name)
    {
        Statx buffer;
        if (StatxCall(file, "", AtEmptyPath, StatxBasicStats, &buffer) != 0)
            throw Failure($"cannot stat {name}");
        return new OpenFileStatus((buffer.Mode & TypeMask) == RegularType, buffer.Links, buffer.UserId, (long)buffer.Size);
    }

    /// <summary>Removes NAME from the directory (a symbolic link itself, never its target). False if it was not there.</summary>
    public static bool Unlink(SafeFileHandle directory, string name)
    {
        int result;
        do
            result = UnlinkAt(directory, name, 0);
        while (Interrupted(result));
        return result == 0;
    }

    /// <summary>
    /// Gives the open file the additional name NAME in the directory (linkat of the descriptor
    /// through /proc/self/fd, which needs no capability); -errno on failure (EEXIST: name taken).
    /// </summary>
    public static int Link(SafeFileHandle file, SafeFileHandle directory, string name)
    {
        var source = "/proc/self/fd/" + file.DangerousGetHandle().ToInt32().ToString(CultureInfo.InvariantCulture);
        var added = false;
        file.DangerousAddRef(ref added);
        try
        {
            int result;
            do
                result = LinkAt(AtFdCwd, source, directory, name, AtSymlinkFollow);
            while (Interrupted(result));
            return result == 0 ? 0 : -Marshal.GetLastPInvokeError();
        }
        finally
        {
            if (added)
                file.DangerousRelease();
        }
    }

    private static bool Interrupted(int result) => result < 0 && Marshal.GetLastPInvokeError() == EINTR;

    private static IOException Failure(string what)
    {
        var error = Marshal.GetLastPInvokeError();
        return new IOException($"{what}: {Marshal.GetPInvokeErrorMessage(error)}", error);
    }

    // The kernel's struct statx: the same layout on every architecture (256 bytes).
    [StructLayout(LayoutKind.Explicit, Size = 256)]
    private struct Statx
    {
        [FieldOffset(16)] public uint Links;
        [FieldOffset(20)] public uint UserId;
        [FieldOffset(28)] public ushort Mode;
        [FieldOffset(40)] public ulong Size;
    }

    /// <summary>This process's effective user id (whose files a worker running as the host's user writes).</summary>
    public static uint EffectiveUserId() => GetEffectiveUserId();

    [LibraryImport("libc", EntryPoint = "geteuid")]
    private static partial uint GetEffectiveUserId();

    [LibraryImport("libc", EntryPoint = "openat", SetLastError = true, StringMarshalling = StringMarshalling.Utf8)]
    private static partial int Open(SafeFileHandle directory, string name, int flags, int mode);

    [LibraryImport("libc", EntryPoint = "openat", SetLastError = true, StringMarshalling = StringMarshalling.Utf8)]
    private static partial int Open(int directory, string name, int flags, int mode);

    [LibraryImport("libc", EntryPoint = "statx", SetLastError = true, StringMarshalling = StringMarshalling.Utf8)]
    private static unsafe partial int StatxCall(SafeFileHandle file, string path, int flags, uint mask, Statx* buffer);

    [LibraryImport("libc", EntryPoint = "unlinkat", SetLastError = true, StringMarshalling = StringMarshalling.Utf8)]
    private static partial int UnlinkAt(SafeFileHandle directory, string name, int flags);

    [LibraryImport("libc", EntryPoint = "linkat", SetLastError = true, StringMarshalling = StringMarshalling.Utf8)]
    private static partial int LinkAt(int fromDirectory, string from, SafeFileHandle toDirectory, string to, int flags);
}
