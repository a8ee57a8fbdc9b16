namespace FaaST.AppModel;

/// <summary>
/// Keeps the paths an app names inside the app folder (issue 19, defect 2). A deployer chooses every path in
/// function.json, and the host (often root) reads and checks them before any worker runs: a scriptFile of
/// "/etc/shadow", "../../x.py" or a link that leads out of the folder must never be read, checked or handed to a
/// worker. Paths are compared by their real path (every link along the way followed, as the kernel would), so a link
/// inside the folder to a file inside it is fine and a link out of it is not.
/// </summary>
public static class AppPaths
{
    // As the kernel's ELOOP: a chain this long is a cycle or an attack, not an app.
    private const int MaxLinks = 40;

    /// <summary>
    /// <paramref name="path"/> made absolute with every symbolic link along it resolved (a ".." after a link goes to
    /// the parent of the link's target, as the kernel does). The part of the path that does not exist is kept as
    /// written, so a missing file still has a real path to compare.
    /// </summary>
    /// <exception cref="IOException">More than 40 links along the path (a cycle).</exception>
    public static string RealPath(string path)
    {
        ArgumentNullException.ThrowIfNull(path);
        var links = 0;
        var full = Path.GetFullPath(path);
        return Resolve(Path.GetPathRoot(full)!, full, path, ref links);
    }

    /// <summary>Whether <paramref name="realPath"/> is <paramref name="realRoot"/> or below it (both real paths).</summary>
    public static bool IsInside(string realRoot, string realPath)
    {
        realRoot = Path.TrimEndingDirectorySeparator(realRoot);
        return realPath.Equals(realRoot, StringComparison.Ordinal) ||
            realPath.StartsWith(realRoot + Path.DirectorySeparatorChar, StringComparison.Ordinal);
    }

    /// <summary>
    /// The real path of <paramref name="path"/> when it leads outside <paramref name="realRoot"/> (the app folder's
    /// real path); null when it stays inside. A link cycle, or a path the host may not resolve, counts as leading
    /// outside (its real path is unknowable).
    /// </summary>
    public static string? Outside(string realRoot, string path)
    {
        string real;
        try
        {
            real = RealPath(path);
        }
        catch (Exception e) when (e is IOException or UnauthorizedAccessException)
        {
            // A cycle, or a link the host may not read: what it leads to cannot be known, so it is not inside.
            return e.Message;
        }
        return IsInside(realRoot, real) ? null : real;
    }

    private static string Resolve(string current, string path, string original, ref int links)
    {
        if (Path.IsPathRooted(path))
            current = Path.GetPathRoot(path)!;
        foreach (var part in path.Split([Path.DirectorySeparatorChar, Path.AltDirectorySeparatorChar], StringSplitOptions.RemoveEmptyEntries))
        {
            if (part == ".")
                continue;
            if (part == "..")
            {
                current = Path.GetDirectoryName(current) ?? current;
                continue;
            }
            var next = Path.Combine(current, part);
            // LinkTarget reads the link itself (lstat/readlink): null for a plain file or folder and for a missing one.
            var target = new FileInfo(next).LinkTarget;
            if (target is null)
            {
                current = next;
                continue;
            }
            if (++links > MaxLinks)
                throw new IOException($"{original}: more than {MaxLinks} symbolic links along the path (a cycle)");
            current = Resolve(current, target, original, ref links);
        }
        return current;
    }
}
