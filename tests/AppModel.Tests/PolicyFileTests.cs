using System.Text.Json;
using System.Text.RegularExpressions;
using FaaST.Policy;

namespace FaaST.AppModel.Tests;

/// <summary>faast.json: defaults, every key, every kind of error, sizes, presets, globs, and agreement
/// with schemas/faast.schema.json.</summary>
public sealed class PolicyFileTests : IDisposable
{
    private const string File = "app/faast.json";
    private readonly string _dir = Directory.CreateTempSubdirectory("faast-policy-").FullName;

    public void Dispose() => Directory.Delete(_dir, recursive: true);

    private static CachePolicy Parse(string json) => CachePolicyFile.Parse(json, File);

    private static CachePolicy ParseCache(string members) => Parse("{ \"cache\": { " + members + " } }");

    /// <summary>Parsing fails, and the message is "FILE: KEY: reason" with the reason containing each fragment.</summary>
    private static PolicyFileException Fails(string json, string? keyPath, params string[] reasonContains)
    {
        var e = Assert.Throws<PolicyFileException>(() => Parse(json));
        Assert.Equal(File, e.FileName);
        Assert.Equal(keyPath, e.KeyPath);
        Assert.StartsWith(keyPath is null ? File + ": " : $"{File}: {keyPath}: ", e.Message);
        Assert.EndsWith(e.Reason, e.Message);
        foreach (var fragment in reasonContains)
            Assert.Contains(fragment, e.Reason);
        return e;
    }

    private static PolicyFileException FailsCache(string members, string keyPath, params string[] reasonContains) =>
        Fails("{ \"cache\": { " + members + " } }", keyPath, reasonContains);

    // ---- defaults ---------------------------------------------------------------------------------

    // Found by ./faast bench fuzz: the JSON reader accepts "\udc00", but reading it as a string threw
    // InvalidOperationException, which stopped the host with an unhandled exception.
    [Theory]
    [InlineData("""{ "cache": { "consistency": "local/\udc00" } }""", "cache.consistency")]
    [InlineData("""{ "cache": { "doNotCache": ["logs/*", "\ud83d"] } }""", "cache.doNotCache[1]")]
    [InlineData("""{ "cache": { "eviction": { "ttl": "0\uddb3" } } }""", "cache.eviction.ttl")]
    [InlineData("""{ "cache": { "memoryLimit": "1\ude00GiB" } }""", "cache.memoryLimit")]
    [InlineData("""{ "$schema": "\udc33" }""", "$schema")]
    [InlineData("""{ "cache": { "x\ud800": 1 } }""", "cache")]
    public void Half_a_surrogate_pair_in_a_string_or_key_is_an_error_naming_the_key(string json, string keyPath) =>
        Fails(json, keyPath, "half a UTF-16 surrogate pair");

    [Fact]
    public void Load_without_faast_json_returns_the_defaults()
    {
        System.IO.File.WriteAllText(Path.Combine(_dir, "host.json"), "{\"version\": \"2.0\"}");

        Assert.Same(CachePolicy.Default, CachePolicyFile.Load(_dir));
    }

    [Fact]
    public void Defaults_are_the_documented_values()
    {
        var p = CachePolicy.Default;

        Assert.True(p.Enabled);
        Assert.Equal(1L << 30, p.MemoryLimit);
        Assert.Equal(MemoryLimitSource.Default, p.MemoryLimitSource);
        Assert.Null(p.CacheCapacity);
        Assert.Equal(1L << 30, p.MaxCachedBytes);
        Assert.Equal(0.10, p.Headroom);
        Assert.Equal(EvictionPolicy.Lru, p.Eviction.Policy);
        Assert.Equal(12 * 1024, p.Eviction.SizeThreshold);
        Assert.Null(p.Eviction.Ttl);
        Assert.Empty(p.DoNotCacheGlobs.Patterns);
        Assert.False(p.DoNotCache("logs", "a.txt"));
        Assert.Same(ConsistencyPreset.StorageSyncStorage, p.Consistency);
        Assert.Equal(64 * 1024, p.InlineThreshold);
        Assert.Equal(8L << 20, p.StreamThreshold);
        Assert.Equal(TimeSpan.FromMilliseconds(500), p.MemoryDaemonInterval);
        Assert.True(p.MemoryDaemon);
    }

    [Theory]
    [InlineData("{}")]
    [InlineData("{ \"cache\": {} }")]
    [InlineData("{ \"cache\": { \"eviction\": {} } }")]
    [InlineData("{ \"$schema\": \"../schemas/faast.schema.json\" }")]
    public void A_file_that_sets_nothing_gives_the_defaults(string json) =>
        Assert.Equal(CachePolicy.Default, Parse(json));

    [Fact]
    public void Load_reads_faast_json_from_the_app_directory()
    {
        System.IO.File.WriteAllText(Path.Combine(_dir, "faast.json"), "{ \"cache\": { \"enabled\": false } }");

        Assert.False(CachePolicyFile.Load(_dir).Enabled);
    }

    [Fact]
    public void Load_errors_name_the_full_path_of_the_file()
    {
        var path = Path.Combine(_dir, "faast.json");
        System.IO.File.WriteAllText(path, "{ \"cache\": { \"enabled\": 1 } }");

        var e = Assert.Throws<PolicyFileException>(() => CachePolicyFile.Load(_dir));

        Assert.Equal(path, e.FileName);
        Assert.StartsWith(path + ": cache.enabled: ", e.Message);
    }

    [Fact]
    public void Load_of_a_missing_app_directory_is_an_error_not_the_defaults() =>
        Assert.Throws<DirectoryNotFoundException>(() => CachePolicyFile.Load(Path.Combine(_dir, "no-such-app")));

    [Fact]
    public void Load_of_an_unreadable_faast_json_says_so()
    {
        Directory.CreateDirectory(Path.Combine(_dir, "faast.json"));

        var e = Assert.Throws<PolicyFileException>(() => CachePolicyFile.Load(_dir));

        Assert.Contains("cannot be read", e.Message);
        Assert.Contains(Path.Combine(_dir, "faast.json"), e.Message);
    }

    [Fact]
    public void Comments_and_trailing_commas_are_allowed_like_host_json()
    {
        var p = Parse("""
            // cache policy
            {
              "cache": {
                /* off for now */
                "enabled": false,
                "doNotCache": ["logs/*",],
              },
            }
            """);

        Assert.False(p.Enabled);
        Assert.Equal(["logs/*"], p.DoNotCacheGlobs.Patterns);
    }

    // ---- every key ----------------------------------------------------------------------------------

    private const string EveryKey = """
        {
          "$schema": "../schemas/faast.schema.json",
          "cache": {
            "enabled": false,
            "memoryLimit": "2GiB",
            "cacheCapacity": "512MiB",
            "headroom": 0.25,
            "eviction": { "policy": "size-aware", "sizeThreshold": "64KB", "ttl": "00:10:00" },
            "doNotCache": ["logs/*", "**/*.tmp"],
            "consistency": "owner/async/owner",
            "inlineThreshold": 4096,
            "streamThreshold": "32MiB",
            "memoryDaemon": false,
            "memoryDaemonInterval": "00:00:02",
            "peerTimeout": "00:00:00.75",
            "peerFetchTimeout": "00:20:00"
          },
          "scale": {
            "minInstances": 2,
            "maxInstances": 16,
            "interval": "00:00:02",
            "scaleOutCooldown": "00:00:10",
            "scaleInCooldown": "00:01:00",
            "scaleInRounds": 5,
            "keepAlive": "00:30:00",
            "band": { "low": 0.5, "high": 0.9 },
            "rareAccessesPerSecond": 0.5,
            "votes": { "compute": false, "cacheSize": false, "bandwidth": false },
            "bandwidth": { "minObjectSize": "128MiB" },
            "queueTimeout": "00:00:05",
            "maxQueueLength": 50
          },
          "prewarm": {
            "enabled": false, "hitRateThreshold": 0.25, "maxBytes": "64MiB", "exclude": ["tmp/**"], "reloadLead": "00:00:30",
            "histogram": { "binWidth": "00:00:30", "range": "02:00:00", "headPercentile": 10, "tailPercentile": 95, "margin": 0.2,
                           "minCv": 1.5, "maxOutOfBounds": 0.75, "minSamples": 3 },
            "history": { "maxAge": "1.00:00:00", "maxRecords": 8 }
          },
          "flash": {
            "enabled": true, "address": "http://127.0.0.1:7300", "iopsSlo": 20000, "p95LatencyUs": 500, "readRatio": 0.9,
            "timeoutMs": 20, "retryAfterSeconds": 2, "demote": false, "minDemoteBytes": "4KiB"
          }
        }
        """;

    [Fact]
    public void Every_key_is_parsed()
    {
        var p = Parse(EveryKey);

        Assert.False(p.Enabled);
        Assert.False(p.MemoryDaemon);
        Assert.Equal(2L << 30, p.MemoryLimit);
        Assert.Equal(MemoryLimitSource.PolicyFile, p.MemoryLimitSource);
        Assert.Equal(512L << 20, p.CacheCapacity);
        Assert.Equal(512L << 20, p.MaxCachedBytes);
        Assert.Equal(0.25, p.Headroom);
        Assert.Equal(EvictionPolicy.SizeAware, p.Eviction.Policy);
        Assert.Equal(64_000, p.Eviction.SizeThreshold);
        Assert.Equal(TimeSpan.FromMinutes(10), p.Eviction.Ttl);
        Assert.Equal(["logs/*", "**/*.tmp"], p.DoNotCacheGlobs.Patterns);
        Assert.True(p.DoNotCache("logs", "today.txt"));
        Assert.True(p.DoNotCache("data", "a/b.tmp"));
        Assert.False(p.DoNotCache("data", "a/b.txt"));
        Assert.Same(ConsistencyPreset.OwnerAsyncOwner, p.Consistency);
        Assert.Equal(4096, p.InlineThreshold);
        Assert.Equal(32L << 20, p.StreamThreshold);
        Assert.Equal(TimeSpan.FromSeconds(2), p.MemoryDaemonInterval);
        Assert.Equal(TimeSpan.FromMilliseconds(750), p.PeerTimeout);
        Assert.Equal(TimeSpan.FromMinutes(20), p.PeerFetchTimeout);
        var scale = p.Scale;
        Assert.Equal(2, scale.MinInstances);
        Assert.Equal(16, scale.MaxInstances);
        Assert.Equal(TimeSpan.FromSeconds(2), scale.Interval);
        Assert.Equal(TimeSpan.FromSeconds(10), scale.ScaleOutCooldown);
        Assert.Equal(TimeSpan.FromMinutes(1), scale.ScaleInCooldown);
        Assert.Equal(5, scale.ScaleInRounds);
        Assert.Equal(TimeSpan.FromMinutes(30), scale.KeepAlive);
        Assert.Equal(0.5, scale.Band.Low);
        Assert.Equal(0.9, scale.Band.High);
        Assert.Equal(0.5, scale.RareAccessesPerSecond);
        Assert.Equal(new ScaleVotes { Compute = false, CacheSize = false, Bandwidth = false }, scale.Votes);
        Assert.Equal(128L << 20, scale.BandwidthMinObjectSize);
        Assert.Equal(TimeSpan.FromSeconds(5), scale.QueueTimeout);
        Assert.Equal(50, scale.MaxQueueLength);
        var prewarm = p.Prewarm;
        Assert.False(prewarm.Enabled);
        Assert.Equal(0.25, prewarm.HitRateThreshold);
        Assert.Equal(64L << 20, prewarm.MaxBytes);
        Assert.Equal(["tmp/**"], prewarm.Exclude.Patterns);
        Assert.Equal(TimeSpan.FromSeconds(30), prewarm.ReloadLead);
        Assert.Equal(TimeSpan.FromSeconds(30), prewarm.HistogramBinWidth);
        Assert.Equal(TimeSpan.FromHours(2), prewarm.HistogramRange);
        Assert.Equal(10, prewarm.HeadPercentile);
        Assert.Equal(95, prewarm.TailPercentile);
        Assert.Equal(0.2, prewarm.Margin);
        Assert.Equal(1.5, prewarm.MinCv);
        Assert.Equal(0.75, prewarm.MaxOutOfBounds);
        Assert.Equal(3, prewarm.MinSamples);
        Assert.Equal(TimeSpan.FromDays(1), prewarm.HistoryMaxAge);
        Assert.Equal(8, prewarm.HistoryMaxRecords);
    }

    [Fact]
    public void The_every_key_file_really_holds_every_key_the_parser_knows()
    {
        var paths = new SortedSet<string>(StringComparer.Ordinal);
        using (var doc = JsonDocument.Parse(EveryKey))
            CollectPaths(doc.RootElement, "", paths);

        Assert.Equal(PolicyKeys.All.Select(k => k.Path).Order(StringComparer.Ordinal), paths);

        static void CollectPaths(JsonElement obj, string parent, SortedSet<string> into)
        {
            foreach (var property in obj.EnumerateObject())
            {
                var path = parent.Length == 0 ? property.Name : parent + "." + property.Name;
                into.Add(path);
                if (property.Value.ValueKind == JsonValueKind.Object)
                    CollectPaths(property.Value, path, into);
            }
        }
    }

    [Fact]
    public void Eviction_keys_left_out_keep_their_defaults()
    {
        var p = ParseCache("\"eviction\": { \"ttl\": \"1.00:00:00\" }");

        Assert.Equal(EvictionPolicy.Lru, p.Eviction.Policy);
        Assert.Equal(12 * 1024, p.Eviction.SizeThreshold);
        Assert.Equal(TimeSpan.FromDays(1), p.Eviction.Ttl);
    }

    [Fact]
    public void Cache_capacity_is_optional_and_memory_limit_bounds_the_cache_without_it()
    {
        var p = ParseCache("\"memoryLimit\": \"256MiB\"");

        Assert.Null(p.CacheCapacity);
        Assert.Equal(256L << 20, p.MaxCachedBytes);
    }

    [Fact]
    public void A_capacity_alone_waits_for_the_instances_limit()
    {
        // Above the default 1 GiB, but a memory cgroup may allow it: checked at start (WithCgroupLimit).
        var p = ParseCache("\"cacheCapacity\": \"2GiB\"");
        Assert.Equal(2L << 30, p.CacheCapacity);
        Assert.Equal(MemoryLimitSource.Default, p.MemoryLimitSource);
    }

    [Fact]
    public void Cache_capacity_equal_to_memory_limit_is_allowed_whatever_the_key_order()
    {
        var p = ParseCache("\"cacheCapacity\": \"2GiB\", \"memoryLimit\": \"2GiB\"");

        Assert.Equal(2L << 30, p.CacheCapacity);
    }

    [Fact]
    public void Parsing_the_same_file_twice_gives_equal_policies()
    {
        Assert.Equal(Parse(EveryKey), Parse(EveryKey));
        Assert.NotEqual(Parse(EveryKey), CachePolicy.Default);
    }

    // ---- errors ----------------------------------------------------------------------------------------

    [Fact]
    public void An_unknown_key_is_named_with_a_suggestion_and_the_allowed_keys()
    {
        var e = FailsCache("\"evicton\": {}", "cache.evicton", "unknown key \"evicton\"", "Did you mean \"eviction\"?");

        foreach (var key in new[] { "enabled", "memoryLimit", "cacheCapacity", "headroom", "eviction", "doNotCache", "consistency", "inlineThreshold", "streamThreshold", "memoryDaemon", "memoryDaemonInterval", "peerTimeout", "peerFetchTimeout" })
            Assert.Contains(key, e.Reason);
    }

    [Fact]
    public void An_unknown_top_level_key_lists_the_top_level_keys() =>
        Fails("{ \"caches\": {} }", "caches", "unknown key \"caches\"", "at the top level: $schema, cache");

    [Fact]
    public void An_unknown_eviction_key_lists_the_eviction_keys() =>
        FailsCache("\"eviction\": { \"maxAge\": \"00:01:00\" }", "cache.eviction.maxAge",
            "unknown key \"maxAge\"", "in \"cache.eviction\": policy, sizeThreshold, ttl");

    [Fact]
    public void Keys_are_case_sensitive()
    {
        var e = FailsCache("\"MemoryLimit\": \"1GiB\"", "cache.MemoryLimit", "unknown key", "Did you mean \"memoryLimit\"?");

        Assert.Contains("memoryLimit", e.Reason);
    }

    [Fact]
    public void A_duplicate_key_is_an_error() =>
        FailsCache("\"headroom\": 0.1, \"headroom\": 0.2", "cache.headroom", "duplicate key");

    [Theory]
    [InlineData("{ \"cache\": { \"enabled\": \"yes\" } }", "cache.enabled", "must be true or false, not a string (\"yes\")")]
    [InlineData("{ \"cache\": { \"headroom\": \"0.1\" } }", "cache.headroom", "must be a number, not a string")]
    [InlineData("{ \"cache\": { \"memoryLimit\": true } }", "cache.memoryLimit", "must be a number of bytes or a size string", "not a boolean")]
    [InlineData("{ \"cache\": { \"cacheCapacity\": null } }", "cache.cacheCapacity", "not null")]
    [InlineData("{ \"cache\": { \"eviction\": \"lru\" } }", "cache.eviction", "must be an object, not a string")]
    [InlineData("{ \"cache\": { \"eviction\": { \"ttl\": 600 } } }", "cache.eviction.ttl", "must be a time span string", "not a number (600)")]
    [InlineData("{ \"cache\": { \"eviction\": { \"policy\": 1 } } }", "cache.eviction.policy", "must be a string", "not a number")]
    [InlineData("{ \"cache\": { \"doNotCache\": \"logs/*\" } }", "cache.doNotCache", "must be an array of glob strings", "not a string")]
    [InlineData("{ \"cache\": { \"doNotCache\": [\"logs/*\", 5] } }", "cache.doNotCache[1]", "must be a glob string, not a number")]
    [InlineData("{ \"cache\": { \"consistency\": [\"storage\"] } }", "cache.consistency", "must be a string", "not an array")]
    [InlineData("{ \"cache\": { \"memoryDaemonInterval\": 0.5 } }", "cache.memoryDaemonInterval", "must be a time span string")]
    [InlineData("{ \"cache\": [] }", "cache", "must be an object, not an array")]
    [InlineData("{ \"$schema\": 1 }", "$schema", "must be a string, not a number")]
    public void A_value_of_the_wrong_type_names_the_expected_type(string json, string keyPath, params string[] reason) =>
        Fails(json, keyPath, reason);

    [Fact]
    public void A_file_that_is_not_an_object_is_an_error() =>
        Fails("[]", null, "must hold a JSON object, not an array");

    [Theory]
    [InlineData("\"headroom\": 0", "cache.headroom", "0 is out of range; must be greater than 0 and less than 1")]
    [InlineData("\"headroom\": 1", "cache.headroom", "1 is out of range")]
    [InlineData("\"headroom\": 1.5", "cache.headroom", "1.5 is out of range")]
    [InlineData("\"headroom\": -0.1", "cache.headroom", "-0.1 is out of range")]
    [InlineData("\"memoryLimit\": 1000", "cache.memoryLimit", "1000 is out of range; must be at least 1MiB")]
    [InlineData("\"memoryLimit\": -1", "cache.memoryLimit", "-1 is out of range")]
    [InlineData("\"cacheCapacity\": 0", "cache.cacheCapacity", "must be at least 1B")]
    [InlineData("\"memoryLimit\": \"64MiB\", \"cacheCapacity\": \"100MB\"", "cache.cacheCapacity", "100MB is more than cache.memoryLimit (64MiB)")]
    [InlineData("\"eviction\": { \"sizeThreshold\": \"0KB\" }", "cache.eviction.sizeThreshold", "\"0KB\" is out of range; must be at least 1B")]
    [InlineData("\"eviction\": { \"ttl\": \"00:00:00\" }", "cache.eviction.ttl", "\"00:00:00\" is out of range; must be greater than 00:00:00")]
    [InlineData("\"inlineThreshold\": \"65MiB\"", "cache.inlineThreshold", "\"65MiB\" is out of range; must be from 0B to 64MiB")]
    [InlineData("\"memoryDaemonInterval\": \"00:00:00.001\"", "cache.memoryDaemonInterval", "\"00:00:00.001\" is out of range; must be from 00:00:00.01 to 00:01:00")]
    [InlineData("\"memoryDaemonInterval\": \"00:01:00.1\"", "cache.memoryDaemonInterval", "out of range")]
    [InlineData("\"peerTimeout\": \"00:00:00.05\"", "cache.peerTimeout", "\"00:00:00.05\" is out of range; must be from 00:00:00.1 to 00:05:00")]
    [InlineData("\"peerFetchTimeout\": \"2.00:00:00\"", "cache.peerFetchTimeout", "out of range")]
    public void A_value_out_of_range_names_the_range(string members, string keyPath, string reason) =>
        FailsCache(members, keyPath, reason);

    [Theory]
    [InlineData("0", 0L)]
    [InlineData("0.0", 0L)]
    [InlineData("\"64MiB\"", 64L << 20)]
    public void The_ends_of_a_size_range_are_accepted(string value, long bytes) =>
        Assert.Equal(bytes, ParseCache($"\"inlineThreshold\": {value}").InlineThreshold);

    [Theory]
    [InlineData("00:00:00.01", 10)]
    [InlineData("00:01:00", 60_000)]
    public void The_ends_of_a_time_range_are_accepted(string value, int milliseconds) =>
        Assert.Equal(TimeSpan.FromMilliseconds(milliseconds), ParseCache($"\"memoryDaemonInterval\": \"{value}\"").MemoryDaemonInterval);

    [Theory]
    [InlineData("\"12 kb\"", "\"12 kb\" is not a size", "case-sensitive")]
    [InlineData("\"1.5.2GB\"", "\"1.5.2GB\" is not a size")]
    [InlineData("\"GB\"", "is not a size")]
    [InlineData("\"-5MB\"", "is not a size")]
    [InlineData("\".5GB\"", "is not a size")]
    [InlineData("\"5.MB\"", "is not a size")]
    [InlineData("\"1TB\"", "is not a size")]
    [InlineData("\"512 \"", "is not a size")]
    [InlineData("\"1  GB\"", "is not a size")]
    [InlineData("\"\"", "is not a size")]
    [InlineData("\"99999999999999GiB\"", "is too large")]
    [InlineData("1.5", "1.5 is not a whole number of bytes")]
    [InlineData("1e30", "is not a whole number of bytes")]
    public void A_bad_size_names_the_value_and_the_accepted_forms(string value, params string[] reason) =>
        FailsCache($"\"memoryLimit\": {value}", "cache.memoryLimit", reason);

    [Theory]
    [InlineData("10")]
    [InlineData("0:1:2")]
    [InlineData("00:10")]
    [InlineData("00:60:00")]
    [InlineData("24:00:00")]
    [InlineData("00:00:00.12345678")]
    [InlineData("-00:10:00")]
    [InlineData("ten minutes")]
    [InlineData("00:10:00\\n")]
    public void A_bad_time_span_names_the_value_and_the_accepted_form(string value) =>
        FailsCache($"\"eviction\": {{ \"ttl\": \"{value}\" }}", "cache.eviction.ttl",
            "is not a time span", "[d.]hh:mm:ss[.fffffff]", "\"00:10:00\"");

    [Fact]
    public void A_bad_glob_names_its_index_the_glob_and_why() =>
        FailsCache("\"doNotCache\": [\"logs/*\", \"logs/a**\"]", "cache.doNotCache[1]",
            "bad glob \"logs/a**\"", "\"**\" must be a whole path segment");

    [Fact]
    public void An_unknown_preset_lists_the_six()
    {
        var e = FailsCache("\"consistency\": \"storage/async/storage\"", "cache.consistency",
            "unknown consistency preset \"storage/async/storage\"", "Table 3");

        foreach (var name in new[] { "storage/sync/storage", "owner/sync/owner", "owner/async/owner", "owner/sync/local", "local/sync/local", "local/async/local" })
            Assert.Contains($"\"{name}\"", e.Reason);
    }

    [Fact]
    public void An_unknown_eviction_policy_lists_both() =>
        FailsCache("\"eviction\": { \"policy\": \"lfu\" }", "cache.eviction.policy",
            "unknown eviction policy \"lfu\"", "one of: \"lru\", \"size-aware\"");

    [Fact]
    public void A_json_syntax_error_names_line_and_position()
    {
        var e = Fails("{\n  \"cache\": {\n    \"enabled\": tru\n  }\n}", null, "not valid JSON (line 3, position ");

        Assert.IsType<JsonException>(e.InnerException, exactMatch: false);
        Assert.DoesNotContain("LineNumber:", e.Message);
        Assert.DoesNotContain('\n', e.Message);
    }

    [Fact]
    public void An_empty_file_is_a_syntax_error() =>
        Fails("", null, "not valid JSON");

    // ---- sizes --------------------------------------------------------------------------------------

    [Theory]
    [InlineData("1048576", 1048576L)]
    [InlineData("1e6", 1_000_000L)]
    [InlineData("2097152.0", 2097152L)]
    [InlineData("\"1048576\"", 1048576L)]
    [InlineData("\"1000000B\"", 1_000_000L)]
    [InlineData("\"1500KB\"", 1_500_000L)]
    [InlineData("\"1500KiB\"", 1_536_000L)]
    [InlineData("\"2MB\"", 2_000_000L)]
    [InlineData("\"2MiB\"", 2_097_152L)]
    [InlineData("\"1.5GB\"", 1_500_000_000L)]
    [InlineData("\"1.5GiB\"", 1_610_612_736L)]
    [InlineData("\"512 MiB\"", 536_870_912L)]
    [InlineData("\"1.0000001MiB\"", 1_048_576L)]
    public void Sizes_are_bytes_or_strings_with_decimal_or_binary_units(string value, long bytes) =>
        Assert.Equal(bytes, ParseCache($"\"eviction\": {{ \"sizeThreshold\": {value} }}").Eviction.SizeThreshold);

    [Fact]
    public void A_fractional_byte_count_is_rounded_down() =>
        Assert.Equal(12_288, ParseCache("\"eviction\": { \"sizeThreshold\": \"12.0009765KiB\" }").Eviction.SizeThreshold);

    // ---- presets ------------------------------------------------------------------------------------

    [Theory]
    [InlineData("storage/sync/storage", DataTarget.Storage, WriteMode.Sync, DataTarget.Storage, true, true)]
    [InlineData("owner/sync/owner", DataTarget.Owner, WriteMode.Sync, DataTarget.Owner, false, false)]
    [InlineData("owner/async/owner", DataTarget.Owner, WriteMode.Async, DataTarget.Owner, false, false)]
    [InlineData("owner/sync/local", DataTarget.Owner, WriteMode.Sync, DataTarget.Local, false, false)]
    [InlineData("local/sync/local", DataTarget.Local, WriteMode.Sync, DataTarget.Local, false, false)]
    [InlineData("local/async/local", DataTarget.Local, WriteMode.Async, DataTarget.Local, false, false)]
    public void Each_preset_has_its_targets_mode_and_helpers(
        string name, DataTarget write, WriteMode mode, DataTarget read, bool validates, bool storageSync)
    {
        var preset = ParseCache($"\"consistency\": \"{name}\"").Consistency;

        Assert.Equal(name, preset.Name);
        Assert.Equal(name, preset.ToString());
        Assert.Equal(write, preset.WriteTarget);
        Assert.Equal(mode, preset.WriteMode);
        Assert.Equal(read, preset.ReadTarget);
        Assert.Equal(validates, preset.ValidatesWithStorage);
        Assert.Equal(storageSync, preset.WritesStorageSynchronously);
    }

    [Fact]
    public void There_are_six_presets_in_table_3_order_and_the_first_is_the_default()
    {
        Assert.Equal(
            ["storage/sync/storage", "owner/sync/owner", "owner/async/owner", "owner/sync/local", "local/sync/local", "local/async/local"],
            ConsistencyPreset.All.Select(p => p.Name));
        Assert.Same(ConsistencyPreset.All[0], ConsistencyPreset.Default);
    }

    [Theory]
    [InlineData("Storage/Sync/Storage")]
    [InlineData("storage/sync/storage ")]
    [InlineData("storage")]
    [InlineData(null)]
    public void Preset_names_are_exact(string? name) =>
        Assert.False(ConsistencyPreset.TryParse(name, out _));

    [Fact]
    public void TryParse_finds_the_shared_preset_instance()
    {
        Assert.True(ConsistencyPreset.TryParse("owner/sync/local", out var preset));
        Assert.Same(ConsistencyPreset.OwnerSyncLocal, preset);
    }

    // ---- globs ----------------------------------------------------------------------------------------

    [Theory]
    // * stays within one segment
    [InlineData("logs/*", "logs", "a.txt", true)]
    [InlineData("logs/*", "logs", "2024/a.txt", false)]
    [InlineData("logs/*", "other", "a.txt", false)]
    [InlineData("logs/*.txt", "logs", "a.txt.bak", false)]
    [InlineData("logs/a*b*c", "logs", "abXc", true)]
    [InlineData("logs/a*b*c", "logs", "aXbYbZc", true)]
    [InlineData("logs/a*b*c", "logs", "acb", false)]
    [InlineData("logs/*", "logs", "", true)]
    // ** is any number of segments, zero included
    [InlineData("**/*.tmp", "c", "x.tmp", true)]
    [InlineData("**/*.tmp", "c", "d/e/x.tmp", true)]
    [InlineData("**/*.tmp", "c", "x.tmpl", false)]
    [InlineData("**/*.tmp", "c", "d/x.tmp/y", false)]
    [InlineData("logs/**", "logs", "a", true)]
    [InlineData("logs/**", "logs", "a/b/c", true)]
    [InlineData("logs/**", "logsx", "a", false)]
    [InlineData("a/**/b", "a", "b", true)]
    [InlineData("a/**/b", "a", "x/y/b", true)]
    [InlineData("a/**/b", "a", "x/b/c", false)]
    [InlineData("c/**/x/**/y", "c", "x/q/x/z/y", true)]
    [InlineData("c/**/x/**/y", "c", "q/y", false)]
    [InlineData("c/**/**/y", "c", "y", true)]
    [InlineData("**", "any", "thing/at/all", true)]
    // ? is one character, never "/"
    [InlineData("logs/?.txt", "logs", "a.txt", true)]
    [InlineData("logs/?.txt", "logs", "ab.txt", false)]
    [InlineData("logs/?.txt", "logs", ".txt", false)]
    [InlineData("logs/?.txt", "logs", "\U0001F600.txt", true)]
    [InlineData("logs/a?b", "logs", "a/b", false)]
    // the container part
    [InlineData("*/tmp/**", "c1", "tmp/x", true)]
    [InlineData("*/tmp/**", "c2", "tmp/a/b", true)]
    [InlineData("*/tmp/**", "c1", "x/tmp/y", false)]
    [InlineData("in-*/**", "in-1", "a", true)]
    [InlineData("in-*/**", "out", "a", false)]
    [InlineData("in-?/x", "in-12", "x", false)]
    // matching is case-sensitive and literal elsewhere
    [InlineData("Logs/*", "logs", "a", false)]
    [InlineData("logs/a.txt", "logs", "a.txt", true)]
    [InlineData("logs/a.txt", "logs", "aXtxt", false)]
    [InlineData("c/a//b", "c", "a//b", true)]
    // escaping
    [InlineData(@"logs/\*.txt", "logs", "*.txt", true)]
    [InlineData(@"logs/\*.txt", "logs", "a.txt", false)]
    [InlineData(@"logs/a\?", "logs", "a?", true)]
    [InlineData(@"logs/a\?", "logs", "ab", false)]
    [InlineData(@"logs/\[x]", "logs", "[x]", true)]
    [InlineData(@"logs/\{a,b}", "logs", "{a,b}", true)]
    [InlineData(@"logs/a\\b", "logs", @"a\b", true)]
    [InlineData(@"\!logs/*", "!logs", "a", true)]
    [InlineData(@"logs/\*\*", "logs", "**", true)]
    [InlineData(@"logs/\*\*", "logs", "ab", false)]
    public void Globs_match_container_and_blob(string glob, string container, string blob, bool matches)
    {
        var set = BlobGlobSet.Create([glob]);

        Assert.Equal(matches, set.Matches(container, blob));
    }

    [Fact]
    public void DoNotCache_is_true_when_any_glob_matches()
    {
        var p = ParseCache("\"doNotCache\": [\"logs/*\", \"**/*.tmp\"]");

        Assert.True(p.DoNotCache("logs", "a"));
        Assert.True(p.DoNotCache("data", "x/y.tmp"));
        Assert.False(p.DoNotCache("data", "x/y.txt"));
    }

    [Fact]
    public void Long_blob_names_match_too()
    {
        var blob = string.Join('/', Enumerable.Repeat(new string('a', 100), 20)) + "/x.tmp";

        Assert.True(BlobGlobSet.Create(["**/*.tmp"]).Matches("c", blob));
        Assert.False(BlobGlobSet.Create(["**/*.txt"]).Matches("c", blob));
    }

    [Theory]
    [InlineData("", "it is empty")]
    [InlineData("/logs/*", "starts with \"/\"")]
    [InlineData("logs/", "ends with \"/\"", "\"logs/**\"")]
    [InlineData("logs", "has no \"/\"")]
    [InlineData("*.tmp", "has no \"/\"", "\"**/\"")]
    [InlineData("logs/a**", "\"**\" must be a whole path segment")]
    [InlineData("***/x", "\"**\" must be a whole path segment")]
    [InlineData("logs/[ab]", "\"[\" is reserved", "\"\\[\"")]
    [InlineData("logs/{a,b}", "\"{\" is reserved")]
    [InlineData("!logs/*", "leading \"!\" is reserved")]
    [InlineData("logs/a\\", "unfinished escape")]
    [InlineData("logs\\/a", "cannot be escaped")]
    public void Bad_globs_are_rejected_with_the_reason(string glob, params string[] reason)
    {
        var e = Assert.Throws<ArgumentException>(() => BlobGlobSet.Create([glob]));
        Assert.Contains($"bad glob \"{glob}\"", e.Message);
        foreach (var fragment in reason)
            Assert.Contains(fragment, e.Message);

        var fromFile = FailsCache($"\"doNotCache\": [{JsonSerializer.Serialize(glob)}]", "cache.doNotCache[0]", $"bad glob \"{glob}\"");
        foreach (var fragment in reason)
            Assert.Contains(fragment, fromFile.Reason);
    }

    // ---- the schema agrees with the parser ------------------------------------------------------------

    private static JsonDocument LoadSchema()
    {
        for (var dir = new DirectoryInfo(AppContext.BaseDirectory); dir is not null; dir = dir.Parent)
        {
            var path = Path.Combine(dir.FullName, "schemas", "faast.schema.json");
            if (System.IO.File.Exists(path))
                return JsonDocument.Parse(System.IO.File.ReadAllText(path));
        }
        throw new FileNotFoundException("schemas/faast.schema.json not found above " + AppContext.BaseDirectory);
    }

    /// <summary>Every property the schema describes, by dotted path.</summary>
    private static Dictionary<string, JsonElement> SchemaKeys(JsonElement schema)
    {
        var keys = new Dictionary<string, JsonElement>(StringComparer.Ordinal);
        Walk(schema, "");
        return keys;

        void Walk(JsonElement obj, string parent)
        {
            Assert.Equal("object", obj.GetProperty("type").GetString());
            Assert.False(obj.GetProperty("additionalProperties").GetBoolean(), $"\"{parent}\" must not allow unknown keys");
            foreach (var property in obj.GetProperty("properties").EnumerateObject())
            {
                var path = parent.Length == 0 ? property.Name : parent + "." + property.Name;
                keys.Add(path, property.Value);
                if (property.Value.TryGetProperty("properties", out _))
                    Walk(property.Value, path);
            }
        }
    }

    [Fact]
    public void Schema_and_parser_know_the_same_keys()
    {
        using var schema = LoadSchema();

        Assert.Equal(
            PolicyKeys.All.Select(k => k.Path).Order(StringComparer.Ordinal),
            SchemaKeys(schema.RootElement).Keys.Order(StringComparer.Ordinal));
    }

    [Fact]
    public void Schema_and_parser_have_the_same_enums()
    {
        using var schema = LoadSchema();
        var keys = SchemaKeys(schema.RootElement);

        Assert.Equal(PolicyKeys.EvictionPolicies, Enum(keys["cache.eviction.policy"]));
        Assert.Equal(["lru", "size-aware"], PolicyKeys.EvictionPolicies);
        Assert.Equal(ConsistencyPreset.All.Select(p => p.Name), Enum(keys["cache.consistency"]));
        Assert.Equal(ConsistencyPreset.All.Select(p => p.Name), PolicyKeys.ConsistencyPresets);

        static IEnumerable<string> Enum(JsonElement key) => key.GetProperty("enum").EnumerateArray().Select(e => e.GetString()!);
    }

    [Fact]
    public void Schema_and_parser_agree_on_types_and_ranges()
    {
        using var schema = LoadSchema();
        var keys = SchemaKeys(schema.RootElement);

        foreach (var key in PolicyKeys.All)
        {
            var s = keys[key.Path];
            Assert.True(s.TryGetProperty("description", out var description) && description.GetString()!.Length > 20,
                $"{key.Path} needs a description");
            switch (key.Kind)
            {
                case PolicyValueKind.Object:
                    Assert.Equal("object", Type(s));
                    break;
                case PolicyValueKind.String:
                    Assert.Equal("string", Type(s));
                    break;
                case PolicyValueKind.Boolean:
                    Assert.Equal("boolean", Type(s));
                    break;
                case PolicyValueKind.Size:
                    Assert.Equal("#/$defs/size", Ref(s));
                    Assert.Equal(key.MinBytes, s.GetProperty("minimum").GetInt64());
                    Assert.Equal(key.MaxBytes, s.TryGetProperty("maximum", out var max) ? max.GetInt64() : long.MaxValue);
                    break;
                case PolicyValueKind.Fraction:
                    Assert.Equal("number", Type(s));
                    Assert.Equal(key.ExclusiveMin, s.GetProperty("exclusiveMinimum").GetDouble());
                    Assert.Equal(key.ExclusiveMax, s.GetProperty("exclusiveMaximum").GetDouble());
                    break;
                case PolicyValueKind.Number:
                    Assert.Equal("number", Type(s));
                    Assert.Equal(key.ExclusiveMin, Bound(s, "exclusiveMinimum", double.NegativeInfinity));
                    Assert.Equal(key.ExclusiveMax, Bound(s, "exclusiveMaximum", double.PositiveInfinity));
                    Assert.Equal(key.Min, Bound(s, "minimum", double.NegativeInfinity));
                    Assert.Equal(key.Max, Bound(s, "maximum", double.PositiveInfinity));
                    break;
                case PolicyValueKind.Integer:
                    Assert.Equal("integer", Type(s));
                    Assert.Equal(key.MinInteger, s.GetProperty("minimum").GetInt64());
                    Assert.Equal(key.MaxInteger, s.GetProperty("maximum").GetInt64());
                    break;
                case PolicyValueKind.TimeSpan:
                    Assert.Equal("#/$defs/timeSpan", Ref(s));
                    break;
                case PolicyValueKind.Choice:
                    Assert.Equal("string", Type(s));
                    Assert.Equal(key.Choices, s.GetProperty("enum").EnumerateArray().Select(e => e.GetString()!));
                    break;
                case PolicyValueKind.GlobList:
                    Assert.Equal("array", Type(s));
                    Assert.Equal("string", Type(s.GetProperty("items")));
                    break;
                default:
                    Assert.Fail($"{key.Path}: kind {key.Kind} has no schema check");
                    break;
            }
        }

        static string? Type(JsonElement e) => e.TryGetProperty("type", out var t) ? t.GetString() : null;
        static string? Ref(JsonElement e) => e.TryGetProperty("$ref", out var r) ? r.GetString() : null;
        static double Bound(JsonElement e, string name, double absent) => e.TryGetProperty(name, out var b) ? b.GetDouble() : absent;
    }

    [Fact]
    public void Schema_patterns_are_the_parsers()
    {
        using var schema = LoadSchema();
        var defs = schema.RootElement.GetProperty("$defs");
        var sizeForms = defs.GetProperty("size").GetProperty("oneOf").EnumerateArray().ToArray();

        Assert.Equal(ByteSize.Pattern, sizeForms.Single(f => f.GetProperty("type").GetString() == "string").GetProperty("pattern").GetString());
        Assert.Equal(0, sizeForms.Single(f => f.GetProperty("type").GetString() == "integer").GetProperty("minimum").GetInt64());
        Assert.Equal(PolicyKeys.TimeSpanPattern, defs.GetProperty("timeSpan").GetProperty("pattern").GetString());
    }

    [Theory]
    [InlineData("0")]
    [InlineData("1024")]
    [InlineData("12KB")]
    [InlineData("12 KiB")]
    [InlineData("1.5GB")]
    [InlineData("0.5B")]
    [InlineData("12kb")]
    [InlineData("12  KB")]
    [InlineData("12 ")]
    [InlineData(" 12")]
    [InlineData("1.")]
    [InlineData(".1")]
    [InlineData("1.2.3")]
    [InlineData("1TB")]
    [InlineData("KB")]
    [InlineData("")]
    public void The_size_parser_accepts_exactly_what_the_schema_pattern_accepts(string s) =>
        Assert.Equal(Regex.IsMatch(s, ByteSize.Pattern, RegexOptions.ECMAScript), ByteSize.TryParse(s, out _, out _));

    [Fact]
    public void Schema_defaults_are_the_parsers_defaults()
    {
        using var schema = LoadSchema();
        var withDefault = new List<string>();

        foreach (var (path, s) in SchemaKeys(schema.RootElement))
        {
            if (!s.TryGetProperty("default", out var value))
                continue;
            withDefault.Add(path);
            // Setting a key to the schema's default must give exactly the default policy (except that a
            // memoryLimit set in the file is the file's, where the default one yields to a cgroup).
            var json = value.GetRawText();
            foreach (var part in path.Split('.').Reverse())
                json = $"{{ {JsonSerializer.Serialize(part)}: {json} }}";
            var parsed = Parse(json) with { MemoryLimitSource = MemoryLimitSource.Default };
            Assert.True(CachePolicy.Default == parsed, $"{path}: the schema's default {value.GetRawText()} is not the parser's");
        }

        // Keys without a default are the optional ones and the objects.
        var without = PolicyKeys.All.Select(k => k.Path).Except(withDefault).Order(StringComparer.Ordinal);
        Assert.Equal(["$schema", "cache", "cache.cacheCapacity", "cache.eviction", "cache.eviction.ttl",
            "flash", "flash.address", "flash.iopsSlo", "flash.p95LatencyUs", "flash.readRatio",
            "prewarm", "prewarm.histogram", "prewarm.history", "prewarm.maxBytes",
            "scale", "scale.band", "scale.bandwidth", "scale.votes"], without);
    }
}
