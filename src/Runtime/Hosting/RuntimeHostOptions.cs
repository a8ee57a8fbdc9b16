namespace FaaST.Runtime.Hosting;

/// <summary>What to run and where; the defaults are what `./faast start` uses.</summary>
public sealed record RuntimeHostOptions
{
    public required string AppDirectory { get; init; }

    /// <summary>HTTP port for the functions (0 picks a free one).</summary>
    public int? HttpPort { get; init; }

    /// <summary>The address HTTP listens on; loopback unless asked otherwise.</summary>
    public string ListenAddress { get; init; } = "127.0.0.1";

    /// <summary>The FaaST checkout (holds workers/ and node_modules/); found from the binary when null.</summary>
    public string? HomeDirectory { get; init; }

    /// <summary>Where a runtime-started Azurite keeps its data; null keeps it in memory.</summary>
    public string? AzuriteDataDirectory { get; init; }

    /// <summary>Worker processes; null reads FUNCTIONS_WORKER_PROCESS_COUNT (default 1).</summary>
    public int? WorkerProcessCount { get; init; }

    /// <summary>Environment used for app settings overrides (tests pass their own).</summary>
    public System.Collections.IDictionary? Environment { get; init; }

    /// <summary>Extra log sink (tests capture logs with it).</summary>
    public ILoggerProvider? LoggerProvider { get; init; }

    public LogLevel MinimumLogLevel { get; init; } = LogLevel.Information;

    public Storage.BlobStoreOptions? StorageOptions { get; init; }

    public TimeSpan? WorkerRestartDelay { get; init; }

    /// <summary>Overrides faast.json's cache.enabled (the --no-cache switch; tests).</summary>
    public bool? CacheEnabled { get; init; }

    /// <summary>Whether workers run as a per-app Unix user (--isolation; see README).</summary>
    public Workers.IsolationMode Isolation { get; init; } = Workers.IsolationMode.Auto;

    /// <summary>The user isolated workers run as; null: "faast-" + the app's name (tests share one).</summary>
    public string? WorkerUser { get; init; }

    /// <summary>Finds the FaaST checkout: $FAAST_HOME, else the nearest parent of the binary with workers/ and package.json.</summary>
    public static string FindHome(string? explicitHome = null)
    {
        if (explicitHome is not null)
            return Path.GetFullPath(explicitHome);
        if (System.Environment.GetEnvironmentVariable("FAAST_HOME") is { Length: > 0 } env)
            return Path.GetFullPath(env);
        for (var dir = new DirectoryInfo(AppContext.BaseDirectory); dir is not null; dir = dir.Parent)
            if (Directory.Exists(Path.Combine(dir.FullName, "workers")) && File.Exists(Path.Combine(dir.FullName, "package.json")))
                return dir.FullName;
        throw new InvalidOperationException("cannot find the FaaST checkout (workers/ and package.json); set FAAST_HOME");
    }
}
