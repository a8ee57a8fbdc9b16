using System.Text.Json;

namespace FaaST.AppModel;

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

    /// <summary>extensions.queues.maxPollingInterval: the longest wait between polls of an empty queue (default 1 minute).</summary>
    public TimeSpan QueueMaxPollingInterval { get; init; } = TimeSpan.FromMinutes(1);

    /// <summary>extensions.queues.visibilityTimeout: how long a message whose invocation failed stays invisible before its retry (default 0).</summary>
    public TimeSpan QueueVisibilityTimeout { get; init; } = TimeSpan.Zero;

    /// <summary>extensions.queues.batchSize: messages taken per receive (1 to 32, default 16).</summary>
    public int QueueBatchSize { get; init; } = 16;

    /// <summary>
    /// extensions.queues.newBatchThreshold: a new batch is fetched only when at most this many messages are in
    /// flight; default batchSize / 2 × processor count, as in Azure Functions.
    /// </summary>
    public int? QueueNewBatchThreshold { get; init; }

    /// <summary>The threshold in force: <see cref="QueueNewBatchThreshold"/>, or Azure's default.</summary>
    public int EffectiveQueueNewBatchThreshold => QueueNewBatchThreshold ?? QueueBatchSize / 2 * Environment.ProcessorCount;

    /// <summary>extensions.queues.maxDequeueCount: attempts before a message moves to QUEUE-poison (default 5).</summary>
    public int QueueMaxDequeueCount { get; init; } = 5;

    /// <summary>extensions.queues.messageEncoding: true (default) for base64, false for "none" (the text as it is).</summary>
    public bool QueueBase64 { get; init; } = true;

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
            if (ext.TryGetProperty("queues", out var queues) && queues.ValueKind == JsonValueKind.Object)
                config = ReadQueues(config, queues, file);
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

    private static string Escape(string s) => LogText.Escape(s);

    private static int PositiveInt(JsonElement obj, string name, string file, int fallback, string section = "blobs", int min = 1, int max = int.MaxValue)
    {
        if (!obj.TryGetProperty(name, out var v))
            return fallback;
        if (v.ValueKind != JsonValueKind.Number || !v.TryGetInt32(out var i) || i < min || i > max)
            throw new AppConfigException(max == int.MaxValue
                ? $"{file}: extensions.{section}.{name} must be a {(min == 0 ? "whole number, 0 or more" : "positive whole number")}"
                : $"{file}: extensions.{section}.{name} must be a whole number from {min} to {max}");
        return i;
    }

    /// <summary>extensions.queues, with the queue extension's names, defaults and ranges.</summary>
    private static HostConfig ReadQueues(HostConfig config, JsonElement queues, string file)
    {
        const string where = "extensions.queues.";
        // maxPollingInterval: a time span, or (the 1.x spelling, still accepted by Azure) milliseconds.
        if (queues.TryGetProperty("maxPollingInterval", out var poll))
        {
            TimeSpan interval;
            if (poll.ValueKind == JsonValueKind.Number)
            {
                if (!poll.TryGetInt64(out var ms) || ms < 0)
                    throw new AppConfigException($"{file}: {where}maxPollingInterval must be a time span like \"00:00:02\" or milliseconds");
                interval = TimeSpan.FromMilliseconds(ms);
            }
            else
            {
                interval = AppJson.GetTimeSpan(queues, "maxPollingInterval", file, where)!.Value;
            }
            if (interval < TimeSpan.FromMilliseconds(100) || interval > TimeSpan.FromHours(24))
                throw new AppConfigException($"{file}: {where}maxPollingInterval must be from 00:00:00.1 to 1.00:00:00, not {interval}");
            config = config with { QueueMaxPollingInterval = interval };
        }
        if (AppJson.GetTimeSpan(queues, "visibilityTimeout", file, where) is { } visibility)
        {
            if (visibility > TimeSpan.FromDays(7))
                throw new AppConfigException($"{file}: {where}visibilityTimeout must be at most 7.00:00:00 (the queue service's limit), not {visibility}");
            config = config with { QueueVisibilityTimeout = visibility };
        }
        config = config with
        {
            QueueBatchSize = PositiveInt(queues, "batchSize", file, config.QueueBatchSize, "queues", 1, 32),
            QueueMaxDequeueCount = PositiveInt(queues, "maxDequeueCount", file, config.QueueMaxDequeueCount, "queues"),
        };
        if (queues.TryGetProperty("newBatchThreshold", out _))
            config = config with { QueueNewBatchThreshold = PositiveInt(queues, "newBatchThreshold", file, 0, "queues", 0) };
        if (AppJson.GetString(queues, "messageEncoding", file, where) is { } encoding)
        {
            config = config with
            {
                QueueBase64 = encoding.ToLowerInvariant() switch
                {
                    "base64" => true,
                    "none" => false,
                    _ => throw new AppConfigException($"{file}: {where}messageEncoding \"{Escape(encoding)}\" must be \"base64\" or \"none\""),
                },
            };
        }
        return config;
    }
}
