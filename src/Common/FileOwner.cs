using System.Runtime.InteropServices;
using Microsoft.Win32.SafeHandles;

namespace FaaST.Common;

/// <summary>
/// The Unix user and group that own the cache's segment directory and files: the user the app's
/// workers run as, so that the modes 0700/0600 let them in and keep other apps' workers out.
/// Giving a file away needs root.
/// </summary>
public readonly partial record struct FileOwner(int UserId, int GroupId)
{
    /// <summary>Gives an open file or directory to this owner.</summary>
    /// <exception cref="IOException">The OS refused (the process is not root).</exception>
    public void ApplyTo(SafeFileHandle file, string path)
    {
        if (FChown(file, UserId, GroupId) != 0)
            throw Failure(path);
    }

    private IOException Failure(string path)
    {
        var error = Marshal.GetLastPInvokeError();
        return new IOException($"cannot give {path} to uid {UserId}, gid {GroupId}: {Marshal.GetPInvokeErrorMessage(error)}", error);
    }

    [LibraryImport("libc", EntryPoint = "fchown", SetLastError = true)]
    private static partial int FChown(SafeFileHandle fd, int uid, int gid);
}
