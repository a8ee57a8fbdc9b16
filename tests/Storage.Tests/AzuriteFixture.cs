using FaaST.Storage;

namespace FaaST.Storage.Tests;

/// <summary>One real Azurite for the tests of the "Azurite" collection, killed when they are done.</summary>
public sealed class AzuriteFixture : IAsyncLifetime
{
    private AzuriteProcess? _azurite;

    public AzuriteProcess Azurite => _azurite ?? throw new InvalidOperationException("Azurite is not running.");

    public string ConnectionString => Azurite.ConnectionString;

    public static string RepoRoot => AzuriteProcess.FindRepoRoot(AppContext.BaseDirectory);

    public async Task InitializeAsync() => _azurite = await AzuriteProcess.StartAsync(RepoRoot);

    public Task DisposeAsync()
    {
        _azurite?.Dispose();
        return Task.CompletedTask;
    }

    /// <summary>A store with short retry delays, so that failures show quickly.</summary>
    public BlobStore CreateStore(BlobStoreOptions? options = null) =>
        new(ConnectionString, options ?? new BlobStoreOptions { RetryBaseDelay = TimeSpan.FromMilliseconds(10), MaxRetries = 2 });

    /// <summary>A fresh, created container.</summary>
    public async Task<string> NewContainerAsync(BlobStore store)
    {
        var name = "t" + Guid.NewGuid().ToString("N")[..20];
        await store.CreateContainerIfNotExistsAsync(name);
        return name;
    }
}

[CollectionDefinition(Name)]
public sealed class AzuriteCollection : ICollectionFixture<AzuriteFixture>
{
    public const string Name = "Azurite";
}
