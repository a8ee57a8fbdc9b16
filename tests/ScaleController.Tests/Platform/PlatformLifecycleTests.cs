using System.Collections.Concurrent;
using System.Net;
using System.Net.Sockets;
using FaaST.Hosting;
using FaaST.ScaleController.Platform;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Logging;

namespace FaaST.ScaleController.Tests.Platform;

/// <summary>
/// The platform's lifecycle (issue 20, item 1): its parts as ordered stages, a component that joins them through the
/// platform's services, and the apps' lifecycle events handed to async handlers that may fail or hang. A real platform
/// on a real Azurite, with real instances where an app runs.
/// </summary>
public sealed class PlatformLifecycleTests : IAsyncLifetime
{
    private static readonly int[] Stages =
    [
        PlatformLifecycleStage.Storage, PlatformLifecycleStage.Deployments, PlatformLifecycleStage.Frontend, PlatformLifecycleStage.Providers,
        PlatformLifecycleStage.Controller, PlatformLifecycleStage.Keda, PlatformLifecycleStage.Serving,
    ];

    private PlatformTestBed _bed = null!;
    private readonly ListLogger _log = new(LogLevel.Information);

    public async Task InitializeAsync() => _bed = await PlatformTestBed.StartAsync("lifecycle");

    public async Task DisposeAsync()
    {
        if (_bed is not null)
            await _bed.DisposeAsync();
    }

    private PlatformOptions Options(int port = 0, string? storage = null) => _bed.Options() with
    {
        Port = port,
        StorageConnectionString = storage ?? _bed.Azurite.ConnectionString,
        AppLifecycleTimeout = TimeSpan.FromSeconds(1),
    };

    private Task<PlatformHost> StartAsync(PlatformOptions options, Action<IServiceCollection>? services = null) =>
        _bed.StartPlatformAsync(options, l =>
        {
            l.ClearProviders();
            l.AddProvider(_log);
        }, services);

    private static bool Listening(int port)
    {
        using var client = new TcpClient();
        try
        {
            client.Connect(IPAddress.Loopback, port);
            return true;
        }
        catch (SocketException)
        {
            return false;
        }
    }

    [Fact]
    public async Task The_platforms_stages_start_in_ascending_order_and_stop_in_descending_order_with_the_frontend_refusing_before_the_apps_stop()
    {
        var port = Ports.Free();
        var recorder = new StageRecorder(port);
        var platform = await StartAsync(Options(port), s => s.AddSingleton<ILifecycleParticipant>(recorder));
        Assert.Equal(LifecycleState.Started, platform.Lifecycle.State);
        await platform.DisposeAsync();

        Assert.Equal(LifecycleState.Stopped, platform.Lifecycle.State);
        // Each observer runs right after the platform's own component of its stage starts, and right before it stops:
        // Kestrel listens from the frontend stage up, and a stop first stops it taking requests (serving), then the rest.
        Assert.Equal(
        [
            "start 2000 closed", "start 3000 closed", "start 4000 listening", "start 5000 listening", "start 6000 listening", "start 7000 listening", "start 8000 listening",
            "stop 8000 listening", "stop 7000 closed", "stop 6000 closed", "stop 5000 closed", "stop 4000 closed", "stop 3000 closed", "stop 2000 closed",
        ], recorder.Events);
    }

    [Fact]
    public async Task A_platform_whose_storage_fails_at_start_stops_the_stages_that_started_in_reverse_and_throws_the_storage_failure()
    {
        var dead = Ports.Free();
        var port = Ports.Free();
        var storage = $"DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey={Storage.AzuriteAccount.Generate().Key};" +
            $"BlobEndpoint=http://127.0.0.1:{dead}/devstoreaccount1;QueueEndpoint=http://127.0.0.1:{dead}/devstoreaccount1;";
        var recorder = new StageRecorder(port);

        var e = await Assert.ThrowsAnyAsync<Exception>(() => StartAsync(Options(port, storage), s => s.AddSingleton<ILifecycleParticipant>(recorder)));

        Assert.True(e is FaaST.Storage.StorageUnavailableException or FaaST.Storage.BlobStorageException, e.ToString());
        // The controller stage (which lists the deployed apps) failed: what started before it stopped, last first.
        Assert.Equal(
        [
            "start 2000 closed", "start 3000 closed", "start 4000 listening", "start 5000 listening",
            "stop 5000 listening", "stop 4000 listening", "stop 3000 closed", "stop 2000 closed",
        ], recorder.Events);
        Assert.False(Listening(port), "the frontend's port is still bound");
        Assert.False(File.Exists(LocalCredentials.PathFor(Repo.Root, new Uri($"http://127.0.0.1:{port}/"))), "the admin credential was left behind");
        Assert.DoesNotContain(_log.Entries, l => l.EventId == 6000); // the caller reports it, in one line
    }

    [Fact]
    public async Task App_lifecycle_handlers_see_each_apps_events_in_order_and_one_that_throws_or_hangs_is_logged_without_stopping_an_unload_or_a_cold_start()
    {
        var seen = new ConcurrentQueue<AppLifecycleEvent>();
        var platform = await StartAsync(Options(), s => s.AddSingleton<ILifecycleParticipant>(sp => new HandlerComponent(sp.GetRequiredService<IAppLifecycle>(), seen)));
        using var client = AdminKey.Client(platform.Address, platform.Keys.AdminKey);
        await _bed.DeployAsync(client, "moody", _bed.ScaleBench("moody", """{ "keepAlive": "00:00:03", "interval": "00:00:01" }"""));
        Assert.Equal("ok", await client.GetStringAsync("moody/api/work/1"));

        // The unload goes through although two of the three handlers fail on every event.
        await Eventually.TrueAsync(() => seen.Any(e => e.Kind == AppLifecycleKind.Unloaded), "the unload", () => _log.All + Output, seconds: 120);
        // A cold start (0 -> 1 instance) as well. On a busy machine an instance can take longer to start than the frontend's
        // queue waits (30 s): a 503 then is the queue's answer, and the request is sent again.
        await Eventually.TrueAsync(async () =>
        {
            using var again = await client.GetAsync("moody/api/work/1");
            return again.IsSuccessStatusCode;
        }, "the cold start to answer", seconds: 180);
        await Eventually.TrueAsync(() => seen.Count(e => e.Kind == AppLifecycleKind.InstanceStarted) >= 2, "the second instance's start", () => _log.All);

        // The load, the unload, and the load again; on a busy machine the queued request may have the controller start
        // more than one instance then, each announced after the app's Loaded.
        Assert.Equal(
        [
            AppLifecycleKind.Loaded, AppLifecycleKind.InstanceStarted, AppLifecycleKind.Unloading, AppLifecycleKind.InstanceStopped,
            AppLifecycleKind.Unloaded, AppLifecycleKind.Loaded, AppLifecycleKind.InstanceStarted,
        ], seen.Select(e => e.Kind).Take(7));
        Assert.All(seen, e => Assert.Equal("moody", e.App));
        await Eventually.TrueAsync(() => _log.Entries.Count(l => l.EventId == 8301) >= seen.Count, "a timeout line for each event", () => _log.All);
        foreach (var kind in Enum.GetValues<AppLifecycleKind>())
        {
            Assert.Contains(_log.Entries, l => l.EventId == 8300 && l.Text.Contains("thrower", StringComparison.Ordinal) && l.Text.Contains($"failed on {kind} ", StringComparison.Ordinal));
            Assert.Contains(_log.Entries, l => l.EventId == 8301 && l.Text.Contains("hanger", StringComparison.Ordinal) && l.Text.Contains($"finish {kind} ", StringComparison.Ordinal));
        }
    }

    [Fact]
    public async Task A_component_registered_through_the_platforms_services_gets_its_parts_injected_and_reads_a_loaded_apps_current_deployment()
    {
        var seen = new ConcurrentQueue<string>();
        var platform = await StartAsync(Options(), s => s.AddSingleton(seen).AddSingleton<ILifecycleParticipant, DeploymentWatcher>());
        using var client = AdminKey.Client(platform.Address, platform.Keys.AdminKey);

        await _bed.DeployAsync(client, "watched", _bed.ScaleBench("watched", """{ "keepAlive": "00:05:00" }"""));

        // At the app's Loaded the watcher, built by the platform's registry, read the deployment store it was given: the
        // version just made current; its keys are the platform's own, and its lifecycle the platform's.
        await Eventually.TrueAsync(() => !seen.IsEmpty, "the watcher to see the load", () => _log.All + Output);
        Assert.Equal(["joined the platform's lifecycle", $"watched v1 loaded, current v1, deploy key {platform.Keys.DeployKeyOf("watched")}"], seen);
    }

    private string Output => _bed.Tail();

    /// <summary>Joins every platform stage, recording each start and stop and whether the frontend's port answers then.</summary>
    private sealed class StageRecorder(int port) : ILifecycleParticipant
    {
        public ConcurrentQueue<string> Events { get; } = new();

        public void Participate(IHostLifecycle lifecycle)
        {
            foreach (var stage in Stages)
            {
                lifecycle.Subscribe($"recorder {stage}", stage, new LifecycleObserver(
                    _ => Record("start", stage),
                    _ => Record("stop", stage)));
            }
        }

        private Task Record(string what, int stage)
        {
            Events.Enqueue($"{what} {stage} {(Listening(port) ? "listening" : "closed")}");
            return Task.CompletedTask;
        }
    }

    /// <summary>A component with the app lifecycle injected: one handler records, one throws, one never finishes.</summary>
    private sealed class HandlerComponent(IAppLifecycle apps, ConcurrentQueue<AppLifecycleEvent> seen) : ILifecycleParticipant
    {
        public void Participate(IHostLifecycle lifecycle)
        {
            apps.Subscribe("thrower", (_, _) => throw new InvalidOperationException("a handler that breaks"));
            apps.Subscribe("hanger", (_, _) => new TaskCompletionSource().Task);
            apps.Subscribe("recorder", (e, _) =>
            {
                seen.Enqueue(e);
                return Task.CompletedTask;
            });
        }
    }

    /// <summary>A component the platform's registry builds: the app lifecycle, the keys, the deployment store and the
    /// platform's lifecycle injected; at each app's load it reads the app's current deployment.</summary>
    private sealed class DeploymentWatcher(IAppLifecycle apps, PlatformKeys keys, FaaST.ScaleController.Deploy.DeploymentStore deployments,
        IHostLifecycle platformLifecycle, ConcurrentQueue<string> seen) : ILifecycleParticipant
    {
        public void Participate(IHostLifecycle lifecycle)
        {
            if (ReferenceEquals(lifecycle, platformLifecycle))
                seen.Enqueue("joined the platform's lifecycle");
            apps.Subscribe("watcher", async (e, ct) =>
            {
                if (e.Kind != AppLifecycleKind.Loaded)
                    return;
                var current = await deployments.CurrentAsync(e.App, ct);
                seen.Enqueue($"{e.App} v{e.Version} loaded, current v{current?.Version}, deploy key {keys.DeployKeyOf(e.App)}");
            });
        }
    }
}
