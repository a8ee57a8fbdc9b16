namespace FaaST.Storage;

/// <summary>
/// The blob operations FaaST needs, against Azure Blob Storage or Azurite. Names are
/// container + blob path ("container", "dir/name.bin"). ETags are passed and returned
/// exactly as the service sends them (quoted).
/// </summary>
public interface IBlobStore
{
    /// <summary>The account's blob endpoint, e.g. http://127.0.0.1:10000/devstoreaccount1.</summary>
    Uri Endpoint { get; }

    /// <summary>The URI of one blob (no credentials in it).</summary>
    Uri GetBlobUri(string container, string blob);

    Task CreateContainerIfNotExistsAsync(string container, CancellationToken ct = default);

    /// <summary>HEAD: properties of a blob, or null when it does not exist.</summary>
    Task<BlobProperties?> GetPropertiesAsync(string container, string blob, CancellationToken ct = default);

    /// <summary>
    /// Streams a blob (or a byte range of it) into <paramref name="destination"/> without an
    /// intermediate copy of the whole object. Returns null when the blob does not exist.
    /// With <paramref name="ifMatch"/>, a changed blob throws <see cref="BlobConditionFailedException"/>.
    /// </summary>
    Task<BlobProperties?> DownloadToAsync(string container, string blob, Stream destination,
        BlobRange? range = null, string? ifMatch = null, CancellationToken ct = default);

    /// <summary>
    /// Streams a whole blob into a destination the caller picks once the blob's properties (its
    /// length and ETag) are known, e.g. a shared-memory extent of exactly that size: one request,
    /// no intermediate buffer. Returns null when the blob does not exist. An exception thrown by
    /// <paramref name="destinationFactory"/> ends the call unretried.
    /// </summary>
    Task<BlobProperties?> DownloadToAsync(string container, string blob, Func<BlobProperties, Stream> destinationFactory,
        string? ifMatch = null, CancellationToken ct = default);

    /// <summary>Reads a whole blob into a new array; null when it does not exist.</summary>
    Task<BlobContent?> DownloadAsync(string container, string blob, CancellationToken ct = default);

    /// <summary>
    /// Writes a block blob (create or replace). <paramref name="ifMatch"/> makes it conditional on
    /// the current ETag, <paramref name="ifNoneMatch"/> = "*" makes it create-only; a failed
    /// condition throws <see cref="BlobConditionFailedException"/>. Returns the new properties.
    /// </summary>
    Task<BlobProperties> UploadAsync(string container, string blob, ReadOnlyMemory<byte> content,
        string? contentType = null, string? ifMatch = null, string? ifNoneMatch = null,
        CancellationToken ct = default);

    /// <summary>Streams a block blob of known length from <paramref name="content"/>.</summary>
    Task<BlobProperties> UploadAsync(string container, string blob, Stream content, long length,
        string? contentType = null, string? ifMatch = null, string? ifNoneMatch = null,
        CancellationToken ct = default);

    /// <summary>Deletes a blob; false when it did not exist.</summary>
    Task<bool> DeleteAsync(string container, string blob, string? ifMatch = null, CancellationToken ct = default);

    /// <summary>Lists blobs under a prefix (all pages), with their properties.</summary>
    IAsyncEnumerable<BlobItem> ListAsync(string container, string? prefix = null, CancellationToken ct = default);

    /// <summary>
    /// Acquires a lease of <paramref name="duration"/> (15 to 60 s, as the service allows) on an existing blob;
    /// null when another lease on it is active. A retried try cannot lock its own caller out: the lease id is
    /// chosen before the first try. A missing blob throws <see cref="BlobStorageException"/> 404.
    /// </summary>
    Task<BlobLeaseInfo?> TryAcquireLeaseAsync(string container, string blob, TimeSpan duration, CancellationToken ct = default);

    /// <summary>Renews a lease for its full duration; a lease that is lost (another holder, blob gone) throws
    /// <see cref="BlobConditionFailedException"/>.</summary>
    Task<BlobLeaseInfo> RenewLeaseAsync(string container, string blob, string leaseId, CancellationToken ct = default);

    /// <summary>Releases a lease at once; false when it was no longer held (expired and taken, or the blob is gone).</summary>
    Task<bool> ReleaseLeaseAsync(string container, string blob, string leaseId, CancellationToken ct = default);

    /// <summary>
    /// Replaces a small leased blob (one Put Blob) only while <paramref name="leaseId"/> holds its lease; the lease
    /// stays. A lost lease throws <see cref="BlobConditionFailedException"/>.
    /// </summary>
    Task<BlobProperties> UploadUnderLeaseAsync(string container, string blob, ReadOnlyMemory<byte> content, string leaseId,
        CancellationToken ct = default);
}

/// <summary>A lease held on a blob: its id, and the blob's ETag when the lease was taken or renewed.</summary>
public sealed record BlobLeaseInfo(string LeaseId, string ETag);

public sealed record BlobProperties(string ETag, long Length, DateTimeOffset LastModified, string? ContentType);

public sealed record BlobItem(string Name, BlobProperties Properties);

public sealed record BlobContent(byte[] Data, BlobProperties Properties);

/// <summary>An inclusive-exclusive byte range: Offset .. Offset+Length.</summary>
public readonly record struct BlobRange(long Offset, long Length);

/// <summary>The service answered with an error that retrying will not fix.</summary>
public class BlobStorageException(int status, string? errorCode, string message, Exception? inner = null) : Exception(message, inner)
{
    public int Status { get; } = status;
    public string? ErrorCode { get; } = errorCode;
}

/// <summary>An If-Match / If-None-Match condition failed (412, or 409 BlobAlreadyExists).</summary>
public sealed class BlobConditionFailedException(int status, string? errorCode, string message, Exception? inner = null)
    : BlobStorageException(status, errorCode, message, inner);

/// <summary>Storage could not be reached (or kept failing) after all retries.</summary>
public sealed class StorageUnavailableException(string message, Exception? inner) : Exception(message, inner);
