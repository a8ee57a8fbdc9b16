namespace FaaST.AppModel;

/// <summary>Where FaaST is installed: the checkout (workers/, node_modules/) and the runtime host's binary.</summary>
public static class FaaSTHome
{
    /// <summary>Finds the FaaST checkout: <paramref name="explicitHome"/>, else $FAAST_HOME, else the nearest parent of
    /// the binary with workers/ and package.json.</summary>
    public static string Find(string? explicitHome = null)
    {
        if (explicitHome is not null)
            return Path.GetFullPath(explicitHome);
        if (Environment.GetEnvironmentVariable("FAAST_HOME") is { Length: > 0 } env)
            return Path.GetFullPath(env);
        for (var dir = new DirectoryInfo(AppContext.BaseDirectory); dir is not null; dir = dir.Parent)
            if (Directory.Exists(Path.Combine(dir.FullName, "workers")) && File.Exists(Path.Combine(dir.FullName, "package.json")))
                return dir.FullName;
        throw new InvalidOperationException("cannot find the FaaST checkout (workers/ and package.json); set FAAST_HOME");
    }

    /// <summary>
    /// The runtime host, FaaST.Runtime.dll: $FAAST_HOME's Release build when there is one, else beside this binary (an
    /// install such as the Kubernetes image's /opt/faast, and the test projects), else the checkout's Release build.
    /// The platform runs it as a process (instances, and the start checks of a deploy) and does not reference it.
    /// </summary>
    public static string RuntimeDll()
    {
        static string Built(string home) => Path.Combine(home, "src", "Runtime", "bin", "Release", "net10.0", "FaaST.Runtime.dll");
        if (Environment.GetEnvironmentVariable("FAAST_HOME") is { Length: > 0 } home && File.Exists(Built(home)))
            return Built(home);
        var beside = Path.Combine(AppContext.BaseDirectory, "FaaST.Runtime.dll");
        if (File.Exists(beside))
            return beside;
        try
        {
            return Built(Find());
        }
        catch (InvalidOperationException)
        {
            return beside;
        }
    }
}
