using System.Globalization;
using FaaST.ScaleController.Deploy;
using FaaST.ScaleController.Platform;

namespace FaaST.ScaleController;

/// <summary>
/// The platform process's commands: <c>start APPDIR [options]</c> (the frontend on the app's port, the app deployed
/// from the folder, its instances and the scale controller), <c>platform [options]</c> (an empty platform for
/// several apps), <c>deploy APPDIR [--name NAME] [--platform URL]</c> and <c>status [--platform URL]</c>. Deploy and
/// status send the platform's admin key (<see cref="AdminKeyFor"/>); exit code 6 when the platform refuses it.
/// </summary>
public static class Program
{
    public const string DefaultPlatform = "http://127.0.0.1:7071";

    public const string PlatformUsage = "usage: faast platform [--port N] [--listen ADDR] [--control-port N] [--control-listen ADDR] " +
        "[--control-tls-cert PEM --control-tls-key PEM [--control-client-ca PEM]] [--admin-host NAME]... [--master-key-file FILE] " +
        "[--state DIR] [--azurite-data DIR | --azurite-in-memory] [--workers N] [--no-cache] [--isolation auto|required|off] [--max-instances N] [--max-workers N]";

    public const string DeployUsage = "usage: faast deploy APPDIR [--name NAME] [--platform URL] [--admin-key-file FILE]";

    public const string StatusUsage = "usage: faast status [--platform URL] [--admin-key-file FILE] [--json]";

    /// <summary>The environment variable the CLI takes the platform's admin key (or an app's deploy key) from.</summary>
    public const string AdminKeyVariable = "FAAST_ADMIN_KEY";

    public static async Task<int> Main(string[] args)
    {
        using var stop = new CancellationTokenSource();
        using var signals = StopSignals.Register(stop);
        return args switch
        {
            ["start", .. var rest] => await StartCommand.RunAsync(rest, stop.Token),
            ["platform", .. var rest] => await StartCommand.RunPlatformAsync(rest, stop.Token),
            ["deploy", .. var rest] => await DeployAsync(rest, stop.Token),
            ["status", .. var rest] => await StatusAsync(rest, stop.Token),
            _ => await UsageErrorAsync($"unknown command \"{string.Join(' ', args)}\"", "usage: faast start|platform|deploy|status ..."),
        };
    }

    internal static async Task<int> UsageErrorAsync(string message, string usage)
    {
        await Console.Error.WriteLineAsync($"faast: {message}");
        await Console.Error.WriteLineAsync(usage);
        return 2;
    }

    /// <summary>./faast deploy APPDIR: zips the folder and sends it to the platform, which validates it before anything changes.</summary>
    private static async Task<int> DeployAsync(string[] args, CancellationToken ct)
    {
        if (args.Any(a => a is "-h" or "--help"))
        {
            await Console.Out.WriteLineAsync(DeployUsage);
            return 0;
        }
        string? directory = null, name = null, platform = null, keyFile = null;
        for (var i = 0; i < args.Length; i++)
        {
            switch (args[i])
            {
                case "--name" when i + 1 < args.Length: name = args[++i]; break;
                case "--platform" when i + 1 < args.Length: platform = args[++i]; break;
                case "--admin-key-file" when i + 1 < args.Length: keyFile = args[++i]; break;
                case "--name" or "--platform" or "--admin-key-file": return await UsageErrorAsync($"{args[i]} needs a value", DeployUsage);
                case var a when a.StartsWith("--", StringComparison.Ordinal): return await UsageErrorAsync($"unknown option {a}", DeployUsage);
                default:
                    if (directory is not null)
                        return await UsageErrorAsync($"one app directory only (got \"{directory}\" and \"{args[i]}\")", DeployUsage);
                    directory = args[i];
                    break;
            }
        }
        if (directory is null)
            return await UsageErrorAsync("deploy needs an app directory", DeployUsage);
        directory = Path.GetFullPath(directory);
        if (!Directory.Exists(directory))
            return await UsageErrorAsync($"{directory} is not a directory", DeployUsage);
        name ??= FunctionApp.NameOf(directory);
        if (!Uri.TryCreate(platform ?? DefaultPlatform, UriKind.Absolute, out var baseUri) || baseUri.Scheme is not ("http" or "https"))
            return await UsageErrorAsync($"--platform must be an http(s) URL, not \"{platform}\"", DeployUsage);
        var (key, keyProblem) = AdminKeyFor(baseUri, keyFile);
        if (keyProblem is not null)
            return await UsageErrorAsync(keyProblem, DeployUsage);
        try
        {
            // The platform validates again (it is the authority); validating here too gives the error before the upload.
            AppValidator.Validate(directory);
        }
        catch (DeployValidationException e)
        {
            await Console.Error.WriteLineAsync($"faast: deploy refused: {e.Message}");
            return 3;
        }
        using var zip = new MemoryStream();
        Packager.Zip(directory, zip, includeSettings: true); // the platform keeps the settings apart from the package
        zip.Position = 0;
        using var http = new HttpClient { Timeout = TimeSpan.FromMinutes(10) };
        using var content = new StreamContent(zip);
        content.Headers.ContentType = new System.Net.Http.Headers.MediaTypeHeaderValue("application/zip");
        using var request = new HttpRequestMessage(HttpMethod.Put, new Uri(baseUri, $"admin/platform/apps/{Uri.EscapeDataString(name)}")) { Content = content };
        Authorize(request, key);
        // A refusal (no key, too large, busy) comes before the upload, not after it.
        request.Headers.ExpectContinue = true;
        HttpResponseMessage response;
        try
        {
            response = await http.SendAsync(request, ct);
        }
        catch (HttpRequestException e)
        {
            await Console.Error.WriteLineAsync($"faast: cannot reach the platform at {baseUri}: {e.Message} (start one with ./faast platform)");
            return 5;
        }
        using (response)
        {
            if (response.IsSuccessStatusCode)
            {
                var result = await response.Content.ReadFromJsonAsync(PlatformJsonContext.Default.DeployResult, ct);
                await Console.Out.WriteLineAsync($"deployed {result!.App} v{result.Version} ({result.Size} bytes, sha256 {result.Sha256[..12]}…): {result.Status}");
                return 0;
            }
            var error = await ReadErrorAsync(response, ct);
            if (await NotAuthorizedAsync(response, error, key, baseUri, "deploy"))
                return 6;
            await Console.Error.WriteLineAsync($"faast: deploy refused ({(int)response.StatusCode}): {error}");
            return response.StatusCode == System.Net.HttpStatusCode.BadRequest ? 3 : 5;
        }
    }

    /// <summary>
    /// The key the CLI sends: the file given with --admin-key-file, else $FAAST_ADMIN_KEY, else the one a platform of this
    /// user published for this address in $FAAST_HOME/.faast/credentials (a local platform: nothing to give). Null when
    /// none is found (the platform then says 401, and the CLI how to give one); a problem with the file given.
    /// </summary>
    internal static (string? Key, string? Problem) AdminKeyFor(Uri platform, string? keyFile)
    {
        if (keyFile is not null)
        {
            try
            {
                var text = File.ReadAllText(keyFile).Trim();
                return text.Length == 0 ? (null, $"--admin-key-file {keyFile} is empty") : (text, null);
            }
            catch (Exception e) when (e is IOException or UnauthorizedAccessException)
            {
                return (null, $"--admin-key-file {keyFile} cannot be read: {e.Message}");
            }
        }
        if (Environment.GetEnvironmentVariable(AdminKeyVariable) is { Length: > 0 } env)
            return (env.Trim(), null);
        try
        {
            return (LocalCredentials.Find(FaaSTHome.Find(), platform), null);
        }
        catch (InvalidOperationException)
        {
            return (null, null); // no checkout to look in: the platform's 401 says what to do
        }
    }

    private static void Authorize(HttpRequestMessage request, string? key)
    {
        if (key is not null)
            request.Headers.Authorization = new System.Net.Http.Headers.AuthenticationHeaderValue("Bearer", key);
    }

    /// <summary>A 401 or 403: says so, and how to give the key. True when it was one.</summary>
    private static async Task<bool> NotAuthorizedAsync(HttpResponseMessage response, string error, string? key, Uri platform, string what)
    {
        if (response.StatusCode is not (System.Net.HttpStatusCode.Unauthorized or System.Net.HttpStatusCode.Forbidden))
            return false;
        var given = key is null ? "no admin key was found for it" : "the key sent was refused";
        await Console.Error.WriteLineAsync($"faast: {what} not allowed by the platform at {platform} ({(int)response.StatusCode}): {error}");
        await Console.Error.WriteLineAsync($"faast: {given}; give the platform's admin key (the file keys/admin in its --state folder) with " +
            $"--admin-key-file FILE or {AdminKeyVariable}=KEY (a platform started by this user with the same FAAST_HOME is found by itself)");
        return true;
    }

    private static async Task<string> ReadErrorAsync(HttpResponseMessage response, CancellationToken ct)
    {
        var text = await response.Content.ReadAsStringAsync(ct);
        try
        {
            return System.Text.Json.JsonSerializer.Deserialize(text, PlatformJsonContext.Default.PlatformError)?.Error ?? text;
        }
        catch (System.Text.Json.JsonException)
        {
            return text;
        }
    }

    /// <summary>./faast status: the platform's apps, versions, instances, last votes and decisions.</summary>
    private static async Task<int> StatusAsync(string[] args, CancellationToken ct)
    {
        if (args.Any(a => a is "-h" or "--help"))
        {
            await Console.Out.WriteLineAsync(StatusUsage);
            return 0;
        }
        string? platform = null, keyFile = null;
        var json = false;
        for (var i = 0; i < args.Length; i++)
        {
            switch (args[i])
            {
                case "--platform" when i + 1 < args.Length: platform = args[++i]; break;
                case "--admin-key-file" when i + 1 < args.Length: keyFile = args[++i]; break;
                case "--json": json = true; break;
                default: return await UsageErrorAsync($"unknown argument {args[i]}", StatusUsage);
            }
        }
        if (!Uri.TryCreate(platform ?? DefaultPlatform, UriKind.Absolute, out var baseUri))
            return await UsageErrorAsync($"--platform must be a URL, not \"{platform}\"", StatusUsage);
        var (key, keyProblem) = AdminKeyFor(baseUri, keyFile);
        if (keyProblem is not null)
            return await UsageErrorAsync(keyProblem, StatusUsage);
        using var http = new HttpClient { Timeout = TimeSpan.FromSeconds(10) };
        string text;
        try
        {
            using var request = new HttpRequestMessage(HttpMethod.Get, new Uri(baseUri, "admin/platform"));
            Authorize(request, key);
            using var response = await http.SendAsync(request, ct);
            text = await response.Content.ReadAsStringAsync(ct);
            if (!response.IsSuccessStatusCode)
            {
                var error = await ReadErrorAsync(response, ct);
                if (await NotAuthorizedAsync(response, error, key, baseUri, "status"))
                    return 6;
                await Console.Error.WriteLineAsync($"faast: the platform at {baseUri} answered {(int)response.StatusCode}: {error}");
                return 5;
            }
        }
        catch (HttpRequestException e)
        {
            await Console.Error.WriteLineAsync($"faast: cannot reach the platform at {baseUri}: {e.Message}");
            return 5;
        }
        if (json)
        {
            await Console.Out.WriteLineAsync(text);
            return 0;
        }
        var status = System.Text.Json.JsonSerializer.Deserialize(text, PlatformJsonContext.Default.PlatformStatus)!;
        await Console.Out.WriteAsync(StatusText.Format(status));
        return 0;
    }
}

/// <summary>The human-readable form of /admin/platform that `./faast status` prints.</summary>
internal static class StatusText
{
    public static string Format(PlatformStatus status)
    {
        var w = new System.Text.StringBuilder();
        w.Append(CultureInfo.InvariantCulture, $"platform {status.Address} ({status.Routing}); {status.Apps.Count} app(s)\n");
        foreach (var a in status.Apps)
        {
            w.Append(CultureInfo.InvariantCulture, $"\n{a.App} v{a.Version}{(a.Unloaded ? " (unloaded)" : "")}: {a.Instances.Count} instance(s), desired {a.Desired}, min {a.Scale.MinInstances} max {a.Scale.MaxInstances}; in flight {a.Frontend.InFlight}, queued {a.Frontend.Queued}\n");
            foreach (var i in a.Instances)
                w.Append(CultureInfo.InvariantCulture, $"  {i.Id,-36} {i.Version,-4} {i.State,-9} {i.Address} outstanding {i.Outstanding}\n");
            foreach (var v in a.LastVotes)
                w.Append(CultureInfo.InvariantCulture, $"  vote {v.Instance} {v.Policy}: {v.Delta:+0;-0;0} ({v.Reason})\n");
            foreach (var d in a.Decisions.TakeLast(5))
                w.Append(CultureInfo.InvariantCulture, $"  {d.At:HH:mm:ss} {d.Kind} {d.From} -> {d.To}: {d.Reason}\n");
        }
        foreach (var u in status.Unavailable ?? [])
            w.Append(CultureInfo.InvariantCulture, $"\n{u.App} v{u.Version}: unavailable: {u.Reason}\n");
        return w.ToString();
    }
}
