using System.Diagnostics;
using System.Globalization;
using System.Text.Json;

namespace FaaST.Policy;

/// <summary>
/// Reads <c>faast.json</c>, the per-application cache policy beside <c>host.json</c>:
/// <code>
/// {
///   "$schema": "...",                        // optional, ignored
///   "cache": {
///     "enabled": true,
///     "memoryLimit": "1GiB",                 // bytes (number) or "512MiB", "1.5GB", "12 KB"
///     "cacheCapacity": "512MiB",             // optional; at most memoryLimit
///     "headroom": 0.10,                      // 0 &lt; h &lt; 1
///     "eviction": { "policy": "lru", "sizeThreshold": "12KiB", "ttl": "00:10:00" },
///     "doNotCache": ["logs/*", "**/*.tmp"],  // globs over "container/blob"
///     "consistency": "storage/sync/storage", // write target/write mode/read target (Faa$T Table 3)
///     "inlineThreshold": "64KiB",
///     "streamThreshold": "8MiB",              // larger inputs that miss reach the function while downloading; 0: off
///     "memoryDaemonInterval": "00:00:00.5",
///     "peerTimeout": "00:00:05",              // any one message from another instance
///     "peerFetchTimeout": "00:05:00"          // an owner still fetching from storage
///   },
///   "scale": {                                // the platform's scale controller (ScalePolicy)
///     "minInstances": 1, "maxInstances": 8, "interval": "00:00:01",
///     "scaleOutCooldown": "00:00:05", "scaleInCooldown": "00:00:30", "scaleInRounds": 3,
///     "keepAlive": "00:10:00", "band": { "low": 0.6, "high": 0.8 }, "rareAccessesPerSecond": 1.0,
///     "votes": { "compute": true, "cacheSize": true, "bandwidth": true },
///     "bandwidth": { "minObjectSize": "64MiB" }, "queueTimeout": "00:00:30", "maxQueueLength": 1000
///   }
/// }
/// </code>
/// Comments and trailing commas are allowed, as in <c>host.json</c>. Every key is optional (defaults:
/// <see cref="CachePolicy"/>, <see cref="ScalePolicy"/>, the latter as <see cref="CachePolicy.Scale"/>); an unknown or duplicate key is an error, so a typo never goes unnoticed.
/// <c>schemas/faast.schema.json</c> describes the same shape for editors.
/// </summary>
public static partial class CachePolicyFile
{
    /// <summary>The file's name in the app directory.</summary>
    public const string FileName = "faast.json";

    private static readonly JsonDocumentOptions Options = new()
    {
        CommentHandling = JsonCommentHandling.Skip,
        AllowTrailingCommas = true,
    };

    /// <summary>Reads <c>faast.json</c> in <paramref name="appDirectory"/>; without one, the defaults
    /// (<see cref="CachePolicy.Default"/>). An invalid file throws <see cref="PolicyFileException"/>.</summary>
    public static CachePolicy Load(string appDirectory)
    {
        ArgumentNullException.ThrowIfNull(appDirectory);
        if (!Directory.Exists(appDirectory))
            throw new DirectoryNotFoundException($"app directory {appDirectory} does not exist");
        var path = Path.Combine(appDirectory, FileName);
        byte[] bytes;
        try
        {
            bytes = File.ReadAllBytes(path);
        }
        catch (FileNotFoundException)
        {
            return CachePolicy.Default;
        }
        catch (Exception e) when (e is IOException or UnauthorizedAccessException)
        {
            throw new PolicyFileException(path, null, "cannot be read: " + e.Message, e);
        }
        // Read as text, a byte that is not UTF-8 would silently become U+FFFD (in a glob, a name).
        if (JsonSyntaxError.InvalidUtf8(bytes) is { } where)
            throw new PolicyFileException(path, null, $"not valid UTF-8{where}; save it as UTF-8");
        var bom = bytes.AsSpan().StartsWith(System.Text.Encoding.UTF8.Preamble) ? System.Text.Encoding.UTF8.Preamble.Length : 0;
        return Parse(System.Text.Encoding.UTF8.GetString(bytes, bom, bytes.Length - bom), path);
    }

    /// <summary>Parses the text of a policy file; errors name <paramref name="fileNameForErrors"/>.</summary>
    public static CachePolicy Parse(string json, string fileNameForErrors)
    {
        ArgumentNullException.ThrowIfNull(json);
        ArgumentNullException.ThrowIfNull(fileNameForErrors);
        JsonDocument document;
        try
        {
            document = JsonDocument.Parse(json, Options);
        }
        catch (JsonException e)
        {
            throw new PolicyFileException(fileNameForErrors, null, "not valid JSON" + JsonSyntaxError.Describe(e, System.Text.Encoding.UTF8.GetBytes(json)), e);
        }
        using (document)
        {
            RequireReadableText(document.RootElement, "", fileNameForErrors);
            return new Reader(fileNameForErrors).ReadRoot(document.RootElement);
        }
    }

    /// <summary>
    /// The JSON reader accepts an escape of half a UTF-16 surrogate pair (<c>"\udc00"</c>), but no
    /// .NET string can be made of it: reading such a value or key later throws
    /// InvalidOperationException. One walk over the document first turns that into an error naming
    /// the file and the key.
    /// </summary>
    private static void RequireReadableText(JsonElement element, string path, string file)
    {
        switch (element.ValueKind)
        {
            case JsonValueKind.String:
                try
                {
                    element.GetString();
                }
                catch (InvalidOperationException)
                {
                    throw new PolicyFileException(file, path.Length == 0 ? null : path,
                        "the string holds a \\u escape of half a UTF-16 surrogate pair, which is not text");
                }
                break;
            case JsonValueKind.Object:
                foreach (var property in element.EnumerateObject())
                {
                    string name;
                    try
                    {
                        name = property.Name;
                    }
                    catch (InvalidOperationException)
                    {
                        throw new PolicyFileException(file, path.Length == 0 ? null : path,
                            "a key holds a \\u escape of half a UTF-16 surrogate pair, which is not text");
                    }
                    RequireReadableText(property.Value, path.Length == 0 ? name : path + "." + name, file);
                }
                break;
            case JsonValueKind.Array:
                var i = 0;
                foreach (var item in element.EnumerateArray())
                    RequireReadableText(item, $"{path}[{i++}]", file);
                break;
        }
    }

    private sealed partial class Reader(string file)
    {
        public CachePolicy ReadRoot(JsonElement root)
        {
            if (root.ValueKind != JsonValueKind.Object)
                throw new PolicyFileException(file, null, $"must hold a JSON object, not {Describe(root)}");
            var policy = CachePolicy.Default;
            ScalePolicy? scale = null;
            PrewarmPolicy? prewarm = null;
            FlashPolicy? flash = null;
            foreach (var (key, value) in Members(root, ""))
            {
                switch (key.Path)
                {
                    case "$schema":
                        RequireKind(value, key, JsonValueKind.String, "a string");
                        break;
                    case "cache":
                        policy = ReadCache(value, key);
                        break;
                    case "scale":
                        scale = ReadScale(value, key);
                        break;
                    case "prewarm":
                        prewarm = ReadPrewarm(value, key);
                        break;
                    case "flash":
                        flash = ReadFlash(value, key);
                        break;
                    default:
                        throw new UnreachableException(key.Path);
                }
            }
            if (scale is not null)
                policy = policy with { Scale = scale };
            if (flash is not null)
                policy = policy with { Flash = flash };
            return prewarm is null ? policy : policy with { Prewarm = prewarm };
        }

        private PrewarmPolicy ReadPrewarm(JsonElement section, PolicyKey sectionKey)
        {
            RequireKind(section, sectionKey, JsonValueKind.Object, "an object");
            var prewarm = PrewarmPolicy.Default;
            foreach (var (key, value) in Members(section, sectionKey.Path))
            {
                prewarm = key.Name switch
                {
                    "enabled" => prewarm with { Enabled = ReadBoolean(value, key) },
                    "hitRateThreshold" => prewarm with { HitRateThreshold = ReadNumber(value, key) },
                    "maxBytes" => prewarm with { MaxBytes = ReadSize(value, key) },
                    "exclude" => prewarm with { Exclude = ReadGlobs(value, key) },
                    "reloadLead" => prewarm with { ReloadLead = ReadTimeSpan(value, key) },
                    "histogram" => ReadHistogram(value, key, prewarm),
                    "history" => ReadHistory(value, key, prewarm),
                    _ => throw new UnreachableException(key.Path),
                };
            }
            return prewarm;
        }

        private PrewarmPolicy ReadHistogram(JsonElement section, PolicyKey sectionKey, PrewarmPolicy prewarm)
        {
            RequireKind(section, sectionKey, JsonValueKind.Object, "an object");
            foreach (var (key, value) in Members(section, sectionKey.Path))
            {
                prewarm = key.Name switch
                {
                    "binWidth" => prewarm with { HistogramBinWidth = ReadTimeSpan(value, key) },
                    "range" => prewarm with { HistogramRange = ReadTimeSpan(value, key) },
                    "headPercentile" => prewarm with { HeadPercentile = ReadNumber(value, key) },
                    "tailPercentile" => prewarm with { TailPercentile = ReadNumber(value, key) },
                    "margin" => prewarm with { Margin = ReadNumber(value, key) },
                    "minCv" => prewarm with { MinCv = ReadNumber(value, key) },
                    "maxOutOfBounds" => prewarm with { MaxOutOfBounds = ReadNumber(value, key) },
                    "minSamples" => prewarm with { MinSamples = (int)ReadInteger(value, key) },
                    _ => throw new UnreachableException(key.Path),
                };
            }
            // The rules between keys, each naming the key the file set (a default cannot break them alone).
            if (prewarm.HistogramRange < prewarm.HistogramBinWidth)
            {
                throw new PolicyFileException(file, section.TryGetProperty("range", out _) ? "prewarm.histogram.range" : "prewarm.histogram.binWidth",
                    $"the range ({Format(prewarm.HistogramRange)}) is shorter than one bin ({Format(prewarm.HistogramBinWidth)})");
            }
            if (prewarm.HistogramRange.Ticks / prewarm.HistogramBinWidth.Ticks > PrewarmPolicy.MaxBins)
            {
                throw new PolicyFileException(file, section.TryGetProperty("binWidth", out _) ? "prewarm.histogram.binWidth" : "prewarm.histogram.range",
                    $"{Format(prewarm.HistogramRange)} of {Format(prewarm.HistogramBinWidth)} bins makes more than {PrewarmPolicy.MaxBins} bins; widen the bins or shorten the range");
            }
            if (prewarm.HeadPercentile >= prewarm.TailPercentile)
            {
                throw new PolicyFileException(file, section.TryGetProperty("headPercentile", out _) ? "prewarm.histogram.headPercentile" : "prewarm.histogram.tailPercentile",
                    $"prewarm.histogram.headPercentile ({Number(prewarm.HeadPercentile)}) must be less than prewarm.histogram.tailPercentile ({Number(prewarm.TailPercentile)})");
            }
            return prewarm;
        }

        private PrewarmPolicy ReadHistory(JsonElement section, PolicyKey sectionKey, PrewarmPolicy prewarm)
        {
            RequireKind(section, sectionKey, JsonValueKind.Object, "an object");
            foreach (var (key, value) in Members(section, sectionKey.Path))
            {
                prewarm = key.Name switch
                {
                    "maxAge" => prewarm with { HistoryMaxAge = ReadTimeSpan(value, key) },
                    "maxRecords" => prewarm with { HistoryMaxRecords = (int)ReadInteger(value, key) },
                    _ => throw new UnreachableException(key.Path),
                };
            }
            return prewarm;
        }

        private ScalePolicy ReadScale(JsonElement section, PolicyKey sectionKey)
        {
            RequireKind(section, sectionKey, JsonValueKind.Object, "an object");
            var scale = ScalePolicy.Default;
            foreach (var (key, value) in Members(section, sectionKey.Path))
            {
                scale = key.Name switch
                {
                    "minInstances" => scale with { MinInstances = (int)ReadInteger(value, key) },
                    "maxInstances" => scale with { MaxInstances = (int)ReadInteger(value, key) },
                    "interval" => scale with { Interval = ReadTimeSpan(value, key) },
                    "scaleOutCooldown" => scale with { ScaleOutCooldown = ReadTimeSpan(value, key) },
                    "scaleInCooldown" => scale with { ScaleInCooldown = ReadTimeSpan(value, key) },
                    "scaleInRounds" => scale with { ScaleInRounds = (int)ReadInteger(value, key) },
                    "keepAlive" => scale with { KeepAlive = ReadTimeSpan(value, key) },
                    "band" => scale with { Band = ReadBand(value, key) },
                    "rareAccessesPerSecond" => scale with { RareAccessesPerSecond = ReadNumber(value, key) },
                    "votes" => scale with { Votes = ReadVotes(value, key) },
                    "bandwidth" => scale with { BandwidthMinObjectSize = ReadBandwidth(value, key) },
                    "queueTimeout" => scale with { QueueTimeout = ReadTimeSpan(value, key) },
                    "maxQueueLength" => scale with { MaxQueueLength = (int)ReadInteger(value, key) },
                    _ => throw new UnreachableException(key.Path),
                };
            }
            // minInstances defaults to 1 and maxInstances is at least 1, so only a minimum set in the file can
            // exceed the maximum: the error names it.
            if (scale.MinInstances > scale.MaxInstances)
            {
                throw new PolicyFileException(file, "scale.minInstances",
                    $"{scale.MinInstances} is more than scale.maxInstances ({scale.MaxInstances}); the controller could satisfy neither");
            }
            return scale;
        }

        private UtilisationBand ReadBand(JsonElement band, PolicyKey bandKey)
        {
            RequireKind(band, bandKey, JsonValueKind.Object, "an object");
            var result = UtilisationBand.Default;
            foreach (var (key, value) in Members(band, bandKey.Path))
            {
                result = key.Name switch
                {
                    "low" => result with { Low = ReadNumber(value, key) },
                    "high" => result with { High = ReadNumber(value, key) },
                    _ => throw new UnreachableException(key.Path),
                };
            }
            // An empty band would make every utilisation either an out or an in vote: flapping.
            if (result.Low >= result.High)
            {
                var key = band.TryGetProperty("high", out _) || !band.TryGetProperty("low", out _) ? "scale.band.high" : "scale.band.low";
                throw new PolicyFileException(file, key,
                    $"the band is empty: scale.band.low ({Number(result.Low)}) must be less than scale.band.high ({Number(result.High)})");
            }
            return result;
        }

        private ScaleVotes ReadVotes(JsonElement votes, PolicyKey votesKey)
        {
            RequireKind(votes, votesKey, JsonValueKind.Object, "an object");
            var result = ScaleVotes.Default;
            foreach (var (key, value) in Members(votes, votesKey.Path))
            {
                result = key.Name switch
                {
                    "compute" => result with { Compute = ReadBoolean(value, key) },
                    "cacheSize" => result with { CacheSize = ReadBoolean(value, key) },
                    "bandwidth" => result with { Bandwidth = ReadBoolean(value, key) },
                    _ => throw new UnreachableException(key.Path),
                };
            }
            return result;
        }

        private long ReadBandwidth(JsonElement bandwidth, PolicyKey bandwidthKey)
        {
            RequireKind(bandwidth, bandwidthKey, JsonValueKind.Object, "an object");
            var minObjectSize = ScalePolicy.Default.BandwidthMinObjectSize;
            foreach (var (key, value) in Members(bandwidth, bandwidthKey.Path))
            {
                minObjectSize = key.Name switch
                {
                    "minObjectSize" => ReadSize(value, key),
                    _ => throw new UnreachableException(key.Path),
                };
            }
            return minObjectSize;
        }

        private long ReadInteger(JsonElement value, PolicyKey key)
        {
            if (value.ValueKind != JsonValueKind.Number)
                throw Error(key, $"must be a whole number, not {Describe(value)}");
            // Beyond decimal's range (1e40) a number is whole but far out of range: say the latter.
            var whole = value.TryGetDecimal(out var d) ? d == decimal.Truncate(d) : double.IsInteger(value.GetDouble());
            if (!whole)
                throw Error(key, $"{value.GetRawText()} is not a whole number");
            if (!value.TryGetDecimal(out d) || d < key.MinInteger || d > key.MaxInteger)
                throw Error(key, $"{value.GetRawText()} is out of range; must be from {key.MinInteger} to {key.MaxInteger}");
            return (long)d;
        }

        private double ReadNumber(JsonElement value, PolicyKey key)
        {
            if (value.ValueKind != JsonValueKind.Number)
                throw Error(key, $"must be a number, not {Describe(value)}");
            var d = value.GetDouble();
            if (!(d > key.ExclusiveMin && d < key.ExclusiveMax && d >= key.Min && d <= key.Max))
            {
                var bounds = new List<string>();
                if (double.IsFinite(key.ExclusiveMin))
                    bounds.Add("greater than " + Number(key.ExclusiveMin));
                if (double.IsFinite(key.Min))
                    bounds.Add("at least " + Number(key.Min));
                if (double.IsFinite(key.ExclusiveMax))
                    bounds.Add("less than " + Number(key.ExclusiveMax));
                if (double.IsFinite(key.Max))
                    bounds.Add("at most " + Number(key.Max));
                throw Error(key, $"{value.GetRawText()} is out of range; must be {string.Join(" and ", bounds)}");
            }
            return d;
        }

        private static string Number(double d) => d.ToString(CultureInfo.InvariantCulture);

        private CachePolicy ReadCache(JsonElement cache, PolicyKey cacheKey)
        {
            RequireKind(cache, cacheKey, JsonValueKind.Object, "an object");
            var policy = CachePolicy.Default;
            foreach (var (key, value) in Members(cache, cacheKey.Path))
            {
                policy = key.Name switch
                {
                    "enabled" => policy with { Enabled = ReadBoolean(value, key) },
                    "memoryLimit" => policy with { MemoryLimit = ReadSize(value, key), MemoryLimitSource = MemoryLimitSource.PolicyFile },
                    "cacheCapacity" => policy with { CacheCapacity = ReadSize(value, key) },
                    "headroom" => policy with { Headroom = ReadFraction(value, key) },
                    "eviction" => policy with { Eviction = ReadEviction(value, key) },
                    "doNotCache" => policy with { DoNotCacheGlobs = ReadGlobs(value, key) },
                    "consistency" => policy with { Consistency = ReadPreset(value, key) },
                    "inlineThreshold" => policy with { InlineThreshold = ReadSize(value, key) },
                    "streamThreshold" => policy with { StreamThreshold = ReadSize(value, key) },
                    "memoryDaemon" => policy with { MemoryDaemon = ReadBoolean(value, key) },
                    "memoryDaemonInterval" => policy with { MemoryDaemonInterval = ReadTimeSpan(value, key) },
                    "peerTimeout" => policy with { PeerTimeout = ReadTimeSpan(value, key) },
                    "peerFetchTimeout" => policy with { PeerFetchTimeout = ReadTimeSpan(value, key) },
                    _ => throw new UnreachableException(key.Path),
                };
            }
            // Without memoryLimit here the limit is known only at start (a memory cgroup may set it):
            // WithMemoryCgroup checks the capacity then.
            if (policy.CacheCapacity is { } capacity && capacity > policy.MemoryLimit && policy.MemoryLimitSource == MemoryLimitSource.PolicyFile)
            {
                throw new PolicyFileException(file, "cache.cacheCapacity",
                    $"{ByteSize.Format(capacity)} is more than cache.memoryLimit ({ByteSize.Format(policy.MemoryLimit)}); "
                    + "the cache cannot hold more than the instance's memory");
            }
            return policy;
        }

        private EvictionOptions ReadEviction(JsonElement eviction, PolicyKey evictionKey)
        {
            RequireKind(eviction, evictionKey, JsonValueKind.Object, "an object");
            var options = EvictionOptions.Default;
            foreach (var (key, value) in Members(eviction, evictionKey.Path))
            {
                options = key.Name switch
                {
                    "policy" => options with { Policy = (EvictionPolicy)ReadChoice(value, key, "eviction policy") },
                    "sizeThreshold" => options with { SizeThreshold = ReadSize(value, key) },
                    "ttl" => options with { Ttl = ReadTimeSpan(value, key) },
                    _ => throw new UnreachableException(key.Path),
                };
            }
            return options;
        }

        /// <summary>The members of an object, each with its key; unknown and duplicate keys are errors.</summary>
        private IEnumerable<(PolicyKey Key, JsonElement Value)> Members(JsonElement obj, string parent)
        {
            var seen = new HashSet<string>(StringComparer.Ordinal);
            foreach (var property in obj.EnumerateObject())
            {
                var path = parent.Length == 0 ? property.Name : parent + "." + property.Name;
                var key = PolicyKeys.Find(path);
                if (key is null)
                    throw new PolicyFileException(file, path, UnknownKey(property.Name, parent));
                if (!seen.Add(property.Name))
                    throw new PolicyFileException(file, path, "duplicate key; each key may appear once");
                yield return (key, property.Value);
            }
        }

        private static string UnknownKey(string name, string parent)
        {
            var allowed = PolicyKeys.ChildrenOf(parent);
            var suggestion = allowed.Where(a => IsNear(name, a)).Select(a => $" Did you mean \"{a}\"?").FirstOrDefault() ?? "";
            var where = parent.Length == 0 ? "at the top level" : $"in \"{parent}\"";
            return $"unknown key \"{name}\".{suggestion} Allowed keys {where}: {string.Join(", ", allowed)}";
        }

        private bool ReadBoolean(JsonElement value, PolicyKey key) => value.ValueKind switch
        {
            JsonValueKind.True => true,
            JsonValueKind.False => false,
            _ => throw Error(key, $"must be true or false, not {Describe(value)}"),
        };

        private long ReadSize(JsonElement value, PolicyKey key)
        {
            long bytes;
            if (value.ValueKind == JsonValueKind.Number)
            {
                if (!value.TryGetDecimal(out var d) || d != decimal.Truncate(d) || d < long.MinValue || d > long.MaxValue)
                    throw Error(key, $"{value.GetRawText()} is not a whole number of bytes; write an integer or a size string like \"512MiB\"");
                bytes = (long)d;
            }
            else if (value.ValueKind == JsonValueKind.String)
            {
                if (!ByteSize.TryParse(value.GetString()!, out bytes, out var error))
                    throw Error(key, error!);
            }
            else
            {
                throw Error(key, $"must be a number of bytes or a size string like \"512MiB\", not {Describe(value)}");
            }
            if (bytes < key.MinBytes || bytes > key.MaxBytes)
            {
                var shown = value.ValueKind == JsonValueKind.String ? $"\"{value.GetString()}\"" : value.GetRawText();
                var range = key.MaxBytes == long.MaxValue
                    ? $"at least {ByteSize.Format(key.MinBytes)}"
                    : $"from {ByteSize.Format(key.MinBytes)} to {ByteSize.Format(key.MaxBytes)}";
                throw Error(key, $"{shown} is out of range; must be {range}");
            }
            return bytes;
        }

        private double ReadFraction(JsonElement value, PolicyKey key)
        {
            if (value.ValueKind != JsonValueKind.Number)
                throw Error(key, $"must be a number, not {Describe(value)}");
            var d = value.GetDouble();
            if (!(d > key.ExclusiveMin && d < key.ExclusiveMax))
            {
                throw Error(key, $"{value.GetRawText()} is out of range; must be greater than "
                    + $"{key.ExclusiveMin.ToString(CultureInfo.InvariantCulture)} and less than {key.ExclusiveMax.ToString(CultureInfo.InvariantCulture)}");
            }
            return d;
        }

        private TimeSpan ReadTimeSpan(JsonElement value, PolicyKey key)
        {
            if (value.ValueKind != JsonValueKind.String)
                throw Error(key, $"must be a time span string like \"00:10:00\", not {Describe(value)}");
            var s = value.GetString()!;
            if (!PolicyKeys.TimeSpanRegex().IsMatch(s) || s.EndsWith('\n')
                || !TimeSpan.TryParseExact(s, "c", CultureInfo.InvariantCulture, out var time))
            {
                throw Error(key, $"\"{s}\" is not a time span; write [d.]hh:mm:ss[.fffffff] "
                    + "with hours below 24 and minutes and seconds below 60, like \"00:10:00\", \"00:00:00.5\" or \"1.00:00:00\"");
            }
            if (time < key.MinTime || time > key.MaxTime)
            {
                var range = key.MaxTime == TimeSpan.MaxValue
                    ? (key.MinTime == TimeSpan.FromTicks(1) ? "greater than 00:00:00" : $"at least {Format(key.MinTime)}")
                    : $"from {Format(key.MinTime)} to {Format(key.MaxTime)}";
                throw Error(key, $"\"{s}\" is out of range; must be {range}");
            }
            return time;
        }

        /// <summary>A time span as written in the file: <c>00:00:00.01</c> rather than <c>00:00:00.0100000</c>.</summary>
        private static string Format(TimeSpan time)
        {
            var s = time.ToString("c", CultureInfo.InvariantCulture);
            return s.LastIndexOf('.') > s.LastIndexOf(':') ? s.TrimEnd('0') : s;
        }

        /// <summary>The index of the value in <see cref="PolicyKey.Choices"/>.</summary>
        private int ReadChoice(JsonElement value, PolicyKey key, string what, string note = "")
        {
            var expected = "one of: " + string.Join(", ", key.Choices.Select(c => "\"" + c + "\"")) + note;
            if (value.ValueKind != JsonValueKind.String)
                throw Error(key, $"must be a string, {expected}; not {Describe(value)}");
            var s = value.GetString()!;
            for (var i = 0; i < key.Choices.Count; i++)
            {
                if (key.Choices[i] == s)
                    return i;
            }
            throw Error(key, $"unknown {what} \"{s}\"; expected {expected}");
        }

        private ConsistencyPreset ReadPreset(JsonElement value, PolicyKey key) =>
            ConsistencyPreset.All[ReadChoice(value, key, "consistency preset", " (write target/write mode/read target, Faa$T Table 3)")];

        private BlobGlobSet ReadGlobs(JsonElement value, PolicyKey key)
        {
            if (value.ValueKind != JsonValueKind.Array)
                throw Error(key, $"must be an array of glob strings like [\"logs/*\", \"**/*.tmp\"], not {Describe(value)}");
            var patterns = new List<string>();
            var i = 0;
            foreach (var item in value.EnumerateArray())
            {
                var itemPath = $"{key.Path}[{i++}]";
                if (item.ValueKind != JsonValueKind.String)
                    throw new PolicyFileException(file, itemPath, $"must be a glob string, not {Describe(item)}");
                var pattern = item.GetString()!;
                if (!BlobGlobSet.IsValid(pattern, out var error))
                    throw new PolicyFileException(file, itemPath, $"bad glob \"{pattern}\": {error}");
                patterns.Add(pattern);
            }
            return BlobGlobSet.Create(patterns);
        }

        private void RequireKind(JsonElement value, PolicyKey key, JsonValueKind kind, string what)
        {
            if (value.ValueKind != kind)
                throw Error(key, $"must be {what}, not {Describe(value)}");
        }

        private PolicyFileException Error(PolicyKey key, string reason) => new(file, key.Path, reason);

        private static string Describe(JsonElement value) => value.ValueKind switch
        {
            JsonValueKind.Object => "an object",
            JsonValueKind.Array => "an array",
            JsonValueKind.String => $"a string (\"{value.GetString()}\")",
            JsonValueKind.Number => $"a number ({value.GetRawText()})",
            JsonValueKind.True or JsonValueKind.False => $"a boolean ({value.GetRawText()})",
            _ => "null",
        };

        /// <summary>Same letters ignoring case, or at most two edits apart: worth suggesting.</summary>
        private static bool IsNear(string a, string b)
        {
            if (string.Equals(a, b, StringComparison.OrdinalIgnoreCase))
                return true;
            if (Math.Abs(a.Length - b.Length) > 2)
                return false;
            var previous = new int[b.Length + 1];
            var current = new int[b.Length + 1];
            for (var j = 0; j <= b.Length; j++)
                previous[j] = j;
            for (var i = 1; i <= a.Length; i++)
            {
                current[0] = i;
                for (var j = 1; j <= b.Length; j++)
                {
                    var cost = char.ToLowerInvariant(a[i - 1]) == char.ToLowerInvariant(b[j - 1]) ? 0 : 1;
                    current[j] = Math.Min(Math.Min(current[j - 1] + 1, previous[j] + 1), previous[j - 1] + cost);
                }
                (previous, current) = (current, previous);
            }
            return previous[b.Length] <= 2;
        }
    }
}
