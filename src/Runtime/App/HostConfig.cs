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
        config = config with { FunctionTimeout = ReadFunctionTimeout(root, file) ?? config.FunctionTimeout };
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
                config = config with { RoutePrefix = CheckRoutePrefix(prefix, file) };
            if (ext.TryGetProperty("blobs", out var blobs) && blobs.ValueKind == JsonValueKind.Object)
            {
                if (AppJson.GetTimeSpan(blobs, "pollingInterval", file, "extensions.blobs.") is { } poll)
                {
                    if (poll < TimeSpan.FromMilliseconds(50) || poll > TimeSpan.FromHours(24))
                        throw new AppConfigException($"{file}: extensions.blobs.pollingInterval must be from 00:00:00.05 to 1.00:00:00, not {poll}");
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

    /// <summary>
    /// The longest functionTimeout FaaST accepts: 24 hours. Azure's plans allow at most 10 minutes
    /// (Consumption) or are unbounded (Premium, Dedicated: "-1"); a finite timeout is a safety net,
    /// and one longer than a day is not one. Timers also stop working past ~24.8 days
    /// (int.MaxValue ms), which is how 60 days used to pass here and then fail every invocation.
    /// </summary>
    public static readonly TimeSpan MaxFunctionTimeout = TimeSpan.FromHours(24);

    /// <summary>functionTimeout: a time span from 00:00:01 to 24:00:00, or "-1" (Azure's way) for none.</summary>
    private static TimeSpan? ReadFunctionTimeout(JsonElement root, string file)
    {
        var text = AppJson.GetString(root, "functionTimeout", file, "");
        if (text is null)
            return null;
        if (text.Trim() == "-1")
            return Timeout.InfiniteTimeSpan;
        var t = AppJson.GetTimeSpan(root, "functionTimeout", file, "")!.Value;
        // 00:00:00 has always meant "no limit" here; kept so that existing apps keep working.
        if (t == TimeSpan.Zero)
            return Timeout.InfiniteTimeSpan;
        if (t < TimeSpan.FromSeconds(1) || t > MaxFunctionTimeout)
            throw new AppConfigException(
                $"{file}: functionTimeout \"{text}\" is out of range: it must be from 00:00:01 to 24:00:00, or \"-1\" for no limit");
        return t;
    }

    /// <summary>extensions.http.routePrefix: literal path segments only, no "." or ".." (they would
    /// never match a normalised request path, or would climb out of the prefix).</summary>
    private static string CheckRoutePrefix(string prefix, string file)
    {
        var trimmed = prefix.Trim('/');
        if (trimmed.Length == 0)
            return trimmed;
        foreach (var segment in trimmed.Split('/'))
        {
            string? reason = segment switch
            {
                "" => "has an empty segment (\"//\")",
                "." or ".." => $"has a \"{segment}\" segment",
                _ when segment.Any(c => char.IsControl(c) || char.IsWhiteSpace(c) || c is '{' or '}' or '?' or '#' or '*' or '\\' or '%') =>
                    $"has a character that cannot be in a literal route segment ({{ }} ? # * \\ % spaces and control characters)",
                _ => null,
            };
            if (reason is not null)
                throw new AppConfigException(
                    $"{file}: extensions.http.routePrefix \"{Escape(prefix)}\" {reason}; use plain path segments such as \"api\" or \"v1/api\", or \"\" for none");
        }
        return trimmed;
    }

    private static string Escape(string s) => FaaST.Runtime.Http.LogText.Escape(s);

    private static int PositiveInt(JsonElement obj, string name, string file, int fallback)
    {
        if (!obj.TryGetProperty(name, out var v))
            return fallback;
        if (v.ValueKind != JsonValueKind.Number || !v.TryGetInt32(out var i) || i < 1)
            throw new AppConfigException($"{file}: extensions.blobs.{name} must be a positive whole number");
        return i;
    }
}
