using System.Runtime.InteropServices;
using Microsoft.Win32.SafeHandles;

namespace FaaST.Cachelet.Memory;

/// <summary>
/// The Unix user and group that own the cache's segment directory and files: the user the app's
/// workers run as, so that the modes 0700/0600 let them in and keep other apps' workers out.
/// Giving a file away needs root.
/// </summary>
public readonly partial record struct FileOwner(int UserId, int GroupId)
{
    /// <summary>Gives an open file to this owner.</summary>
    /// <exception cref="IOException">The OS refused (the process is not root).</exception>
    internal void ApplyTo(SafeFileHandle file, string path)
    {
        if (FChown(file, UserId, GroupId) != 0)
            throw Failure(path);
    }

    /// <summary>Gives a directory to this owner; a symbolic link is not followed (the link itself changes).</summary>
    /// <exception cref="IOException">The OS refused (the process is not root).</exception>
    internal void ApplyTo(string path)
    {
        if (LChown(path, UserId, GroupId) != 0)
            throw Failure(path);
    }

    private IOException Failure(string path)
    {
        var error = Marshal.GetLastPInvokeError();
        return new IOException($"cannot give {path} to uid {UserId}, gid {GroupId}: {Marshal.GetPInvokeErrorMessage(error)}", error);
    }

    [LibraryImport("libc", EntryPoint = "fchown", SetLastError = true)]
    private static partial int FChown(SafeFileHandle fd, int uid, int gid);

    [LibraryImport("libc", EntryPoint = "lchown", SetLastError = true, StringMarshalling = StringMarshalling.Utf8)]
    private static partial int LChown(string path, int uid, int gid);
}
