using System.Net;
using FaaST.Hosting;
using Microsoft.AspNetCore.Server.Kestrel.Core;
using Microsoft.Extensions.Options;

namespace FaaST.Runtime.Hosting.Components;

/// <summary>
/// Kestrel (stage <see cref="ServiceLifecycleStage.Endpoints"/>): the app's HTTP port, the workers'
/// loopback gRPC port, and whatever listeners and endpoints other components add before it starts.
/// It stops after the workers, whose streams are its only long-lived requests.
/// </summary>
internal sealed class ServingComponent : ILifecycleParticipant, IAsyncDisposable
{
    private readonly ServingOptions _options;
    private readonly List<(IPAddress Address, int Port, Action<ListenOptions> Configure)> _listeners = [];
    private readonly List<Action<WebApplication>> _endpoints = [];
    private readonly List<Action<WebApplicationBuilder>> _services = [];
    private ListenOptions? _http, _workerChannel;
    private WebApplication? _web;

    private readonly WebApplicationBuilder _builder;

    /// <param name="builder">From <see cref="CreateBuilder"/>; the host read its configuration for the loggers.</param>
    public ServingComponent(IOptions<ServingOptions> options, WebApplicationBuilder builder)
    {
        _options = options.Value;
        _builder = builder;
    }

    /// <summary>The web host's builder: its configuration (appsettings.json, environment) also configures the host's loggers.</summary>
    public static WebApplicationBuilder CreateBuilder(string contentRoot) =>
        WebApplication.CreateSlimBuilder(new WebApplicationOptions { ContentRootPath = contentRoot });

    /// <summary>Where the app's HTTP functions are served, once started.</summary>
    public Uri? BaseAddress { get; private set; }

    /// <summary>The loopback port the workers dial, once started (0 before).</summary>
    public int WorkerChannelPort { get; private set; }

    /// <summary>Adds a listener of another component (e.g. the peer port); only before <see cref="Build"/>.</summary>
    public void Listen(IPAddress address, int port, Action<ListenOptions> configure)
    {
        if (_web is not null)
            throw new InvalidOperationException("listeners are added before the web host is built");
        _listeners.Add((address, port, configure));
    }

    /// <summary>Registers another component's services (e.g. a gRPC service, telemetry); only before <see cref="Build"/>.</summary>
    public void ConfigureServices(Action<WebApplicationBuilder> configure)
    {
        if (_web is not null)
            throw new InvalidOperationException("services are registered before the web host is built");
        _services.Add(configure);
    }

    /// <summary>The web host's services, once built.</summary>
    public IServiceProvider Services => _web?.Services ?? throw new InvalidOperationException("the web host was not built");

    /// <summary>The app's HTTP port, once started (0 before).</summary>
    public int HttpPort => _http?.IPEndPoint?.Port ?? 0;

    /// <summary>Adds endpoints of another component; they are mapped in order when this stage starts.</summary>
    public void MapEndpoints(Action<WebApplication> map) => _endpoints.Add(map);

    /// <summary>Builds the web host on <paramref name="loggers"/> (the host's, shared by every component).</summary>
    public WebApplication Build(ILoggerFactory loggers)
    {
        var builder = _builder;
        builder.Logging.ClearProviders();
        // The host owns the logger factory, so components that stop after Kestrel still log.
        builder.Services.AddSingleton(loggers);
        builder.WebHost.ConfigureKestrel(k =>
        {
            k.AddServerHeader = false;
            k.Limits.MaxRequestBodySize = null; // the HTTP trigger enforces FUNCTIONS_REQUEST_BODY_SIZE_LIMIT itself
            k.Limits.Http2.MaxStreamsPerConnection = 1000;
            k.Limits.Http2.InitialConnectionWindowSize = 16 * 1024 * 1024;
            k.Limits.Http2.InitialStreamWindowSize = 16 * 1024 * 1024;
            k.Limits.Http2.MaxFrameSize = 1024 * 1024;
            k.Listen(_options.ListenAddress, _options.HttpPort, l =>
            {
                l.Protocols = HttpProtocols.Http1;
                _http = l;
            });
            k.Listen(IPAddress.Loopback, 0, l =>
            {
                l.Protocols = HttpProtocols.Http2;
                _workerChannel = l;
            });
            foreach (var (address, port, configure) in _listeners)
                k.Listen(address, port, configure);
        });
        // Azure's route constraints include regex, which the slim builder leaves out.
        builder.Services.Configure<RouteOptions>(r => r.SetParameterPolicy<Microsoft.AspNetCore.Routing.Constraints.RegexInlineRouteConstraint>("regex"));
        foreach (var configure in _services)
            configure(builder);
        _web = builder.Build();
        return _web;
    }

    public void Participate(IHostLifecycle lifecycle) =>
        lifecycle.Subscribe(nameof(ServingComponent), ServiceLifecycleStage.Endpoints, new LifecycleObserver(StartAsync, StopAsync));

    private async Task StartAsync(CancellationToken ct)
    {
        var web = _web ?? throw new InvalidOperationException("the web host was not built");
        foreach (var map in _endpoints)
            map(web);
        await web.StartAsync(ct);
        WorkerChannelPort = BoundPort(_workerChannel, "worker channel");
        BaseAddress = new Uri($"http://{_options.ListenAddress}:{BoundPort(_http, "HTTP")}");
    }

    /// <summary>The port Kestrel bound for <paramref name="listen"/> (a free one for port 0).</summary>
    private static int BoundPort(ListenOptions? listen, string what) =>
        listen?.IPEndPoint?.Port ?? throw new InvalidOperationException($"Kestrel started without the {what} listener");

    private async Task StopAsync(CancellationToken ct)
    {
        if (_web is null)
            return; // never built: nothing listens
        try
        {
            await _web.StopAsync(_options.ShutdownTimeout);
        }
        catch (OperationCanceledException)
        {
            // shutting down anyway
        }
    }

    /// <summary>Releases the web host's services; after the lifecycle has stopped.</summary>
    public async ValueTask DisposeAsync()
    {
        if (_web is not null)
            await _web.DisposeAsync();
    }
}
