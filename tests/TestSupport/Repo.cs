namespace FaaST.TestSupport;

/// <summary>The repository the tests run from (samples, workers, node_modules, protos).</summary>
public static class Repo
{
    public static string Root { get; } = Find();

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
