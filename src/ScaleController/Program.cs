using System.Globalization;
using System.Net.Http.Json;
using FaaST.Runtime.App;
using FaaST.ScaleController.Deploy;
using FaaST.ScaleController.Platform;
using FaaST.Storage;

namespace FaaST.ScaleController;

/// <summary>
/// The platform process's commands: <c>start APPDIR [options]</c> (the frontend on the app's port, the app deployed
/// from the folder, its instances and the scale controller), <c>platform [options]</c> (an empty platform for
/// several apps), <c>deploy APPDIR [--name NAME] [--platform URL]</c> and <c>status [--platform URL]</c>.
/// </summary>
public static class Program
{
    public const string DefaultPlatform = "http://127.0.0.1:7071";

    public const string PlatformUsage = "usage: faast platform [--port N] [--listen ADDR] [--control-port N] [--state DIR] [--azurite-data DIR | --azurite-in-memory] [--workers N] [--no-cache] [--isolation auto|required|off] [--max-instances N] [--max-workers N]";

    public const string DeployUsage = "usage: faast deploy APPDIR [--name NAME] [--platform URL]";

    public const string StatusUsage = "usage: faast status [--platform URL] [--json]";

    public static async Task<int> Main(string[] args)
    {
        using var stop = new CancellationTokenSource();
        using var signals = Runtime.Cli.StopSignals.Register(stop);
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
        string? directory = null, name = null, platform = null;
        for (var i = 0; i < args.Length; i++)
        {
            switch (args[i])
            {
                case "--name" when i + 1 < args.Length: name = args[++i]; break;
                case "--platform" when i + 1 < args.Length: platform = args[++i]; break;
                case "--name" or "--platform": return await UsageErrorAsync($"{args[i]} needs a value", DeployUsage);
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
        Packager.Zip(directory, zip);
        zip.Position = 0;
        using var http = new HttpClient { Timeout = TimeSpan.FromMinutes(10) };
        using var content = new StreamContent(zip);
        content.Headers.ContentType = new System.Net.Http.Headers.MediaTypeHeaderValue("application/zip");
        HttpResponseMessage response;
        try
        {
            response = await http.PutAsync(new Uri(baseUri, $"admin/platform/apps/{Uri.EscapeDataString(name)}"), content, ct);
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
            await Console.Error.WriteLineAsync($"faast: deploy refused ({(int)response.StatusCode}): {error}");
            return response.StatusCode == System.Net.HttpStatusCode.BadRequest ? 3 : 5;
        }
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
        string? platform = null;
        var json = false;
        for (var i = 0; i < args.Length; i++)
        {
            switch (args[i])
            {
                case "--platform" when i + 1 < args.Length: platform = args[++i]; break;
                case "--json": json = true; break;
                default: return await UsageErrorAsync($"unknown argument {args[i]}", StatusUsage);
            }
        }
        if (!Uri.TryCreate(platform ?? DefaultPlatform, UriKind.Absolute, out var baseUri))
            return await UsageErrorAsync($"--platform must be a URL, not \"{platform}\"", StatusUsage);
        using var http = new HttpClient { Timeout = TimeSpan.FromSeconds(10) };
        string text;
        try
        {
            text = await http.GetStringAsync(new Uri(baseUri, "admin/platform"), ct);
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
        return w.ToString();
    }
}
