namespace FaaST.TestSupport;

/// <summary>The repository the tests run from (samples, workers, node_modules, protos).</summary>
public static class Repo
{
    public static string Root { get; } = Find();

    /// <summary>
    /// Copies samples/<paramref name="sample"/> to <paramref name="target"/> (created; files there are
    /// overwritten), leaving out what a run of the sample may have left in the checkout: its .faast folder
    /// and Python's __pycache__.
    /// </summary>
    public static string CopySample(string sample, string target)
    {
        var source = Path.Combine(Root, "samples", sample);
        Directory.CreateDirectory(target);
        foreach (var file in Directory.EnumerateFiles(source, "*", SearchOption.AllDirectories))
        {
            var relative = Path.GetRelativePath(source, file);
            if (relative.StartsWith(".faast", StringComparison.Ordinal) || relative.Contains("__pycache__", StringComparison.Ordinal))
                continue;
            Directory.CreateDirectory(Path.GetDirectoryName(Path.Combine(target, relative))!);
            File.Copy(file, Path.Combine(target, relative), overwrite: true);
        }
        return target;
    }

    private static string Find()
    {
        for (var dir = new DirectoryInfo(AppContext.BaseDirectory); dir is not null; dir = dir.Parent)
        {
            if (File.Exists(Path.Combine(dir.FullName, "FaaST.sln"))
                || (File.Exists(Path.Combine(dir.FullName, "package.json")) && Directory.Exists(Path.Combine(dir.FullName, "workers"))))
                return dir.FullName;
        }
        throw new InvalidOperationException($"repository root not found above {AppContext.BaseDirectory} (no FaaST.sln, nor package.json beside workers/)");
    }
}
