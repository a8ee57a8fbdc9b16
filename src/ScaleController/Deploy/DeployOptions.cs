namespace FaaST.ScaleController.Deploy;

/// <summary>Deploy's limits and places, with their defaults (docs/scaling.md, "Deploy").</summary>
public sealed record DeployOptions
{
    /// <summary>The largest file a package may hold, packed or extracted (default 256 MiB): a function app is code
    /// and small assets; data belongs in blob storage.</summary>
    public long MaxFileBytes { get; init; } = 256L << 20;

    /// <summary>The most bytes a package may extract to in all (default 1 GiB): a zip bomb stops here.</summary>
    public long MaxTotalBytes { get; init; } = 1L << 30;

    /// <summary>The most entries (files and folders) a package may hold (default 100,000). An upload's count is read
    /// from the zip's end-of-central-directory record before the central directory is parsed.</summary>
    public int MaxEntries { get; init; } = 100_000;

    /// <summary>The largest upload (the zip as sent) a deploy accepts (default 256 MiB): a bigger Content-Length is
    /// refused at once (HTTP 413), and a body without one stops being read at this many bytes.</summary>
    public long MaxPackageBytes { get; init; } = 256L << 20;

    /// <summary>How many uploads may be received, unpacked and checked at once on the platform (default 2); one more is
    /// refused with HTTP 503 and Retry-After. Each app has at most one deploy in progress (a second is HTTP 409).</summary>
    public int MaxConcurrentDeploys { get; init; } = 2;

    /// <summary>How often a publish tries the next version after losing the race for one to another deployer
    /// (default 5) before it fails with <see cref="DeployConflictException"/>.</summary>
    public int PublishAttempts { get; init; } = 5;

    /// <summary>Where uploads are unpacked and checked before they are published (default: the system's temporary
    /// directory; the platform uses STATE/work, 0700, emptied at its start); each deploy uses a folder of its own
    /// there (0700, its spooled zips 0600) and deletes it.</summary>
    public string? WorkDirectory { get; init; }

    /// <summary>The settings instances see on top of local.settings.json, for validation; null: this process's
    /// environment (local instances inherit it).</summary>
    public IReadOnlyDictionary<string, string>? ValidationEnvironment { get; init; }

    /// <summary>The runtime host whose start checks a deploy runs (`FaaST.Runtime.dll check`, see <see cref="RuntimeChecks"/>);
    /// default <see cref="FaaSTHome.RuntimeDll"/>, the binary the platform's instances run.</summary>
    public string RuntimeDll { get; init; } = FaaSTHome.RuntimeDll();

    public static DeployOptions Default { get; } = new();
}
