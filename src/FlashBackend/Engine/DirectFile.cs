using System.Runtime.InteropServices;
using Microsoft.Win32.SafeHandles;

namespace FaaST.FlashBackend.Engine;

/// <summary>
/// One preallocated file (or block device) opened with Linux <c>O_DIRECT</c>, read and written with
/// <see cref="RandomAccess"/> at 4 KiB-aligned offsets, lengths and buffers. .NET has no FileOptions value that
/// reaches <c>O_DIRECT</c> (docs/flash.md measured that a cast-in 0x4000 is dropped), so the fd comes from open(2)
/// and is wrapped in a <see cref="SafeFileHandle"/>. Why our own device layer and not Tsavorite's or FASTER's:
/// docs/flash.md, "Device layer: what we evaluated".
/// </summary>
internal sealed partial class DirectFile : IDisposable
{
    /// <summary>4 KiB: a multiple of every logical block size direct I/O meets (512 B on this VM's virtio disk,
    /// 4 KiB on most NVMe), and En4S's cost unit (§4: cost = ceil(size / 4 KiB) · C*).</summary>
    public const int Alignment = 4096;

    // Linux x86-64 and arm64 open(2) flags (asm-generic/fcntl.h; x86-64 shares these values).
    private const int ORdWr = 0x2, OCreat = 0x40, ODirect = 0x4000, OCloExec = 0x80000;
    private const int EInval = 22, ENoDev = 19;

    private readonly SafeFileHandle _handle;

    public string Path { get; }

    public long Capacity { get; }

    /// <summary>The descriptor, for reads submitted through <see cref="IoUring"/> (valid until disposal).</summary>
    internal int Fd => (int)_handle.DangerousGetHandle();

    private DirectFile(string path, SafeFileHandle handle, long capacity)
    {
        Path = path;
        _handle = handle;
        Capacity = capacity;
    }

    /// <summary>Opens (creating if needed) <paramref name="path"/> with O_DIRECT and preallocates
    /// <paramref name="capacity"/> bytes, so the log never grows the file on the write path (a block device
    /// is taken as it is). Fails, naming the path, where the filesystem refuses O_DIRECT (tmpfs before Linux 6.6):
    /// a silent fallback to buffered I/O would make the device model's calibration measure the page cache.</summary>
    public static DirectFile Open(string path, long capacity)
    {
        if (capacity <= 0 || capacity % Alignment != 0)
            throw new ArgumentException($"flash file {path}: capacity {capacity} must be a positive multiple of {Alignment}", nameof(capacity));
        // 0600: the log holds every tenant's objects; only the server's user may read it (issue 22: tenants are isolated).
        int fd = Sys.Open(path, ORdWr | OCreat | ODirect | OCloExec, 0x180 /* 0600 */);
        if (fd < 0)
        {
            int errno = Marshal.GetLastPInvokeError();
            string why = errno == EInval ? "the filesystem does not support O_DIRECT (tmpfs before Linux 6.6 does not; use a disk-backed path such as /var/tmp)" : Marshal.GetPInvokeErrorMessage(errno);
            throw new IOException($"flash file {path}: open with O_DIRECT failed (errno {errno}): {why}");
        }
        var handle = new SafeFileHandle(fd, ownsHandle: true);
        try
        {
            // ENODEV: not a regular file, i.e. a block device, whose size is what it is.
            int err = Sys.PosixFallocate(fd, 0, capacity);
            if (err != 0 && err != ENoDev)
                throw new IOException($"flash file {path}: preallocating {capacity} bytes failed (errno {err}): {Marshal.GetPInvokeErrorMessage(err)}");
            return new DirectFile(path, handle, capacity);
        }
        catch
        {
            handle.Dispose();
            throw;
        }
    }

    /// <summary>Whether the kernel really holds O_DIRECT for this file (from /proc/self/fdinfo, whose
    /// flags are octal): the proof docs/flash.md relies on, and what the tests assert.</summary>
    public bool KernelHasODirect()
    {
        string line = File.ReadLines($"/proc/self/fdinfo/{_handle.DangerousGetHandle()}").First(l => l.StartsWith("flags:", StringComparison.Ordinal));
        return (Convert.ToInt64(line["flags:".Length..].Trim(), 8) & ODirect) != 0;
    }

    public void Write(ReadOnlySpan<byte> alignedSource, long offset)
    {
        CheckAligned(alignedSource, offset, "write");
        RandomAccess.Write(_handle, alignedSource, offset);
    }

    /// <summary>Reads exactly <paramref name="alignedDestination"/>'s length; a short read (past the end of the
    /// device) is an error naming the offset, never a partial result.</summary>
    public void Read(Span<byte> alignedDestination, long offset)
    {
        CheckAligned(alignedDestination, offset, "read");
        int done = 0;
        while (done < alignedDestination.Length)
        {
            int n = RandomAccess.Read(_handle, alignedDestination[done..], offset + done);
            if (n <= 0)
                throw new IOException($"flash file {Path}: short read at {offset + done} ({done} of {alignedDestination.Length} bytes)");
            done += n;
        }
    }

    /// <summary>O_DIRECT needs aligned offsets, lengths and buffers; the kernel would answer EINVAL, this says
    /// which and where (and is what makes "every write is aligned" checkable: an unaligned one never reaches the disk).</summary>
    private unsafe void CheckAligned(ReadOnlySpan<byte> buffer, long offset, string op)
    {
        fixed (byte* p = buffer)
        {
            if (offset % Alignment != 0 || buffer.Length % Alignment != 0 || (nuint)p % Alignment != 0)
                throw new ArgumentException($"flash file {Path}: unaligned {op} of {buffer.Length} bytes at offset {offset} (buffer 0x{(nuint)p:x}); direct I/O needs {Alignment}-byte alignment");
        }
        if (offset < 0 || offset + buffer.Length > Capacity)
            throw new ArgumentOutOfRangeException(nameof(offset), $"flash file {Path}: {op} of {buffer.Length} bytes at {offset} is outside the capacity {Capacity}");
    }

    public void Dispose() => _handle.Dispose();

    private static partial class Sys
    {
        [LibraryImport("libc", EntryPoint = "open", SetLastError = true, StringMarshalling = StringMarshalling.Utf8)]
        public static partial int Open(string path, int flags, int mode);

        [LibraryImport("libc", EntryPoint = "posix_fallocate")]
        public static partial int PosixFallocate(int fd, long offset, long len);
    }
}
