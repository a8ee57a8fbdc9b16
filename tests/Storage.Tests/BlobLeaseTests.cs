using System.Text;

namespace FaaST.Storage.Tests;

/// <summary>The lease operations of BlobStore (what blob-trigger receipts are taken under) against a real Azurite.</summary>
[Collection(AzuriteCollection.Name)]
public sealed class BlobLeaseTests(AzuriteFixture fixture) : IDisposable
{
    private static readonly TimeSpan Duration = TimeSpan.FromSeconds(15);

    private readonly BlobStore _store = fixture.CreateStore();

    public void Dispose() => _store.Dispose();

    private async Task<(string Container, BlobProperties Put)> BlobAsync(string text = "receipt")
    {
        var container = await fixture.NewContainerAsync(_store);
        var put = await _store.UploadAsync(container, "r/1", Encoding.UTF8.GetBytes(text));
        return (container, put);
    }

    [Fact]
    public async Task A_leased_blob_cannot_be_leased_again_until_the_lease_is_released()
    {
        var (container, put) = await BlobAsync();
        var first = await _store.TryAcquireLeaseAsync(container, "r/1", Duration);
        Assert.NotNull(first);
        Assert.Equal(put.ETag, first.ETag);
        Assert.Null(await _store.TryAcquireLeaseAsync(container, "r/1", Duration));

        Assert.True(await _store.ReleaseLeaseAsync(container, "r/1", first.LeaseId));
        var second = await _store.TryAcquireLeaseAsync(container, "r/1", Duration);
        Assert.NotNull(second);
        Assert.NotEqual(first.LeaseId, second.LeaseId);
    }

    [Fact]
    public async Task A_write_under_the_lease_succeeds_and_a_write_without_it_fails_as_a_condition()
    {
        var (container, _) = await BlobAsync();
        var lease = await _store.TryAcquireLeaseAsync(container, "r/1", Duration);
        Assert.NotNull(lease);

        var written = await _store.UploadUnderLeaseAsync(container, "r/1", Encoding.UTF8.GetBytes("done"), lease.LeaseId);
        Assert.Equal("done", Encoding.UTF8.GetString((await _store.DownloadAsync(container, "r/1"))!.Data));
        Assert.Equal(written.ETag, (await _store.GetPropertiesAsync(container, "r/1"))!.ETag);

        await Assert.ThrowsAsync<BlobConditionFailedException>(() =>
            _store.UploadUnderLeaseAsync(container, "r/1", Encoding.UTF8.GetBytes("x"), Guid.NewGuid().ToString()));
        await Assert.ThrowsAnyAsync<BlobStorageException>(() => _store.UploadAsync(container, "r/1", Encoding.UTF8.GetBytes("x")));
        Assert.Equal("done", Encoding.UTF8.GetString((await _store.DownloadAsync(container, "r/1"))!.Data));
    }

    [Fact]
    public async Task Renewing_or_releasing_a_lease_that_is_not_held_says_so()
    {
        var (container, _) = await BlobAsync();
        var lease = await _store.TryAcquireLeaseAsync(container, "r/1", Duration);
        Assert.NotNull(lease);
        Assert.Equal(lease.LeaseId, (await _store.RenewLeaseAsync(container, "r/1", lease.LeaseId)).LeaseId);

        var stranger = Guid.NewGuid().ToString();
        await Assert.ThrowsAsync<BlobConditionFailedException>(() => _store.RenewLeaseAsync(container, "r/1", stranger));
        Assert.False(await _store.ReleaseLeaseAsync(container, "r/1", stranger));
        Assert.True(await _store.ReleaseLeaseAsync(container, "r/1", lease.LeaseId));
        // Released: a write under the old lease no longer counts.
        await Assert.ThrowsAsync<BlobConditionFailedException>(() =>
            _store.UploadUnderLeaseAsync(container, "r/1", Encoding.UTF8.GetBytes("late"), lease.LeaseId));
    }

    [Fact]
    public async Task A_lease_on_a_missing_blob_fails_with_404_and_a_duration_outside_15_to_60_seconds_is_refused()
    {
        var container = await fixture.NewContainerAsync(_store);
        var missing = await Assert.ThrowsAsync<BlobStorageException>(() => _store.TryAcquireLeaseAsync(container, "nothing", Duration));
        Assert.Equal(404, missing.Status);
        Assert.Contains("nothing", missing.Message, StringComparison.Ordinal);

        var (other, _) = await BlobAsync();
        await Assert.ThrowsAsync<ArgumentOutOfRangeException>(() => _store.TryAcquireLeaseAsync(other, "r/1", TimeSpan.FromSeconds(5)));
        await Assert.ThrowsAsync<ArgumentOutOfRangeException>(() => _store.TryAcquireLeaseAsync(other, "r/1", TimeSpan.FromSeconds(61)));
    }
}
