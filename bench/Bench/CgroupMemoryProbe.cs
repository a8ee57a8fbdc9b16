using System.Globalization;
using System.Text.Json.Nodes;

namespace FaaST.Bench;

/// <summary>
/// Where an instance's memory goes, as its memory cgroup sees it: what the cgroup is charged (memory.current or v1's
/// usage_in_bytes), the charge split by kind (memory.stat: anonymous, page cache, shared memory, mapped files), and per
/// process (/proc/PID/smaps_rollup: Rss and the proportional set split into anonymous, file and shared memory), so that
/// a Table 5 run says what of the instance's memory the memory daemon saw and what it did not.
/// </summary>
public static class CgroupMemoryProbe
{
    // The memory.stat keys worth a column: v1 (hierarchical "total_" totals) and v2 names.
    private static readonly string[] V1Keys = ["total_rss", "total_cache", "total_shmem", "total_mapped_file", "total_active_file", "total_inactive_file"];
    private static readonly string[] V2Keys = ["anon", "file", "shmem", "file_mapped", "active_file", "inactive_file", "kernel"];
    private static readonly string[] RollupKeys = ["Rss", "Pss_Anon", "Pss_File", "Pss_Shmem"];

    /// <summary>One sample of the cgroup in <paramref name="directory"/> (v1 when it has memory.usage_in_bytes);
    /// bytes throughout, per process in MiB for reading.</summary>
    public static JsonObject Sample(string directory, long? cachedBytes = null, bool detail = false)
    {
        var v1 = File.Exists(Path.Combine(directory, "memory.usage_in_bytes"));
        var sample = new JsonObject
        {
            ["usage"] = ReadLong(Path.Combine(directory, v1 ? "memory.usage_in_bytes" : "memory.current")),
        };
        if (cachedBytes is { } c)
            sample["cache_bytes"] = c;
        var stat = ReadKeyed(Path.Combine(directory, "memory.stat"), ' ');
        foreach (var key in v1 ? V1Keys : V2Keys)
            if (stat.TryGetValue(key, out var value))
                sample[key] = value;
        var processes = new JsonArray();
        foreach (var line in SafeLines(Path.Combine(directory, "cgroup.procs")))
        {
            if (!int.TryParse(line, NumberStyles.None, CultureInfo.InvariantCulture, out var pid))
                continue;
            var rollup = ReadKeyed($"/proc/{pid}/smaps_rollup", ':');
            if (rollup.Count == 0)
                continue; // gone
            var process = new JsonObject { ["pid"] = pid, ["name"] = Name(pid) };
            foreach (var key in RollupKeys)
                if (rollup.TryGetValue(key, out var kb))
                    process[key + "_mib"] = Math.Round(kb / 1024.0, 1);
            if (detail)
                process["largest_anonymous_mappings"] = LargestAnonymousMappings(pid);
            processes.Add(process);
        }
        sample["processes"] = processes;
        return sample;
    }

    /// <summary>The process's five mappings with the most anonymous memory (/proc/PID/smaps): whether a heap that is
    /// not returned is the C heap ([heap], glibc's arenas) or blocks still mapped (live objects).</summary>
    private static JsonArray LargestAnonymousMappings(int pid)
    {
        var mappings = new List<(string Mapping, long Kb)>();
        string? current = null;
        foreach (var line in SafeLines($"/proc/{pid}/smaps"))
        {
            // A mapping's line starts "start-end perms ..."; its fields' lines start "Name:".
            var space = line.IndexOf(' ');
            if (space > 0 && line[..space].Contains('-', StringComparison.Ordinal) && !line[..space].EndsWith(':'))
                current = line;
            else if (current is not null && line.StartsWith("Anonymous:", StringComparison.Ordinal))
            {
                var kb = long.Parse(line["Anonymous:".Length..].Trim().Split(' ')[0], CultureInfo.InvariantCulture);
                mappings.Add((current, kb));
            }
        }
        var largest = new JsonArray();
        foreach (var (mapping, kb) in mappings.OrderByDescending(m => m.Kb).Take(5))
            largest.Add($"{kb >> 10} MiB {mapping}");
        return largest;
    }

    /// <summary>Bytes charged to the cgroup, from a sample.</summary>
    public static long Usage(JsonObject sample) => sample["usage"]!.GetValue<long>();

    private static string Name(int pid)
    {
        // The command line's last word names the process well enough: the host's dll, or a worker's module.
        var cmdline = SafeRead($"/proc/{pid}/cmdline").Split('\0', StringSplitOptions.RemoveEmptyEntries);
        var name = string.Join(' ', cmdline.Take(3).Select(Path.GetFileName));
        return name.Length == 0 ? "?" : name[..Math.Min(80, name.Length)];
    }

    private static long ReadLong(string path) =>
        long.TryParse(SafeRead(path).Trim(), NumberStyles.None, CultureInfo.InvariantCulture, out var v) ? v : -1;

    /// <summary>"key value" (memory.stat) or "Key:   123 kB" (smaps_rollup) lines as a dictionary of the first number.</summary>
    private static Dictionary<string, long> ReadKeyed(string path, char separator)
    {
        var values = new Dictionary<string, long>(StringComparer.Ordinal);
        foreach (var line in SafeLines(path))
        {
            var at = line.IndexOf(separator);
            if (at <= 0)
                continue;
            var rest = line[(at + 1)..].Trim();
            var space = rest.IndexOf(' ');
            if (long.TryParse(space > 0 ? rest[..space] : rest, NumberStyles.None, CultureInfo.InvariantCulture, out var v))
                values[line[..at]] = v;
        }
        return values;
    }

    private static string SafeRead(string path)
    {
        try
        {
            return File.ReadAllText(path);
        }
        catch (Exception e) when (e is IOException or UnauthorizedAccessException)
        {
            return "";
        }
    }

    private static string[] SafeLines(string path) => SafeRead(path).Split('\n', StringSplitOptions.RemoveEmptyEntries);
}
