using FaaST.Storage;

namespace FaaST.ScaleController.Platform;

/// <summary>
/// Where one app's development storage lives: Azurite's data folder (null: in memory), the file that keeps its account
/// (name and key) beside that data, and the app folder whose .faast/azurite-connection tells `./faast blob` about it.
/// </summary>
public sealed record AppStorageLocation(string? DataDirectory, string? AccountFile, string? PublishTo = null);

/// <summary>
/// Each app on development storage gets an Azurite of its own (issue 19): an account and key of its own, blob and queue
/// services, started when the app is loaded and stopped when the platform stops. Instances get its connection string as
/// <see cref="StorageAccounts.DevelopmentStorageVariable"/>, and every development-storage setting of the app resolves to
/// it. No app's connection string opens another app's data, nor the platform's own storage (faast-deployments: packages,
/// app.json, instance records), which is never handed to an app. Apps with a storage account of their own keep theirs.
/// </summary>
internal sealed class AppStorage(PlatformOptions options, ILogger logger) : IAsyncDisposable
{
    private readonly Dictionary<string, Started> _apps = new(StringComparer.OrdinalIgnoreCase);
    private readonly SemaphoreSlim _gate = new(1, 1);
    private bool _disposed;

    /// <summary>
    /// The default place of <paramref name="app"/>'s Azurite: STATE/storage/APP/azurite (its account in
    /// STATE/storage/APP/azurite-account), or in memory with a fresh account when <see cref="PlatformOptions.AppStorageInMemory"/>.
    /// </summary>
    public static AppStorageLocation DefaultLocation(PlatformOptions options, string app)
    {
        if (options.AppStorageInMemory)
            return new AppStorageLocation(null, null);
        var root = Path.Combine(Path.GetFullPath(options.StateDirectory), "storage", app); // not under apps/APP: the extracted versions are the app user's to read there, its raw storage is not
        return new AppStorageLocation(Path.Combine(root, "azurite"), Path.Combine(root, "azurite-account"));
    }

    /// <summary>
    /// Starts <paramref name="app"/>'s Azurite if the version in <paramref name="directory"/> uses development storage
    /// and none runs yet; returns its connection string (null: the app uses none). Nothing is kept of a start that
    /// failed, so the next call (the app's next deploy) tries again.
    /// </summary>
    /// <exception cref="AppStorageException">The app's Azurite could not start; the message names the app, its data
    /// folder and the cause.</exception>
    public async Task<string?> StartAsync(string app, string directory, CancellationToken ct)
    {
        if (!StorageAccounts.UsesDevelopmentStorage(PlatformContext.LoadApp(directory).Settings))
            return null;
        await _gate.WaitAsync(ct);
        try
        {
            ObjectDisposedException.ThrowIf(_disposed, this);
            if (ConnectionStringOf(app) is { } running)
                return running;
            var location = options.AppStorage?.Invoke(app) ?? DefaultLocation(options, app);
            AzuriteProcess azurite;
            try
            {
                var account = location.DataDirectory is null || location.AccountFile is null
                    ? AzuriteAccount.Generate()
                    : AzuriteAccount.LoadOrCreate(location.AccountFile);
                azurite = await AzuriteProcess.StartAsync(FaaSTHome.Find(), ct: ct,
                    dataDirectory: location.DataDirectory, account: account, queues: true);
            }
            catch (Exception e) when (e is IOException or UnauthorizedAccessException or InvalidDataException or InvalidOperationException &&
                !ct.IsCancellationRequested)
            {
                // Its data folder or account file unusable (IOException, UnauthorizedAccessException, InvalidDataException),
                // no Azurite installed (FileNotFoundException), or Azurite exited or never answered (InvalidOperationException):
                // one kind of failure for the caller, which keeps this app out and every other app served.
                throw new AppStorageException(app, location.DataDirectory, e);
            }
            DevelopmentStorageFile? published = null;
            if (location.PublishTo is { } folder)
            {
                try
                {
                    published = DevelopmentStorageFile.Publish(folder, azurite.ConnectionString);
                }
                catch (Exception e) when (e is IOException or UnauthorizedAccessException)
                {
                    Log.AppStoragePublishFailed(logger, app, DevelopmentStorageFile.PathOf(folder), e.Message);
                }
            }
            lock (_apps)
                _apps[app] = new Started(azurite, published);
            Log.AppStorageStarted(logger, app, azurite.BlobEndpoint, azurite.QueueEndpoint!, location.DataDirectory ?? "memory");
            return azurite.ConnectionString;
        }
        finally
        {
            _gate.Release();
        }
    }

    /// <summary>The connection string of <paramref name="app"/>'s Azurite, once <see cref="StartAsync"/> started it; else null.</summary>
    public string? ConnectionStringOf(string app)
    {
        lock (_apps)
            return _apps.TryGetValue(app, out var started) ? started.Azurite.ConnectionString : null;
    }

    /// <summary>Stops every app's Azurite (after their instances: the platform disposes this last).</summary>
    public async ValueTask DisposeAsync()
    {
        await _gate.WaitAsync();
        try
        {
            _disposed = true;
            Started[] all;
            lock (_apps)
            {
                all = [.. _apps.Values];
                _apps.Clear();
            }
            foreach (var started in all)
            {
                started.Published?.Dispose();
                await started.Azurite.DisposeAsync();
            }
        }
        finally
        {
            _gate.Release();
        }
    }

    private sealed record Started(AzuriteProcess Azurite, DevelopmentStorageFile? Published);
}

/// <summary>
/// An app's own Azurite could not start (its data folder or account file unusable, Azurite not installed, or Azurite
/// exited or never answered). The app cannot be served; every other app is unaffected.
/// </summary>
public sealed class AppStorageException(string app, string? dataDirectory, Exception inner)
    : Exception($"the storage of app \"{app}\" (its own Azurite, data in {dataDirectory ?? "memory"}) cannot start: {OneLine(inner.Message)}", inner)
{
    /// <summary>The app whose storage did not start.</summary>
    public string App { get; } = app;

    /// <summary>Its Azurite's data folder; null when kept in memory.</summary>
    public string? DataDirectory { get; } = dataDirectory;

    /// <summary>Why, on one line (Azurite's own last lines when it exited, joined).</summary>
    public string Reason { get; } = OneLine(inner.Message);

    // Azurite's failure carries its output, several lines: a log line and a JSON error stay one line each.
    private static string OneLine(string text) =>
        string.Join(" | ", text.Split('\n', StringSplitOptions.RemoveEmptyEntries | StringSplitOptions.TrimEntries)).TrimEnd('.');
}
