namespace FaaST.Runtime.Hosting;

/// <summary>/admin/host/status: what the instance runs and which functions have problems.</summary>
internal static class AdminEndpoints
{
    public static void Map(IEndpointRouteBuilder routes, RuntimeHost host)
    {
        // The HTTP floor: no worker, no storage (benchmarks compare functions against it).
        routes.MapGet("/admin/host/ping", () => Results.Ok());
        routes.MapGet("/admin/host/status", () => Results.Json(new
        {
            state = host.ReadyWorkers > 0 ? "Running" : "Initializing",
            workerRuntime = host.App.WorkerRuntime,
            readyWorkers = host.ReadyWorkers,
            functions = host.FunctionStatus(),
        }));
    }
}
