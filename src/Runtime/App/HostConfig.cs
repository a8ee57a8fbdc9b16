using System.Text.Json;

namespace FaaST.Runtime.App;

/// <summary>The parts of host.json that FaaST honours, with Azure Functions' defaults.</summary>
public sealed record HostConfig
{
    /// <summary>How long one invocation may run before it fails and its worker is restarted.</summary>
    public TimeSpan FunctionTimeout { get; init; } = TimeSpan.FromMinutes(5);

    /// <summary>extensions.http.routePrefix: "api" unless set ("" for none).</summary>
    public string RoutePrefix { get; init; } = "api";

    /// <summary>extensions.blobs.pollingInterval: how often blob-trigger containers are scanned.</summary>
    public TimeSpan BlobPollingInterval { get; init; } = TimeSpan.FromSeconds(2);

    /// <summary>extensions.blobs.maxDegreeOfParallelism: blob-triggered invocations at once.</summary>
    public int BlobMaxDegreeOfParallelism { get; init; } = 8;

    /// <summary>extensions.blobs.maxDequeueCount: attempts of a failing blob-triggered invocation.</summary>
    public int BlobMaxDequeueCount { get; init; } = 5;

    /// <summary>"functions": if present, only these functions load.</summary>
    public IReadOnlyList<string>? Functions { get; init; }

    public static HostConfig Load(string appDirectory)
    {
        var file = Path.Combine(appDirectory, "host.json");
        if (!File.Exists(file))
            throw new AppConfigException($"{file}: missing; a function app needs a host.json (at least {{\"version\": \"2.0\"}})");
        using var doc = AppJson.Parse(file);
        var root = doc.RootElement;
        if (root.ValueKind != JsonValueKind.Object)
            throw new AppConfigException($"{file}: the top level must be a JSON object");
        var version = AppJson.GetString(root, "version", file, "");
        if (version is not null && version != "2.0")
            throw new AppConfigException($"{file}: version \"{version}\" is not supported; use \"2.0\"");
        var config = new HostConfig();
        if (AppJson.GetTimeSpan(root, "functionTimeout", file, "") is { } timeout)
            config = config with { FunctionTimeout = timeout == TimeSpan.Zero ? Timeout.InfiniteTimeSpan : timeout };
        if (root.TryGetProperty("functions", out var functions))
        {
            if (functions.ValueKind != JsonValueKind.Array || functions.EnumerateArray().Any(f => f.ValueKind != JsonValueKind.String))
                throw new AppConfigException($"{file}: functions must be an array of function names");
            config = config with { Functions = functions.EnumerateArray().Select(f => f.GetString()!).ToArray() };
        }
        if (root.TryGetProperty("extensions", out var ext) && ext.ValueKind == JsonValueKind.Object)
        {
            if (ext.TryGetProperty("http", out var http) && http.ValueKind == JsonValueKind.Object &&
                AppJson.GetString(http, "routePrefix", file, "extensions.http.") is { } prefix)
                config = config with { RoutePrefix = prefix.Trim('/') };
            if (ext.TryGetProperty("blobs", out var blobs) && blobs.ValueKind == JsonValueKind.Object)
            {
                if (AppJson.GetTimeSpan(blobs, "pollingInterval", file, "extensions.blobs.") is { } poll)
                {
                    if (poll < TimeSpan.FromMilliseconds(50))
                        throw new AppConfigException($"{file}: extensions.blobs.pollingInterval must be at least 00:00:00.05");
                    config = config with { BlobPollingInterval = poll };
                }
                config = config with
                {
                    BlobMaxDegreeOfParallelism = PositiveInt(blobs, "maxDegreeOfParallelism", file, config.BlobMaxDegreeOfParallelism),
                    BlobMaxDequeueCount = PositiveInt(blobs, "maxDequeueCount", file, config.BlobMaxDequeueCount),
                };
            }
        }
        return config;
    }

    private static int PositiveInt(JsonElement obj, string name, string file, int fallback)
    {
        if (!obj.TryGetProperty(name, out var v))
            return fallback;
        if (v.ValueKind != JsonValueKind.Number || !v.TryGetInt32(out var i) || i < 1)
            throw new AppConfigException($"{file}: extensions.blobs.{name} must be a positive whole number");
        return i;
    }
}
