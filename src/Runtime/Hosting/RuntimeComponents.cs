using FaaST.Hosting;
using FaaST.Runtime.Hosting.Components;
using FaaST.Runtime.Http;
using FaaST.Runtime.Workers;
using Microsoft.Extensions.DependencyInjection.Extensions;
using Microsoft.Extensions.Options;

namespace FaaST.Runtime.Hosting;

/// <summary>
/// The host's registry: every component once, as a singleton that gets what it needs through its constructor
/// (no component makes another), the options per concern, the seams (<see cref="IWorkerScheduler"/>, the
/// cache's read sources and eviction sinks, <see cref="IHostCache"/>, <see cref="IHostMembership"/>), then
/// whatever <see cref="RuntimeHostOptions.ConfigureServices"/> adds.
/// </summary>
internal static class RuntimeComponents
{
    public static ServiceProvider Build(FunctionApp app, HostOptions options, RuntimeHostOptions given, WebApplicationBuilder web, ILoggerFactory loggers)
    {
        var services = new ServiceCollection();
        // Instances the host made before the registry: not disposed by it (the host disposes the loggers last).
        services.AddSingleton(app);
        services.AddSingleton(loggers);
        services.AddSingleton(web);
        services.AddSingleton(_ => new HostLifecycle(loggers.CreateLogger("FaaST.Lifecycle")));
        services.AddFromExisting<IHostLifecycle, HostLifecycle>();

        // One options object per concern, resolved and checked by HostOptions.Resolve before anything is
        // registered: its errors name the file or setting (faast.json's key, the app setting, the option).
        services.AddSingleton(Options.Create(options.Serving));
        services.AddSingleton(Options.Create(options.Storage));
        services.AddSingleton(Options.Create(options.Cache));
        services.AddSingleton(Options.Create(options.Workers));
        services.AddSingleton(Options.Create(options.Peers));
        services.AddSingleton(Options.Create(options.Telemetry));
        services.AddSingleton(Options.Create(options.Scaling));

        // What HTTP functions and the admin endpoints ask of each request; the keys component fills it in.
        services.AddSingleton(_ => new HttpKeyCheck(options.Serving.EnforceKeys));
        // The default policy; a component replaces it with one registration of its own.
        services.TryAddSingleton<IWorkerScheduler, FewestInFlightScheduler>();

        // The participants in subscription order. Resolving them makes the components in this order (each
        // after what it takes), and a component maps its endpoints when it is made, so this is also the
        // endpoints' order: worker channel, peers, functions, scale votes (then the host's admin and /metrics).
        services.AddLifecycleComponent<TelemetryComponent>();
        services.AddLifecycleComponent<StorageComponent>();
        services.AddLifecycleComponent<KeysComponent>();
        services.AddLifecycleComponent<CacheComponent>();
        services.AddFromExisting<IHostCache, CacheComponent>();
        services.AddLifecycleComponent<WorkersComponent>();
        services.AddLifecycleComponent<ServingComponent>();
        if (options.Peers.Enabled)
        {
            services.AddLifecycleComponent<PeersComponent>();
            services.AddFromExisting<IHostMembership, PeersComponent>();
            services.AddLifecycleComponent<FaaST.Runtime.Bandwidth.BandwidthComponent>();
        }
        else
            services.AddSingleton<IHostMembership>(NoPeers.Instance);
        services.AddLifecycleComponent<TriggersComponent>();
        services.AddLifecycleComponent<QueueTriggersComponent>();
        services.AddLifecycleComponent<TimerTriggersComponent>();
        services.AddLifecycleComponent<TablesComponent>();
        services.AddLifecycleComponent<HttpFunctionsComponent>();
        // The scale votes are served on the peer endpoint, so only with peers; after the functions, so that
        // its draining callback runs once their gate is closed.
        if (options.Peers.Enabled)
        {
            services.AddLifecycleComponent<ScalingComponent>();
            services.AddFromExisting<FaaST.Scaling.IInstanceLoadTime, ScalingComponent>();
        }
        services.AddLifecycleComponent<FaaST.Runtime.Prewarm.PrewarmComponent>();
        // The flash tier (issue 22): a read source, a demotion sink and its component, when faast.json enables it.
        FaaST.Runtime.Flash.FlashRegistration.AddFlashTier(services, app, options.Cache.Policy, given.Environment);

        // Later components: instances that need nothing injected, then the registrations of the hook.
        foreach (var participant in given.Participants)
            services.AddSingleton(participant);
        given.ConfigureServices?.Invoke(services);
        // A component that needs something nothing registers fails here, naming both, before anything starts.
        return services.BuildServiceProvider(new ServiceProviderOptions { ValidateOnBuild = true });
    }

    /// <summary>Membership without peers (no cache, or --no-peers): this instance is alone and in no view.</summary>
    private sealed class NoPeers : IHostMembership
    {
        public static readonly NoPeers Instance = new();

        public IReadOnlyList<FaaST.Membership.Member> Members => [];

        public FaaST.Membership.Member? Self => null;
    }
}
