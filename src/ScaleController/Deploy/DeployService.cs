using System.Collections.Concurrent;
using Microsoft.Extensions.Logging.Abstractions;

namespace FaaST.ScaleController.Deploy;

/// <summary>
/// A deploy as the platform runs it (issue 13, item 2): the upload is unpacked into a private folder named after the
/// app, validated completely (<see cref="AppValidator"/>), packed again deterministically from what was validated,
/// and only then published (<c>DeploymentStore.PublishAsync</c>). Anything refused
/// (<see cref="DeployRefusedException"/>) is refused before the first write to storage, so the running version keeps
/// serving and storage is unchanged. One request must not exhaust the platform (issue 19, defect 6): an upload stops
/// being read at <see cref="DeployOptions.MaxPackageBytes"/>, each app has one deploy in progress at a time, and at
/// most <see cref="DeployOptions.MaxConcurrentDeploys"/> run at once on the platform.
/// </summary>
public sealed class DeployService
{
    private readonly DeploymentStore _store;
    private readonly DeployOptions _options;
    private readonly ILogger _logger;
    private readonly ConcurrentDictionary<string, bool> _inProgress = new(StringComparer.OrdinalIgnoreCase);
    private readonly SemaphoreSlim _slots;

    public DeployService(DeploymentStore store, DeployOptions? options = null, ILogger? logger = null)
    {
        ArgumentNullException.ThrowIfNull(store);
        _store = store;
        _options = options ?? DeployOptions.Default;
        _logger = logger ?? NullLogger.Instance;
        ArgumentOutOfRangeException.ThrowIfLessThan(_options.MaxConcurrentDeploys, 1, "DeployOptions.MaxConcurrentDeploys");
        ArgumentOutOfRangeException.ThrowIfLessThan(_options.MaxPackageBytes, 1, "DeployOptions.MaxPackageBytes");
        _slots = new SemaphoreSlim(_options.MaxConcurrentDeploys, _options.MaxConcurrentDeploys);
    }

    /// <summary>What a refused deploy over capacity is told to wait (Retry-After): about one deploy's time.</summary>
    public static TimeSpan RetryAfter { get; } = TimeSpan.FromSeconds(10);

    public DeployOptions Options => _options;

    /// <summary>
    /// Admits one deploy of <paramref name="app"/>: refused at once, never queued (a queue of uploads is what the cap
    /// prevents), when the app has a deploy in progress or the platform runs <see cref="DeployOptions.MaxConcurrentDeploys"/>.
    /// Dispose the result when the deploy is over.
    /// </summary>
    /// <exception cref="DeployInProgressException">The app has a deploy in progress (HTTP 409).</exception>
    /// <exception cref="DeployCapacityException">The platform's deploys are all taken (HTTP 503).</exception>
    public IDisposable Admit(string app)
    {
        AppNames.Validate(app);
        if (!_inProgress.TryAdd(app, true))
            throw new DeployInProgressException(app);
        if (!_slots.Wait(0))
        {
            _inProgress.TryRemove(app, out _);
            throw new DeployCapacityException(_options.MaxConcurrentDeploys, RetryAfter);
        }
        return new Admission(this, app);
    }

    private sealed class Admission(DeployService service, string app) : IDisposable
    {
        private int _disposed;

        public void Dispose()
        {
            if (Interlocked.Exchange(ref _disposed, 1) != 0)
                return;
            service._slots.Release();
            service._inProgress.TryRemove(app, out _);
        }
    }

    /// <summary>Deploys an uploaded package (a zip of the app folder's contents) as <paramref name="app"/>'s next version.</summary>
    /// <exception cref="ArgumentException">The app name is unusable.</exception>
    /// <exception cref="DeployInProgressException">The app has a deploy in progress.</exception>
    /// <exception cref="DeployCapacityException">The platform runs as many deploys as it may.</exception>
    /// <exception cref="PackageTooLargeException">The upload is over <see cref="DeployOptions.MaxPackageBytes"/>.</exception>
    /// <exception cref="PackageException">The zip is corrupt or unsafe (zip-slip, links, over a cap).</exception>
    /// <exception cref="DeployValidationException">The app is invalid: every bad file, key and reason.</exception>
    public Task<Deployment> DeployAsync(string app, Stream zip, CancellationToken ct = default) =>
        PrepareAsync(app, zip, (package, settings, token) => _store.PublishAsync(app, package, settings, "upload", token), null, ct);

    /// <summary>
    /// Validates an uploaded package as <see cref="DeployAsync(string, Stream, CancellationToken)"/> does and stores it as
    /// <paramref name="app"/>'s next version without making it current (<see cref="DeploymentStore.StageAsync"/>): the
    /// platform makes it current once one of its instances is ready.
    /// </summary>
    /// <param name="afterStage">Runs once the version is stored, still inside the deploy's admission (the platform
    /// starts the version's instances and rolls there, so a second deploy of the app waits for none of it: it is refused).</param>
    public Task<StagedDeployment> StageAsync(string app, Stream zip, CancellationToken ct = default,
        Func<StagedDeployment, CancellationToken, Task>? afterStage = null) =>
        PrepareAsync(app, zip, (package, settings, token) => _store.StageAsync(app, package, settings, "upload", token), afterStage, ct);

    private async Task<T> PrepareAsync<T>(string app, Stream zip, Func<Stream, byte[]?, CancellationToken, Task<T>> store,
        Func<T, CancellationToken, Task>? after, CancellationToken ct)
    {
        ArgumentNullException.ThrowIfNull(zip);
        AppNames.Validate(app);
        using var admission = Admit(app);
        var work = NewWorkDirectory();
        try
        {
            var folder = Path.Combine(work, app);
            // Unpacking, checking and packing again are synchronous file work: off the request's thread, bounded by
            // the admission above.
            await using (var upload = NewWorkFile(work))
            {
                await CopyCappedAsync(app, zip, upload, ct).ConfigureAwait(false);
                upload.Position = 0;
                await Task.Run(() => Refusing(app, () => Packager.Extract(upload, folder, _options)), ct).ConfigureAwait(false);
            }

            await Task.Run(() => Refusing(app, () => CheckStart(folder, AppValidator.Validate(folder, _options.ValidationEnvironment), _options, _logger)), ct).ConfigureAwait(false);
            await using var package = NewWorkFile(work);
            // The package leaves the settings out; they are stored apart (see DeploymentStore).
            await Task.Run(() => Refusing(app, () => Packager.Zip(folder, package, _options)), ct).ConfigureAwait(false);
            package.Position = 0;
            var result = await store(package, SettingsOf(folder), ct).ConfigureAwait(false);
            if (after is not null)
                await after(result, ct).ConfigureAwait(false);
            return result;
        }
        finally
        {
            DeploymentStore.TryDelete(work, _logger);
        }
    }

    /// <summary>Copies the upload, reading no further than one byte past the cap.</summary>
    private async Task CopyCappedAsync(string app, Stream zip, Stream upload, CancellationToken ct)
    {
        var buffer = new byte[1 << 16];
        long total = 0;
        int read;
        while ((read = await zip.ReadAsync(buffer, ct).ConfigureAwait(false)) > 0)
        {
            total += read;
            if (total > _options.MaxPackageBytes)
            {
                var e = new PackageTooLargeException(app, _options.MaxPackageBytes);
                Log.Refused(_logger, app, e.Message);
                throw e;
            }
            await upload.WriteAsync(buffer.AsMemory(0, read), ct).ConfigureAwait(false);
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
        using var admission = Admit(app);
        var work = NewWorkDirectory();
        try
        {
            await using var package = NewWorkFile(work);
            Refusing(app, () => Packager.Zip(directory, package, _options));
            package.Position = 0;
            var folder = Path.Combine(work, app);
            Refusing(app, () => Packager.Extract(package, folder, _options));
            // Validated with its settings, as an instance will run it; they are stored apart from the package.
            var settings = SettingsOf(directory);
            if (settings is not null)
                await File.WriteAllBytesAsync(Path.Combine(folder, Packager.SettingsFile), settings, ct).ConfigureAwait(false);
            Refusing(app, () => CheckStart(folder, AppValidator.Validate(folder, _options.ValidationEnvironment), _options, _logger));
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

    /// <summary>
    /// What an instance checks as it starts beyond what <see cref="AppValidator"/> loads (settings its components read
    /// then: keys, queue leases, telemetry exporters), checked here too, so that a deploy an instance would refuse
    /// is refused before anything changes, naming the file and setting (issue 19, defect 7).
    /// </summary>
    private static void CheckStart(string folder, ValidatedApp validated, DeployOptions options, ILogger logger)
    {
        var dir = Path.TrimEndingDirectorySeparator(Path.GetFullPath(folder));
        var index = validated.IndexedFrom is not null;
        if (index && !OperatingSystem.IsWindows() && AppAccess.For(validated.Name, logger) is { GroupId: not null } access)
        {
            // A Python v2 / Node v4 app's functions are known by importing its code: the check's worker runs it as the
            // app's own user (never root), so that user reads this work copy as it reads a published version.
            // The deploy's own folder is given to the app's group as a version is (AppAccess.Apply); the work folder and
            // the state folder above it only let the app users pass (o+x, no listing), as STATE/apps does.
            var work = Path.GetDirectoryName(dir)!;
            access.Apply(work);
            var workRoot = Path.GetDirectoryName(work)!;
            foreach (var up in (string?[])[workRoot, Path.GetDirectoryName(workRoot)])
            {
                if (up is null)
                    continue;
                var mode = File.GetUnixFileMode(up);
                if ((mode & UnixFileMode.OtherExecute) == 0)
                    File.SetUnixFileMode(up, mode | UnixFileMode.OtherExecute);
            }
        }
        var problems = RuntimeChecks.Problems(options.RuntimeDll, dir, options.ValidationEnvironment, index);
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

    /// <summary>A folder of this deploy's own (0700: the upload is another tenant's code until it is published).</summary>
    private string NewWorkDirectory()
    {
        var root = _options.WorkDirectory ?? Path.GetTempPath();
        return Storage.PrivateFiles.CreateDirectory(Path.Combine(root, $"faast-deploy-{Guid.NewGuid():N}"));
    }

    /// <summary>A spool file in the deploy's folder, 0600, deleted when closed.</summary>
    private static FileStream NewWorkFile(string work)
    {
        var options = new FileStreamOptions
        {
            Mode = FileMode.CreateNew,
            Access = FileAccess.ReadWrite,
            Share = FileShare.None,
            BufferSize = 1 << 16,
            Options = FileOptions.DeleteOnClose | FileOptions.Asynchronous,
        };
        if (!OperatingSystem.IsWindows())
            options.UnixCreateMode = UnixFileMode.UserRead | UnixFileMode.UserWrite;
        return new FileStream(Path.Combine(work, $"package-{Guid.NewGuid():N}.zip"), options);
    }
}
