using FaaST.Hosting;
using FaaST.Storage;
using Microsoft.Extensions.Options;

namespace FaaST.Runtime.Hosting.Components;

/// <summary>
/// Storage (stage <see cref="ServiceLifecycleStage.Storage"/>): the Azurite the host starts when the app
/// configures no storage, and the app's storage accounts. Stopped last but telemetry, so that the cache
/// can flush its write-behind uploads and membership can leave first.
/// </summary>
internal sealed class StorageComponent(FunctionApp app, IOptions<StorageHostOptions> storageOptions, ILoggerFactory loggers) : ILifecycleParticipant
{
    private readonly StorageHostOptions _options = storageOptions.Value;
    private readonly ILogger _logger = loggers.CreateLogger("FaaST.Host");
    private AzuriteProcess? _azurite;
    private DevelopmentStorageFile? _published;
    private StorageAccounts? _accounts;

    /// <summary>The app's storage accounts, once started.</summary>
    public StorageAccounts Accounts => _accounts ?? throw new InvalidOperationException("storage has not started");

    /// <summary>The storage connection string the app's default account resolves to, once started.</summary>
    public string? ConnectionString => _accounts?.ConnectionString("AzureWebJobsStorage");

    /// <summary>
    /// The connection string of the app's development storage: the Azurite this host started, or the one the platform
    /// started for the app (<see cref="StorageHostOptions.DevelopmentConnectionString"/>); null when the app uses none.
    /// </summary>
    public string? DevelopmentConnectionString => _azurite?.ConnectionString ?? _options.DevelopmentConnectionString;

    /// <summary>Every setting that names development storage, resolved to it: the workers get these instead of the literal value.</summary>
    public IReadOnlyDictionary<string, string> DevelopmentSettings => StorageAccounts.DevelopmentSettings(app.Settings, DevelopmentConnectionString);

    public void Participate(IHostLifecycle lifecycle) =>
        lifecycle.Subscribe(nameof(StorageComponent), ServiceLifecycleStage.Storage, new LifecycleObserver(StartAsync, StopAsync));

    private async Task StartAsync(CancellationToken ct)
    {
        if (_options.StartsAzurite)
        {
            Log.AzuriteStarting(_logger);
            // An account of the app's own, so its workers hold no key that opens another app's Azurite;
            // kept beside persisted data, since that data is filed under the account's name.
            var account = _options.AzuriteDataDirectory is null ? AzuriteAccount.Generate()
                : AzuriteAccount.LoadOrCreate(Path.Combine(app.Directory, ".faast", "azurite-account"));
            _azurite = await AzuriteProcess.StartAsync(_options.Home, ct: ct, dataDirectory: _options.AzuriteDataDirectory, account: account, queues: true);
            Log.AzuriteListening(_logger, _azurite.BlobEndpoint);
            Log.AzuriteQueuesListening(_logger, _azurite.QueueEndpoint!);
            _published = PublishDevelopmentStorage(app.Directory, _azurite.ConnectionString, _logger);
        }
        else if (_options.DevelopmentConnectionString is not null)
        {
            // The platform's Azurite for this app: it publishes it for `./faast blob` itself (instances come and go).
            Log.DevelopmentStorageGiven(_logger, StorageAccounts.DevelopmentStorageVariable);
        }
        _accounts = new StorageAccounts(app.Settings, DevelopmentConnectionString, _options.Blob, logger: _logger);
    }

    private async Task StopAsync(CancellationToken ct)
    {
        _accounts?.Dispose();
        _published?.Dispose();
        if (_azurite is not null)
            await _azurite.DisposeAsync();
    }

    /// <summary>Tells `./faast blob` where this Azurite is (see <see cref="DevelopmentStorageFile"/>); a folder
    /// that cannot be written costs only that, with a warning.</summary>
    internal static DevelopmentStorageFile? PublishDevelopmentStorage(string appDirectory, string connectionString, ILogger logger)
    {
        try
        {
            return DevelopmentStorageFile.Publish(appDirectory, connectionString);
        }
        catch (Exception e) when (e is IOException or UnauthorizedAccessException)
        {
            Cli.Log.DevelopmentStorageFileFailed(logger, e, DevelopmentStorageFile.PathOf(appDirectory));
            return null;
        }
    }
}
