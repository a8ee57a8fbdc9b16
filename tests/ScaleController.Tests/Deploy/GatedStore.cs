using System.Runtime.CompilerServices;
using FaaST.Storage;

namespace FaaST.ScaleController.Tests.Deploy;

/// <summary>
/// A real store whose first write of one blob waits at a gate the test opens: it holds a deployer between writing its
/// package and writing app.json, so that another deployer can win the race in between, every run.
/// </summary>
internal sealed class GatedStore(IBlobStore inner, string gatedBlob) : IBlobStore
{
    private int _passed;

    /// <summary>Completes when the gated write arrives at the gate.</summary>
    public TaskCompletionSource Arrived { get; } = new(TaskCreationOptions.RunContinuationsAsynchronously);

    /// <summary>Completed by the test to let the gated write through.</summary>
    public TaskCompletionSource Open { get; } = new(TaskCreationOptions.RunContinuationsAsynchronously);

    public Uri Endpoint => inner.Endpoint;

    public Uri GetBlobUri(string container, string blob) => inner.GetBlobUri(container, blob);

    public Task CreateContainerIfNotExistsAsync(string container, CancellationToken ct = default) => inner.CreateContainerIfNotExistsAsync(container, ct);

    public Task<BlobProperties?> GetPropertiesAsync(string container, string blob, CancellationToken ct = default) =>
        inner.GetPropertiesAsync(container, blob, ct);

    public Task<BlobProperties?> DownloadToAsync(string container, string blob, Stream destination, BlobRange? range = null,
        string? ifMatch = null, CancellationToken ct = default) => inner.DownloadToAsync(container, blob, destination, range, ifMatch, ct);

    public Task<BlobProperties?> DownloadToAsync(string container, string blob, Func<BlobProperties, Stream> destinationFactory,
        string? ifMatch = null, CancellationToken ct = default) => inner.DownloadToAsync(container, blob, destinationFactory, ifMatch, ct);

    public Task<BlobContent?> DownloadAsync(string container, string blob, CancellationToken ct = default) => inner.DownloadAsync(container, blob, ct);

    public async Task<BlobProperties> UploadAsync(string container, string blob, ReadOnlyMemory<byte> content, string? contentType = null,
        string? ifMatch = null, string? ifNoneMatch = null, CancellationToken ct = default)
    {
        if (blob == gatedBlob && Interlocked.Exchange(ref _passed, 1) == 0)
        {
            Arrived.TrySetResult();
            await Open.Task.WaitAsync(ct);
        }

        return await inner.UploadAsync(container, blob, content, contentType, ifMatch, ifNoneMatch, ct);
    }

    public Task<BlobProperties> UploadAsync(string container, string blob, Stream content, long length, string? contentType = null,
        string? ifMatch = null, string? ifNoneMatch = null, CancellationToken ct = default) =>
        inner.UploadAsync(container, blob, content, length, contentType, ifMatch, ifNoneMatch, ct);

    public Task<bool> DeleteAsync(string container, string blob, string? ifMatch = null, CancellationToken ct = default) =>
        inner.DeleteAsync(container, blob, ifMatch, ct);

    public async IAsyncEnumerable<BlobItem> ListAsync(string container, string? prefix = null, [EnumeratorCancellation] CancellationToken ct = default)
    {
        await foreach (var item in inner.ListAsync(container, prefix, ct))
            yield return item;
    }

    public Task<BlobLeaseInfo?> TryAcquireLeaseAsync(string container, string blob, TimeSpan duration, CancellationToken ct = default) =>
        inner.TryAcquireLeaseAsync(container, blob, duration, ct);

    public Task<BlobLeaseInfo> RenewLeaseAsync(string container, string blob, string leaseId, CancellationToken ct = default) =>
        inner.RenewLeaseAsync(container, blob, leaseId, ct);

    public Task<bool> ReleaseLeaseAsync(string container, string blob, string leaseId, CancellationToken ct = default) =>
        inner.ReleaseLeaseAsync(container, blob, leaseId, ct);

    public Task<BlobProperties> UploadUnderLeaseAsync(string container, string blob, ReadOnlyMemory<byte> content, string leaseId,
        CancellationToken ct = default) => inner.UploadUnderLeaseAsync(container, blob, content, leaseId, ct);
}
