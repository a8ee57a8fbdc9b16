using Microsoft.Extensions.Logging;
using Microsoft.Extensions.Logging.Abstractions;

namespace FaaST.ScaleController.Deploy;

/// <summary>
/// A deploy as the platform runs it (issue 13, item 2): the upload is unpacked into a private folder named after the
/// app, validated completely (<see cref="AppValidator"/>), packed again deterministically from what was validated,
/// and only then published (<see cref="DeploymentStore.PublishAsync"/>). Anything refused
/// (<see cref="DeployRefusedException"/>) is refused before the first write to storage, so the running version keeps
/// serving and storage is unchanged.
/// </summary>
public sealed class DeployService
{
    private readonly DeploymentStore _store;
    private readonly DeployOptions _options;
    private readonly ILogger _logger;

    public DeployService(DeploymentStore store, DeployOptions? options = null, ILogger? logger = null)
    {
        ArgumentNullException.ThrowIfNull(store);
        _store = store;
        _options = options ?? DeployOptions.Default;
        _logger = logger ?? NullLogger.Instance;
    }

    /// <summary>Deploys an uploaded package (a zip of the app folder's contents) as <paramref name="app"/>'s next version.</summary>
    /// <exception cref="ArgumentException">The app name is unusable.</exception>
    /// <exception cref="PackageException">The zip is corrupt or unsafe (zip-slip, links, over a cap).</exception>
    /// <exception cref="DeployValidationException">The app is invalid: every bad file, key and reason.</exception>
    public Task<Deployment> DeployAsync(string app, Stream zip, CancellationToken ct = default) =>
        PrepareAsync(app, zip, (package, token) => _store.PublishAsync(app, package, "upload", token), ct);

    /// <summary>
    /// Validates an uploaded package as <see cref="DeployAsync(string, Stream, CancellationToken)"/> does and stores it as
    /// <paramref name="app"/>'s next version without making it current (<see cref="DeploymentStore.StageAsync"/>): the
    /// platform makes it current once one of its instances is ready.
    /// </summary>
    public Task<StagedDeployment> StageAsync(string app, Stream zip, CancellationToken ct = default) =>
        PrepareAsync(app, zip, (package, token) => _store.StageAsync(app, package, "upload", token), ct);

    private async Task<T> PrepareAsync<T>(string app, Stream zip, Func<Stream, CancellationToken, Task<T>> store, CancellationToken ct)
    {
        ArgumentNullException.ThrowIfNull(zip);
        AppNames.Validate(app);
        var work = NewWorkDirectory();
        try
        {
            var folder = Path.Combine(work, app);
            await using (var upload = DeploymentStore.NewTempFile(_options))
            {
                await zip.CopyToAsync(upload, ct).ConfigureAwait(false);
                upload.Position = 0;
                Refusing(app, () => Packager.Extract(upload, folder, _options));
            }

            Refusing(app, () => CheckStart(folder, AppValidator.Validate(folder, _options.ValidationEnvironment)));
            await using var package = DeploymentStore.NewTempFile(_options);
            Refusing(app, () => Packager.Zip(folder, package, _options));
            package.Position = 0;
            return await store(package, ct).ConfigureAwait(false);
        }
        finally
        {
            DeploymentStore.TryDelete(work, _logger);
        }
    }

    /// <summary>Deploys the app folder <paramref name="directory"/> as <paramref name="app"/>'s next version: what is
    /// validated is the package's content, unpacked, exactly as an instance will see it.</summary>
    /// <exception cref="ArgumentException">The app name is unusable.</exception>
    /// <exception cref="PackageException">The folder cannot be packed (a link out of it, a file over the cap).</exception>
    /// <exception cref="DeployValidationException">The app is invalid: every bad file, key and reason.</exception>
    public async Task<Deployment> DeployAsync(string app, string directory, CancellationToken ct = default)
    {
        ArgumentNullException.ThrowIfNull(directory);
        AppNames.Validate(app);
        var work = NewWorkDirectory();
        try
        {
            await using var package = DeploymentStore.NewTempFile(_options);
            Refusing(app, () => Packager.Zip(directory, package, _options));
            package.Position = 0;
            var folder = Path.Combine(work, app);
            Refusing(app, () => Packager.Extract(package, folder, _options));
            Refusing(app, () => CheckStart(folder, AppValidator.Validate(folder, _options.ValidationEnvironment)));
            package.Position = 0;
            return await _store.PublishAsync(app, package, Path.GetFullPath(directory), ct).ConfigureAwait(false);
        }
        finally
        {
            DeploymentStore.TryDelete(work, _logger);
        }
    }

    /// <summary>
    /// What an instance checks as it starts beyond what <see cref="AppValidator"/> loads (settings its components read
    /// then: keys, queue leases, telemetry exporters), checked here too, so that a deploy an instance would refuse
    /// is refused before anything changes, naming the file and setting (issue 19, defect 7).
    /// </summary>
    private static void CheckStart(string folder, ValidatedApp validated)
    {
        var dir = Path.TrimEndingDirectorySeparator(Path.GetFullPath(folder));
        var problems = Runtime.Hosting.StartChecks.Problems(validated.App, System.Net.IPAddress.Loopback);
        if (problems.Count > 0)
            throw new DeployValidationException(problems.Select(p => AppValidator.FromMessage(dir, "local.settings.json", p)).ToList());
    }

    private void Refusing(string app, Action step)
    {
        try
        {
            step();
        }
        catch (DeployRefusedException e)
        {
            Log.Refused(_logger, app, e.Message.Replace('\n', ';'));
            throw;
        }
    }

    private string NewWorkDirectory()
    {
        var root = _options.WorkDirectory ?? Path.GetTempPath();
        return Directory.CreateDirectory(Path.Combine(root, $"faast-deploy-{Guid.NewGuid():N}")).FullName;
    }
}
