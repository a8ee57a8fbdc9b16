namespace FaaST.TestSupport;

/// <summary>
/// A fact about per-app worker users: it needs root, and a checkout that other users can reach, since
/// the app's user must read the worker's code there. Skipped with the reason otherwise (e.g. a clone
/// inside a 0700 folder from mktemp -d), where the host rightly runs the workers as its own user.
/// </summary>
[AttributeUsage(AttributeTargets.Method, AllowMultiple = false)]
public sealed class IsolationFactAttribute : FactAttribute
{
    public IsolationFactAttribute()
    {
        if (!Environment.IsPrivilegedProcess)
            Skip = $"needs root (per-app worker users); running as {Environment.UserName}";
        else if (Isolation.Unreachable is { } folder)
            Skip = $"the checkout is not reachable by other users ({folder} lets them not traverse it), so an app's user cannot read the workers' code";
    }
}

/// <summary>Whether per-app worker users can run from this checkout.</summary>
public static class Isolation
{
    /// <summary>The first folder from the checkout up to / that other users cannot traverse, or null.</summary>
    public static string? Unreachable { get; } = FindUnreachable();

    private static string? FindUnreachable()
    {
        if (OperatingSystem.IsWindows())
            return null;
        for (var dir = new DirectoryInfo(Repo.Root); dir is not null; dir = dir.Parent)
            if ((File.GetUnixFileMode(dir.FullName) & UnixFileMode.OtherExecute) == 0)
                return dir.FullName;
        return null;
    }
}
