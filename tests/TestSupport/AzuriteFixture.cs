using FaaST.Storage;

namespace FaaST.TestSupport;

/// <summary>
/// One real Azurite (on a free loopback port, in memory) for a collection of tests, killed when they are done.
/// Each suite declares its own collection of it (xunit wants the definition in the test assembly).
/// </summary>
public class AzuriteFixture : IAsyncLifetime
{
    private AzuriteProcess? _azurite;
    private BlobStore? _store;

    public AzuriteProcess Azurite => _azurite ?? throw new InvalidOperationException("Azurite is not running.");

    public string ConnectionString => Azurite.ConnectionString;

    /// <summary>A store with the default options, shared by the collection's tests.</summary>
    public BlobStore Store => _store ?? throw new InvalidOperationException("Azurite is not running.");

    public static string RepoRoot => Repo.Root;

    /// <summary>Whether this Azurite also serves queues (<see cref="QueueAzuriteFixture"/>).</summary>
    protected virtual bool WithQueues => false;

    public async Task InitializeAsync()
    {
        _azurite = await AzuriteProcess.StartAsync(Repo.Root, queues: WithQueues);
        _store = new BlobStore(_azurite.ConnectionString);
    }

    public async Task DisposeAsync()
    {
        _store?.Dispose();
        if (_azurite is not null)
            await _azurite.DisposeAsync();
    }

    /// <summary>A store with short retry delays, so that failures show quickly.</summary>
    public BlobStore CreateStore(BlobStoreOptions? options = null) =>
        new(ConnectionString, options ?? new BlobStoreOptions { RetryBaseDelay = TimeSpan.FromMilliseconds(10), MaxRetries = 2 });

    /// <summary>A store on any Azurite with few, quick retries, so that outages show quickly.</summary>
    public static BlobStore CreateStore(string connectionString) => new(connectionString, new BlobStoreOptions
    {
        MaxRetries = 2,
        RetryBaseDelay = TimeSpan.FromMilliseconds(10),
        RetryMaxDelay = TimeSpan.FromMilliseconds(100),
    });

    /// <summary>A fresh, created container.</summary>
    public async Task<string> NewContainerAsync(BlobStore store)
    {
        var name = "t" + Guid.NewGuid().ToString("N")[..20];
        await store.CreateContainerIfNotExistsAsync(name);
        return name;
    }
}

/// <summary>The same fixture with Azurite's queue service too (its connection string has QueueEndpoint).</summary>
public sealed class QueueAzuriteFixture : AzuriteFixture
{
    protected override bool WithQueues => true;

    /// <summary>A queue client on this Azurite with few, quick retries.</summary>
    public QueueStore CreateQueueStore() => new(ConnectionString, new BlobStoreOptions { RetryBaseDelay = TimeSpan.FromMilliseconds(10), MaxRetries = 2 });
}
