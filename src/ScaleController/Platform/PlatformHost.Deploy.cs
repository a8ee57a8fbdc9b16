using System.Collections.Immutable;
using FaaST.Policy;
using FaaST.ScaleController.Deploy;
using FaaST.ScaleController.Providers;
using FaaST.Storage;


namespace FaaST.ScaleController.Platform;

/// <summary>Deploying: a package or a folder becomes the app's next version, loaded or rolled to; the apps deployed
/// before a restart are loaded again.</summary>
internal sealed partial class PlatformHost
{
    /// <summary>
    /// Validates and stores a zipped app, then loads it (first deploy) or rolls its instances to it; it becomes current
    /// only once an instance of it is ready (defect 7). All of it inside the deploy's admission (one deploy of an app at
    /// a time, a bounded number on the platform).
    /// </summary>
    public async Task<Deployment> DeployPackageAsync(string app, Stream zip, CancellationToken ct)
    {
        try
        {
            var staged = await _deploy.StageAsync(app, zip, ct,
                (s, token) => LoadOrRollAsync(s.Deployment, initialInstances: null, token, staged: s));
            _context.Metrics.Deploy(app, "deployed");
            return staged.Deployment;
        }
        catch (Exception e)
        {
            _context.Metrics.Deploy(app, DeployOutcome(e));
            throw;
        }
    }

    /// <summary>
    /// `./faast start APPDIR`: publishes the folder as the app's next version and loads it. Functions the runtime
    /// would disable are not a refusal here, as before the platform (they are logged and answer with their
    /// reason); `./faast deploy` refuses them.
    /// </summary>
    public async Task<Deployment> DeployDirectoryAsync(string directory, int? initialInstances, CancellationToken ct)
    {
        // The runtime's own checks of app-level files (host.json, local.settings.json, faast.json) refuse as before.
        var app = FunctionApp.Load(directory);
        CachePolicyFile.Load(directory);
        using var zip = new MemoryStream();
        Packager.Zip(directory, zip);
        zip.Position = 0;
        try
        {
            var staged = await _deployments.StageAsync(app.Name, zip, DeployService.SettingsOf(directory), $"./faast start {directory}", ct);
            await LoadOrRollAsync(staged.Deployment, initialInstances, ct, staged: staged);
            _context.Metrics.Deploy(app.Name, "deployed");
            return staged.Deployment;
        }
        catch (Exception e)
        {
            _context.Metrics.Deploy(app.Name, DeployOutcome(e));
            throw;
        }
    }

    /// <summary>The outcome tag of a deploy that threw: failed on the platform's side (no instance, storage), cancelled, or refused.</summary>
    private static string DeployOutcome(Exception e) => e switch
    {
        InstanceStartException or AppStorageException or Flash.FlashServerException or PlatformBudgetException or StorageUnavailableException or BlobStorageException
            or DeploymentStoreException or IOException => "failed",
        OperationCanceledException => "cancelled",
        _ => "refused",
    };

    /// <summary>
    /// Loads <paramref name="deployment"/> (first instances) or rolls the running app to it. A <paramref name="staged"/>
    /// deployment (a deploy) is made current only once one of its instances is ready; when none starts, its instances
    /// are stopped, its package is deleted, and the running version (if any) was never touched.
    /// </summary>
    private async Task LoadOrRollAsync(Deployment deployment, int? initialInstances, CancellationToken ct, bool adopt = false,
        StagedDeployment? staged = null)
    {
        await _deploying.WaitAsync(ct);
        try
        {
            Func<CancellationToken, Task>? makeCurrent = staged is null ? null : async token =>
            {
                await _deployments.MakeCurrentAsync(staged, token);
                Log.Deployed(_logger, deployment.App, deployment.Version, deployment.Size, deployment.Sha256);
            };
            try
            {
                var directory = await _deployments.ExtractAsync(deployment, Options.StateDirectory, ct);
                await _context.AppStorage.StartAsync(deployment.App, directory, ct);
                var file = CachePolicyFile.Load(directory);
                // Registered with the flash tier (its SLO admitted) before any instance of this version starts.
                await _context.Flash.PrepareAsync(deployment.App, file.Flash, ct);
                var policy = file.Scale;
                var schedule = Prewarm.LoadScheduleOptions.From(file.Prewarm);
                if (_apps.TryGetValue(deployment.App, out var running))
                {
                    await running.RedeployAsync(deployment, directory, policy, makeCurrent ?? (_ => Task.CompletedTask), ct, schedule);
                }
                else
                {
                    var learnt = await _loadSchedules.LoadAsync(deployment.App, schedule.Histogram, ct);
                    var app = new AppHost(_context, deployment, directory, policy, _context.Loggers.CreateLogger("FaaST.Platform"), schedule, learnt);
                    _apps.Set(deployment.App, app);
                    _router.AddApp(deployment.App);
                    try
                    {
                        if (adopt)
                            await app.AdoptAsync(await _context.Registry.ListAsync(deployment.App, ct), ct);
                        // Instances taken over count: a restarted platform keeps as many as were running.
                        await app.StartAsync(Math.Max(app.CurrentInstances,
                            Math.Clamp(initialInstances ?? Options.InitialInstances ?? policy.MinInstances, 1, policy.MaxInstances)), makeCurrent, ct);
                    }
                    catch when (staged is not null)
                    {
                        // A first deploy that did not start leaves no app behind (nothing of it is current).
                        _apps.Remove(deployment.App);
                        if (Options.SingleApp is null && !_unavailable.ContainsKey(deployment.App)) // still answered 503, with why
                            _router.RemoveApp(deployment.App);
                        await app.DisposeAsync();
                        throw;
                    }
                }
            }
            catch (Exception e) when (staged is not null && e is not DeployConflictException)
            {
                await _deployments.DiscardAsync(staged);
                throw;
            }
            // Served (and any older instances drained): only this version and the previous one stay extracted.
            ImmutableInterlocked.TryRemove(ref _unavailable, deployment.App, out _);
            _deployments.Prune(deployment.App, Options.StateDirectory, deployment.Version);
            Changed?.Invoke(deployment.App);
        }
        finally
        {
            _deploying.Release();
        }
    }

    /// <summary>A restarted platform: every app in faast-deployments is loaded again at its current version.</summary>
    private async Task LoadDeployedAppsAsync(CancellationToken ct)
    {
        foreach (var deployment in await _deployments.ListAppsAsync(ct))
        {
            if (Options.SingleApp is { } single && !deployment.App.Equals(single, StringComparison.OrdinalIgnoreCase))
                continue;
            if (Options.SingleApp is not null)
                continue; // `./faast start` deploys the folder it was given right after; no need to start the old version first
            try
            {
                await LoadOrRollAsync(deployment, initialInstances: null, ct, adopt: true);
                Log.Recovered(_logger, deployment.App, deployment.Version, deployment.Deployed);
            }
            catch (AppStorageException e)
            {
                // One app's storage must not stop the platform (an Azurite that exited here used to end the process), nor
                // look like an app never deployed (an unusable data folder used to give 404): it is routed, and answered
                // 503 with why, until its next deploy starts its Azurite again.
                Log.AppStorageFailed(_logger, deployment.App, deployment.Version, e.DataDirectory ?? "memory", e.Reason);
                ImmutableInterlocked.Update(ref _unavailable, u => u.SetItem(deployment.App, new UnavailableApp(deployment.App, deployment.Version, e.Message)));
                _router.AddApp(deployment.App);
            }
            catch (Exception e) when (e is DeployRefusedException or PolicyFileException or AppConfigException or InstanceStartException or PlatformBudgetException or IOException or InvalidDataException or DeploymentStoreException)
            {
                Log.RecoveryFailed(_logger, deployment.App, deployment.Version, e.Message);
            }
        }
    }
}
