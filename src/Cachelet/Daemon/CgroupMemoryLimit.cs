using System.Globalization;

namespace FaaST.Cachelet.Daemon;

/// <summary>
/// The memory limit of the control group this process runs in: what a container or a systemd unit
/// gives the instance, and so the natural default of <c>cache.memoryLimit</c>. Reads cgroup v2
/// (<c>memory.max</c>) and v1 (<c>memory.limit_in_bytes</c>), whichever are mounted (hybrid
/// systems have both), and takes the smallest limit from this process's group up to the
/// hierarchy's root, because every ancestor's limit binds too.
/// </summary>
/// <param name="Bytes">The limit.</param>
/// <param name="File">The file that set it, e.g. <c>/sys/fs/cgroup/memory/app/memory.limit_in_bytes</c>.</param>
public sealed record CgroupMemoryLimit(long Bytes, string File)
{
    // v1 writes "no limit" as LONG_MAX rounded down to a page; anything this large is no limit.
    private const long Unlimited = 1L << 60;

    /// <summary>The limit of this process's memory cgroup, or null when there is none (or no cgroup
    /// file system is mounted).</summary>
    public static CgroupMemoryLimit? Find() => Find("/");

    /// <summary>As <see cref="Find()"/>, with <c>/proc</c> and the cgroup mounts under <paramref name="root"/> (for tests).</summary>
    public static CgroupMemoryLimit? Find(string root)
    {
        string[] mounts, groups;
        try
        {
            mounts = System.IO.File.ReadAllLines(Under(root, "/proc/self/mountinfo"));
            groups = System.IO.File.ReadAllLines(Under(root, "/proc/self/cgroup"));
        }
        catch (Exception e) when (e is IOException or UnauthorizedAccessException)
        {
            return null;
        }
        CgroupMemoryLimit? smallest = null;
        foreach (var (mountRoot, mountPoint, version2) in MemoryMounts(mounts))
        {
            var group = GroupPath(groups, version2);
            if (group is null)
                continue;
            // Inside a container the mount's root is the container's own group; /proc/self/cgroup
            // may still show the path from the host's root.
            if (mountRoot != "/" && (group == mountRoot || group.StartsWith(mountRoot + "/", StringComparison.Ordinal)))
                group = group[mountRoot.Length..];
            var top = Path.TrimEndingDirectorySeparator(Under(root, mountPoint));
            var file = version2 ? "memory.max" : "memory.limit_in_bytes";
            for (var dir = Path.TrimEndingDirectorySeparator(Under(top, group)); ; dir = Path.GetDirectoryName(dir)!)
            {
                var path = Path.Combine(dir, file);
                if (ReadLimit(path) is { } bytes && (smallest is null || bytes < smallest.Bytes))
                    smallest = new CgroupMemoryLimit(bytes, root == "/" ? path : "/" + Path.GetRelativePath(root, path));
                if (dir.Length <= top.Length)
                    break;
            }
        }
        return smallest;
    }

    /// <summary>cgroup2 mounts, and cgroup (v1) mounts with the memory controller, from /proc/self/mountinfo.</summary>
    private static IEnumerable<(string Root, string MountPoint, bool Version2)> MemoryMounts(string[] mountinfo)
    {
        // "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory"
        foreach (var line in mountinfo)
        {
            var fields = line.Split(' ');
            var dash = Array.IndexOf(fields, "-");
            if (dash < 5 || dash + 3 >= fields.Length)
                continue;
            var type = fields[dash + 1];
            if (type == "cgroup2")
                yield return (Unescape(fields[3]), Unescape(fields[4]), true);
            else if (type == "cgroup" && fields[dash + 3].Split(',').Contains("memory"))
                yield return (Unescape(fields[3]), Unescape(fields[4]), false);
        }
    }

    /// <summary>This process's group in the v2 hierarchy ("0::/path") or the v1 memory hierarchy ("4:memory:/path").</summary>
    private static string? GroupPath(string[] cgroups, bool version2)
    {
        foreach (var line in cgroups)
        {
            var parts = line.Split(':', 3);
            if (parts.Length != 3)
                continue;
            if (version2 ? parts[0] == "0" && parts[1].Length == 0 : parts[1].Split(',').Contains("memory"))
                return parts[2];
        }
        return null;
    }

    private static long? ReadLimit(string file)
    {
        string text;
        try
        {
            text = System.IO.File.ReadAllText(file).Trim();
        }
        catch (Exception e) when (e is IOException or UnauthorizedAccessException)
        {
            return null; // this level has no memory controller
        }
        return long.TryParse(text, NumberStyles.None, CultureInfo.InvariantCulture, out var bytes) && bytes is > 0 and < Unlimited
            ? bytes
            : null; // "max" (v2) or unlimited (v1)
    }

    private static string Under(string root, string path) => root == "/" ? path : Path.Join(root, path);

    // mountinfo escapes space, tab, newline and backslash as octal (\040 ...).
    private static string Unescape(string field) =>
        field.Contains('\\', StringComparison.Ordinal)
            ? System.Text.RegularExpressions.Regex.Replace(field, @"\\([0-7]{3})", m => ((char)Convert.ToInt32(m.Groups[1].Value, 8)).ToString())
            : field;
}
