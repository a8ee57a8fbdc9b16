using FaaST.Storage;

namespace FaaST.TestSupport;

/// <summary>An <see cref="IBlobStore"/> that passes every call to another; a test overrides the ones it bends
/// (slow storage, a crash mid-range, a write held at a gate).</summary>
public class DelegatingStore(IBlobStore inner) : IBlobStore
{
    public virtual Uri Endpoint => inner.Endpoint;
    public virtual Uri GetBlobUri(string container, string blob) => inner.GetBlobUri(container, blob);
    public virtual Task CreateContainerIfNotExistsAsync(string container, CancellationToken ct = default) => inner.CreateContainerIfNotExistsAsync(container, ct);
    public virtual Task<BlobProperties?> GetPropertiesAsync(string container, string blob, CancellationToken ct = default) => inner.GetPropertiesAsync(container, blob, ct);

    public virtual Task<BlobProperties?> DownloadToAsync(string container, string blob, Stream destination, BlobRange? range = null,
        string? ifMatch = null, CancellationToken ct = default) => inner.DownloadToAsync(container, blob, destination, range, ifMatch, ct);

    public virtual Task<BlobProperties?> DownloadToAsync(string container, string blob, Func<BlobProperties, Stream> destinationFactory,
        string? ifMatch = null, CancellationToken ct = default) => inner.DownloadToAsync(container, blob, destinationFactory, ifMatch, ct);

    public virtual Task<BlobContent?> DownloadAsync(string container, string blob, CancellationToken ct = default) => inner.DownloadAsync(container, blob, ct);

    public virtual Task<BlobProperties> UploadAsync(string container, string blob, ReadOnlyMemory<byte> content, string? contentType = null,
        string? ifMatch = null, string? ifNoneMatch = null, CancellationToken ct = default) =>
        inner.UploadAsync(container, blob, content, contentType, ifMatch, ifNoneMatch, ct);

    public virtual Task<BlobProperties> UploadAsync(string container, string blob, Stream content, long length, string? contentType = null,
        string? ifMatch = null, string? ifNoneMatch = null, CancellationToken ct = default) =>
        inner.UploadAsync(container, blob, content, length, contentType, ifMatch, ifNoneMatch, ct);

    public virtual Task<bool> DeleteAsync(string container, string blob, string? ifMatch = null, CancellationToken ct = default) =>
        inner.DeleteAsync(container, blob, ifMatch, ct);

    public virtual IAsyncEnumerable<BlobItem> ListAsync(string container, string? prefix = null, CancellationToken ct = default) =>
        inner.ListAsync(container, prefix, ct);

    public virtual Task<BlobLeaseInfo?> TryAcquireLeaseAsync(string container, string blob, TimeSpan duration, CancellationToken ct = default) =>
        inner.TryAcquireLeaseAsync(container, blob, duration, ct);

    public virtual Task<BlobLeaseInfo> RenewLeaseAsync(string container, string blob, string leaseId, CancellationToken ct = default) =>
        inner.RenewLeaseAsync(container, blob, leaseId, ct);

    public virtual Task<bool> ReleaseLeaseAsync(string container, string blob, string leaseId, CancellationToken ct = default) =>
        inner.ReleaseLeaseAsync(container, blob, leaseId, ct);

    public virtual Task<BlobProperties> UploadUnderLeaseAsync(string container, string blob, ReadOnlyMemory<byte> content, string leaseId,
        CancellationToken ct = default) => inner.UploadUnderLeaseAsync(container, blob, content, leaseId, ct);
}
