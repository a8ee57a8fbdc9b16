namespace FaaST.Storage.Tests;

/// <summary>The queue store against a real Azurite serving blobs and queues.</summary>
public sealed class QueueStoreTests : IAsyncLifetime
{
    private AzuriteProcess _azurite = null!;

    public async Task InitializeAsync() => _azurite = await AzuriteProcess.StartAsync(AzuriteFixture.RepoRoot, queues: true);

    public async Task DisposeAsync() => await _azurite.DisposeAsync();

    private QueueStore Store() => new(_azurite.ConnectionString, new BlobStoreOptions { RetryBaseDelay = TimeSpan.FromMilliseconds(10), MaxRetries = 1 });

    [Fact]
    public async Task An_azurite_with_queues_serves_both_and_its_connection_string_names_both_endpoints()
    {
        Assert.NotNull(_azurite.QueueEndpoint);
        Assert.Contains($"QueueEndpoint={_azurite.QueueEndpoint};", _azurite.ConnectionString, StringComparison.Ordinal);
        Assert.Contains($"BlobEndpoint={_azurite.BlobEndpoint};", _azurite.ConnectionString, StringComparison.Ordinal);
        Assert.NotEqual(_azurite.Port, _azurite.QueuePort);
        using var blobs = new BlobStore(_azurite.ConnectionString);
        await blobs.CreateContainerIfNotExistsAsync("both");
        await blobs.UploadAsync("both", "b", "x"u8.ToArray());
        var queues = Store();
        await queues.CreateQueueIfNotExistsAsync("both");
        await queues.SendAsync("both", "m");
        Assert.Equal(["m"], await queues.PeekAsync("both", 5));
    }

    [Fact]
    public async Task A_message_is_taken_invisible_made_visible_again_and_deleted_with_its_latest_pop_receipt()
    {
        var store = Store();
        await store.CreateQueueIfNotExistsAsync("work");
        await store.SendAsync("work", "hello");
        var taken = Assert.Single(await store.ReceiveAsync("work", 16, TimeSpan.FromMinutes(1)));
        Assert.Equal("hello", taken.Text);
        Assert.Equal(1, taken.DequeueCount);
        Assert.NotNull(taken.InsertionTime);
        Assert.NotNull(taken.ExpirationTime);
        Assert.Empty(await store.ReceiveAsync("work", 16, TimeSpan.FromMinutes(1))); // invisible while taken
        var receipt = await store.UpdateVisibilityAsync("work", taken.Id, taken.PopReceipt, TimeSpan.Zero);
        var again = Assert.Single(await store.ReceiveAsync("work", 16, TimeSpan.FromMinutes(1)));
        Assert.Equal(taken.Id, again.Id);
        Assert.Equal(2, again.DequeueCount);
        // The receipt of the first take is stale now: deleting with it fails, naming the queue.
        var stale = await Assert.ThrowsAsync<QueueStorageException>(() => store.DeleteAsync("work", taken.Id, receipt));
        Assert.Contains("queue work", stale.Message, StringComparison.Ordinal);
        await store.DeleteAsync("work", again.Id, again.PopReceipt);
        Assert.Empty(await store.PeekAsync("work", 32));
    }

    [Fact]
    public async Task A_queue_that_does_not_exist_is_a_404_naming_it()
    {
        var e = await Assert.ThrowsAsync<QueueStorageException>(() => Store().SendAsync("nosuchqueue", "x"));
        Assert.Equal(404, e.Status);
        Assert.Contains("nosuchqueue", e.Message, StringComparison.Ordinal);
    }

    [Fact]
    public void A_blob_only_connection_string_is_refused_for_queues_saying_what_is_missing()
    {
        var e = Assert.Throws<ArgumentException>(() => new QueueStore(StorageConnectionString.ForAzurite(10000)));
        Assert.Contains("QueueEndpoint", e.Message, StringComparison.Ordinal);
        Assert.True(QueueStore.HasQueueService("UseDevelopmentStorage=true"));
        Assert.True(QueueStore.HasQueueService("DefaultEndpointsProtocol=https;AccountName=a;AccountKey=a2V5;EndpointSuffix=core.windows.net"));
        Assert.False(QueueStore.HasQueueService(StorageConnectionString.ForAzurite(10000)));
    }

    [Theory]
    [InlineData("ab", "3 to 63")]
    [InlineData("Upper", "lowercase")]
    [InlineData("a--b", "two dashes")]
    [InlineData("-ab", "start and end")]
    public void Queue_names_follow_azures_rules(string name, string expected) =>
        Assert.Contains(expected, QueueNames.Problem(name), StringComparison.Ordinal);
}
