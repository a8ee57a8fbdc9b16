using FaaST.Cachelet.Policy;
using FaaST.Cachelet.Telemetry;

namespace FaaST.Runtime.Hosting;

/// <summary>/admin/host/status: what the instance runs and which functions have problems.</summary>
internal static class AdminEndpoints
{
    public static void Map(IEndpointRouteBuilder routes, RuntimeHost host)
    {
        // The HTTP floor: no worker, no storage (benchmarks compare functions against it).
        routes.MapGet("/admin/host/ping", () => Results.Ok());
        routes.MapGet("/admin/cache", () =>
        {
            if (host.Cache is not { } cache)
                return Results.Json(new { enabled = false });
            var m = cache.Metrics;
            return Results.Json(new
            {
                enabled = true,
                consistency = cache.Policy.Consistency.Name,
                memoryLimit = cache.Policy.MemoryLimit,
                memoryLimitSource = cache.Policy.MemoryLimitSource switch
                {
                    MemoryLimitSource.PolicyFile => "faast.json",
                    MemoryLimitSource.Cgroup => "cgroup " + host.MemoryCgroup?.File,
                    _ => "default",
                },
                directory = cache.Directory,
                objects = cache.ObjectCount,
                bytes = cache.CachedBytes,
                pinnedBytes = cache.PinnedBytes,
                reads = Enum.GetValues<ReadPath>().ToDictionary(CacheletMetrics.PathName, m.Reads),
                writes = m.Writes,
                evictions = m.Evictions,
            });
        });
        routes.MapGet("/admin/host/status", () => Results.Json(new
        {
            state = host.ReadyWorkers > 0 ? "Running" : "Initializing",
            workerRuntime = host.App.WorkerRuntime,
            readyWorkers = host.ReadyWorkers,
            hostProcessId = Environment.ProcessId,
            workerProcessIds = host.WorkerProcessIds,
            isolation = host.WorkerIdentity is { } user
                ? new { user = user.UserName, uid = (int?)user.UserId, gid = (int?)user.GroupId, reason = (string?)null }
                : new { user = "none", uid = (int?)null, gid = (int?)null, reason = host.IsolationReason },
            instance = host.Self is { } self ? new { id = self.Id, peerAddress = self.PeerAddress.ToString() } : null,
            members = host.Members.Select(m => new { id = m.Id, peerAddress = m.PeerAddress.ToString() }),
            functions = host.FunctionStatus(),
        }));
    }
}
