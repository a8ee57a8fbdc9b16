using FaaST.Cachelet;
using FaaST.Policy;
using FaaST.Cachelet.Telemetry;
using FaaST.Hosting.Status;

namespace FaaST.Runtime.Hosting;

/// <summary>The admin API: the HTTP floor, and the host's and the cache's status (the records of <see cref="StatusJsonContext"/>).</summary>
internal static class AdminEndpoints
{
    public static void Map(WebApplication routes, RuntimeHost host, Http.HttpKeyCheck keys, ILogger logger)
    {
        // As in Azure Functions, /admin/* needs the master key (when keys are checked), except the ping
        // (a health probe). A middleware rather than a filter per endpoint, so that admin endpoints other
        // components add are covered too; it costs the other requests one path comparison when keys are
        // checked and nothing when they are not.
        if (keys.Enforced)
            routes.Use((context, next) =>
            {
                var path = context.Request.Path;
                if (!path.StartsWithSegments("/admin", StringComparison.OrdinalIgnoreCase) ||
                    path.Equals("/admin/host/ping", StringComparison.OrdinalIgnoreCase))
                    return next(context);
                return keys.Refusal(context.Request, AuthLevel.Admin, function: null) is { } refusal
                    ? Http.HttpTriggerEndpoints.WriteUnauthorizedAsync(context, refusal, null, logger)
                    : next(context);
            });
        // The HTTP floor: no worker, no storage (benchmarks compare functions against it).
        routes.MapGet("/admin/host/ping", () => Results.Ok());
        routes.MapGet("/admin/cache", () => Results.Json(CacheStatus(host), StatusJsonContext.Default.CacheStatus));
        routes.MapGet("/admin/host/status", () => Results.Json(host.Status(), StatusJsonContext.Default.HostStatus));
    }

    private static CacheStatus CacheStatus(RuntimeHost host)
    {
        if (host.Cache is not { } cache)
            return FaaST.Hosting.Status.CacheStatus.Disabled;
        var m = cache.Metrics;
        var reads = new Dictionary<string, long>();
        foreach (var path in Enum.GetValues<ReadPath>())
            reads[CacheletMetrics.PathName(path)] = m.Reads(path);
        return new CacheStatus(
            Enabled: true,
            Consistency: cache.Policy.Consistency.Name,
            MemoryLimit: cache.Policy.MemoryLimit,
            MemoryLimitSource: cache.Policy.MemoryLimitSource switch
            {
                MemoryLimitSource.PolicyFile => "faast.json",
                MemoryLimitSource.Cgroup => "cgroup " + host.MemoryCgroup?.File,
                _ => "default",
            },
            Directory: cache.Directory,
            Objects: cache.ObjectCount,
            Bytes: cache.CachedBytes,
            PinnedBytes: cache.PinnedBytes,
            Reads: reads,
            Writes: m.Writes,
            Evictions: m.Evictions);
    }
}
