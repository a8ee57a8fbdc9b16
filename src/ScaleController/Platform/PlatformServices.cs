using System.Diagnostics.Metrics;
using FaaST.Hosting;
using FaaST.ScaleController.Control;
using FaaST.ScaleController.Deploy;
using FaaST.ScaleController.Frontend;
using FaaST.ScaleController.Providers;
using FaaST.ScaleController.Telemetry;
using FaaST.Storage;

namespace FaaST.ScaleController.Platform;

/// <summary>
/// The platform's parts in its registry (Microsoft.Extensions.DependencyInjection, as the instance's host registers its
/// components): each one singleton, given what it needs by the registry; <see cref="PlatformHost"/> resolves them. A part
/// with stages is also an <see cref="ILifecycleParticipant"/> (the same instance), and joins the platform's lifecycle
/// after the host's own stages, in registration order, as the components of StartAsync's services callback do.
/// </summary>
internal static class PlatformServices
{
    /// <summary>The key of the deploy endpoint's limiter (the <see cref="RateGate"/> of its refusal lines; not the only gate).</summary>
    public const string DeployLimits = "deploy limits";

    /// <summary>
    /// Registers the platform's parts for <paramref name="options"/>. <paramref name="provider"/> and
    /// <paramref name="time"/> (tests') replace the default local processes and the system clock.
    /// </summary>
    public static IServiceCollection AddPlatform(this IServiceCollection services, PlatformOptions options, TelemetryExport export,
        IInstanceProvider? provider, TimeProvider? time)
    {
        services.AddSingleton(options);
        services.AddSingleton(export);
        services.AddSingleton(time ?? TimeProvider.System);
        // Registered as an instance, so the registry never disposes it: the providers stage does (PlatformHost.Lifecycle.cs),
        // which stops every instance before the apps' Azurites stop (storage stage), and disposing it twice would fail.
        services.AddSingleton<IInstanceProvider>(provider ?? DefaultProvider(options));
        services.AddSingleton(sp => new HostLifecycle(
            new PlatformHost.QuietStartFailures(sp.GetRequiredService<ILoggerFactory>().CreateLogger("FaaST.Platform.Lifecycle")), PlatformLifecycleStage.Serving));
        services.AddSingleton<IHostLifecycle>(sp => sp.GetRequiredService<HostLifecycle>());
        services.AddSingleton(_ => PlatformKeys.LoadOrCreate(options.StateDirectory, options.MasterKeyFile));
        // Created by the registry, so disposed by it once, when the host disposes the web application after its lifecycle stopped.
        services.AddSingleton(_ => new BlobStore(options.StorageConnectionString));
        services.AddSingleton<DeployedApps>();
        services.AddSingleton<IScaleLoopRegistry>(sp => sp.GetRequiredService<DeployedApps>());
        services.AddSingleton(sp => new InstanceRegistry(sp.GetRequiredService<BlobStore>(), sp.GetRequiredService<PlatformKeys>(), PlatformLogger(sp)));
        services.AddSingleton(sp =>
        {
            var apps = sp.GetRequiredService<DeployedApps>();
            return new PlatformMetrics(sp.GetRequiredService<IMeterFactory>(), () => apps.Values);
        });
        // The flash tier's server, started for the apps that enable it (issue 22); stopped after their instances.
        services.AddSingleton<Flash.PlatformFlash>();
        services.AddSingleton<ILifecycleParticipant>(sp => sp.GetRequiredService<Flash.PlatformFlash>());
        services.AddSingleton<PlatformContext>();
        services.AddSingleton<IAppLifecycle>(sp => sp.GetRequiredService<PlatformContext>().AppEvents);
        services.AddSingleton(sp => new AdminGuard(sp.GetRequiredService<PlatformKeys>(), options, sp.GetRequiredService<TimeProvider>(), PlatformLogger(sp)));
        services.AddKeyedSingleton(DeployLimits, (sp, _) => new RateGate(sp.GetRequiredService<TimeProvider>(), TimeSpan.FromSeconds(1)));
        services.AddSingleton(sp => new DeploymentStore(sp.GetRequiredService<BlobStore>(), sp.GetRequiredService<PlatformKeys>(),
            time: sp.GetRequiredService<TimeProvider>(), logger: DeployLogger(sp)));
        services.AddSingleton(sp => new DeployService(sp.GetRequiredService<DeploymentStore>(),
            (options.Deploy ?? DeployOptions.Default) with { WorkDirectory = PlatformHost.WorkDirectoryOf(options) }, logger: DeployLogger(sp)));
        services.AddSingleton(_ => options.SingleApp is { } single ? AppRouter.SingleApp(single) : AppRouter.MultiApp());
        services.AddSingleton(sp =>
        {
            var apps = sp.GetRequiredService<DeployedApps>();
            return new PrometheusTargets(options.StateDirectory, () => apps.Values, sp.GetRequiredService<IAppLifecycle>(), PlatformLogger(sp));
        });
        services.AddSingleton<ILifecycleParticipant>(sp => sp.GetRequiredService<PrometheusTargets>());
        services.AddSingleton(sp =>
        {
            var apps = sp.GetRequiredService<DeployedApps>();
            return new Prewarm.LoadScheduleStore(sp.GetRequiredService<BlobStore>(), () => apps.Values, sp.GetRequiredService<TimeProvider>(), PlatformLogger(sp));
        });
        services.AddSingleton<ILifecycleParticipant>(sp => sp.GetRequiredService<Prewarm.LoadScheduleStore>());
        return services;
    }

    private static ILogger PlatformLogger(IServiceProvider services) => services.GetRequiredService<ILoggerFactory>().CreateLogger("FaaST.Platform");

    private static ILogger DeployLogger(IServiceProvider services) => services.GetRequiredService<ILoggerFactory>().CreateLogger("FaaST.Deploy");

    private static LocalProcessProvider DefaultProvider(PlatformOptions options) => new(new LocalProcessOptions
    {
        TiedToPlatform = options.DevelopmentStorage,
        RunDirectory = Path.Combine(options.StateDirectory, "run"),
        Output = options.InstanceOutput ?? ((label, line) => Console.WriteLine($"[{label}] {LogText.EscapeOutput(line)}")),
    });
}
