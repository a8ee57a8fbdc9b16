namespace FaaST.ScaleController.Platform;

/// <summary>The platform process's settings, with their defaults in one place.</summary>
public sealed record PlatformOptions
{
    /// <summary>Where the frontend listens. Default 127.0.0.1.</summary>
    public string ListenAddress { get; init; } = "127.0.0.1";

    /// <summary>The frontend's HTTP port. Default 7071 (0: a free one).</summary>
    public int Port { get; init; } = 7071;

    /// <summary>The control port (HTTP/2: ScaleControl for instances' unrequested votes, KEDA's external scaler). Default 0: a free one.</summary>
    public int ControlPort { get; init; }

    /// <summary>Where extracted packages and per-app secrets live on this machine.</summary>
    public required string StateDirectory { get; init; }

    /// <summary>The platform's storage: deployments, membership and (for apps on development storage) the apps' data.</summary>
    public required string StorageConnectionString { get; init; }

    /// <summary>True when <see cref="StorageConnectionString"/> is an Azurite the platform started: apps that ask for development storage get it.</summary>
    public bool DevelopmentStorage { get; init; }

    /// <summary>More runtime arguments for every instance (--workers N, --no-cache, --isolation MODE, --no-peers, ...).</summary>
    public IReadOnlyList<string> InstanceArguments { get; init; } = [];

    /// <summary>The one app of `./faast start APP`: every path on the port goes to it. Null: route by path or host.</summary>
    public string? SingleApp { get; init; }

    /// <summary>Instances to start when an app is loaded; default the policy's minInstances (at least 1).</summary>
    public int? InitialInstances { get; init; }

    /// <summary>How long a draining instance may finish its invocations. Default 30 s.</summary>
    public TimeSpan DrainDeadline { get; init; } = TimeSpan.FromSeconds(30);

    /// <summary>
    /// Instances of all apps together the platform runs at most (starting, ready and draining ones count). A scale-out
    /// beyond it is capped and logged with the reason; a deploy that cannot get even one instance is refused (503).
    /// A redeploy needs room for its new instances beside the old ones while they roll. Default 32.
    /// </summary>
    public int MaxInstances { get; init; } = 32;

    /// <summary>
    /// Language worker processes of all instances together at most: each instance counts its workers (the platform's
    /// --workers N, else the app's FUNCTIONS_WORKER_PROCESS_COUNT, else 1). Capped as <see cref="MaxInstances"/> is. Default 128.
    /// </summary>
    public int MaxWorkers { get; init; } = 128;

    /// <summary>Receives instance output lines (label, line); default: the console.</summary>
    public Action<string, string>? InstanceOutput { get; init; }
}
