namespace FaaST.Cachelet.Memory;

/// <summary>The files workers write their large outputs to in an instance's shared-memory directory (w&lt;pid&gt;-*).</summary>
public static class WorkerOutputFiles
{
    /// <summary>
    /// Deletes the output files a dead worker wrote but never handed over; outputs the cache took over are not among
    /// them (it moves them to names of its own). The directory belongs to the workers' user, who may have replaced its
    /// path with a link: it is opened once, not through a link, and listed and emptied through that descriptor. Best
    /// effort: a directory already gone (the instance is stopping) or unreadable is left to the arena's shutdown.
    /// </summary>
    public static void Sweep(string directory, int pid)
    {
        Microsoft.Win32.SafeHandles.SafeFileHandle handle;
        try
        {
            handle = DirectoryFiles.OpenDirectory(directory);
        }
        catch (IOException)
        {
            return;
        }
        using (handle)
        {
            var listing = "/proc/self/fd/" + handle.DangerousGetHandle().ToString();
            try
            {
                foreach (var entry in Directory.EnumerateFileSystemEntries(listing, SharedMemoryNames.WorkerOutputGlob(pid)))
                    DirectoryFiles.Unlink(handle, Path.GetFileName(entry));
            }
            catch (Exception e) when (e is IOException or UnauthorizedAccessException)
            {
                // best effort: the arena removes the directory at shutdown anyway
            }
        }
    }
}
