using System.Net;

namespace FaaST.ScaleController.Platform;

/// <summary>Why an admin request was refused: the HTTP status (401 or 403) and a sentence naming what is wrong.</summary>
internal sealed record AdminRefusal(int Status, string Error);

/// <summary>
/// Who may call the platform's admin endpoints (every <c>/admin/platform...</c>: status, deploy, deploy keys), on the
/// frontend's port and on the control port (issue 19, defect 1). In order:
/// <list type="number">
/// <item>The Host header must be a name of this platform: a loopback name or address (127.0.0.1, localhost,
/// *.localhost, [::1]), a listen address, or one the operator allowed (<see cref="PlatformOptions.AllowedAdminHosts"/>);
/// any port. A web page that rebinds its own DNS name to this machine sends its own name, and is refused.</item>
/// <item>A browser's cross-origin request is refused: an <c>Origin</c> other than the platform's own (scheme, host and
/// port of the request), and <c>Sec-Fetch-Site: cross-site|same-site</c>. A page can send a "simple" POST (text/plain)
/// without a preflight; these headers are how the platform tells it apart.</item>
/// <item><c>Authorization: Bearer KEY</c>: the admin key for everything; an app's deploy key
/// (<see cref="PlatformKeys.DeployKeyOf"/>) for deploying that app only. None: 401 with <c>WWW-Authenticate: Bearer</c>;
/// another key: 403.</item>
/// </list>
/// Each refusal is logged with the remote address and the reason, at most one line a second (with the count held back).
/// </summary>
internal sealed class AdminGuard
{
    private readonly PlatformKeys _keys;
    private readonly HashSet<string> _hosts = new(StringComparer.OrdinalIgnoreCase);
    private readonly List<IPAddress> _addresses = [];
    private readonly bool _anyAddress;
    private readonly RateGate _gate;
    private readonly ILogger _logger;

    public AdminGuard(PlatformKeys keys, PlatformOptions options, TimeProvider time, ILogger logger)
    {
        _keys = keys;
        _logger = logger;
        _gate = new RateGate(time, TimeSpan.FromSeconds(1));
        foreach (var host in options.AllowedAdminHosts)
            _hosts.Add(host.Trim().Trim('[', ']'));
        foreach (var listen in new[] { options.ListenAddress, options.ControlListenAddress })
        {
            if (!IPAddress.TryParse(listen, out var address))
                continue;
            // A wildcard listener is reached by any of the machine's addresses: an address literal cannot be rebound
            // (the page's own origin would be that address, i.e. the platform itself), so any is a name of this platform.
            if (address.Equals(IPAddress.Any) || address.Equals(IPAddress.IPv6Any))
                _anyAddress = true;
            else
                _addresses.Add(address);
        }
    }

    /// <summary>The header a 401 carries.</summary>
    public const string Challenge = "Bearer realm=\"faast-platform\"";

    /// <summary>Null when the request may go on; else why not (already logged). <paramref name="deployApp"/>: the app a
    /// deploy is for (its deploy key is then accepted too); null for endpoints only the admin key opens.</summary>
    public AdminRefusal? Check(HttpContext context, string? deployApp)
    {
        var refusal = HostProblem(context.Request) is { } host ? new AdminRefusal(StatusCodes.Status403Forbidden, host)
            : OriginProblem(context.Request) is { } origin ? new AdminRefusal(StatusCodes.Status403Forbidden, origin)
            : CredentialProblem(context.Request, deployApp);
        if (refusal is not null && _gate.TryPass(out var heldBack))
        {
            Log.AdminRefused(_logger, context.Connection.RemoteIpAddress?.ToString() ?? "?", context.Request.Method,
                Printable(context.Request.Path.Value ?? ""), refusal.Status, refusal.Error, heldBack);
        }
        return refusal;
    }

    private string? HostProblem(HttpRequest request)
    {
        var host = request.Host.Host.Trim('[', ']');
        if (IsOurs(host))
            return null;
        return host.Length == 0
            ? "a request without a Host header is refused on the platform's admin endpoints"
            : $"Host \"{Printable(host)}\" is not a name of this platform (loopback, its listen address, or one given with --admin-host NAME); " +
              "admin endpoints refuse other names, as a web page that rebinds its DNS name to this machine would send its own";
    }

    private bool IsOurs(string host)
    {
        if (host.Length == 0)
            return false;
        if (host.Equals("localhost", StringComparison.OrdinalIgnoreCase) || host.EndsWith(".localhost", StringComparison.OrdinalIgnoreCase))
            return true; // browsers resolve *.localhost to loopback themselves (RFC 6761): no page can rebind it
        if (_hosts.Contains(host))
            return true;
        if (!IPAddress.TryParse(host, out var address))
            return false;
        return IPAddress.IsLoopback(address) || _anyAddress || _addresses.Contains(address);
    }

    private static string? OriginProblem(HttpRequest request)
    {
        var site = request.Headers["Sec-Fetch-Site"].ToString();
        if (site.Equals("cross-site", StringComparison.OrdinalIgnoreCase) || site.Equals("same-site", StringComparison.OrdinalIgnoreCase))
            return $"a request a browser made for another site (Sec-Fetch-Site: {site}) is refused on the platform's admin endpoints";
        if (!request.Headers.TryGetValue("Origin", out var values))
            return null;
        var origin = values.ToString();
        if (Uri.TryCreate(origin, UriKind.Absolute, out var uri) && uri.Scheme.Equals(request.Scheme, StringComparison.OrdinalIgnoreCase)
            && uri.Host.Trim('[', ']').Equals(request.Host.Host.Trim('[', ']'), StringComparison.OrdinalIgnoreCase)
            && uri.Port == (request.Host.Port ?? (request.IsHttps ? 443 : 80))
            && uri.AbsolutePath == "/")
        {
            return null;
        }
        return $"a request from another origin (Origin: {Printable(origin)}) is refused on the platform's admin endpoints";
    }

    private AdminRefusal? CredentialProblem(HttpRequest request, string? deployApp)
    {
        var header = request.Headers.Authorization.ToString();
        const string Bearer = "Bearer ";
        if (!header.StartsWith(Bearer, StringComparison.OrdinalIgnoreCase) || header.Length == Bearer.Length)
        {
            return new AdminRefusal(StatusCodes.Status401Unauthorized,
                (header.Length == 0 ? "no credential: " : "not a Bearer credential: ") +
                "the platform's admin endpoints need \"Authorization: Bearer KEY\" with the platform's admin key (STATE/keys/admin; " +
                "./faast deploy and ./faast status find a local platform's key themselves, else pass --admin-key-file FILE or set FAAST_ADMIN_KEY)" +
                (deployApp is null ? "" : $" or app \"{deployApp}\"'s deploy key"));
        }
        var key = header[Bearer.Length..].Trim();
        if (_keys.IsAdminKey(key) || (deployApp is not null && _keys.IsDeployKey(deployApp, key)))
            return null;
        return new AdminRefusal(StatusCodes.Status403Forbidden, deployApp is null
            ? "the credential is not the platform's admin key (this endpoint takes no app's deploy key)"
            : $"the credential is neither the platform's admin key nor app \"{deployApp}\"'s deploy key");
    }

    /// <summary>What a client sent, as it may appear in an answer and a log line: no control characters, at most 100 characters.</summary>
    internal static string Printable(string value)
    {
        var text = value.Length > 100 ? value[..100] + "…" : value;
        return string.Create(text.Length, text, static (span, v) =>
        {
            for (var i = 0; i < span.Length; i++)
                span[i] = char.IsControl(v[i]) ? '?' : v[i];
        });
    }
}

/// <summary>The admin endpoints' and the platform's own security log lines (event ids 8240-8249 of the platform's range).</summary>
internal static partial class Log
{
    [LoggerMessage(EventId = 8240, Level = LogLevel.Warning,
        Message = "Refused {Method} {Path} from {Remote}: {Status}: {Reason} ({Suppressed} more refusals held back since the last one logged)")]
    public static partial void AdminRefused(ILogger logger, string remote, string method, string path, int status, string reason, long suppressed);

    [LoggerMessage(EventId = 8241, Level = LogLevel.Warning, Message = "Cannot publish the admin key for the CLI at {File}: {Reason}; ./faast deploy then needs --admin-key-file {AdminKeyFile}")]
    public static partial void CredentialNotPublished(ILogger logger, string file, string reason, string adminKeyFile);

    [LoggerMessage(EventId = 8242, Level = LogLevel.Warning, Message = "Deploy of {App} refused: {Status}: {Reason}")]
    public static partial void DeployLimited(ILogger logger, string app, int status, string reason);

    [LoggerMessage(EventId = 8243, Level = LogLevel.Information, Message = "Removed {Count} left-over deploy work folder(s) from {Directory}")]
    public static partial void WorkCleaned(ILogger logger, int count, string directory);
}
