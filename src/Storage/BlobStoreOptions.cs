using System.Security.Cryptography.X509Certificates;

namespace FaaST.Storage;

/// <summary>
/// Tuning knobs of <see cref="BlobStore"/>. The defaults suit Azure and Azurite alike. The retry settings are
/// handed to the Azure SDK's retry policy (exponential mode) as they are.
/// </summary>
public sealed class BlobStoreOptions
{
    /// <summary>Retries after the first try of a request that failed transiently (default 4, so 5 tries).</summary>
    public int MaxRetries { get; set; } = 4;

    /// <summary>Delay before the first retry; doubled on each further retry, with ±20 % jitter (default 100 ms).</summary>
    public TimeSpan RetryBaseDelay { get; set; } = TimeSpan.FromMilliseconds(100);

    /// <summary>Upper bound of one retry delay, also for a server's Retry-After (default 10 s).</summary>
    public TimeSpan RetryMaxDelay { get; set; } = TimeSpan.FromSeconds(10);

    /// <summary>
    /// Time limit of one try (the SDK's NetworkTimeout): until the response headers arrive (a request body
    /// included), and then again for each read of a streamed response body (default 30 s). Time spent in the
    /// caller's destination stream does not count.
    /// </summary>
    public TimeSpan TryTimeout { get; set; } = TimeSpan.FromSeconds(30);

    /// <summary>Connections per server in the shared handler's pool (default 64).</summary>
    public int MaxConnectionsPerServer { get; set; } = 64;

    /// <summary>How long a pooled connection lives before it is replaced, so DNS changes are seen (default 5 min).</summary>
    public TimeSpan PooledConnectionLifetime { get; set; } = TimeSpan.FromMinutes(5);

    /// <summary>
    /// Content larger than this is uploaded as staged blocks (Put Block + Put Block List) (default 256 MiB).
    /// A source stream that cannot seek always is, so that each block can be retried.
    /// </summary>
    public long SingleUploadThreshold { get; set; } = 256L * 1024 * 1024;

    /// <summary>Size of one block of a block upload (default 8 MiB; raised when a blob would need more than 50,000 blocks).</summary>
    public int BlockSize { get; set; } = 8 * 1024 * 1024;

    /// <summary>Blocks of one upload sent at the same time (default 4).</summary>
    public int BlockUploadConcurrency { get; set; } = 4;

    /// <summary>maxresults of one List Blobs page; null lets the service choose (5,000).</summary>
    public int? ListPageSize { get; set; }

    /// <summary>Size of the pooled buffer that streams bodies to and from the caller's streams (default 128 KiB).</summary>
    public int CopyBufferSize { get; set; } = 128 * 1024;

    /// <summary>
    /// A certificate trusted in addition to the system's roots (as a root, or as the server's own certificate),
    /// for an HTTPS endpoint with a self-signed certificate such as a test's Azurite; null: the system's roots only.
    /// </summary>
    public X509Certificate2? TrustedCertificate { get; set; }

    internal void Validate()
    {
        ArgumentOutOfRangeException.ThrowIfNegative(MaxRetries, nameof(MaxRetries));
        ArgumentOutOfRangeException.ThrowIfLessThan(RetryBaseDelay, TimeSpan.Zero, nameof(RetryBaseDelay));
        ArgumentOutOfRangeException.ThrowIfLessThan(RetryMaxDelay, RetryBaseDelay, nameof(RetryMaxDelay));
        ArgumentOutOfRangeException.ThrowIfLessThanOrEqual(TryTimeout, TimeSpan.Zero, nameof(TryTimeout));
        ArgumentOutOfRangeException.ThrowIfLessThan(MaxConnectionsPerServer, 1, nameof(MaxConnectionsPerServer));
        ArgumentOutOfRangeException.ThrowIfLessThanOrEqual(PooledConnectionLifetime, TimeSpan.Zero, nameof(PooledConnectionLifetime));
        ArgumentOutOfRangeException.ThrowIfLessThan(SingleUploadThreshold, 0, nameof(SingleUploadThreshold));
        ArgumentOutOfRangeException.ThrowIfLessThan(BlockSize, 1, nameof(BlockSize));
        ArgumentOutOfRangeException.ThrowIfGreaterThan(BlockSize, 1024 * 1024 * 1024, nameof(BlockSize));
        ArgumentOutOfRangeException.ThrowIfLessThan(BlockUploadConcurrency, 1, nameof(BlockUploadConcurrency));
        if (ListPageSize is { } pageSize)
        {
            ArgumentOutOfRangeException.ThrowIfLessThan(pageSize, 1, nameof(ListPageSize));
            ArgumentOutOfRangeException.ThrowIfGreaterThan(pageSize, 5000, nameof(ListPageSize));
        }

        ArgumentOutOfRangeException.ThrowIfLessThan(CopyBufferSize, 4096, nameof(CopyBufferSize));
        ArgumentOutOfRangeException.ThrowIfGreaterThan(CopyBufferSize, 16 * 1024 * 1024, nameof(CopyBufferSize));
    }

    internal BlobStoreOptions Clone() => (BlobStoreOptions)MemberwiseClone();
}
