using System.Collections;
using System.Text;
using FaaST.Policy;
using FaaST.Storage;
using Microsoft.AspNetCore.Routing;
using Microsoft.AspNetCore.Routing.Patterns;
using Microsoft.Extensions.DependencyInjection;

namespace FaaST.Bench.Fuzz;

/// <summary>What one input got.</summary>
public enum Verdict
{
    /// <summary>Loaded, and the host could use what was loaded.</summary>
    Accepted,

    /// <summary>Refused with the project's error type, naming the file.</summary>
    Rejected,

    /// <summary>Anything else: another exception type, an error that does not name the file, or a
    /// value accepted that the host then cannot use (it would fail at start or on every request).</summary>
    Crash,
}

/// <summary>The outcome of one input; <see cref="Signature"/> groups crashes of one cause.</summary>
public sealed record Outcome(Verdict Verdict, string? Signature = null, string? Detail = null)
{
    public static readonly Outcome Accepted = new(Verdict.Accepted);
    public static readonly Outcome Rejected = new(Verdict.Rejected);

    public static Outcome Crash(string signature, string detail) => new(Verdict.Crash, signature, detail);

    /// <summary>A crash from an exception: its type and the first FaaST frame name the cause.</summary>
    public static Outcome Crash(string what, Exception e) =>
        new(Verdict.Crash, $"{what}: {e.GetType().Name} at {FirstOwnFrame(e)}", $"{e.GetType().FullName}: {e.Message}\n{e.StackTrace}");

    private static string FirstOwnFrame(Exception e)
    {
        var lines = (e.StackTrace ?? "").Split('\n', StringSplitOptions.TrimEntries);
        var frame = lines.FirstOrDefault(l => l.Contains("FaaST.", StringComparison.Ordinal) && !l.Contains("FaaST.Bench", StringComparison.Ordinal))
            ?? lines.FirstOrDefault() ?? "?";
        var paren = frame.IndexOf('(', StringComparison.Ordinal);
        return (paren > 0 ? frame[..paren] : frame).Replace("at ", "", StringComparison.Ordinal);
    }
}

/// <summary>
/// Fuzzes the app's configuration parsers in process: function.json, host.json and
/// local.settings.json through <see cref="FunctionApp.Load"/>, and faast.json through
/// <see cref="CachePolicyFile.Load"/>, each file in a scratch app whose other files are valid.
/// Oracle: the load succeeds (and the host could use the result: routes map, timeouts fit a timer,
/// the storage connection opens), or it throws the documented error type naming the file.
/// </summary>
public sealed class ConfigFuzzer : IDisposable
{
    public static readonly string[] Targets = ["function.json", "host.json", "local.settings.json", "faast.json"];

    private readonly string _root;
    private readonly string _app;
    private readonly Hashtable _environment = new();
    private static readonly IInlineConstraintResolver Constraints = new ServiceCollection()
        .AddRoutingCore() // what the host's slim builder registers ...
        // ... plus the regex constraint, which the host registers itself (RuntimeHost: Azure's route
        // constraints include it); without it the oracle called every regex route a crash.
        .Configure<Microsoft.AspNetCore.Routing.RouteOptions>(r => r.SetParameterPolicy<Microsoft.AspNetCore.Routing.Constraints.RegexInlineRouteConstraint>("regex"))
        .BuildServiceProvider()
        .GetRequiredService<IInlineConstraintResolver>();

    // Task.Delay / CancelAfter / WaitAsync take at most this many milliseconds.
    private static readonly TimeSpan MaxTimer = TimeSpan.FromMilliseconds(uint.MaxValue - 1);

    public const string ValidHostJson = """{ "version": "2.0", "functionTimeout": "00:00:30", "extensions": { "http": { "routePrefix": "api" }, "blobs": { "pollingInterval": "00:00:02", "maxDegreeOfParallelism": 4, "maxDequeueCount": 3 } }, "functions": ["F", "G"] }""";
    public const string ValidSettingsJson = """{ "IsEncrypted": false, "Values": { "FUNCTIONS_WORKER_RUNTIME": "python", "AzureWebJobsStorage": "UseDevelopmentStorage=true", "FUNCTIONS_WORKER_PROCESS_COUNT": "1", "FUNCTIONS_REQUEST_BODY_SIZE_LIMIT": "1048576", "AzureWebJobs.G.Disabled": "false", "Container": "data" }, "Host": { "LocalHttpPort": 7071 } }""";
    public const string ValidFunctionJson = """{ "scriptFile": "__init__.py", "entryPoint": "main", "disabled": false, "bindings": [ { "type": "httpTrigger", "direction": "in", "name": "req", "authLevel": "anonymous", "methods": ["get", "post"], "route": "items/{id:int}/{name?}" }, { "type": "blob", "direction": "in", "name": "inblob", "path": "%Container%/{name}", "dataType": "binary", "connection": "AzureWebJobsStorage" }, { "type": "blob", "direction": "out", "name": "outblob", "path": "out/{id}-{rand-guid}.txt" }, { "type": "http", "direction": "out", "name": "$return" } ] }""";
    public const string ValidBlobTriggerJson = """{ "bindings": [ { "type": "blobTrigger", "direction": "in", "name": "input", "path": "input/{name}.{ext}", "dataType": "string" }, { "type": "blob", "direction": "out", "name": "$return", "path": "output/{name}-{DateTime}.{ext}" } ] }""";
    public const string ValidFaastJson = """{ "$schema": "../schemas/faast.schema.json", "cache": { "enabled": true, "memoryLimit": "1GiB", "cacheCapacity": "512MiB", "headroom": 0.10, "eviction": { "policy": "lru", "sizeThreshold": "12KiB", "ttl": "00:10:00" }, "doNotCache": ["logs/**", "tmp/*.bin"], "consistency": "storage/sync/storage", "inlineThreshold": "64KiB", "memoryDaemonInterval": "00:00:00.5", "peerTimeout": "00:00:05", "peerFetchTimeout": "00:05:00" }, "scale": { "minInstances": 1, "maxInstances": 8, "interval": "00:00:01", "scaleOutCooldown": "00:00:05", "scaleInCooldown": "00:00:30", "scaleInRounds": 3, "keepAlive": "00:10:00", "band": { "low": 0.6, "high": 0.8 }, "rareAccessesPerSecond": 1.0, "votes": { "compute": true, "cacheSize": true, "bandwidth": true }, "bandwidth": { "minObjectSize": "64MiB" }, "queueTimeout": "00:00:30", "maxQueueLength": 1000 } }""";

    /// <summary>Values that matter to each key, beside the generic ones the mutator always tries.</summary>
    public static readonly IReadOnlyDictionary<string, string[]> Values = new Dictionary<string, string[]>
    {
        ["type"] = ["httpTrigger", "http", "blob", "blobTrigger", "HTTPTRIGGER", "queueTrigger", "timerTrigger", "Blob"],
        ["direction"] = ["in", "out", "inout", "IN", "Out", "sideways"],
        ["name"] = ["req", "$return", "inblob", "outblob", "_x", "1abc", "a b", "ünï", "req", "$Return", "a-b"],
        ["route"] = [
            "items/{id}", "items/{id:int}", "{id:regex(^a+$)}", "x/{id:regex(\\\\d{{3}})}", "{*rest}", "a/{*rest}/b", "{id:int:min(1)}", "{id:min(abc)}",
            "{id:length(1,2,3)}", "{x:unknowncon}", "{a}{b}", "{a}-{b}", "{a?}/{b}", "{a=5}", "{a:int=x}", "{", "}", "{{a}}", "a//b", "~/x", "..",
            "%2e%2e", "{id:bool}", "{id:guid}", "{id:datetime}", "{id:alpha}", "{id:range(5,1)}", "{id:maxlength(-1)}", "{*a}/{*b}", "{a}/{A}",
            "{id:file}", "{id:nonfile}", "{id:required}", "{id:decimal}", "{id:long}", "{id:double}", "{id:float}", "{id:minlength(99999999999)}",
        ],
        ["methods"] = ["GET", "get", "POST", "", "G ET", "\r\n", "CONNECT", "TRACE", "ü"],
        ["path"] = [
            "c/{name}", "{c}/x", "C/x", "c", "/x", "c/", "%Missing%/x", "%Container%/x", "%%/x", "c/{", "c/}", "c/{a}{b}", "c/{rand-guid}", "c/{DateTime}",
            "c/{sys.utcnow}", "c/{sys.randguid}", "$logs/x", "a--b/x", "ab/x", "abc/{name}.{ext}", "abc/{name}.{ext}.{x}", "abc/{{x}}", "abc/" + new string('x', 1100),
            "abc/{name:int}", "abc/{data.x}", "abc/{}", "abc/{ }", "abc/%", "abc/{name}/../../x",
        ],
        ["dataType"] = ["binary", "string", "stream", "", "BINARY", "json"],
        ["scriptFile"] = ["__init__.py", "../../../etc/passwd", "/etc/passwd", "", "x\0y", "sub/../__init__.py", "nope.py", "\u0000", "C:\\x.py"],
        ["entryPoint"] = ["main", "", "no_such", "x.y", "\0"],
        ["disabled"] = ["true", "false", "True", "1", "yes"],
        ["connection"] = ["AzureWebJobsStorage", "", "Missing", "Container", "%x%"],
        ["version"] = ["2.0", "1.0", "3.0", "", "2"],
        ["functionTimeout"] = [
            "00:05:00", "-00:00:01", "00:00:00", "00:00:00.0000001", "10675199.02:48:05.4775807", "99999.00:00:00", "49.17:02:47.295", "49.17:02:47.296",
            "1", "abc", "24:00:00", "23:59:59.9999999", "1.00:00:00", "-1", "365.00:00:00",
        ],
        ["routePrefix"] = ["api", "", "/", "{x}", "{x:regex(a)}", "a b", "%", "{*all}", "api/{", "..", "ü"],
        ["pollingInterval"] = ["00:00:02", "00:00:00.05", "00:00:00.049", "10675199.02:48:05.4775807", "99999.00:00:00", "-00:00:01", "x"],
        ["maxDegreeOfParallelism"] = ["\u0001raw:1", "\u0001raw:0", "\u0001raw:-1", "\u0001raw:2147483647", "\u0001raw:1e3", "8"],
        ["maxDequeueCount"] = ["\u0001raw:1", "\u0001raw:0", "\u0001raw:2147483648", "\u0001raw:5.5"],
        ["functions"] = ["F", "G", "f", "", "nope"],
        ["IsEncrypted"] = ["\u0001raw:true", "\u0001raw:false", "true"],
        ["FUNCTIONS_WORKER_RUNTIME"] = ["python", "node", "Python ", "java", "", "dotnet-isolated", "\u0001raw:1"],
        ["AzureWebJobsStorage"] = [
            "UseDevelopmentStorage=true", "UseDevelopmentStorage=false", "", "garbage", "=", ";;;", "AccountName=;AccountKey=",
            "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=not-base64!;BlobEndpoint=http://127.0.0.1:1/devstoreaccount1",
            "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;BlobEndpoint=http://127.0.0.1:1/devstoreaccount1;",
            "BlobEndpoint=http://127.0.0.1:1/a;SharedAccessSignature=sv=2020&sig=x", "BlobEndpoint=ftp://127.0.0.1/x;AccountName=a;AccountKey=AAAA",
            "BlobEndpoint=not a uri;AccountName=a;AccountKey=AAAA", "AccountName=a;AccountKey=AAAA;EndpointSuffix=", "DefaultEndpointsProtocol=gopher;AccountName=a;AccountKey=AAAA",
            "AccountName=a;AccountKey=AAAA;BlobEndpoint=http://[::1", "AccountKey=AAAA", "BlobEndpoint=http://127.0.0.1:99999/a;AccountName=a;AccountKey=AAAA",
        ],
        ["FUNCTIONS_WORKER_PROCESS_COUNT"] = ["1", "0", "-1", "65", "99999999999", "x"],
        ["FUNCTIONS_REQUEST_BODY_SIZE_LIMIT"] = ["1", "0", "-1", "9223372036854775807", "9223372036854775808", "x"],
        ["LocalHttpPort"] = ["\u0001raw:7071", "\u0001raw:0", "\u0001raw:65536", "\u0001raw:-1", "\u0001raw:7071.5", "7071"],
        ["memoryLimit"] = ["1GiB", "0", "-1", "1.5GB", "12 KB", "\u0001raw:1073741824", "9999999999999999999999", "1e3MiB", "1 EiB", "8EiB", "NaN", "1KiB"],
        ["cacheCapacity"] = ["512MiB", "0", "2GiB", "\u0001raw:-5", "1B"],
        ["headroom"] = ["\u0001raw:0.1", "\u0001raw:0", "\u0001raw:1", "\u0001raw:-0.5", "\u0001raw:1e-300", "0.1"],
        ["policy"] = ["lru", "size-aware", "LRU", "fifo", ""],
        ["sizeThreshold"] = ["12KiB", "0", "\u0001raw:1e20", "-1KiB"],
        ["ttl"] = ["00:10:00", "00:00:00", "-00:00:01", "10675199.02:48:05.4775807", "99999999.00:00:00", "1"],
        ["doNotCache"] = ["logs/**", "**", "*", "", "a/[", "a/{b,c}", "a/***", "/", "\\", "a//b", "***/**"],
        ["consistency"] = ["storage/sync/storage", "owner/sync/owner", "owner/async/owner", "owner/sync/local", "local/sync/local", "local/async/local", "local/async/storage", "x/y", "", "//"],
        ["inlineThreshold"] = ["64KiB", "0", "1", "2GiB", "\u0001raw:-1"],
        ["memoryDaemonInterval"] = ["00:00:00.5", "00:00:00", "10675199.02:48:05.4775807", "00:00:00.0000001", "-00:00:01"],
        ["peerTimeout"] = ["00:00:05", "00:00:00", "10675199.02:48:05.4775807", "99999.00:00:00"],
        ["peerFetchTimeout"] = ["00:05:00", "00:00:00", "10675199.02:48:05.4775807"],
        ["enabled"] = ["\u0001raw:true", "\u0001raw:false", "true", "\u0001raw:1"],
        ["minInstances"] = ["\u0001raw:1", "\u0001raw:0", "\u0001raw:9", "\u0001raw:64", "\u0001raw:65", "\u0001raw:1.5", "\u0001raw:1e40", "2"],
        ["maxInstances"] = ["\u0001raw:8", "\u0001raw:0", "\u0001raw:1", "\u0001raw:64", "\u0001raw:65", "\u0001raw:-1", "\u0001raw:2147483648"],
        ["scaleInRounds"] = ["\u0001raw:3", "\u0001raw:0", "\u0001raw:1000", "\u0001raw:1001"],
        ["maxQueueLength"] = ["\u0001raw:1000", "\u0001raw:0", "\u0001raw:1000000", "\u0001raw:1000001"],
        ["interval"] = ["00:00:01", "00:00:00", "00:00:00.1", "00:00:00.0999999", "00:01:00.0000001", "10675199.02:48:05.4775807"],
        ["keepAlive"] = ["00:10:00", "00:00:00", "30.00:00:00", "30.00:00:00.0000001", "10675199.02:48:05.4775807"],
        ["queueTimeout"] = ["00:00:30", "00:00:00", "00:10:00", "99999.00:00:00"],
        ["scaleOutCooldown"] = ["00:00:05", "00:00:00", "-00:00:01", "01:00:00.0000001"],
        ["scaleInCooldown"] = ["00:00:30", "00:00:00", "1.00:00:00.0000001"],
        ["low"] = ["\u0001raw:0.6", "\u0001raw:0", "\u0001raw:0.8", "\u0001raw:1", "\u0001raw:1e-300", "\u0001raw:-0.1"],
        ["high"] = ["\u0001raw:0.8", "\u0001raw:0.6", "\u0001raw:1", "\u0001raw:1.0000001", "\u0001raw:0"],
        ["rareAccessesPerSecond"] = ["\u0001raw:1.0", "\u0001raw:0", "\u0001raw:-1", "\u0001raw:1000000", "\u0001raw:1e300"],
        ["minObjectSize"] = ["64MiB", "0", "1B", "\u0001raw:-1"],
    };

    public ConfigFuzzer(string? workDirectory = null)
    {
        _root = Path.Combine(workDirectory ?? Path.GetTempPath(), "faast-fuzz-" + Guid.NewGuid().ToString("N")[..10]);
        _app = Path.Combine(_root, "fuzzapp");
        Directory.CreateDirectory(Path.Combine(_app, "F"));
        Directory.CreateDirectory(Path.Combine(_app, "G"));
        File.WriteAllText(Path.Combine(_app, "F", "__init__.py"), "def main(req): pass\n");
        File.WriteAllText(Path.Combine(_app, "G", "__init__.py"), "def main(req): pass\n");
        ResetFiles();
    }

    /// <summary>The seed documents each target mutates.</summary>
    public static string[] SeedsFor(string target) => target switch
    {
        "function.json" => [ValidFunctionJson, ValidBlobTriggerJson],
        "host.json" => [ValidHostJson, """{ "version": "2.0" }"""],
        "local.settings.json" => [ValidSettingsJson],
        "faast.json" => [ValidFaastJson, """{ "cache": { "enabled": false } }"""],
        _ => throw new ArgumentException($"unknown config target {target}", nameof(target)),
    };

    /// <summary>The i-th input of a run: a function of (seed, target, i) only, so one input reproduces alone.</summary>
    public static byte[] Input(string target, int seed, long index)
    {
        var random = new Random(FuzzRun.Mix(seed, StableHash(target), index));
        var seeds = SeedsFor(target);
        return new JsonMutator(random, Values).Mutate(seeds[random.Next(seeds.Length)]);
    }

    public static int StableHash(string s)
    {
        var h = 17;
        foreach (var c in s)
            h = unchecked(h * 31 + c);
        return h;
    }

    private void ResetFiles()
    {
        File.WriteAllText(Path.Combine(_app, "host.json"), ValidHostJson);
        File.WriteAllText(Path.Combine(_app, "local.settings.json"), ValidSettingsJson);
        File.WriteAllText(Path.Combine(_app, "F", "function.json"), ValidFunctionJson);
        File.WriteAllText(Path.Combine(_app, "G", "function.json"), ValidBlobTriggerJson);
        File.Delete(Path.Combine(_app, "faast.json"));
    }

    public string PathOf(string target) => target == "function.json" ? Path.Combine(_app, "F", "function.json") : Path.Combine(_app, target);

    /// <summary>Runs one input against one target.</summary>
    public Outcome Run(string target, byte[] input)
    {
        ResetFiles();
        var file = PathOf(target);
        File.WriteAllBytes(file, input);
        return target switch
        {
            "faast.json" => RunPolicy(file),
            _ => RunApp(target, file),
        };
    }

    private Outcome RunApp(string target, string file)
    {
        FunctionApp app;
        try
        {
            app = FunctionApp.Load(_app, _environment);
        }
        catch (AppConfigException e)
        {
            if (target == "function.json")
                return Outcome.Crash("a bad function.json refused the whole app (only that function should be disabled)", Shorten(e.Message));
            return e.Message.Contains(file, StringComparison.Ordinal) && e.Message.Length > file.Length + 4
                ? Outcome.Rejected
                : Outcome.Crash("the error does not name the file", Shorten(e.Message));
        }
        catch (Exception e)
        {
            return Outcome.Crash($"{target}: load threw", e);
        }
        try
        {
            return target switch
            {
                "function.json" => CheckFunction(app, file),
                "host.json" => CheckHost(app),
                _ => CheckSettings(app),
            };
        }
        catch (Exception e)
        {
            return Outcome.Crash($"{target}: accepted, then the host's use of it threw", e);
        }
    }

    private static Outcome CheckFunction(FunctionApp app, string file)
    {
        var f = app.Functions.SingleOrDefault(x => x.Name == "F");
        var g = app.Functions.SingleOrDefault(x => x.Name == "G");
        if (g is null || g.Error is not null)
            return Outcome.Crash("a bad function.json broke another function", g?.Error ?? "G missing");
        if (f is null)
            return Outcome.Crash("the function vanished instead of being disabled with a reason", "F missing");
        if (f.Error is { } error)
            return error.Contains(file, StringComparison.Ordinal) && error.Length > file.Length + 4
                ? Outcome.Rejected
                : Outcome.Crash("the function's error does not name its file", Shorten(error));
        if (f.Trigger?.Type == BindingMetadata.HttpTrigger)
        {
            var template = string.IsNullOrEmpty(app.Host.RoutePrefix) ? f.Trigger.Route! : $"{app.Host.RoutePrefix}/{f.Trigger.Route}";
            if (RouteProblem("/" + template) is { } problem)
                return Outcome.Crash($"function.json accepted a route the host cannot map: {problem.Kind}", $"route \"{f.Trigger.Route}\": {problem.Message}");
        }
        return Outcome.Accepted;
    }

    private static Outcome CheckHost(FunctionApp app)
    {
        var h = app.Host;
        if (h.FunctionTimeout != Timeout.InfiniteTimeSpan && (h.FunctionTimeout <= TimeSpan.Zero || h.FunctionTimeout > MaxTimer))
            return Outcome.Crash("host.json accepted a functionTimeout no timer can wait for", $"functionTimeout {h.FunctionTimeout}");
        if (h.BlobPollingInterval <= TimeSpan.Zero || h.BlobPollingInterval > MaxTimer)
            return Outcome.Crash("host.json accepted a pollingInterval no timer can wait for", $"pollingInterval {h.BlobPollingInterval}");
        if (RouteProblem("/" + (h.RoutePrefix.Length > 0 ? h.RoutePrefix + "/" : "") + "x") is { } problem)
            return Outcome.Crash($"host.json accepted a routePrefix the host cannot map: {problem.Kind}", $"routePrefix \"{h.RoutePrefix}\": {problem.Message}");
        return Outcome.Accepted;
    }

    private static Outcome CheckSettings(FunctionApp app)
    {
        var settings = app.Settings;
        if (StorageAccounts.NeedsDevelopmentStorage(settings))
            return Outcome.Accepted;
        // What the host does at start with the storage setting, in its order: derive the peer secret
        // from it (peers are on by default), then open the account.
        using var accounts = new StorageAccounts(settings, null);
        if (settings["FAAST_PEER_SECRET"] is not { Length: > 0 })
        {
            try
            {
                StorageConnectionString.Parse(accounts.ConnectionString("AzureWebJobsStorage")!).DeriveKey("faast-peer-v1");
            }
            catch (AppConfigException e)
            {
                return e.Message.Contains("AzureWebJobsStorage", StringComparison.Ordinal) ? Outcome.Rejected : Outcome.Crash("the storage error does not name the setting", Shorten(e.Message));
            }
        }
        try
        {
            accounts.Get("AzureWebJobsStorage");
        }
        catch (AppConfigException e)
        {
            return e.Message.Contains("AzureWebJobsStorage", StringComparison.Ordinal) ? Outcome.Rejected : Outcome.Crash("the storage error does not name the setting", Shorten(e.Message));
        }
        return Outcome.Accepted;
    }

    private Outcome RunPolicy(string file)
    {
        CachePolicy policy;
        try
        {
            policy = CachePolicyFile.Load(_app);
        }
        catch (PolicyFileException e)
        {
            return e.Message.Contains(file, StringComparison.Ordinal) ? Outcome.Rejected : Outcome.Crash("the error does not name the file", Shorten(e.Message));
        }
        catch (Exception e)
        {
            return Outcome.Crash("faast.json: load threw", e);
        }
        try
        {
            policy.WithMemoryCgroup(null, null, file, out _);
        }
        catch (PolicyFileException e)
        {
            return e.Message.Contains(file, StringComparison.Ordinal) ? Outcome.Rejected : Outcome.Crash("the error does not name the file", Shorten(e.Message));
        }
        catch (Exception e)
        {
            return Outcome.Crash("faast.json: accepted, then the host's use of it threw", e);
        }
        if (policy.Scale.MinInstances > policy.Scale.MaxInstances || policy.Scale.Band.Low >= policy.Scale.Band.High)
            return Outcome.Crash("faast.json accepted a scale section the controller cannot satisfy", $"{policy.Scale}");
        foreach (var (name, t) in new[]
        {
            ("memoryDaemonInterval", policy.MemoryDaemonInterval), ("peerTimeout", policy.PeerTimeout), ("peerFetchTimeout", policy.PeerFetchTimeout),
            ("scale.interval", policy.Scale.Interval), ("scale.keepAlive", policy.Scale.KeepAlive), ("scale.queueTimeout", policy.Scale.QueueTimeout),
        })
            if (t <= TimeSpan.Zero || t > MaxTimer)
                return Outcome.Crash($"faast.json accepted a {name} no timer can wait for", $"{name} {t}");
        return Outcome.Accepted;
    }

    /// <summary>Why the host could not map this route template (as its endpoint routing would), or null.</summary>
    public static (string Kind, string Message)? RouteProblem(string template)
    {
        try
        {
            var pattern = RoutePatternFactory.Parse(template);
            foreach (var parameter in pattern.Parameters)
                foreach (var policy in parameter.ParameterPolicies)
                    if (policy.Content is { } content && Constraints.ResolveConstraint(content) is null)
                        return ("unknown route constraint", $"the constraint \"{content}\" does not exist in the host");
            return null;
        }
        catch (Exception e)
        {
            return (e.GetType().Name, e.Message);
        }
    }

    private static string Shorten(string s) => s.Length > 600 ? s[..600] + "..." : s;

    public void Dispose()
    {
        try
        {
            Directory.Delete(_root, recursive: true);
        }
        catch (IOException)
        {
            // best effort
        }
    }

    /// <summary>A printable form of an input for reports: UTF-8 text if it is, else base64.</summary>
    public static string Printable(byte[] input)
    {
        try
        {
            var text = new UTF8Encoding(false, true).GetString(input);
            return text.Length > 2000 ? text[..2000] + $"... ({input.Length} bytes)" : text;
        }
        catch (DecoderFallbackException)
        {
            return "base64:" + Convert.ToBase64String(input.Length > 3000 ? input[..3000] : input);
        }
    }
}
