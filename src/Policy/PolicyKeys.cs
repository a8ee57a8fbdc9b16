using System.Text.RegularExpressions;

namespace FaaST.Policy;

/// <summary>What a key's value must be.</summary>
internal enum PolicyValueKind
{
    Object,
    String,
    Boolean,
    Size,
    Fraction,
    /// <summary>A number with any of <see cref="PolicyKey.ExclusiveMin"/>, <see cref="PolicyKey.ExclusiveMax"/>,
    /// <see cref="PolicyKey.Min"/>, <see cref="PolicyKey.Max"/> as bounds.</summary>
    Number,
    /// <summary>A whole number from <see cref="PolicyKey.MinInteger"/> to <see cref="PolicyKey.MaxInteger"/>.</summary>
    Integer,
    TimeSpan,
    Choice,
    GlobList,
}

/// <summary>One key of <c>faast.json</c>, by its dotted path, with its kind and bounds.</summary>
internal sealed record PolicyKey(string Path, PolicyValueKind Kind)
{
    /// <summary>The key's own name, the last part of <see cref="Path"/>.</summary>
    public string Name => Path[(Path.LastIndexOf('.') + 1)..];

    /// <summary>The path of the object holding the key; "" at the top level.</summary>
    public string Parent => Path.LastIndexOf('.') is var i and >= 0 ? Path[..i] : "";

    /// <summary>Inclusive bounds of a <see cref="PolicyValueKind.Size"/>.</summary>
    public long MinBytes { get; init; }

    public long MaxBytes { get; init; } = long.MaxValue;

    /// <summary>Exclusive bounds of a <see cref="PolicyValueKind.Fraction"/>.</summary>
    public double ExclusiveMin { get; init; } = double.NegativeInfinity;

    public double ExclusiveMax { get; init; } = double.PositiveInfinity;

    /// <summary>Inclusive bounds of a <see cref="PolicyValueKind.Number"/> (beside its exclusive ones).</summary>
    public double Min { get; init; } = double.NegativeInfinity;

    public double Max { get; init; } = double.PositiveInfinity;

    /// <summary>Inclusive bounds of an <see cref="PolicyValueKind.Integer"/>.</summary>
    public long MinInteger { get; init; }

    public long MaxInteger { get; init; } = int.MaxValue;

    /// <summary>Inclusive bounds of a <see cref="PolicyValueKind.TimeSpan"/>.</summary>
    public TimeSpan MinTime { get; init; } = TimeSpan.Zero;

    public TimeSpan MaxTime { get; init; } = TimeSpan.MaxValue;

    /// <summary>The values a <see cref="PolicyValueKind.Choice"/> accepts.</summary>
    public IReadOnlyList<string> Choices { get; init; } = [];
}

/// <summary>
/// Every key <c>faast.json</c> accepts. The parser takes its allowed keys and bounds from here, and a
/// test checks <c>schemas/faast.schema.json</c> against it; defaults live in <see cref="CachePolicy"/> and
/// <see cref="ScalePolicy"/>.
/// </summary>
internal static partial class PolicyKeys
{
    /// <summary>The accepted time span form, <c>[d.]hh:mm:ss[.fffffff]</c>; the schema uses the same pattern.</summary>
    public const string TimeSpanPattern = "^([0-9]+\\.)?[0-9]{1,2}:[0-9]{2}:[0-9]{2}(\\.[0-9]{1,7})?$";

    /// <summary>Values of <c>cache.eviction.policy</c>, in <see cref="EvictionPolicy"/> order.</summary>
    public static IReadOnlyList<string> EvictionPolicies { get; } = ["lru", "size-aware"];

    /// <summary>Values of <c>cache.consistency</c>.</summary>
    public static IReadOnlyList<string> ConsistencyPresets { get; } = [.. ConsistencyPreset.All.Select(p => p.Name)];

    public static IReadOnlyList<PolicyKey> All { get; } =
    [
        new("$schema", PolicyValueKind.String),
        new("cache", PolicyValueKind.Object),
        new("cache.enabled", PolicyValueKind.Boolean),
        new("cache.memoryLimit", PolicyValueKind.Size) { MinBytes = ByteSize.MiB },
        new("cache.cacheCapacity", PolicyValueKind.Size) { MinBytes = 1 },
        new("cache.headroom", PolicyValueKind.Fraction) { ExclusiveMin = 0, ExclusiveMax = 1 },
        new("cache.eviction", PolicyValueKind.Object),
        new("cache.eviction.policy", PolicyValueKind.Choice) { Choices = EvictionPolicies },
        new("cache.eviction.sizeThreshold", PolicyValueKind.Size) { MinBytes = 1 },
        new("cache.eviction.ttl", PolicyValueKind.TimeSpan) { MinTime = TimeSpan.FromTicks(1) },
        new("cache.doNotCache", PolicyValueKind.GlobList),
        new("cache.consistency", PolicyValueKind.Choice) { Choices = ConsistencyPresets },
        // Well under the gRPC channel's 256 MiB message limit, leaving room for the rest of the message.
        new("cache.inlineThreshold", PolicyValueKind.Size) { MinBytes = 0, MaxBytes = 64 * ByteSize.MiB },
        new("cache.streamThreshold", PolicyValueKind.Size) { MinBytes = 0 },
        new("cache.memoryDaemon", PolicyValueKind.Boolean),
        new("cache.memoryDaemonInterval", PolicyValueKind.TimeSpan)
        {
            MinTime = TimeSpan.FromMilliseconds(10),
            MaxTime = TimeSpan.FromMinutes(1),
        },
        new("cache.peerTimeout", PolicyValueKind.TimeSpan)
        {
            MinTime = TimeSpan.FromMilliseconds(100),
            MaxTime = TimeSpan.FromMinutes(5),
        },
        new("cache.peerFetchTimeout", PolicyValueKind.TimeSpan)
        {
            MinTime = TimeSpan.FromSeconds(1),
            MaxTime = TimeSpan.FromDays(1),
        },
        new("scale", PolicyValueKind.Object),
        new("scale.minInstances", PolicyValueKind.Integer) { MinInteger = 1, MaxInteger = ScalePolicy.InstanceLimit },
        new("scale.maxInstances", PolicyValueKind.Integer) { MinInteger = 1, MaxInteger = ScalePolicy.InstanceLimit },
        new("scale.interval", PolicyValueKind.TimeSpan)
        {
            MinTime = TimeSpan.FromMilliseconds(100),
            MaxTime = TimeSpan.FromMinutes(1),
        },
        new("scale.scaleOutCooldown", PolicyValueKind.TimeSpan) { MaxTime = TimeSpan.FromHours(1) },
        new("scale.scaleInCooldown", PolicyValueKind.TimeSpan) { MaxTime = TimeSpan.FromDays(1) },
        new("scale.scaleInRounds", PolicyValueKind.Integer) { MinInteger = 1, MaxInteger = 1000 },
        new("scale.keepAlive", PolicyValueKind.TimeSpan)
        {
            MinTime = TimeSpan.FromSeconds(1),
            MaxTime = TimeSpan.FromDays(30),
        },
        new("scale.band", PolicyValueKind.Object),
        new("scale.band.low", PolicyValueKind.Number) { ExclusiveMin = 0, Max = 1 },
        new("scale.band.high", PolicyValueKind.Number) { ExclusiveMin = 0, Max = 1 },
        new("scale.rareAccessesPerSecond", PolicyValueKind.Number) { Min = 0, Max = 1_000_000 },
        new("scale.votes", PolicyValueKind.Object),
        new("scale.votes.compute", PolicyValueKind.Boolean),
        new("scale.votes.cacheSize", PolicyValueKind.Boolean),
        new("scale.votes.bandwidth", PolicyValueKind.Boolean),
        new("scale.bandwidth", PolicyValueKind.Object),
        new("scale.bandwidth.minObjectSize", PolicyValueKind.Size) { MinBytes = 1 },
        new("scale.queueTimeout", PolicyValueKind.TimeSpan)
        {
            MinTime = TimeSpan.FromMilliseconds(1),
            MaxTime = TimeSpan.FromMinutes(10),
        },
        new("scale.maxQueueLength", PolicyValueKind.Integer) { MinInteger = 1, MaxInteger = 1_000_000 },
        new("prewarm", PolicyValueKind.Object),
        new("prewarm.enabled", PolicyValueKind.Boolean),
        new("prewarm.hitRateThreshold", PolicyValueKind.Number) { Min = 0, Max = 1 },
        new("prewarm.maxBytes", PolicyValueKind.Size) { MinBytes = 0 },
        new("prewarm.exclude", PolicyValueKind.GlobList),
        new("prewarm.reloadLead", PolicyValueKind.TimeSpan) { MaxTime = TimeSpan.FromDays(1) },
        new("prewarm.histogram", PolicyValueKind.Object),
        new("prewarm.histogram.binWidth", PolicyValueKind.TimeSpan)
        {
            MinTime = TimeSpan.FromMilliseconds(100),
            MaxTime = TimeSpan.FromDays(1),
        },
        new("prewarm.histogram.range", PolicyValueKind.TimeSpan)
        {
            MinTime = TimeSpan.FromSeconds(1),
            MaxTime = TimeSpan.FromDays(365),
        },
        new("prewarm.histogram.headPercentile", PolicyValueKind.Number) { Min = 0, Max = 100 },
        new("prewarm.histogram.tailPercentile", PolicyValueKind.Number) { ExclusiveMin = 0, Max = 100 },
        new("prewarm.histogram.margin", PolicyValueKind.Number) { Min = 0, ExclusiveMax = 1 },
        new("prewarm.histogram.minCv", PolicyValueKind.Number) { Min = 0, Max = 1000 },
        new("prewarm.histogram.maxOutOfBounds", PolicyValueKind.Number) { ExclusiveMin = 0, Max = 1 },
        new("prewarm.histogram.minSamples", PolicyValueKind.Integer) { MinInteger = 1, MaxInteger = 1_000_000 },
        new("prewarm.history", PolicyValueKind.Object),
        new("prewarm.history.maxAge", PolicyValueKind.TimeSpan)
        {
            MinTime = TimeSpan.FromSeconds(1),
            MaxTime = TimeSpan.FromDays(365),
        },
        new("prewarm.history.maxRecords", PolicyValueKind.Integer) { MinInteger = 1, MaxInteger = 10_000 },
        new("flash", PolicyValueKind.Object),
        new("flash.enabled", PolicyValueKind.Boolean),
        new("flash.address", PolicyValueKind.String),
        new("flash.iopsSlo", PolicyValueKind.Number) { ExclusiveMin = 0, Max = 10_000_000 },
        new("flash.p95LatencyUs", PolicyValueKind.Integer) { MinInteger = 1, MaxInteger = 10_000_000 },
        new("flash.readRatio", PolicyValueKind.Number) { Min = 0, Max = 1 },
        new("flash.timeoutMs", PolicyValueKind.Integer) { MinInteger = 1, MaxInteger = 60_000 },
        new("flash.retryAfterSeconds", PolicyValueKind.Integer) { MinInteger = 1, MaxInteger = 3_600 },
        new("flash.demote", PolicyValueKind.Boolean),
        new("flash.minDemoteBytes", PolicyValueKind.Size) { MinBytes = 0, MaxBytes = ByteSize.GiB },
    ];

    private static readonly Dictionary<string, PolicyKey> ByPath = All.ToDictionary(k => k.Path, StringComparer.Ordinal);

    public static PolicyKey? Find(string path) => ByPath.GetValueOrDefault(path);

    public static PolicyKey Get(string path) => ByPath[path];

    /// <summary>The names of the keys allowed in the object at <paramref name="parent"/> ("" = top level).</summary>
    public static IReadOnlyList<string> ChildrenOf(string parent) =>
        [.. All.Where(k => k.Parent == parent).Select(k => k.Name)];

    [GeneratedRegex(TimeSpanPattern, RegexOptions.CultureInvariant)]
    public static partial Regex TimeSpanRegex();
}
