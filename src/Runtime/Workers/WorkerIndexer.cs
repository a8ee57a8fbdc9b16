using System.Net;
using FaaST.Protos.Worker;
using Microsoft.AspNetCore.Hosting.Server;
using Microsoft.AspNetCore.Hosting.Server.Features;
using Microsoft.AspNetCore.Server.Kestrel.Core;

namespace FaaST.Runtime.Workers;

/// <summary>
/// Worker indexing, as the Functions host does it for the Python v2 and Node v4 models: a worker of the app — started
/// as the app's workers are, as the app's user, with the app's settings — answers a FunctionsMetadataRequest with one
/// RpcFunctionMetadata per function it registered, and the host validates them as function.json files
/// (<see cref="FunctionApp.WithIndex"/>) before anything is served. Why a worker of its own, on a loopback gRPC
/// endpoint of its own, ended after the answer: the host builds its routes, triggers and bindings from the function
/// list, so the list must be known before the host's components (and its worker endpoint) exist; and the platform
/// validates a deployment the same way (`FaaST.Runtime.dll index`) without starting an instance. It costs one worker
/// start (~0.3 s for Python, ~0.2 s for Node here) at the start of a worker-indexed app only.
/// </summary>
internal static partial class WorkerIndexer
{
    /// <summary>How long a worker has to start, import the app and answer: 30 s by default (FAAST_INDEX_TIMEOUT_S),
    /// as long as a worker has to start and load its functions (<see cref="WorkerOptions.StartupTimeout"/>).</summary>
    public static TimeSpan DefaultTimeout => TimeSpan.FromSeconds(
        int.TryParse(Environment.GetEnvironmentVariable("FAAST_INDEX_TIMEOUT_S"), out var s) && s > 0 ? s : 30);

    /// <summary>
    /// <paramref name="app"/> with the functions its worker registered, or, when indexing failed (the worker's FAILURE
    /// naming the file and line, a worker that did not start or answer within <paramref name="timeout"/>), with no
    /// function and <see cref="FunctionApp.IndexError"/> saying why. A function.json app comes back as it is.
    /// </summary>
    public static async Task<FunctionApp> IndexAsync(FunctionApp app, WorkerOptions options, ILoggerFactory loggers, TimeSpan timeout,
        CancellationToken ct = default)
    {
        if (app.IndexedFrom is null)
            return app;
        var logger = loggers.CreateLogger("FaaST.Host");
        Log.IndexingApp(logger, app.Name, app.IndexedFrom);
        try
        {
            var reply = await RequestMetadataAsync(app, options with { ProcessCount = 1, StartupTimeout = timeout }, loggers, timeout, ct);
            var response = reply.FunctionMetadataResponse;
            if (response.Result is { Status: StatusResult.Types.Status.Failure } failed)
                return app.WithIndexError($"{app.IndexedFrom}: the {app.WorkerRuntime} worker could not index the app: " +
                    (failed.Exception?.Message is { Length: > 0 } m ? m : failed.Result));
            if (response.UseDefaultMetadataIndexing)
                return app.WithIndexError($"{app.IndexedFrom}: the {app.WorkerRuntime} worker found no function registered in it " +
                    "(and the app has no function.json folder)");
            var functions = response.FunctionMetadataResults.Select(m => new IndexedFunction
            {
                Name = m.Name,
                ScriptFile = m.ScriptFile,
                EntryPoint = m.EntryPoint,
                RawBindings = m.RawBindings.ToArray(),
            }).ToList();
            var indexed = app.WithIndex(functions);
            Log.AppIndexed(logger, app.Name, indexed.Functions.Count, string.Join(", ", indexed.Functions.Select(f => f.Name)));
            return indexed;
        }
        catch (WorkerUnavailableException e)
        {
            return app.WithIndexError($"{app.IndexedFrom}: indexing the app failed: {e.Message}");
        }
    }

    private static async Task<StreamingMessage> RequestMetadataAsync(FunctionApp app, WorkerOptions options, ILoggerFactory loggers,
        TimeSpan timeout, CancellationToken ct)
    {
        var web = WebApplication.CreateSlimBuilder(new WebApplicationOptions { ContentRootPath = app.Directory });
        web.Logging.ClearProviders();
        web.WebHost.ConfigureKestrel(k => k.Listen(IPAddress.Loopback, 0, l => l.Protocols = HttpProtocols.Http2));
        var service = web.Services.AddWorkerChannel(options.MaxMessageSize);
        await using var server = web.Build();
        server.MapWorkerChannel();
        await server.StartAsync(ct);
        try
        {
            var address = server.Services.GetRequiredService<IServer>().Features.Get<IServerAddressesFeature>()!.Addresses.Single();
            await using var pool = new WorkerPool(options, loggers) { GrpcPort = new Uri(address).Port };
            service.Attach(pool, options.MaxMessageSize);
            // Specialised with the app but no function yet: the worker gets the app's environment and directory, and
            // loads nothing before it is asked what the app declares.
            var ready = pool.SpecializeAsync(new WorkerSpecialization { App = app, Identity = options.Identity }, ct);
            await pool.StartAsync(ct);
            if (!await ready)
                throw new WorkerUnavailableException(pool.WorkerProcessIds.Count == 0
                    ? $"the {app.WorkerRuntime} worker did not start within {timeout.TotalSeconds:0} s"
                    : $"the {app.WorkerRuntime} worker did not take the app within {timeout.TotalSeconds:0} s");
            return await pool.RequestAsync(new StreamingMessage
            {
                FunctionsMetadataRequest = new FunctionsMetadataRequest { FunctionAppDirectory = app.Directory },
            }, timeout, ct);
        }
        finally
        {
            await server.StopAsync(CancellationToken.None);
        }
    }

    private static partial class Log
    {
        [LoggerMessage(EventId = 1460, Level = LogLevel.Information, Message = "indexing app {App}: asking a worker what {File} declares")]
        public static partial void IndexingApp(ILogger logger, string app, string file);

        [LoggerMessage(EventId = 1461, Level = LogLevel.Information, Message = "app {App}: the worker declared {Count} function(s): {Names}")]
        public static partial void AppIndexed(ILogger logger, string app, int count, string names);
    }
}
