using FaaST.Common;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Hosting;
using Microsoft.AspNetCore.Hosting.Server;
using Microsoft.AspNetCore.Hosting.Server.Features;
using Microsoft.AspNetCore.Server.Kestrel.Core;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Hosting;
using Microsoft.Extensions.Logging;

namespace FaaST.FlashBackend.Server;

/// <summary>
/// The flash tier's server: Kestrel (HTTP/2 cleartext, the proto's transport) with FlashTier and FlashAdmin over one
/// <see cref="FlashServerCore"/>. Started by `FaaST.FlashBackend serve` and, in-process, by the tests and the
/// real-server benchmark. Disposing drains: Kestrel stops taking calls and waits for the running ones, then the
/// dispatcher stops and the store closes.
/// </summary>
public sealed class FlashServer : IAsyncDisposable
{
    private readonly WebApplication _app;
    private readonly FlashServerCore _core;

    private readonly ILoggerFactory _coreLogs;

    private FlashServer(WebApplication app, FlashServerCore core, Uri address, ILoggerFactory coreLogs)
    {
        _coreLogs = coreLogs;
        _app = app;
        _core = core;
        Address = address;
    }

    /// <summary>Where it serves, e.g. http://127.0.0.1:41234.</summary>
    public Uri Address { get; }

    /// <summary>The admin key's file (keys/admin in the state folder, 0600).</summary>
    public string AdminKeyPath => _core.Keys.AdminKeyPath;

    /// <summary>The storage engine (tests and the bench read how it does I/O).</summary>
    internal Engine.FlashStore Store => _core.Store;

    public static async Task<FlashServer> StartAsync(ServeOptions options, Action<ILoggingBuilder>? logging = null)
    {
        ArgumentNullException.ThrowIfNull(options);
        options.Validate();
        Action<ILoggingBuilder> configure = logging ?? (b => b.AddSimpleConsole(o => o.SingleLine = true).SetMinimumLevel(LogLevel.Information)
            .AddFilter("Microsoft", LogLevel.Warning).AddFilter("Grpc", LogLevel.Warning));
        // The core's logger lives as long as the server (the dispatcher logs through it until disposal).
        ILoggerFactory coreLogs = LoggerFactory.Create(configure);
        FlashServerCore core;
        try
        {
            core = await FlashServerCore.OpenAsync(options, coreLogs.CreateLogger("FaaST.FlashBackend")).ConfigureAwait(false);
        }
        catch
        {
            coreLogs.Dispose();
            throw;
        }
        // Get and Put stream with synchronous pread/pwrite (RandomAccess on an O_DIRECT fd: docs/flash.md), one pool
        // thread per unit in flight (GetMany too with --io pread); without enough threads ready the pool's slow
        // injection, not the device, would cap the queue depth. The LC in-flight cap plus room for the gRPC handlers.
        // Idle threads cost nothing here: they do not spin (UnfairSemaphoreSpinLimit 0 in the project file).
        ThreadPool.GetMinThreads(out int workers, out int io);
        ThreadPool.SetMinThreads(Math.Max(workers, SchedulingLimitsInFlight() + 16), io);
        try
        {
            WebApplicationBuilder builder = WebApplication.CreateSlimBuilder(new WebApplicationOptions { Args = [], ContentRootPath = AppContext.BaseDirectory });
            builder.Logging.ClearProviders();
            configure(builder.Logging);
            builder.WebHost.ConfigureKestrel(k =>
            {
                k.Listen(options.Listen, l => l.Protocols = HttpProtocols.Http2);
                // Clients keep one connection and put many calls on it (a QD 32 load is 32 streams).
                k.Limits.Http2.MaxStreamsPerConnection = 1024;
            });
            if (options.ReusePort)
                builder.WebHost.UseSockets(s => s.CreateBoundListenSocket = SharedPort.Bind);
            builder.Services.AddSingleton(core);
            builder.Services.AddGrpc(g =>
            {
                g.EnableDetailedErrors = false;
                g.Interceptors.Add<ClientGoneInterceptor>();
            });
            builder.Services.Configure<HostOptions>(h => h.ShutdownTimeout = TimeSpan.FromSeconds(30));
            WebApplication app = builder.Build();
            app.MapGrpcService<FlashTierService>();
            app.MapGrpcService<FlashAdminService>();
            await app.StartAsync().ConfigureAwait(false);
            string bound = app.Services.GetRequiredService<IServer>().Features.Get<IServerAddressesFeature>()!.Addresses.First();
            var address = new Uri(bound.Replace("[::]", "127.0.0.1", StringComparison.Ordinal));
            if (options.ReadyFile is { } ready)
                ServerKeys.WriteAtomically(ready, address.ToString().TrimEnd('/') + "\n");
            return new FlashServer(app, core, address, coreLogs);
        }
        catch
        {
            core.Dispose();
            coreLogs.Dispose();
            throw;
        }
    }

    private static int SchedulingLimitsInFlight() => Scheduling.SchedulerLimits.Default.LcInFlightMax;

    public async ValueTask DisposeAsync()
    {
        await _app.StopAsync().ConfigureAwait(false);
        _core.Dispose();
        await _app.DisposeAsync().ConfigureAwait(false);
        _coreLogs.Dispose();
    }
}
