using System.Collections.Frozen;

namespace FaaST.ScaleController.Frontend;

/// <summary>
/// Maps a request to the app that serves it and the path to forward (docs/scaling.md, "The frontend"):
/// <list type="bullet">
/// <item>single-app mode (<c>./faast start APP</c>): every request goes to that app, path unchanged;</item>
/// <item>host-based: a Host <c>{app}.localhost</c>, or any host whose first label names a deployed app
/// (<c>{app}.example.com</c>), goes to that app with the path unchanged;</item>
/// <item>path-based: <c>/{app}/rest</c> goes to that app as <c>/rest</c> (the prefix stripped).</item>
/// </list>
/// App names compare case-insensitively (host names do). The set of apps is an immutable snapshot swapped
/// on deploy, so routing takes no lock.
/// </summary>
public sealed class AppRouter
{
    private const string LocalhostSuffix = ".localhost";
    private readonly string? _single;
    private readonly Lock _gate = new();
    private FrozenSet<string> _apps = FrozenSet<string>.Empty;

    private AppRouter(string? single) => _single = single;

    /// <summary>A router that sends every request to <paramref name="app"/> with its path unchanged.</summary>
    public static AppRouter SingleApp(string app)
    {
        ArgumentException.ThrowIfNullOrWhiteSpace(app);
        var router = new AppRouter(app);
        router.AddApp(app);
        return router;
    }

    /// <summary>A router for a platform serving several apps (host- and path-based); add the apps as they are deployed.</summary>
    public static AppRouter MultiApp() => new(null);

    /// <summary>The apps routed to now.</summary>
    public IReadOnlyCollection<string> Apps => Volatile.Read(ref _apps);

    /// <summary>Routes to <paramref name="app"/> from now on.</summary>
    public void AddApp(string app)
    {
        ArgumentException.ThrowIfNullOrWhiteSpace(app);
        if (app.Contains('/', StringComparison.Ordinal) || app.Contains('.', StringComparison.Ordinal))
            throw new ArgumentException($"app name \"{app}\" cannot be routed: it must not contain '/' or '.'", nameof(app));
        lock (_gate)
            Volatile.Write(ref _apps, _apps.Append(app).ToFrozenSet(StringComparer.OrdinalIgnoreCase));
    }

    /// <summary>Stops routing to <paramref name="app"/>.</summary>
    public void RemoveApp(string app)
    {
        lock (_gate)
            Volatile.Write(ref _apps, _apps.Where(a => !string.Equals(a, app, StringComparison.OrdinalIgnoreCase)).ToFrozenSet(StringComparer.OrdinalIgnoreCase));
    }

    /// <summary>Routes <paramref name="request"/>; false with a one-line reason when no deployed app matches.</summary>
    public bool TryRoute(HttpRequest request, out string app, out string pathAndQuery, out string? reason)
    {
        ArgumentNullException.ThrowIfNull(request);
        return TryRoute(request.Host.Host, request.Path, request.QueryString, out app, out pathAndQuery, out reason);
    }

    /// <summary>Routes a request for <paramref name="host"/> (without port) and <paramref name="path"/>; the path and query returned are URI-escaped, ready to append to an instance's base address.</summary>
    public bool TryRoute(string? host, PathString path, QueryString query, out string app, out string pathAndQuery, out string? reason)
    {
        var apps = Volatile.Read(ref _apps);
        if (_single is not null)
            return Found(_single, path, query, out app, out pathAndQuery, out reason);

        if (!string.IsNullOrEmpty(host))
        {
            var dot = host.IndexOf('.', StringComparison.Ordinal);
            if (dot > 0)
            {
                var label = host[..dot];
                if (apps.TryGetValue(label, out var named))
                    return Found(named, path, query, out app, out pathAndQuery, out reason);
                if (host.EndsWith(LocalhostSuffix, StringComparison.OrdinalIgnoreCase) && dot == host.Length - LocalhostSuffix.Length)
                    return NotFound($"no app named \"{label}\" is deployed (from the Host header \"{host}\")", out app, out pathAndQuery, out reason);
            }
        }

        var value = path.Value;
        if (!string.IsNullOrEmpty(value) && value.Length > 1)
        {
            var end = value.IndexOf('/', 1);
            var segment = end < 0 ? value[1..] : value[1..end];
            if (apps.TryGetValue(segment, out var named))
            {
                var rest = end < 0 ? new PathString("/") : new PathString(value[end..]);
                return Found(named, rest, query, out app, out pathAndQuery, out reason);
            }
            return NotFound($"no app named \"{segment}\" is deployed (from the path \"{value}\"; route as /APP/... or with Host APP.localhost)", out app, out pathAndQuery, out reason);
        }
        return NotFound("no app in the request: route as /APP/... or with Host APP.localhost", out app, out pathAndQuery, out reason);
    }

    private static bool Found(string name, PathString path, QueryString query, out string app, out string pathAndQuery, out string? reason)
    {
        app = name;
        var escaped = path.HasValue ? path.ToUriComponent() : "/";
        pathAndQuery = query.HasValue ? escaped + query.ToUriComponent() : escaped;
        reason = null;
        return true;
    }

    private static bool NotFound(string why, out string app, out string pathAndQuery, out string? reason)
    {
        app = "";
        pathAndQuery = "";
        reason = why;
        return false;
    }
}
