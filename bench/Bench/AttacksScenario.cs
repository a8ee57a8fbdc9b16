using System.Collections.Concurrent;
using System.Diagnostics;
using System.Globalization;
using System.IO.Compression;
using System.Net;
using System.Net.Http.Headers;
using System.Security.Cryptography;
using System.Text;
using System.Text.Json;
using System.Text.Json.Nodes;
using System.Text.RegularExpressions;
using FaaST.ScaleController.Deploy;

namespace FaaST.Bench;

/// <summary>
/// ./faast bench attacks [--quick]: issue 19's attack run against a real platform process (as root, as the
/// README runs it) with two real tenants: bench/apps/attack-tenant (Python functions that attack from inside
/// their worker: environment, storage with every credential they find, files on disk, /dev/shm, the platform's
/// endpoints on 127.0.0.1) and bench/apps/victim-tenant (blob read/write, a secret in its settings, a secret
/// in a blob, a keyed function). A steady load on the victim runs throughout, and its failed requests are
/// counted. Each attack is an entry {name, tried, expected, observed, refused, logged}; the oracle is always what
/// actually happened (a status code, a secret found or not, a process alive or not), never what the code is
/// believed to do. Writes bench/results/attacks.json and prints a table. Goal: 0 attacks succeeded, 0 victim
/// requests failed.
/// </summary>
public static partial class AttacksScenario
{
    private const string Attacker = "attacker";
    private const string Victim = "victim";

    /// <summary>One attack's record.</summary>
    private sealed class Attack(string name, string tried, string expected, bool loggedByDesign)
    {
        public string Name { get; } = name;
        public string Tried { get; } = tried;
        public string Expected { get; } = expected;
        public bool LoggedByDesign { get; } = loggedByDesign;
        public string Observed { get; set; } = "";
        public bool Refused { get; set; }
        public bool Logged { get; set; }
        public string? Error { get; set; }
        public double Seconds { get; set; }
        public JsonObject Details { get; } = [];

        public JsonObject ToJson() => new()
        {
            ["name"] = Name,
            ["tried"] = Tried,
            ["expected"] = Expected,
            ["observed"] = Observed,
            ["refused"] = Error is null && Refused,
            ["succeeded"] = Error is null && !Refused,
            ["logged"] = Logged,
            ["logged_by_design"] = LoggedByDesign,
            ["error"] = Error,
            ["seconds"] = Math.Round(Seconds, 2),
            ["details"] = Details.DeepClone(),
        };
    }

    private sealed class Run
    {
        public required string Home { get; init; }
        public required string Work { get; init; }
        public required bool Quick { get; init; }
        public required PlatformProcess Platform { get; set; }
        public string? AdminKey { get; set; }
        public required string SettingsSecret { get; init; }
        public required string BlobSecret { get; init; }
        public Dictionary<string, string> Needles { get; } = new(StringComparer.Ordinal);
        public List<Attack> Attacks { get; } = [];
        public List<Process> Started { get; } = [];
        public List<HttpListener> Listeners { get; } = [];
        public HttpClient Http { get; } = new(new SocketsHttpHandler { UseCookies = false, AllowAutoRedirect = false }) { Timeout = TimeSpan.FromMinutes(6) };
        public JsonObject? AttackerEnv { get; set; }
        public JsonObject? AttackerStorage { get; set; }
        public JsonObject? AttackerFiles { get; set; }
    }

    public static async Task RunAsync(string home, bool quick)
    {
        var clock = Stopwatch.StartNew();
        if (!OperatingSystem.IsLinux())
            throw new PlatformNotSupportedException("the attack run needs Linux (/proc, /dev/shm, per-app users)");
        var root = Environment.UserName == "root" || File.ReadAllText("/proc/self/status").Contains("\nUid:\t0\t", StringComparison.Ordinal);
        if (!root)
            Console.WriteLine("attacks: not running as root: tenants cannot run as users of their own, so the results do not describe the platform as the README runs it");
        var work = Path.Combine(Path.GetTempPath(), $"faast-attacks-{Environment.ProcessId}");
        // 0711, as an operator's state folder's parents must be: each tenant's user passes through to its own extracted app
        // (the platform makes STATE/apps 0711 and each app 0750 root:faast-APP), and lists nothing here.
        Directory.CreateDirectory(work, UnixFileMode.UserRead | UnixFileMode.UserWrite | UnixFileMode.UserExecute | UnixFileMode.GroupExecute | UnixFileMode.OtherExecute);
        File.SetUnixFileMode(work, UnixFileMode.UserRead | UnixFileMode.UserWrite | UnixFileMode.UserExecute | UnixFileMode.GroupExecute | UnixFileMode.OtherExecute);
        var run = new Run
        {
            Home = home,
            Work = work,
            Quick = quick,
            Platform = new PlatformProcess(home, Path.Combine(work, "state")),
            SettingsSecret = "settings-secret-" + Convert.ToHexStringLower(RandomNumberGenerator.GetBytes(16)),
            BlobSecret = "blob-secret-" + Convert.ToHexStringLower(RandomNumberGenerator.GetBytes(16)),
        };
        using var load = new CancellationTokenSource();
        var victim = new VictimLoad(run, quick ? 1 : 2);
        try
        {
            await SetUpAsync(run);
            victim.Start(load.Token);
            await Task.Delay(quick ? 500 : 2000);
            await RunAttacksAsync(run);
            await victim.StopAsync(load);
            // Last: it restarts the platform, which is not an attack and which no tenant survives on one machine
            // (instances are tied to their platform), so the victim's load is over before it.
            await Try(run, "forged-instance-records", ForgedRecordsAsync);
        }
        catch (Exception e)
        {
            Console.WriteLine($"attacks: the run stopped early: {e}");
            run.Attacks.Add(new Attack("the attack run itself", "set up the platform and the tenants, run every attack", "completes", false)
            {
                Error = e.Message,
                Observed = e.GetType().Name + ": " + e.Message,
            });
        }
        finally
        {
            await victim.StopAsync(load);
            await CleanUpAsync(run);
        }
        Write(run, victim, clock.Elapsed);
    }

    // --- set-up --------------------------------------------------------------------------------------------

    private static async Task SetUpAsync(Run run)
    {
        Console.WriteLine($"attacks: starting a platform (state {run.Platform.State})");
        await run.Platform.StartAsync(TimeSpan.FromSeconds(180));
        // The contract: the platform writes STATE/keys/admin at start. A platform from before issue 19 has none:
        // the run then deploys without a key (and every attack on deploy will show it).
        for (var i = 0; i < 50 && run.Platform.AdminKey is null; i++)
            await Task.Delay(100);
        run.AdminKey = run.Platform.AdminKey;
        Console.WriteLine(run.AdminKey is null
            ? $"attacks: the platform wrote no admin key ({run.Platform.AdminKeyFile}); deploying without one"
            : $"attacks: admin key from {run.Platform.AdminKeyFile}");
        run.Needles["settings_secret"] = run.SettingsSecret;
        run.Needles["blob_secret"] = run.BlobSecret;
        if (run.AdminKey is not null)
            run.Needles["admin_key"] = run.AdminKey;
        var masterFile = Path.Combine(run.Platform.State, "keys", "master");
        if (File.Exists(masterFile))
            run.Needles["master_key"] = File.ReadAllText(masterFile).Trim();
        if (PlatformAccount(run) is { } account)
            run.Needles["platform_storage_key"] = account.Key;
        if (File.Exists(masterFile))
        {
            // Reads the existing keys (LoadOrCreate creates nothing when both files exist).
            var keys = ScaleController.Platform.PlatformKeys.LoadOrCreate(run.Platform.State);
            run.Needles["victim_peer_secret"] = keys.PeerSecretOf(Victim);
        }

        var apps = Path.Combine(run.Work, "apps");
        var attacker = CopyApp(Path.Combine(run.Home, "bench", "apps", "attack-tenant"), Path.Combine(apps, Attacker));
        var victim = CopyApp(Path.Combine(run.Home, "bench", "apps", "victim-tenant"), Path.Combine(apps, Victim));
        SetSetting(victim, "VICTIM_SECRET", run.SettingsSecret);
        foreach (var (name, dir) in new[] { (Attacker, attacker), (Victim, victim) })
        {
            var (status, body) = await DeployAsync(run, run.Platform.Address, name, Zip(dir), run.AdminKey);
            if (status is not (200 or 201))
                throw new InvalidOperationException($"deploying the tenant {name} with the admin key answered {status}: {body}\n{string.Join('\n', run.Platform.Lines.TakeLast(30))}");
            Console.WriteLine($"attacks: deployed {name}");
        }
        var (put, text) = await SendAsync(run, HttpMethod.Post, Url(run, $"{Victim}/api/write/secret.txt"), new StringContent(run.BlobSecret));
        if (put != 200)
            throw new InvalidOperationException($"the victim did not store its secret blob: {put} {text}");
        await SendAsync(run, HttpMethod.Post, Url(run, $"{Victim}/api/write/load.txt"), new StringContent("load"));
        // Read once, so the victim's cache holds the secret (what the /dev/shm attack looks for).
        var (get, read) = await SendAsync(run, HttpMethod.Get, Url(run, $"{Victim}/api/read/secret.txt"));
        if (get != 200 || read != run.BlobSecret)
            throw new InvalidOperationException($"the victim did not read its secret blob back: {get} {read}");
    }

    private static async Task RunAttacksAsync(Run run)
    {
        // Deploy and admin endpoints, from outside (a local user, a web page, the network).
        await Try(run, "deploy-unauthenticated-frontend", UnauthenticatedDeployAsync);
        await Try(run, "deploy-unauthenticated-control-port", UnauthenticatedControlDeployAsync);
        await Try(run, "deploy-wrong-key", WrongKeyDeployAsync);
        await Try(run, "deploy-under-victims-name", DeployUnderVictimsNameAsync);
        await Try(run, "deploy-cross-site", CrossSiteDeployAsync);
        await Try(run, "dns-rebinding-host-header", DnsRebindingAsync);
        await Try(run, "status-without-key", StatusWithoutKeyAsync);
        await Try(run, "not-found-lists-apps", NotFoundListingAsync);
        // The attacking tenant, from inside its worker.
        await Try(run, "tenant-worker-environment", AttackerEnvironmentAsync);
        await Try(run, "tenant-storage-credentials", AttackerStorageAsync);
        await Try(run, "tenant-reads-victim-blobs", r => FromStorageAsync(r, "tenant-reads-victim-blobs",
            "the attacker's function lists and reads every container of every storage account it can reach (each connection string in its environment and settings, the emulator's public key) on every Azurite listening on 127.0.0.1",
            "no credential the attacker holds reaches the victim's storage: the victim's secret blob is never read",
            rep => Found(rep, "blob_secret") is { } w ? $"read the victim's secret blob at {w}" : null));
        await Try(run, "tenant-reads-victim-function-keys", r => FromStorageAsync(r, "tenant-reads-victim-function-keys",
            "the same crawl, looking for the victim's keys document azure-webjobs-secrets/victim/host.json (master key)",
            "unreachable: keys live in the victim's own storage only",
            rep => Reached(rep, "/azure-webjobs-secrets/victim/") is { } w ? $"read the victim's keys document {w}" : null));
        await Try(run, "tenant-reads-victim-package-and-app-json", r => FromStorageAsync(r, "tenant-reads-victim-package-and-app-json",
            "the same crawl, looking for faast-deployments/victim/ (the victim's package and app.json)",
            "unreachable: faast-deployments is the platform's storage, never handed to an app",
            rep => Reached(rep, "/faast-deployments/victim/") is { } w ? $"read {w}" + (Found(rep, "settings_secret") is { } s ? $"; the victim's settings secret was in {s}" : "") : null));
        await Try(run, "tenant-deploys-through-loopback", TenantInsideDeployAsync);
        await Try(run, "tenant-finds-the-platform-state-folder", AttackerFilesAsync);
        await Try(run, "tenant-reads-victim-settings-on-disk", r => FromFilesAsync(r, "tenant-reads-victim-settings-on-disk",
            "the attacker's function finds the platform's state folder (its own path, the platform's command line) and reads STATE/apps/victim/** (local.settings.json and the code)",
            "refused by file modes: apps/ 0711, each app 0750 owned by root with the app user's group, settings stored apart",
            rep => FoundOutsideProc(rep, "settings_secret") is { } w ? $"read the victim's settings secret in {w}" : null));
        await Try(run, "tenant-reads-platform-keys-on-disk", r => FromFilesAsync(r, "tenant-reads-platform-keys-on-disk",
            "the attacker's function reads STATE/keys/admin, STATE/keys/master and STATE/azurite-account",
            "refused: keys/ is 0700, its files 0600, owned by the platform's user",
            rep => (FoundOutsideProc(rep, "admin_key") ?? FoundOutsideProc(rep, "master_key") ?? FoundOutsideProc(rep, "platform_storage_key")) is { } w ? $"read a platform key in {w}" : null));
        await Try(run, "tenant-reads-other-processes-environment", r => FromFilesAsync(r, "tenant-reads-other-processes-environment",
            "the attacker's function reads /proc/PID/environ and cmdline of every process (the platform, the victim's host and workers)",
            "refused: other tenants' and the platform's processes run as other users; no secret is on a command line",
            rep => (Found(rep, "settings_secret", "/proc/") ?? Found(rep, "admin_key", "/proc/") ?? Found(rep, "master_key", "/proc/")
                ?? Found(rep, "platform_storage_key", "/proc/") ?? Found(rep, "victim_peer_secret", "/proc/")) is { } w ? $"read a secret in {w}" : null));
        await Try(run, "tenant-reads-victim-cache", SharedMemoryAsync);
        await Try(run, "tenant-learns-victim-addresses", StatusFromInsideAsync);
        await Try(run, "tenant-calls-victim-peer-port", PeerCallAsync);
        // Deploys that must be refused whoever sends them.
        await Try(run, "scriptfile-escape", ScriptFileEscapeAsync);
        await Try(run, "deploy-oversized", OversizedDeployAsync);
        await Try(run, "deploy-zip-eocd-claims-millions", EocdBombAsync);
        await Try(run, "deploy-zip-over-entry-cap", ManyEntriesAsync);
        await Try(run, "broken-redeploy-under-load", BrokenRedeployAsync);
    }

    /// <summary>Runs one attack, timing it; an exception is the attack's error (neither refused nor succeeded).</summary>
    private static async Task Try(Run run, string name, Func<Run, Task<Attack>> attack)
    {
        // The platform logs refusals at most once a second (a flood of refusals must not flood its log; the lines held back
        // are counted in the next one): a second apart, each attack's refusal gets a line of its own to be found by.
        await Task.Delay(TimeSpan.FromSeconds(1.1));
        var clock = Stopwatch.StartNew();
        Attack result;
        try
        {
            result = await attack(run);
        }
        catch (Exception e)
        {
            result = new Attack(name, "(see the error)", "", false) { Error = $"{e.GetType().Name}: {e.Message}", Observed = "the attack could not be carried out: " + e.Message };
        }
        result.Seconds = clock.Elapsed.TotalSeconds;
        run.Attacks.Add(result);
        var verdict = result.Error is not null ? "ERROR" : result.Refused ? "refused" : "SUCCEEDED";
        Console.WriteLine($"attacks: {result.Name}: {verdict}{(result.Logged ? ", logged" : "")} ({result.Seconds:0.0} s): {Oneline(result.Observed, 200)}");
    }

    // --- deploy and admin endpoints ------------------------------------------------------------------------

    private static async Task<Attack> UnauthenticatedDeployAsync(Run run)
    {
        var a = new Attack("deploy-unauthenticated-frontend", "PUT /admin/platform/apps/intruder1 on the frontend port with a valid zip and no Authorization header",
            "401, nothing deployed, a log line", true);
        return await DeployAttackAsync(run, a, run.Platform.Address, "intruder1", null, []);
    }

    private static async Task<Attack> UnauthenticatedControlDeployAsync(Run run)
    {
        var a = new Attack("deploy-unauthenticated-control-port", "PUT /admin/platform/apps/intruder2 on the control port (HTTP/2 cleartext) with no Authorization header",
            "401 (or no deploy endpoint on the control port), nothing deployed", true);
        return await DeployAttackAsync(run, a, run.Platform.ControlAddress, "intruder2", null, [], http2: true);
    }

    private static async Task<Attack> WrongKeyDeployAsync(Run run)
    {
        var a = new Attack("deploy-wrong-key", "PUT /admin/platform/apps/intruder3 with Authorization: Bearer (a random key)", "403, nothing deployed, a log line", true);
        return await DeployAttackAsync(run, a, run.Platform.Address, "intruder3", PlatformKeysText(), []);
    }

    private static async Task<Attack> DeployUnderVictimsNameAsync(Run run)
    {
        // The attacker's own deploy key (derived from the master, as the platform would give it to the tenant), used for the victim's name.
        var masterFile = Path.Combine(run.Platform.State, "keys", "master");
        var key = File.Exists(masterFile) ? ScaleController.Platform.PlatformKeys.LoadOrCreate(run.Platform.State).DeployKeyOf(Attacker) : PlatformKeysText();
        var a = new Attack("deploy-under-victims-name", "PUT /admin/platform/apps/victim (a working copy of the victim without its secrets) with the ATTACKER's deploy key",
            "403 (the key is the attacker's app's, not the victim's), the victim keeps its version", true);
        a.Details["key"] = File.Exists(masterFile) ? "the attacker's deploy key (DeployKeyOf(attacker))" : "a random key (the platform has no master key)";
        var copy = CopyApp(Path.Combine(run.Home, "bench", "apps", "victim-tenant"), Path.Combine(run.Work, "apps-evil", Victim));
        SetSetting(copy, "VICTIM_SECRET", "replaced-by-the-attacker");
        return await DeployAttackAsync(run, a, run.Platform.Address, Victim, key, [], zip: Zip(copy));
    }

    private static async Task<Attack> CrossSiteDeployAsync(Run run)
    {
        var a = new Attack("deploy-cross-site", "POST /admin/platform/apps/intruder4 as a web page would: Origin: http://evil.example, Content-Type: text/plain, no key; "
            + "then the same with the admin key (intruder5) and with Sec-Fetch-Site: cross-site (intruder6), to check the origin check itself",
            "403 for every one, nothing deployed, a log line", true);
        var mark = run.Platform.Mark;
        var results = new List<string>();
        var any = false;
        foreach (var (app, key, headers) in new (string, string?, (string, string)[])[]
        {
            ("intruder4", null, [("Origin", "http://evil.example")]),
            ("intruder5", run.AdminKey, [("Origin", "http://evil.example")]),
            ("intruder6", run.AdminKey, [("Sec-Fetch-Site", "cross-site")]),
        })
        {
            var (status, body) = await DeployAsync(run, run.Platform.Address, app, IntruderZip(run), key, headers, HttpMethod.Post, "text/plain");
            results.Add($"{app}{(key is null ? "" : " (admin key)")}: {status}");
            any |= status is >= 200 and < 300;
            a.Details[app] = $"{status} {Oneline(body, 200)}";
        }
        a.Refused = !any;
        a.Observed = string.Join("; ", results);
        a.Logged = await LoggedAsync(run, mark, "intruder4", "intruder5", "intruder6", "origin", "cross-site");
        return a;
    }

    private static async Task<Attack> DnsRebindingAsync(Run run)
    {
        var a = new Attack("dns-rebinding-host-header", "GET /admin/platform and PUT /admin/platform/apps/intruder7 with Host: evil.example (a rebound name reaching 127.0.0.1) and the admin key",
            "403 for both (non-loopback Host on admin endpoints)", true);
        var mark = run.Platform.Mark;
        var host = $"evil.example:{run.Platform.Port}";
        var (status, body) = await SendAsync(run, HttpMethod.Get, new Uri(run.Platform.Address, "admin/platform"), null, run.AdminKey, [("Host", host)]);
        var (deploy, deployBody) = await DeployAsync(run, run.Platform.Address, "intruder7", IntruderZip(run), run.AdminKey, [("Host", host)]);
        a.Details["status"] = $"{status} {Oneline(body, 200)}";
        a.Details["deploy"] = $"{deploy} {Oneline(deployBody, 200)}";
        a.Refused = status is not (>= 200 and < 300) && deploy is not (>= 200 and < 300);
        a.Observed = $"GET /admin/platform: {status}; deploy: {deploy}";
        a.Logged = await LoggedAsync(run, mark, "evil.example", "intruder7", "host");
        return a;
    }

    private static async Task<Attack> StatusWithoutKeyAsync(Run run)
    {
        var a = new Attack("status-without-key", "GET /admin/platform with no key", "401; apps, pids, ports and ids stay private", true);
        var mark = run.Platform.Mark;
        var (status, body) = await SendAsync(run, HttpMethod.Get, new Uri(run.Platform.Address, "admin/platform"));
        a.Refused = status is not (>= 200 and < 300);
        a.Observed = $"{status}: {Oneline(body, 160)}";
        a.Details["lists_the_victim"] = body.Contains(Victim, StringComparison.Ordinal);
        a.Logged = await LoggedAsync(run, mark, "/admin/platform", "status");
        return a;
    }

    private static async Task<Attack> NotFoundListingAsync(Run run)
    {
        var a = new Attack("not-found-lists-apps", "GET /no-such-app/x with no key (an unknown app's 404)", "404 that names no other app", false);
        var (status, body) = await SendAsync(run, HttpMethod.Get, new Uri(run.Platform.Address, "no-such-app/x"));
        var leaks = body.Contains(Victim, StringComparison.Ordinal) || body.Contains(Attacker, StringComparison.Ordinal);
        a.Refused = !leaks;
        a.Observed = $"{status}: {Oneline(body, 200)}";
        return a;
    }

    private static async Task<Attack> DeployAttackAsync(Run run, Attack a, Uri platform, string app, string? key, (string, string)[] headers, bool http2 = false, byte[]? zip = null)
    {
        var mark = run.Platform.Mark;
        var before = await VersionOfAsync(run, app);
        var (status, body) = await DeployAsync(run, platform, app, zip ?? IntruderZip(run), key, headers, http2: http2);
        var after = await VersionOfAsync(run, app);
        a.Refused = status is not (>= 200 and < 300);
        a.Observed = $"{status}: {Oneline(body, 160)}" + (before != after ? $" (the app's version went from {before?.ToString(CultureInfo.InvariantCulture) ?? "none"} to {after})" : "");
        a.Details["status"] = status;
        a.Details["version_before"] = before;
        a.Details["version_after"] = after;
        a.Logged = await LoggedAsync(run, mark, app);
        return a;
    }

    // --- the attacking tenant --------------------------------------------------------------------------------

    private static async Task<JsonObject> ProbeAsync(Run run, JsonObject args)
    {
        args["needles"] = new JsonObject(run.Needles.Select(n => KeyValuePair.Create(n.Key, (JsonNode?)n.Value)));
        var (status, body) = await SendAsync(run, HttpMethod.Post, Url(run, $"{Attacker}/api/probe"),
            new StringContent(args.ToJsonString(), Encoding.UTF8, "application/json"));
        if (status != 200)
            throw new InvalidOperationException($"the attacker's probe ({args["op"]}) answered {status}: {Oneline(body, 300)}");
        return JsonNode.Parse(body)!.AsObject();
    }

    private static async Task<Attack> AttackerEnvironmentAsync(Run run)
    {
        var a = new Attack("tenant-worker-environment", "the attacker's function reads its own environment and identity (uid)",
            "an allow-listed environment: no platform storage key, no peer secret, no FAAST_DEVELOPMENT_STORAGE, no other tenant's secret; its own uid, not root", false);
        var rep = run.AttackerEnv = await ProbeAsync(run, new JsonObject { ["op"] = "env" });
        var env = rep["env"]?.AsObject() ?? [];
        var forbidden = new[] { "FAAST_PEER_SECRET", "FAAST_DEVELOPMENT_STORAGE", "FAAST_SCALE_CONTROLLER", "FAAST_ADMIN_KEY" }.Where(env.ContainsKey).ToArray();
        var found = rep["found"]?.AsObject().Select(p => p.Key).ToArray() ?? [];
        var uid = rep["uid"]?.GetValue<int>() ?? -1;
        a.Details["uid"] = uid;
        a.Details["variables"] = new JsonArray(env.Select(p => p.Key).Order(StringComparer.Ordinal).Select(k => (JsonNode?)k).ToArray());
        a.Details["secrets_found"] = new JsonArray(found.Select(f => (JsonNode?)f).ToArray());
        var problems = new List<string>();
        if (forbidden.Length > 0)
            problems.Add("holds " + string.Join(", ", forbidden));
        if (found.Length > 0)
            problems.Add("holds the secret(s) " + string.Join(", ", found));
        if (uid == 0)
            problems.Add("runs as root");
        a.Refused = problems.Count == 0;
        a.Observed = problems.Count == 0 ? $"uid {uid}; {env.Count} variables, none of them a secret of the platform or another tenant" : string.Join("; ", problems);
        return a;
    }

    private static async Task<Attack> AttackerStorageAsync(Run run)
    {
        var a = new Attack("tenant-storage-credentials", "the attacker's function collects every storage credential it can find and tries each on every Azurite on 127.0.0.1",
            "only its own account answers", false);
        var rep = run.AttackerStorage = await ProbeAsync(run, new JsonObject { ["op"] = "storage" });
        var reached = rep["reached"]?.AsArray().Select(r => r!.GetValue<string>()).Where(r => r.Contains("containers [", StringComparison.Ordinal)).ToArray() ?? [];
        a.Details["credentials"] = rep["credentials"]?.DeepClone();
        a.Details["azurite_ports"] = rep["azurite_ports"]?.DeepClone();
        a.Details["accounts_reached"] = new JsonArray(reached.Select(r => (JsonNode?)r).ToArray());
        var foreign = reached.Where(r => r.Contains("faast-deployments", StringComparison.Ordinal) || r.Contains("victim-data", StringComparison.Ordinal)).ToArray();
        a.Refused = foreign.Length == 0;
        a.Observed = foreign.Length == 0
            ? $"{reached.Length} account(s) answered, none holding the platform's deployments or the victim's data"
            : "reached " + string.Join("; ", foreign.Select(f => Oneline(f, 160)));
        return a;
    }

    private static async Task<Attack> FromStorageAsync(Run run, string name, string tried, string expected, Func<JsonObject, string?> success)
    {
        var a = new Attack(name, tried, expected, false);
        var rep = run.AttackerStorage ?? await ProbeAsync(run, new JsonObject { ["op"] = "storage" });
        var s = success(rep);
        a.Refused = s is null;
        a.Observed = s ?? "not reached with any credential the attacker holds";
        return a;
    }

    private static async Task<Attack> AttackerFilesAsync(Run run)
    {
        var a = new Attack("tenant-finds-the-platform-state-folder", "the attacker's function looks for the platform's state folder (its own path, the platform's --state) and lists STATE/apps",
            "it may learn the path; listing apps/ is refused (0711)", false);
        var rep = run.AttackerFiles = await ProbeAsync(run, new JsonObject { ["op"] = "files", ["victim"] = Victim });
        a.Details["state_directories"] = rep["state_directories"]?.DeepClone();
        a.Details["apps_listing"] = rep["apps_listing"]?.DeepClone();
        a.Refused = rep["apps_listing"] is null;
        a.Observed = rep["apps_listing"] is { } listing ? $"listed STATE/apps: {listing.ToJsonString()}" : "could not list STATE/apps";
        return a;
    }

    private static async Task<Attack> FromFilesAsync(Run run, string name, string tried, string expected, Func<JsonObject, string?> success)
    {
        var a = new Attack(name, tried, expected, false);
        var rep = run.AttackerFiles ?? await ProbeAsync(run, new JsonObject { ["op"] = "files", ["victim"] = Victim });
        var s = success(rep);
        a.Refused = s is null;
        var errors = rep["errors"]?.AsArray().Select(e => e!.GetValue<string>()).Take(3) ?? [];
        a.Observed = s ?? "not read; first errors: " + string.Join("; ", errors);
        return a;
    }

    private static async Task<Attack> SharedMemoryAsync(Run run)
    {
        var a = new Attack("tenant-reads-victim-cache", "the attacker's function reads every file under /dev/shm (the cachelets' arenas), looking for the victim's cached secret blob",
            "refused: each arena is a 0700 folder of 0600 files owned by its app's user", false);
        var rep = await ProbeAsync(run, new JsonObject { ["op"] = "shm" });
        var reached = rep["reached"]?.AsArray().Count ?? 0;
        a.Details["files_read"] = reached;
        var s = Found(rep, "blob_secret");
        a.Refused = s is null;
        a.Observed = s is null ? $"the victim's secret was in none of the {reached} /dev/shm file(s) the attacker could read" : $"read the victim's cached secret in {s}";
        return a;
    }

    private static async Task<Attack> StatusFromInsideAsync(Run run)
    {
        var a = new Attack("tenant-learns-victim-addresses", "the attacker's function GETs the platform's /admin/platform on 127.0.0.1 (no key) for the victim's instance and peer addresses",
            "401: no address of another tenant", true);
        var mark = run.Platform.Mark;
        var rep = await ProbeAsync(run, new JsonObject { ["op"] = "http", ["url"] = new Uri(run.Platform.Address, "admin/platform").ToString() });
        var body = rep["body"]?.GetValue<string>() ?? "";
        var status = rep["status"]?.GetValue<int>() ?? 0;
        var peer = PeerAddresses(body, Victim).FirstOrDefault();
        a.Details["status"] = status;
        a.Details["victim_peer_address"] = peer;
        var exposed = InstanceFields(body, Victim);
        a.Details["victim_instance_fields_shown"] = new JsonArray(exposed.Select(f => (JsonNode?)f).ToArray());
        a.Refused = peer is null && exposed.Count == 0;
        a.Observed = a.Refused ? $"{status}: no address of the victim" : $"{status}: the victim's instances are listed with {string.Join(", ", exposed)}{(peer is null ? "" : $" (peer {peer})")}";
        a.Logged = await LoggedAsync(run, mark, "/admin/platform");
        return a;
    }

    private static async Task<Attack> PeerCallAsync(Run run)
    {
        var a = new Attack("tenant-calls-victim-peer-port", "a signed Stats call to the victim's peer port with every peer secret the attacker holds (FAAST_PEER_SECRET in its environment, any read in other processes' environments, a guess), the victim's peer address taken from the platform's status (as a port scan would find it)",
            "UNAUTHENTICATED: each app has its own peer secret (HKDF of the master) and workers hold none", false);
        var env = (run.AttackerEnv ?? await ProbeAsync(run, new JsonObject { ["op"] = "env" }))["env"]?.AsObject();
        var secret = env?["FAAST_PEER_SECRET"]?.GetValue<string>();
        var peer = await VictimPeerAddressAsync(run);
        a.Details["attacker_holds_a_peer_secret"] = secret is not null;
        a.Details["victim_peer_address"] = peer?.ToString();
        if (peer is null)
        {
            a.Refused = true;
            a.Observed = "the victim serves no peer port (or the status does not show it)";
            return a;
        }
        var tries = new List<(string What, string Secret)>();
        if (secret is not null)
            tries.Add(("the attacker's FAAST_PEER_SECRET", secret));
        // Peer secrets the attacker could read in other processes' environments (the files attack).
        var read = (run.AttackerFiles ?? await ProbeAsync(run, new JsonObject { ["op"] = "files", ["victim"] = Victim }))["peer_secrets"]?.AsArray()
            .Select(n => n!.GetValue<string>()).Where(v => v.Length > 0 && v != secret).Distinct(StringComparer.Ordinal).ToArray() ?? [];
        foreach (var s in read)
            tries.Add(("a FAAST_PEER_SECRET read from another process's /proc/PID/environ", s));
        a.Details["peer_secrets_read_from_other_processes"] = read.Length;
        tries.Add(("a guessed secret", "faast"));
        var results = new List<string>();
        var ok = false;
        using var grpc = new Fuzz.RawGrpc();
        foreach (var (what, s) in tries)
        {
            Peers.PeerAuth auth;
            try
            {
                auth = new Peers.PeerAuth(Encoding.UTF8.GetBytes(s), Victim);
            }
            catch (ArgumentException e)
            {
                results.Add($"{what}: not usable ({e.Message})");
                continue;
            }
            var reply = await grpc.CallAsync(peer, "/faast.peer.v1.CacheletPeer/Stats", Fuzz.RawGrpc.Frame(new Protos.Peer.StatsRequest()),
                auth.SignCall("/faast.peer.v1.CacheletPeer/Stats"), "application/grpc", TimeSpan.FromSeconds(20));
            var answered = reply.GrpcStatus == 0 && reply.HttpStatus == 200;
            ok |= answered;
            results.Add($"{what}: {(answered ? "answered (grpc-status 0)" : $"grpc-status {reply.GrpcStatus?.ToString(CultureInfo.InvariantCulture) ?? "none"} {reply.GrpcMessage ?? reply.Failure}")}");
        }
        a.Refused = !ok;
        a.Observed = string.Join("; ", results);
        return a;
    }

    private static async Task<Attack> TenantInsideDeployAsync(Run run)
    {
        var a = new Attack("tenant-deploys-through-loopback", "the attacker's function PUTs a zip to http://127.0.0.1:PORT/admin/platform/apps/intruder8 (no key), as any tenant's code can",
            "401, nothing deployed, a log line", true);
        var mark = run.Platform.Mark;
        var rep = await ProbeAsync(run, new JsonObject
        {
            ["op"] = "http",
            ["method"] = "PUT",
            ["url"] = new Uri(run.Platform.Address, "admin/platform/apps/intruder8").ToString(),
            ["body"] = Convert.ToBase64String(IntruderZip(run)),
            ["headers"] = new JsonObject { ["Content-Type"] = "application/zip" },
        });
        var status = rep["status"]?.GetValue<int>() ?? 0;
        a.Refused = status is not (>= 200 and < 300);
        a.Observed = $"{status}: {Oneline(rep["body"]?.GetValue<string>() ?? "", 160)}";
        a.Logged = await LoggedAsync(run, mark, "intruder8");
        return a;
    }

    // --- deploys every platform must refuse ----------------------------------------------------------------

    private static async Task<Attack> ScriptFileEscapeAsync(Run run)
    {
        var a = new Attack("scriptfile-escape", "deploy (admin key) an app whose function Escape names \"scriptFile\": \"/etc/shadow\", then ask its WhoAmI function for its uid",
            "400 naming the function.json and scriptFile; if it ever deployed, no worker runs as root", true);
        var mark = run.Platform.Mark;
        var dir = CopyApp(Path.Combine(run.Home, "bench", "apps", "escape-tenant"), Path.Combine(run.Work, "apps", "escape"));
        var (status, body) = await DeployAsync(run, run.Platform.Address, "escape", Zip(dir), run.AdminKey);
        a.Details["status"] = status;
        a.Logged = await LoggedAsync(run, mark, "escape", "scriptFile", "shadow");
        if (status is not (>= 200 and < 300))
        {
            a.Refused = true;
            a.Observed = $"{status}: {Oneline(body, 200)}";
            return a;
        }
        var (who, text) = await SendAsync(run, HttpMethod.Get, Url(run, "escape/api/whoami"));
        a.Details["whoami"] = $"{who} {text}";
        a.Refused = false;
        a.Observed = $"deployed ({status}); WhoAmI answered {who} {Oneline(text, 100)}" + (text.Contains("\"uid\": 0,", StringComparison.Ordinal) ? ": the app's workers run as ROOT" : "");
        return a;
    }

    private static async Task<Attack> OversizedDeployAsync(Run run)
    {
        var size = run.Quick ? 512L << 20 : 2L << 30;
        var a = new Attack("deploy-oversized", $"PUT /admin/platform/apps/intruder9 (admin key) with a {size >> 20} MiB body streamed from memory",
            "413 well before the end of the body (the size cap), nothing written beyond the cap", true);
        var mark = run.Platform.Mark;
        var content = new CountingContent(size);
        int status;
        string body;
        try
        {
            (status, body) = await SendAsync(run, HttpMethod.Put, new Uri(run.Platform.Address, "admin/platform/apps/intruder9"), content, run.AdminKey);
        }
        catch (HttpRequestException e)
        {
            (status, body) = (0, "connection closed: " + e.Message);
        }
        var sent = content.Sent;
        a.Details["status"] = status;
        a.Details["bytes_sent"] = sent;
        a.Details["bytes_offered"] = size;
        a.Refused = status == 413 || (status == 0 && sent < size);
        a.Observed = $"{(status == 0 ? "no status" : status.ToString(CultureInfo.InvariantCulture))} after {sent >> 20} of {size >> 20} MiB: {Oneline(body, 160)}";
        a.Logged = await LoggedAsync(run, mark, "intruder9", "413", "too large", "size");
        return a;
    }

    private static async Task<Attack> EocdBombAsync(Run run)
    {
        var a = new Attack("deploy-zip-eocd-claims-millions", "PUT (admin key) a 200-byte zip whose ZIP64 end-of-central-directory record claims 50,000,000 entries and a 1 TiB central directory",
            "400 at once (the entry count read from the EOCD first), no memory growth", true);
        var mark = run.Platform.Mark;
        var rssBefore = Rss(run.Platform.Process);
        var clock = Stopwatch.StartNew();
        var (status, body) = await DeployAsync(run, run.Platform.Address, "intruder10", EocdBomb(), run.AdminKey);
        var seconds = clock.Elapsed.TotalSeconds;
        var rssAfter = Rss(run.Platform.Process);
        var growth = (rssAfter - rssBefore) / (1024.0 * 1024);
        a.Details["status"] = status;
        a.Details["seconds"] = Math.Round(seconds, 2);
        a.Details["platform_rss_growth_mib"] = Math.Round(growth, 1);
        var alive = run.Platform.Process is { HasExited: false };
        a.Refused = status is >= 400 and < 500 && seconds < 10 && growth < 512 && alive;
        a.Observed = $"{status} in {seconds:0.00} s, platform RSS {growth:+0;-0} MiB{(alive ? "" : ", the platform EXITED")}: {Oneline(body, 160)}";
        a.Logged = await LoggedAsync(run, mark, "intruder10", "entries", "zip");
        return a;
    }

    private static async Task<Attack> ManyEntriesAsync(Run run)
    {
        // One entry over the platform's cap (DeployOptions.MaxEntries, 100,000 by default): a real zip, so the count in its
        // end record is true and the refusal must come from the cap, not from a malformed archive.
        var entries = DeployOptions.Default.MaxEntries + 1;
        var a = new Attack("deploy-zip-over-entry-cap", $"PUT (admin key) a real zip of {entries:N0} empty files (a few MB)",
            "400 naming the entry limit, before any extraction", true);
        var mark = run.Platform.Mark;
        using var zip = new MemoryStream();
        using (var archive = new ZipArchive(zip, ZipArchiveMode.Create, leaveOpen: true))
        {
            // A working app (the entry count is then the only thing wrong with it) plus empty files.
            foreach (var file in new[] { "host.json", "local.settings.json", "WhoAmI/function.json", "WhoAmI/__init__.py" })
                using (var s = archive.CreateEntry(file).Open())
                    s.Write(File.ReadAllBytes(Path.Combine(run.Home, "bench", "apps", "escape-tenant", file)));
            for (var i = 0; i < entries - 4; i++)
                archive.CreateEntry($"junk/{i:x}", CompressionLevel.NoCompression);
        }
        var clock = Stopwatch.StartNew();
        var (status, body) = await DeployAsync(run, run.Platform.Address, "intruder11", zip.ToArray(), run.AdminKey);
        a.Details["status"] = status;
        a.Details["seconds"] = Math.Round(clock.Elapsed.TotalSeconds, 2);
        a.Refused = status is not (>= 200 and < 300);
        a.Observed = $"{status} in {clock.Elapsed.TotalSeconds:0.00} s: {Oneline(body, 160)}";
        a.Logged = await LoggedAsync(run, mark, "intruder11", "entries");
        return a;
    }

    private static async Task<Attack> BrokenRedeployAsync(Run run)
    {
        var a = new Attack("broken-redeploy-under-load", "redeploy the victim (admin key) with a version whose instances cannot start (AzureWebJobsSecretStorageType \"bogus\", checked by the host at start) while its load runs",
            "the deploy fails with the instance's own error (or is refused at deploy), the previous version keeps serving: 0 failed requests", true);
        var mark = run.Platform.Mark;
        var failedBefore = VictimLoad.Current?.Failed ?? 0;
        var before = await VersionOfAsync(run, Victim);
        var dir = CopyApp(Path.Combine(run.Home, "bench", "apps", "victim-tenant"), Path.Combine(run.Work, "apps-broken", Victim));
        SetSetting(dir, "VICTIM_SECRET", run.SettingsSecret);
        SetSetting(dir, "AzureWebJobsSecretStorageType", "bogus");
        var (status, body) = await DeployAsync(run, run.Platform.Address, Victim, Zip(dir), run.AdminKey);
        // A rollout that went wrong shows within seconds: the old instances drain, the new ones do not start.
        var served = 0;
        for (var i = 0; i < (run.Quick ? 10 : 30); i++)
        {
            var (s, t) = await SendAsync(run, HttpMethod.Get, Url(run, $"{Victim}/api/read/load.txt"));
            served += s == 200 && t == "load" ? 1 : 0;
            await Task.Delay(250);
        }
        var after = await VersionOfAsync(run, Victim);
        var failed = (VictimLoad.Current?.Failed ?? 0) - failedBefore;
        a.Details["status"] = status;
        a.Details["version_before"] = before;
        a.Details["version_after"] = after;
        a.Details["victim_failed_during"] = failed;
        a.Refused = status is not (>= 200 and < 300) && failed == 0 && served == (run.Quick ? 10 : 30);
        a.Observed = $"deploy {status} ({Oneline(body, 140)}); the victim's load failed {failed} request(s) meanwhile; {served}/{(run.Quick ? 10 : 30)} checks after it served the old data";
        a.Logged = await LoggedAsync(run, mark, Victim, "bogus", "AzureWebJobsSecretStorageType");
        return a;
    }

    // --- forged instance records (restarts the platform) --------------------------------------------------

    private static async Task<Attack> ForgedRecordsAsync(Run run)
    {
        var a = new Attack("forged-instance-records", "instance records for the victim written into faast-deployments/victim/instances/: one of the current version pointing at an attacker's server "
            + "(adoption would send it the victim's traffic) and one of an older version naming a process the bench started (a `sleep`; a cleanup would kill it); "
            + "written by the attacker's function with every credential it holds, and (a storage leak) by the bench with the platform's own storage key; then the platform is restarted",
            "the attacker cannot write the records; records written with the platform's key but unsigned are refused and logged: nothing adopted, nothing killed", true);
        var version = await VersionOfAsync(run, Victim) ?? 1;
        var records = new List<(string Who, string Blob, byte[] Data, string AdoptId, string KillId, Process Sleeper, Process Decoy, FakeInstance Server, FakeInstance KillServer)>();
        foreach (var who in new[] { "attacker", "storage-leak" })
        {
            var adoptId = $"{Victim}-v{version}-9{who.Length}-{Convert.ToHexStringLower(RandomNumberGenerator.GetBytes(4))}";
            var killId = $"{Victim}-v{Math.Max(0, version - 1)}-8{who.Length}-{Convert.ToHexStringLower(RandomNumberGenerator.GetBytes(4))}";
            var server = FakeInstance.Start(adoptId);
            var killServer = FakeInstance.Start(killId);
            var decoy = Sleeper(run, adoptId);
            var sleeper = Sleeper(run, killId);
            records.Add((who, $"{Victim}/instances/{adoptId}.json", Record(adoptId, version, server.Address, decoy.Id), adoptId, killId, sleeper, decoy, server, killServer));
            records.Add((who, $"{Victim}/instances/{killId}.json", Record(killId, Math.Max(0, version - 1), killServer.Address, sleeper.Id), adoptId, killId, sleeper, decoy, server, killServer));
            run.Listeners.Add(server.Listener);
            run.Listeners.Add(killServer.Listener);
        }
        // 1. The attacker, with whatever it holds.
        var writes = new JsonArray(records.Where(r => r.Who == "attacker")
            .Select(r => (JsonNode?)new JsonObject { ["container"] = "faast-deployments", ["blob"] = r.Blob, ["data"] = Convert.ToBase64String(r.Data) }).ToArray());
        var rep = await ProbeAsync(run, new JsonObject { ["op"] = "storage", ["writes"] = writes });
        var attackerWrites = rep["writes"]?.AsArray().Where(w => w!["status"]!.GetValue<int>() is 201 or 200).Select(w => w!.ToJsonString()).ToArray() ?? [];
        a.Details["attacker_writes_accepted"] = new JsonArray(attackerWrites.Select(w => (JsonNode?)JsonNode.Parse(w)).ToArray());
        // 2. Someone who holds the platform's storage key (a leak): the signature check must still refuse.
        var leak = "not tried: the platform's storage account or endpoint was not found";
        if (PlatformConnectionString(run) is { } platformStorage)
        {
            using var store = new Storage.BlobStore(platformStorage);
            foreach (var r in records.Where(r => r.Who == "storage-leak"))
                await store.UploadAsync("faast-deployments", r.Blob, r.Data, "application/json");
            leak = "written with the platform's storage key";
        }
        a.Details["storage_leak_records"] = leak;
        // 3. Restart the platform on the same state and storage.
        Console.WriteLine("attacks: restarting the platform (forged records)");
        await run.Platform.StopAsync(TimeSpan.FromSeconds(90));
        run.Platform = new PlatformProcess(run.Home, run.Platform.State);
        var mark = run.Platform.Mark;
        // A platform loads every deployed app before it reports ready: many apps (intruders that got in) take long.
        await run.Platform.StartAsync(TimeSpan.FromSeconds(600));
        var servedAgain = false;
        // Until the victim answers again, or a forged record took its traffic (then no real instance may ever come).
        for (var i = 0; i < 240 && !servedAgain && !records.Any(r => r.Server.Forwarded > 0); i++)
        {
            var (s, t) = await SendAsync(run, HttpMethod.Get, Url(run, $"{Victim}/api/read/load.txt"));
            servedAgain = s == 200 && t == "load";
            if (!servedAgain)
                await Task.Delay(500);
        }
        for (var i = 0; i < 10; i++)
            await SendAsync(run, HttpMethod.Get, Url(run, $"{Victim}/api/read/load.txt"));
        var problems = new List<string>();
        foreach (var group in records.GroupBy(r => r.Who))
        {
            var r = group.First();
            var stolen = r.Server.Forwarded;
            var killed = HasExited(r.Sleeper);
            var decoyKilled = HasExited(r.Decoy);
            var (_, status) = await SendAsync(run, HttpMethod.Get, new Uri(run.Platform.Address, "admin/platform"), null, run.AdminKey);
            var listed = status.Contains(r.AdoptId, StringComparison.Ordinal);
            a.Details[r.Who] = new JsonObject
            {
                ["adopted_in_status"] = listed,
                ["victim_requests_sent_to_the_forged_address"] = stolen,
                ["requests_at_the_forged_address"] = new JsonArray(r.Server.Requests.Take(5).Select(q => (JsonNode?)q).ToArray()),
                ["chosen_process_killed"] = killed,
                ["decoy_process_killed"] = decoyKilled,
            };
            if (listed || stolen > 0)
                problems.Add($"{r.Who}: the forged record was ADOPTED ({stolen} victim request(s) went to the attacker's server)");
            if (killed || decoyKilled)
                problems.Add($"{r.Who}: the platform KILLED the process the record named");
        }
        a.Details["victim_served_after_restart"] = servedAgain;
        a.Refused = problems.Count == 0;
        a.Observed = (attackerWrites.Length > 0 ? $"the attacker WROTE {attackerWrites.Length} record(s); " : "the attacker could not write a record; ")
            + leak + "; " + (problems.Count == 0 ? "after the restart nothing was adopted and nothing killed" : string.Join("; ", problems))
            + (servedAgain ? "" : "; the victim was NOT served after the restart");
        a.Logged = await LoggedAsync(run, mark, records.Select(r => r.AdoptId).Concat(records.Select(r => r.KillId)).Concat(["signature", "unsigned", "forged"]).ToArray());
        return a;
    }

    private static byte[] Record(string id, int version, Uri address, int pid) => Encoding.UTF8.GetBytes(new JsonObject
    {
        ["id"] = id,
        ["app"] = Victim,
        ["version"] = version,
        ["baseAddress"] = address.ToString(),
        ["peerAddress"] = null,
        ["processId"] = pid,
        ["started"] = DateTimeOffset.UtcNow.ToString("O", CultureInfo.InvariantCulture),
        ["host"] = Environment.MachineName,
    }.ToJsonString());

    /// <summary>A process whose command line carries "--instance-id ID" (what the old adoption check looked for): the process the record asks to kill.</summary>
    private static Process Sleeper(Run run, string id)
    {
        var info = new ProcessStartInfo("bash") { UseShellExecute = false };
        foreach (var a in new[] { "-c", "sleep 3600; :", "faast-attack-sleeper", "--instance-id", id, "x" })
            info.ArgumentList.Add(a);
        var p = Process.Start(info)!;
        run.Started.Add(p);
        return p;
    }

    private static bool HasExited(Process p)
    {
        p.Refresh();
        return p.HasExited;
    }

    /// <summary>An attacker's server answering /admin/host/status as the forged instance; counts every other request (the victim's traffic).</summary>
    private sealed class FakeInstance
    {
        private int _forwarded;

        public required HttpListener Listener { get; init; }
        public required Uri Address { get; init; }
        public int Forwarded => Volatile.Read(ref _forwarded);

        /// <summary>The requests other than the status check, as "METHOD PATH from ADDRESS" (who reached the forged address).</summary>
        public ConcurrentQueue<string> Requests { get; } = new();

        public static FakeInstance Start(string id)
        {
            var port = PlatformProcess.FreePort();
            var listener = new HttpListener();
            listener.Prefixes.Add($"http://127.0.0.1:{port}/");
            listener.Start();
            var fake = new FakeInstance { Listener = listener, Address = new Uri($"http://127.0.0.1:{port}/") };
            _ = Task.Run(async () =>
            {
                while (listener.IsListening)
                {
                    HttpListenerContext c;
                    try
                    {
                        c = await listener.GetContextAsync();
                    }
                    catch (Exception e) when (e is HttpListenerException or ObjectDisposedException or InvalidOperationException)
                    {
                        return;
                    }
                    var status = c.Request.Url?.AbsolutePath.EndsWith("/admin/host/status", StringComparison.Ordinal) == true;
                    // The victim's traffic is its function routes (/api/...): what an adopted forged record would steal. Other
                    // requests are recorded, not counted (a stray GET / from a port probe on the machine is no theft).
                    if (!status && c.Request.Url?.AbsolutePath.StartsWith("/api/", StringComparison.Ordinal) == true)
                        Interlocked.Increment(ref fake._forwarded);
                    if (!status)
                    {
                        fake.Requests.Enqueue($"{c.Request.HttpMethod} {c.Request.Url?.PathAndQuery} from {c.Request.RemoteEndPoint} ({c.Request.UserAgent})");
                    }
                    var body = Encoding.UTF8.GetBytes(status
                        ? $$"""{"state":"Running","instance":{"id":"{{id}}"},"functions":[]}"""
                        : "stolen");
                    c.Response.ContentType = status ? "application/json" : "text/plain";
                    await c.Response.OutputStream.WriteAsync(body);
                    c.Response.Close();
                }
            });
            return fake;
        }
    }

    // --- the victim's load ---------------------------------------------------------------------------------

    private sealed class VictimLoad(Run run, int loops)
    {
        public static VictimLoad? Current { get; private set; }

        private long _requests;
        private long _failed;
        private Task _running = Task.CompletedTask;
        public ConcurrentQueue<string> Failures { get; } = new();
        public long Requests => Interlocked.Read(ref _requests);
        public long Failed => Interlocked.Read(ref _failed);

        public void Start(CancellationToken stop)
        {
            Current = this;
            _running = Task.WhenAll(Enumerable.Range(0, loops).Select(l => Task.Run(async () =>
            {
                for (var i = 0L; !stop.IsCancellationRequested; i++)
                {
                    var write = i % 5 == 4;
                    string? failure;
                    try
                    {
                        var (s, t) = write
                            ? await SendAsync(run, HttpMethod.Post, Url(run, $"{Victim}/api/write/load-{l}.txt"), new StringContent("w" + i.ToString(CultureInfo.InvariantCulture)))
                            : await SendAsync(run, HttpMethod.Get, Url(run, $"{Victim}/api/read/load.txt"));
                        failure = (write ? s == 200 : s == 200 && t == "load") ? null : $"{(write ? "write" : "read")}: {s} {Oneline(t, 160)}";
                    }
                    catch (Exception e) when (e is HttpRequestException or TaskCanceledException or IOException)
                    {
                        failure = $"{(write ? "write" : "read")}: {e.GetType().Name} {e.Message}";
                    }
                    Interlocked.Increment(ref _requests);
                    if (failure is not null)
                    {
                        Interlocked.Increment(ref _failed);
                        if (Failures.Count < 20)
                            Failures.Enqueue($"{DateTime.UtcNow:HH:mm:ss.fff} {failure}");
                    }
                    try
                    {
                        await Task.Delay(20, stop);
                    }
                    catch (OperationCanceledException)
                    {
                        break;
                    }
                }
            })));
        }

        public async Task StopAsync(CancellationTokenSource stop)
        {
            await stop.CancelAsync();
            await _running;
        }
    }

    // --- helpers -------------------------------------------------------------------------------------------

    private static Uri Url(Run run, string path) => new(run.Platform.Address, path);

    private static async Task<(int Status, string Body)> SendAsync(Run run, HttpMethod method, Uri uri, HttpContent? content = null, string? key = null,
        (string Name, string Value)[]? headers = null, bool http2 = false)
    {
        using var request = new HttpRequestMessage(method, uri) { Content = content };
        if (http2)
        {
            request.Version = HttpVersion.Version20;
            request.VersionPolicy = HttpVersionPolicy.RequestVersionExact;
        }
        if (key is not null)
            request.Headers.Authorization = new AuthenticationHeaderValue("Bearer", key);
        foreach (var (name, value) in headers ?? [])
        {
            if (name == "Host")
                request.Headers.Host = value;
            else
                request.Headers.TryAddWithoutValidation(name, value);
        }
        try
        {
            using var response = await run.Http.SendAsync(request);
            return ((int)response.StatusCode, await response.Content.ReadAsStringAsync());
        }
        catch (HttpRequestException e) when (e.HttpRequestError is HttpRequestError.ConnectionError or HttpRequestError.HttpProtocolError or HttpRequestError.ResponseEnded or HttpRequestError.SecureConnectionError)
        {
            return (0, $"{e.HttpRequestError}: {e.Message}");
        }
    }

    private static Task<(int Status, string Body)> DeployAsync(Run run, Uri platform, string app, byte[] zip, string? key,
        (string, string)[]? headers = null, HttpMethod? method = null, string contentType = "application/zip", bool http2 = false)
    {
        var content = new ByteArrayContent(zip);
        content.Headers.ContentType = MediaTypeHeaderValue.Parse(contentType);
        return SendAsync(run, method ?? HttpMethod.Put, new Uri(platform, $"admin/platform/apps/{app}"), content, key, headers, http2);
    }

    /// <summary>The app's deployed version from the platform's status (read with the admin key), null when it is not deployed.</summary>
    private static async Task<int?> VersionOfAsync(Run run, string app)
    {
        var (status, body) = await SendAsync(run, HttpMethod.Get, new Uri(run.Platform.Address, "admin/platform"), null, run.AdminKey);
        if (status != 200)
            return null;
        try
        {
            foreach (var a in JsonNode.Parse(body)?["apps"]?.AsArray() ?? [])
                if (a?["app"]?.GetValue<string>() == app)
                    return a["version"]?.GetValue<int>();
        }
        catch (JsonException)
        {
        }
        return null;
    }

    private static async Task<Uri?> VictimPeerAddressAsync(Run run)
    {
        var (_, body) = await SendAsync(run, HttpMethod.Get, new Uri(run.Platform.Address, "admin/platform"), null, run.AdminKey);
        return PeerAddresses(body, Victim).Select(p => new Uri(p)).FirstOrDefault();
    }

    /// <summary>The address, peer and process fields a status document shows for <paramref name="app"/>'s instances.</summary>
    private static List<string> InstanceFields(string statusJson, string app)
    {
        var shown = new List<string>();
        try
        {
            if (JsonNode.Parse(statusJson) is JsonObject { } o && o["apps"] is JsonArray apps)
                foreach (var a in apps)
                    if (a?["app"]?.GetValue<string>() == app && a["instances"] is JsonArray instances)
                        foreach (var i in instances.OfType<JsonObject>())
                            shown.AddRange(new[] { "address", "baseAddress", "peer", "peerAddress", "processId" }.Where(i.ContainsKey));
        }
        catch (JsonException)
        {
        }
        return shown.Distinct(StringComparer.Ordinal).ToList();
    }

    private static IEnumerable<string> PeerAddresses(string statusJson, string app)
    {
        JsonNode? doc;
        try
        {
            doc = JsonNode.Parse(statusJson);
        }
        catch (JsonException)
        {
            yield break;
        }
        if (doc is not JsonObject o || o["apps"] is not JsonArray apps)
            yield break;
        foreach (var a in apps)
            if (a?["app"]?.GetValue<string>() == app && a["instances"] is JsonArray instances)
                foreach (var i in instances)
                    if ((i?["peer"] ?? i?["peerAddress"])?.GetValue<string>() is { Length: > 0 } p)
                        yield return p;
    }

    /// <summary>
    /// Whether the platform's output (its own log and its instances' lines) has, since <paramref name="mark"/>, a line
    /// that names one of <paramref name="markers"/> and says it refused something.
    /// </summary>
    /// The platform writes its log through a background queue and a pipe, so the line may follow the answer by a moment:
    /// looked for until it shows, for up to 5 s (a refusal answered at once had been counted as not logged).
    private static async Task<bool> LoggedAsync(Run run, long mark, params string[] markers)
    {
        var deadline = Stopwatch.StartNew();
        while (true)
        {
            if (run.Platform.LinesSince(mark).Any(l => RefusalWords().IsMatch(l) && markers.Any(m => l.Contains(m, StringComparison.OrdinalIgnoreCase))))
                return true;
            if (deadline.Elapsed > TimeSpan.FromSeconds(5))
                return false;
            await Task.Delay(100);
        }
    }

    [GeneratedRegex("refus|denied|unauthori[sz]ed|forbidden|reject|not allowed|invalid|signature|\\b40[13]\\b|\\b413\\b|too large|outside|cannot start|failed", RegexOptions.IgnoreCase)]
    private static partial Regex RefusalWords();

    private static string? Found(JsonObject rep, string needle, string? under = null) =>
        rep["found"]?[needle]?.AsArray().Select(w => w!.GetValue<string>()).FirstOrDefault(w => under is null || w.Contains(under, StringComparison.Ordinal));

    private static string? FoundOutsideProc(JsonObject rep, string needle) =>
        rep["found"]?[needle]?.AsArray().Select(w => w!.GetValue<string>()).FirstOrDefault(w => !w.StartsWith("/proc/", StringComparison.Ordinal));

    private static string? Reached(JsonObject rep, string part) =>
        rep["reached"]?.AsArray().Select(w => w!.GetValue<string>()).FirstOrDefault(w => w.Contains(part, StringComparison.Ordinal));

    private static Storage.AzuriteAccount? PlatformAccount(Run run)
    {
        var file = Path.Combine(run.Platform.State, "azurite-account");
        try
        {
            return File.Exists(file) ? Storage.AzuriteAccount.LoadOrCreate(file) : null;
        }
        catch (InvalidDataException)
        {
            return null;
        }
    }

    private static string? PlatformConnectionString(Run run) =>
        PlatformAccount(run) is { } account && run.Platform.StorageEndpoint is { } endpoint
            ? $"DefaultEndpointsProtocol=http;AccountName={account.Name};AccountKey={account.Key};BlobEndpoint={endpoint.TrimEnd('/')}"
            : null;

    private static string PlatformKeysText() => Convert.ToBase64String(RandomNumberGenerator.GetBytes(32)).TrimEnd('=').Replace('+', '-').Replace('/', '_');

    private static byte[]? _intruder;

    /// <summary>A small valid app (one Python function) for the deploy attacks.</summary>
    private static byte[] IntruderZip(Run run)
    {
        if (_intruder is not null)
            return _intruder;
        var dir = CopyApp(Path.Combine(run.Home, "bench", "apps", "escape-tenant"), Path.Combine(run.Work, "apps", "intruder"));
        Directory.Delete(Path.Combine(dir, "Escape"), recursive: true);
        return _intruder = Zip(dir);
    }

    private static byte[] Zip(string directory)
    {
        using var zip = new MemoryStream();
        Packager.Zip(directory, zip, includeSettings: true); // as ./faast deploy uploads: the platform keeps the settings apart
        return zip.ToArray();
    }

    /// <summary>
    /// A zip that is only an end: a ZIP64 end-of-central-directory record claiming 50,000,000 entries in a 1 TiB
    /// central directory, its locator, and the classic record with every field at its ZIP64 marker.
    /// </summary>
    internal static byte[] EocdBomb()
    {
        var b = new MemoryStream();
        var w = new BinaryWriter(b);
        w.Write(Encoding.ASCII.GetBytes("PK\x03\x04")); // a local header's signature, so it looks like a zip from the start
        w.Write(new byte[26]);
        var eocd64 = b.Position;
        w.Write(0x06064b50u);        // ZIP64 EOCD
        w.Write(44UL);               // size of the rest of the record
        w.Write((ushort)45); w.Write((ushort)45);
        w.Write(0u); w.Write(0u);
        w.Write(50_000_000UL);       // entries on this disk
        w.Write(50_000_000UL);       // entries in total
        w.Write(1UL << 40);          // central directory size
        w.Write(0UL);                // central directory offset
        w.Write(0x07064b50u);        // ZIP64 EOCD locator
        w.Write(0u);
        w.Write((ulong)eocd64);
        w.Write(1u);
        w.Write(0x06054b50u);        // EOCD
        w.Write((ushort)0xFFFF); w.Write((ushort)0xFFFF);
        w.Write((ushort)0xFFFF); w.Write((ushort)0xFFFF);
        w.Write(0xFFFFFFFFu); w.Write(0xFFFFFFFFu);
        w.Write((ushort)0);
        w.Flush();
        return b.ToArray();
    }

    private static long Rss(Process? p)
    {
        if (p is null || p.HasExited)
            return 0;
        try
        {
            var line = File.ReadLines($"/proc/{p.Id}/status").FirstOrDefault(l => l.StartsWith("VmRSS:", StringComparison.Ordinal));
            return line is null ? 0 : long.Parse(line.Split(' ', StringSplitOptions.RemoveEmptyEntries)[1], CultureInfo.InvariantCulture) * 1024;
        }
        catch (IOException)
        {
            return 0;
        }
    }

    /// <summary>A body of <paramref name="size"/> zero bytes, written in 1 MiB pieces; counts what the server took.</summary>
    private sealed class CountingContent(long size) : HttpContent
    {
        private long _sent;
        public long Sent => Interlocked.Read(ref _sent);

        protected override async Task SerializeToStreamAsync(Stream stream, TransportContext? context)
        {
            var chunk = new byte[1 << 20];
            while (Sent < size)
            {
                var n = (int)Math.Min(chunk.Length, size - Sent);
                await stream.WriteAsync(chunk.AsMemory(0, n));
                Interlocked.Add(ref _sent, n);
            }
        }

        protected override bool TryComputeLength(out long length)
        {
            length = size;
            return true;
        }
    }

    private static string CopyApp(string source, string target)
    {
        if (Directory.Exists(target))
            Directory.Delete(target, recursive: true);
        foreach (var file in Directory.EnumerateFiles(source, "*", SearchOption.AllDirectories))
        {
            if (file.Contains("__pycache__", StringComparison.Ordinal))
                continue;
            var to = Path.Combine(target, Path.GetRelativePath(source, file));
            Directory.CreateDirectory(Path.GetDirectoryName(to)!);
            File.Copy(file, to);
        }
        return target;
    }

    private static void SetSetting(string appDirectory, string name, string value)
    {
        var file = Path.Combine(appDirectory, "local.settings.json");
        var doc = JsonNode.Parse(File.ReadAllText(file))!.AsObject();
        doc["Values"]![name] = value;
        File.WriteAllText(file, doc.ToJsonString());
    }

    private static string Oneline(string s, int max)
    {
        var t = s.Replace("\r", " ", StringComparison.Ordinal).Replace("\n", " ", StringComparison.Ordinal);
        return t.Length > max ? t[..max] + "…" : t;
    }

    private static async Task CleanUpAsync(Run run)
    {
        foreach (var l in run.Listeners)
        {
            try
            {
                l.Close();
            }
            catch (ObjectDisposedException)
            {
            }
        }
        foreach (var p in run.Started)
        {
            try
            {
                if (!p.HasExited)
                    p.Kill(entireProcessTree: true);
            }
            catch (InvalidOperationException)
            {
            }
            p.Dispose();
        }
        await run.Platform.DisposeAsync();
        PlatformProcess.KillProcessesMentioning(run.Work);
        run.Http.Dispose();
        try
        {
            Directory.Delete(run.Work, recursive: true);
        }
        catch (Exception e) when (e is IOException or UnauthorizedAccessException)
        {
            Console.WriteLine($"attacks: could not remove {run.Work}: {e.Message}");
        }
    }

    // --- the report ------------------------------------------------------------------------------------------

    private static void Write(Run run, VictimLoad victim, TimeSpan elapsed)
    {
        var attacks = run.Attacks;
        var tried = attacks.Count(a => a.Error is null);
        var succeeded = attacks.Count(a => a.Error is null && !a.Refused);
        var notLogged = attacks.Count(a => a.Error is null && a.LoggedByDesign && !a.Logged);
        var doc = new JsonObject
        {
            ["scenario"] = "attacks",
            ["quick"] = run.Quick,
            ["date"] = DateTime.UtcNow.ToString("yyyy-MM-ddTHH:mm:ssZ", CultureInfo.InvariantCulture),
            ["seconds"] = Math.Round(elapsed.TotalSeconds, 1),
            ["goal"] = "0 attacks succeeded, every attack refused (and logged where the design logs it), 0 victim requests failed",
            ["attacks_tried"] = tried,
            ["attacks_succeeded"] = succeeded,
            ["attacks_with_errors"] = attacks.Count(a => a.Error is not null),
            ["attacks_not_logged"] = notLogged,
            ["victim_requests"] = victim.Requests,
            ["victim_failed"] = victim.Failed,
            ["victim_failures_first"] = new JsonArray(victim.Failures.Select(f => (JsonNode?)f).ToArray()),
            ["admin_key_found"] = run.AdminKey is not null,
            ["machine"] = Machine(),
            ["attacks"] = new JsonArray(attacks.Select(a => (JsonNode?)a.ToJson()).ToArray()),
        };
        var dir = Path.Combine(run.Home, "bench", "results");
        Directory.CreateDirectory(dir);
        var file = Path.Combine(dir, "attacks.json");
        File.WriteAllText(file, doc.ToJsonString(new JsonSerializerOptions { WriteIndented = true, Encoder = System.Text.Encodings.Web.JavaScriptEncoder.UnsafeRelaxedJsonEscaping }) + "\n");

        var width = Math.Max(6, attacks.Max(a => a.Name.Length));
        Console.WriteLine();
        Console.WriteLine($"{"attack".PadRight(width)}  {"result",-9}  {"logged",-6}  observed");
        Console.WriteLine($"{new string('-', width)}  ---------  ------  --------");
        foreach (var a in attacks)
        {
            var result = a.Error is not null ? "ERROR" : a.Refused ? "refused" : "SUCCEEDED";
            var logged = a.LoggedByDesign ? (a.Logged ? "yes" : "NO") : "-";
            Console.WriteLine($"{a.Name.PadRight(width)}  {result,-9}  {logged,-6}  {Oneline(a.Error ?? a.Observed, 110)}");
        }
        Console.WriteLine();
        Console.WriteLine($"attacks tried      {tried,6}   succeeded {succeeded}   (goal: 0)");
        Console.WriteLine($"not logged         {notLogged,6}   of those the design logs (goal: 0)");
        Console.WriteLine($"victim requests    {victim.Requests,6}   failed {victim.Failed}   (goal: 0)");
        foreach (var f in victim.Failures.Take(5))
            Console.WriteLine($"  victim failure: {f}");
        Console.WriteLine($"\nwrote {Path.GetRelativePath(run.Home, file)} in {elapsed.TotalSeconds:0} s");
    }

    private static JsonObject Machine()
    {
        var machine = MachineDescription.Describe();
        machine["user"] = Environment.UserName;
        return machine;
    }
}
