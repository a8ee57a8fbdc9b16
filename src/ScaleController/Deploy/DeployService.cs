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
    public async Task<Deployment> DeployAsync(string app, Stream zip, CancellationToken ct = default)
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

            Refusing(app, () => AppValidator.Validate(folder, _options.ValidationEnvironment));
            await using var package = DeploymentStore.NewTempFile(_options);
            // The package leaves the settings out; they are stored apart (see DeploymentStore).
            Refusing(app, () => Packager.Zip(folder, package, _options));
            package.Position = 0;
            return await _store.PublishAsync(app, package, SettingsOf(folder), "upload", ct).ConfigureAwait(false);
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
            // Validated with its settings, as an instance will run it; they are stored apart from the package.
            var settings = SettingsOf(directory);
            if (settings is not null)
                await File.WriteAllBytesAsync(Path.Combine(folder, Packager.SettingsFile), settings, ct).ConfigureAwait(false);
            Refusing(app, () => AppValidator.Validate(folder, _options.ValidationEnvironment));
            package.Position = 0;
            return await _store.PublishAsync(app, package, settings, Path.GetFullPath(directory), ct).ConfigureAwait(false);
        }
        finally
        {
            DeploymentStore.TryDelete(work, _logger);
        }
    }

    /// <summary>The bytes of the app's local.settings.json, or null when it has none.</summary>
    internal static byte[]? SettingsOf(string appDirectory)
    {
        var file = Path.Combine(appDirectory, Packager.SettingsFile);
        return File.Exists(file) ? File.ReadAllBytes(file) : null;
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
