using FaaST.Hosting;
using FaaST.Runtime.App;
using FaaST.Runtime.Bindings;
using FaaST.Storage;

namespace FaaST.Runtime.Hosting.Components;

/// <summary>
/// Storage (stage <see cref="ServiceLifecycleStage.Storage"/>): the Azurite the host starts when the app
/// configures no storage, and the app's storage accounts. Stopped last but telemetry, so that the cache
/// can flush its write-behind uploads and membership can leave first.
/// </summary>
internal sealed class StorageComponent(FunctionApp app, StorageHostOptions options, string home, ILogger logger) : ILifecycleParticipant
{
    private AzuriteProcess? _azurite;
    private StorageAccounts? _accounts;

    /// <summary>The app's storage accounts, once started.</summary>
    public StorageAccounts Accounts => _accounts ?? throw new InvalidOperationException("storage has not started");

    /// <summary>The storage connection string the app's default account resolves to, once started.</summary>
    public string? ConnectionString => _accounts?.ConnectionString("AzureWebJobsStorage");

    /// <summary>The connection string of the Azurite this host started (the workers get it as AzureWebJobsStorage), or null.</summary>
    public string? DevelopmentConnectionString => _azurite?.ConnectionString;

    public void Participate(IHostLifecycle lifecycle) =>
        lifecycle.Subscribe(nameof(StorageComponent), ServiceLifecycleStage.Storage, new LifecycleObserver(StartAsync, StopAsync));

    private async Task StartAsync(CancellationToken ct)
    {
        if (options.StartsAzurite)
        {
            logger.LogInformation("No storage connection configured: starting Azurite (blob and queue services, loopback)");
            // An account of the app's own, so its workers hold no key that opens another app's Azurite;
            // kept beside persisted data, since that data is filed under the account's name.
            var account = options.AzuriteDataDirectory is null ? AzuriteAccount.Generate()
                : AzuriteAccount.LoadOrCreate(Path.Combine(app.Directory, ".faast", "azurite-account"));
            _azurite = await AzuriteProcess.StartAsync(home, ct: ct, dataDirectory: options.AzuriteDataDirectory, account: account, queues: true);
            logger.LogInformation("Azurite is listening at {Endpoint} (queues: {QueueEndpoint})", _azurite.BlobEndpoint, _azurite.QueueEndpoint);
        }
        _accounts = new StorageAccounts(app.Settings, _azurite?.ConnectionString, options.Blob, logger: logger);
    }

    private async Task StopAsync(CancellationToken ct)
    {
        _accounts?.Dispose();
        if (_azurite is not null)
            await _azurite.DisposeAsync();
    }
}
