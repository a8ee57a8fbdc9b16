using System.Buffers;
using System.Buffers.Binary;
using System.Collections.Concurrent;
using System.Globalization;
using System.Runtime.CompilerServices;
using Azure;
using Azure.Core;
using Azure.Storage.Blobs;
using Azure.Storage.Blobs.Models;
using Azure.Storage.Blobs.Specialized;
using Microsoft.Extensions.Logging;
using SdkBlobProperties = Azure.Storage.Blobs.Models.BlobProperties;

namespace FaaST.Storage;

/// <summary>
/// <see cref="IBlobStore"/> on Azure.Storage.Blobs: one <see cref="BlobServiceClient"/> per connection over the
/// process's shared transport (<see cref="StorageTransport"/>), with the SDK's logging, tracing and telemetry
/// off. Downloads stream straight into the caller's stream through one pooled buffer (the SDK resumes a broken
/// body with Range + If-Match on the first ETag); uploads are one Put Blob, or staged blocks above
/// <see cref="BlobStoreOptions.SingleUploadThreshold"/>. The SDK retries as <see cref="BlobStoreOptions"/> says;
/// its errors become <see cref="BlobStorageException"/>, <see cref="BlobConditionFailedException"/> and
/// <see cref="StorageUnavailableException"/>, each naming the operation and blob. Thread-safe; dispose at shutdown.
/// </summary>
public sealed class BlobStore : IBlobStore, IDisposable
{
    private const int MaxBlocks = 50_000;
    private const long MaxBlockSize = 1024L * 1024 * 1024; // pooled block buffers are arrays; the service allows 4000 MiB
    private const string DefaultContentType = "application/octet-stream";
    private static readonly TimeSpan MinLeaseDuration = TimeSpan.FromSeconds(15);
    private static readonly TimeSpan MaxLeaseDuration = TimeSpan.FromSeconds(60);

    private readonly BlobServiceClient _service;
    private readonly BlobStoreOptions _options;
    private readonly string _endpointText;
    private readonly ILogger? _logger;
    private readonly ConcurrentDictionary<string, BlobContainerClient> _containers = new(StringComparer.Ordinal);

    /// <summary>
    /// Blob clients of recently used blobs: making one builds and parses its URI (about 2 KB per call), which a
    /// HEAD of the same hot blob would otherwise pay on every request. Bounded: emptied when it reaches
    /// <see cref="MaxCachedBlobClients"/> entries (the next requests refill it with what is hot).
    /// </summary>
    private readonly ConcurrentDictionary<(string Container, string Blob), BlockBlobClient> _blobs = new();
    private int _cachedBlobClients;
    private const int MaxCachedBlobClients = 4096;

    /// <summary>Creates a store from a storage connection string (account key, SAS, or UseDevelopmentStorage=true).</summary>
    /// <exception cref="ArgumentException">The connection string is not usable (the message says why, never a secret).</exception>
    /// <param name="logger">Where failed tries that are retried, and the give-up, are logged; none by default.</param>
    public BlobStore(string connectionString, BlobStoreOptions? options = null, ILogger? logger = null)
    {
        ArgumentNullException.ThrowIfNull(connectionString);
        _options = Validated(options);
        _logger = logger;
        if (string.IsNullOrWhiteSpace(connectionString))
        {
            throw new ArgumentException("The storage connection string is empty.", nameof(connectionString));
        }

        // Ours first: they name the key that is wrong, where the SDK says "No valid combination of account information found".
        _ = StorageConnectionString.Parse(connectionString);
        if (StorageConnectionString.Explain(connectionString) is { } explained)
        {
            throw new ArgumentException($"The storage connection string is not usable: {explained}.", nameof(connectionString));
        }

        try
        {
            _service = new BlobServiceClient(connectionString, ClientOptions(_options, logger));
        }
        catch (Exception e) when (e is not OutOfMemoryException)
        {
            // Only parsing happens here (no I/O): whatever the SDK's parser throws means the string is unusable.
            // The SDK's messages do not repeat values.
            throw new ArgumentException($"The storage connection string is not usable: {FirstLine(e.Message).Split(" (Parameter", 2)[0]}",
                nameof(connectionString), e);
        }

        if (_service.Uri.Scheme != Uri.UriSchemeHttp && _service.Uri.Scheme != Uri.UriSchemeHttps)
        {
            throw new ArgumentException("The storage connection string is not usable: BlobEndpoint is not an absolute http(s) URI",
                nameof(connectionString));
        }

        (Endpoint, _endpointText) = NormalizeEndpoint(_service.Uri);
    }

    /// <summary>
    /// What makes <paramref name="connectionString"/> unusable (its credential or what the SDK cannot read in it),
    /// without repeating any value; null when a store can be made from it. Nothing is sent anywhere.
    /// </summary>
    public static string? ConnectionStringProblem(string connectionString)
    {
        ArgumentNullException.ThrowIfNull(connectionString);
        try
        {
            using var store = new BlobStore(connectionString);
            return null;
        }
        catch (ArgumentException e)
        {
            return e.Message.Split(" (Parameter", 2)[0];
        }
    }

    /// <summary>Creates a store for a blob service URI with a token credential (e.g. a managed identity); https only.</summary>
    /// <param name="logger">Where failed tries that are retried, and the give-up, are logged; none by default.</param>
    public BlobStore(Uri serviceUri, TokenCredential credential, BlobStoreOptions? options = null, ILogger? logger = null)
    {
        ArgumentNullException.ThrowIfNull(serviceUri);
        ArgumentNullException.ThrowIfNull(credential);
        _options = Validated(options);
        _logger = logger;
        if (!serviceUri.IsAbsoluteUri || serviceUri.Scheme != Uri.UriSchemeHttps)
        {
            throw new ArgumentException($"The blob service URI {serviceUri} is not an absolute https URI (a token is only ever sent over TLS).",
                nameof(serviceUri));
        }

        _service = new BlobServiceClient(serviceUri, credential, ClientOptions(_options, logger));
        (Endpoint, _endpointText) = NormalizeEndpoint(_service.Uri);
    }

    /// <inheritdoc />
    public Uri Endpoint { get; }

    /// <summary>The options in force (a copy of those given).</summary>
    internal BlobStoreOptions Options => _options;

    /// <summary>The SDK client under this store (for benchmarks and tests that compare against it).</summary>
    internal BlobServiceClient ServiceClient => _service;

    /// <inheritdoc />
    public Uri GetBlobUri(string container, string blob)
    {
        BlobNames.ValidateContainer(container);
        BlobNames.ValidateBlob(blob);
        return new Uri(_endpointText + "/" + container + "/" + BlobNames.EncodePath(blob), UriKind.Absolute);
    }

    /// <inheritdoc />
    public async Task CreateContainerIfNotExistsAsync(string container, CancellationToken ct = default)
    {
        BlobNames.ValidateContainer(container);
        try
        {
            await Container(container).CreateIfNotExistsAsync(cancellationToken: ct).ConfigureAwait(false);
        }
        catch (Exception e) when (Translate(e, "CreateContainer", container, null, ct) is { } mapped)
        {
            throw mapped;
        }
    }

    /// <inheritdoc />
    public async Task<BlobProperties?> GetPropertiesAsync(string container, string blob, CancellationToken ct = default)
    {
        var client = Blob(container, blob);
        Response<SdkBlobProperties> response;
        try
        {
            response = await client.GetPropertiesAsync(cancellationToken: ct).ConfigureAwait(false);
        }
        catch (RequestFailedException e) when (e.Status == 404)
        {
            return null;
        }
        catch (Exception e) when (Translate(e, "GetProperties", container, blob, ct) is { } mapped)
        {
            throw mapped;
        }

        var p = response.Value;
        return new BlobProperties(p.ETag.ToString("H"), p.ContentLength, p.LastModified, p.ContentType);
    }

    /// <inheritdoc />
    /// <remarks>
    /// A range that runs past the end of the blob is cut at the end; one that starts past it fails with 416.
    /// The returned <see cref="BlobProperties.Length"/> is the length of the whole blob, also for a range.
    /// A transient fault in the middle of the body resumes where it stopped (pinned to the first response's ETag),
    /// so <paramref name="destination"/> never receives a byte twice.
    /// </remarks>
    public Task<BlobProperties?> DownloadToAsync(string container, string blob, Stream destination,
        BlobRange? range = null, string? ifMatch = null, CancellationToken ct = default)
    {
        var client = Blob(container, blob);
        ArgumentNullException.ThrowIfNull(destination);
        if (!destination.CanWrite)
        {
            throw new ArgumentException("The destination stream is not writable.", nameof(destination));
        }

        if (range is { } r)
        {
            ArgumentOutOfRangeException.ThrowIfNegative(r.Offset, nameof(range));
            ArgumentOutOfRangeException.ThrowIfLessThan(r.Length, 1, nameof(range));
        }

        BlobNames.ValidateHeaderValue(ifMatch, nameof(ifMatch));
        return DownloadCoreAsync(client, container, blob, range, ifMatch, destination, null, ct);
    }

    /// <inheritdoc />
    public Task<BlobProperties?> DownloadToAsync(string container, string blob, Func<BlobProperties, Stream> destinationFactory,
        string? ifMatch = null, CancellationToken ct = default)
    {
        var client = Blob(container, blob);
        ArgumentNullException.ThrowIfNull(destinationFactory);
        BlobNames.ValidateHeaderValue(ifMatch, nameof(ifMatch));
        return DownloadCoreAsync(client, container, blob, null, ifMatch, null, destinationFactory, ct);
    }

    /// <inheritdoc />
    public async Task<BlobContent?> DownloadAsync(string container, string blob, CancellationToken ct = default)
    {
        var client = Blob(container, blob);
        byte[]? array = null;
        var properties = await DownloadCoreAsync(client, container, blob, null, null, null, props =>
        {
            if (props.Length > Array.MaxLength)
            {
                throw new InvalidOperationException(
                    $"{Describe("Download", container, blob)}: the blob has {props.Length} bytes, too many for one array; use DownloadToAsync.");
            }

            // Exactly the blob's size, filled in place: the SDK's DownloadContent would buffer it a second time.
            array = GC.AllocateUninitializedArray<byte>((int)props.Length);
            return new MemoryStream(array, 0, array.Length, writable: true, publiclyVisible: true);
        }, ct).ConfigureAwait(false);
        return properties is null ? null : new BlobContent(array!, properties);
    }

    /// <inheritdoc />
    public Task<BlobProperties> UploadAsync(string container, string blob, ReadOnlyMemory<byte> content,
        string? contentType = null, string? ifMatch = null, string? ifNoneMatch = null, CancellationToken ct = default)
    {
        var client = Blob(container, blob);
        ValidateConditions(contentType, ifMatch, ifNoneMatch);
        if (content.Length > _options.SingleUploadThreshold)
        {
            return UploadBlocksAsync(client, container, blob, content, null, content.Length, contentType, ifMatch, ifNoneMatch, ct);
        }

        return PutBlobAsync(client, container, blob, new MemoryReadStream(content), content.Length, contentType, ifMatch, ifNoneMatch, ct);
    }

    /// <inheritdoc />
    /// <remarks>
    /// Reads exactly <paramref name="length"/> bytes from the stream's current position. A seekable stream is
    /// sent as it is and rewound for a retry; a stream that cannot seek is read into pooled blocks (staged
    /// blocks), so every request can be retried.
    /// </remarks>
    public Task<BlobProperties> UploadAsync(string container, string blob, Stream content, long length,
        string? contentType = null, string? ifMatch = null, string? ifNoneMatch = null, CancellationToken ct = default)
    {
        var client = Blob(container, blob);
        ArgumentNullException.ThrowIfNull(content);
        ArgumentOutOfRangeException.ThrowIfNegative(length);
        if (!content.CanRead)
        {
            throw new ArgumentException("The content stream is not readable.", nameof(content));
        }

        if (content.CanSeek && content.Length - content.Position < length)
        {
            throw new ArgumentException(
                $"The content stream has {content.Length - content.Position} bytes left, fewer than the {length} announced.",
                nameof(length));
        }

        ValidateConditions(contentType, ifMatch, ifNoneMatch);
        if (length > _options.SingleUploadThreshold || !content.CanSeek)
        {
            return UploadBlocksAsync(client, container, blob, default, content, length, contentType, ifMatch, ifNoneMatch, ct);
        }

        return PutBlobAsync(client, container, blob, new WindowStream(content, length), length, contentType, ifMatch, ifNoneMatch, ct);
    }

    /// <inheritdoc />
    public async Task<bool> DeleteAsync(string container, string blob, string? ifMatch = null, CancellationToken ct = default)
    {
        var client = Blob(container, blob);
        BlobNames.ValidateHeaderValue(ifMatch, nameof(ifMatch));
        try
        {
            await client.DeleteAsync(DeleteSnapshotsOption.IncludeSnapshots, Conditions(ifMatch, null), ct).ConfigureAwait(false);
            return true;
        }
        catch (RequestFailedException e) when (e.Status == 404 && e.ErrorCode != "ContainerNotFound")
        {
            return false;
        }
        catch (Exception e) when (Translate(e, "Delete", container, blob, ct, condition: IsPreconditionFailure(e)) is { } mapped)
        {
            throw mapped;
        }
    }

    /// <inheritdoc />
    /// <remarks>
    /// Pages are fetched lazily, <see cref="BlobStoreOptions.ListPageSize"/> at a time. ETags are returned quoted,
    /// as HEAD returns them. A missing container throws 404 ContainerNotFound.
    /// </remarks>
    public IAsyncEnumerable<BlobItem> ListAsync(string container, string? prefix = null, CancellationToken ct = default)
    {
        BlobNames.ValidateContainer(container);
        return ListCoreAsync(container, prefix, ct);
    }

    /// <inheritdoc />
    public async Task<BlobLeaseInfo?> TryAcquireLeaseAsync(string container, string blob, TimeSpan duration, CancellationToken ct = default)
    {
        var client = Blob(container, blob);
        if (duration < MinLeaseDuration || duration > MaxLeaseDuration)
        {
            throw new ArgumentOutOfRangeException(nameof(duration), duration,
                $"A blob lease lasts from {MinLeaseDuration.TotalSeconds:0} to {MaxLeaseDuration.TotalSeconds:0} seconds.");
        }

        // Proposing the id makes a retried try idempotent: acquiring again with the active lease's own id succeeds.
        var lease = client.GetBlobLeaseClient(Guid.NewGuid().ToString());
        try
        {
            var granted = (await lease.AcquireAsync(duration, cancellationToken: ct).ConfigureAwait(false)).Value;
            return new BlobLeaseInfo(granted.LeaseId, granted.ETag.ToString("H"));
        }
        catch (RequestFailedException e) when (e.Status == 409 && e.ErrorCode == "LeaseAlreadyPresent")
        {
            return null;
        }
        catch (Exception e) when (Translate(e, "AcquireLease", container, blob, ct) is { } mapped)
        {
            throw mapped;
        }
    }

    /// <inheritdoc />
    public async Task<BlobLeaseInfo> RenewLeaseAsync(string container, string blob, string leaseId, CancellationToken ct = default)
    {
        var client = Blob(container, blob);
        ArgumentException.ThrowIfNullOrEmpty(leaseId);
        try
        {
            var renewed = (await client.GetBlobLeaseClient(leaseId).RenewAsync(cancellationToken: ct).ConfigureAwait(false)).Value;
            return new BlobLeaseInfo(renewed.LeaseId, renewed.ETag.ToString("H"));
        }
        catch (Exception e) when (Translate(e, "RenewLease", container, blob, ct, condition: IsLeaseLost(e)) is { } mapped)
        {
            throw mapped;
        }
    }

    /// <inheritdoc />
    public async Task<bool> ReleaseLeaseAsync(string container, string blob, string leaseId, CancellationToken ct = default)
    {
        var client = Blob(container, blob);
        ArgumentException.ThrowIfNullOrEmpty(leaseId);
        try
        {
            await client.GetBlobLeaseClient(leaseId).ReleaseAsync(cancellationToken: ct).ConfigureAwait(false);
            return true;
        }
        catch (RequestFailedException e) when (IsLeaseLost(e))
        {
            return false;
        }
        catch (Exception e) when (Translate(e, "ReleaseLease", container, blob, ct) is { } mapped)
        {
            throw mapped;
        }
    }

    /// <inheritdoc />
    public async Task<BlobProperties> UploadUnderLeaseAsync(string container, string blob, ReadOnlyMemory<byte> content, string leaseId,
        CancellationToken ct = default)
    {
        var client = Blob(container, blob);
        ArgumentException.ThrowIfNullOrEmpty(leaseId);
        BlobNames.ValidateHeaderValue(leaseId, nameof(leaseId));
        if (content.Length > _options.SingleUploadThreshold)
        {
            throw new ArgumentOutOfRangeException(nameof(content), content.Length,
                $"A leased write is one Put Blob of at most {_options.SingleUploadThreshold} bytes.");
        }

        try
        {
            var options = new BlobUploadOptions { Conditions = new BlobRequestConditions { LeaseId = leaseId } };
            var info = (await client.UploadAsync(new MemoryReadStream(content), options, ct).ConfigureAwait(false)).Value;
            return new BlobProperties(info.ETag.ToString("H"), content.Length, info.LastModified, DefaultContentType);
        }
        catch (Exception e) when (Translate(e, "Upload", container, blob, ct, condition: IsLeaseLost(e)) is { } mapped)
        {
            throw mapped;
        }
    }

    /// <summary>Nothing to release: the transport is shared by the process (see <see cref="StorageTransport"/>).</summary>
    public void Dispose()
    {
    }

    private async IAsyncEnumerable<BlobItem> ListCoreAsync(string container, string? prefix,
        [EnumeratorCancellation] CancellationToken ct)
    {
        var pages = Container(container)
            .GetBlobsAsync(BlobTraits.None, BlobStates.None, string.IsNullOrEmpty(prefix) ? null : prefix, ct)
            .AsPages(pageSizeHint: _options.ListPageSize)
            .GetAsyncEnumerator(ct);
        try
        {
            while (true)
            {
                Page<Azure.Storage.Blobs.Models.BlobItem> page;
                try
                {
                    if (!await pages.MoveNextAsync().ConfigureAwait(false))
                    {
                        yield break;
                    }

                    page = pages.Current;
                }
                catch (Exception e) when (Translate(e, "List", container, null, ct) is { } mapped)
                {
                    throw mapped;
                }

                foreach (var item in page.Values)
                {
                    var p = item.Properties;
                    yield return new BlobItem(item.Name, new BlobProperties(
                        p.ETag?.ToString("H") ?? string.Empty, p.ContentLength ?? 0, p.LastModified ?? default,
                        string.IsNullOrEmpty(p.ContentType) ? null : p.ContentType));
                }
            }
        }
        finally
        {
            await pages.DisposeAsync().ConfigureAwait(false);
        }
    }

    /// <summary>
    /// One Get Blob, streamed into the destination (given, or made by the factory from the first response's
    /// properties) through one pooled buffer. The SDK's download stream resumes a broken body by itself, asking
    /// for the rest with Range and If-Match on the first ETag; counting what reached the destination tells a
    /// changed blob apart from a fresh failure.
    /// </summary>
    private async Task<BlobProperties?> DownloadCoreAsync(BlobBaseClient client, string container, string blob, BlobRange? range,
        string? ifMatch, Stream? destination, Func<BlobProperties, Stream>? destinationFactory, CancellationToken ct)
    {
        Response<BlobDownloadStreamingResult> response;
        try
        {
            var options = new BlobDownloadOptions
            {
                Range = range is { } r ? new HttpRange(r.Offset, r.Length) : default,
                Conditions = Conditions(ifMatch, null),
            };
            response = await client.DownloadStreamingAsync(options, ct).ConfigureAwait(false);
        }
        catch (RequestFailedException e) when (e.Status == 404)
        {
            return null;
        }
        catch (Exception e) when (Translate(e, "Download", container, blob, ct, condition: IsPreconditionFailure(e)) is { } mapped)
        {
            throw mapped;
        }

        using var result = response.Value;
        var details = result.Details;
        var expected = details.ContentLength;
        var properties = new BlobProperties(details.ETag.ToString("H"), TotalLength(details.ContentRange) ?? expected,
            details.LastModified, string.IsNullOrEmpty(details.ContentType) ? null : details.ContentType);
        // The caller sizes its destination (e.g. a shared-memory extent) from the first response; its failure is
        // the caller's, never retried.
        destination ??= destinationFactory!(properties);

        var size = (int)Math.Clamp(expected, 1, _options.CopyBufferSize);
        var buffer = ArrayPool<byte>.Shared.Rent(size);
        long written = 0;
        // The SDK resumes a broken body inside ReadAsync with requests of its own; they carry this marker, by which
        // the retry-logging policy tells a resume apart from a first request. Made only when Debug is on (an
        // allocation per download otherwise spared); the give-up below is logged either way.
        var resumes = _logger?.IsEnabled(LogLevel.Debug) == true ? new DownloadResumes(_logger, $"{container}/{blob}") : null;
        using var resumeScope = resumes?.Scope();
        try
        {
            var body = result.Content;
            while (true)
            {
                int n;
                try
                {
                    n = await body.ReadAsync(buffer.AsMemory(0, size), ct).ConfigureAwait(false);
                }
                catch (RequestFailedException e) when (written > 0 && e.Status is 404 or 412)
                {
                    throw Error(e, "Download", container, blob, condition: true, note: string.Create(CultureInfo.InvariantCulture,
                        $"the blob changed or was deleted after {written} bytes had been downloaded"));
                }
                catch (Exception e) when (Translate(e, "Download", container, blob, ct, condition: IsPreconditionFailure(e)) is { } mapped)
                {
                    if (_logger is not null && mapped is StorageUnavailableException)
                        Log.DownloadGivingUp(_logger, e, $"{container}/{blob}", written,
                            resumes?.Count ?? (e is AggregateException a ? a.InnerExceptions.Count - 1 : 0), mapped.InnerException?.Message ?? e.Message);
                    throw mapped;
                }

                if (n == 0)
                {
                    break;
                }

                await destination.WriteAsync(buffer.AsMemory(0, n), ct).ConfigureAwait(false);
                written += n;
            }
        }
        finally
        {
            ArrayPool<byte>.Shared.Return(buffer);
        }

        if (written != expected)
        {
            throw Unavailable("Download", container, blob, new IOException(string.Create(CultureInfo.InvariantCulture,
                $"The response body ended after {written} of {expected} bytes.")));
        }

        return properties;
    }

    private async Task<BlobProperties> PutBlobAsync(BlockBlobClient client, string container, string blob, Stream content, long length,
        string? contentType, string? ifMatch, string? ifNoneMatch, CancellationToken ct)
    {
        try
        {
            var options = new BlobUploadOptions
            {
                HttpHeaders = contentType is null ? null : new BlobHttpHeaders { ContentType = contentType },
                Conditions = Conditions(ifMatch, ifNoneMatch),
            };
            var info = (await client.UploadAsync(content, options, ct).ConfigureAwait(false)).Value;
            return new BlobProperties(info.ETag.ToString("H"), length, info.LastModified, contentType ?? DefaultContentType);
        }
        catch (Exception e) when (Translate(e, "Upload", container, blob, ct, IsConditionFailure(e, ifMatch, ifNoneMatch)) is { } mapped)
        {
            throw mapped;
        }
    }

    private async Task<BlobProperties> UploadBlocksAsync(BlockBlobClient client, string container, string blob,
        ReadOnlyMemory<byte> memory, Stream? stream, long length, string? contentType, string? ifMatch,
        string? ifNoneMatch, CancellationToken ct)
    {
        var blockSize = Math.Max(_options.BlockSize, (length + MaxBlocks - 1) / MaxBlocks);
        if (blockSize > MaxBlockSize)
        {
            throw new ArgumentOutOfRangeException(nameof(length), length,
                $"A blob of {length} bytes would need blocks larger than {MaxBlockSize} bytes.");
        }

        var count = (int)((length + blockSize - 1) / blockSize);
        var blockIds = NewBlockIds(count);
        var concurrency = _options.BlockUploadConcurrency;
        var inFlight = new List<Task>(concurrency);
        using var failed = CancellationTokenSource.CreateLinkedTokenSource(ct);
        try
        {
            for (var i = 0; i < count; i++)
            {
                var offset = i * blockSize;
                var size = (int)Math.Min(blockSize, length - offset);
                if (stream is null)
                {
                    inFlight.Add(StageBlockAsync(client, container, blob, blockIds[i], memory.Slice((int)offset, size), null, failed.Token));
                }
                else
                {
                    // One block in a pooled buffer: a retry sends it again even when the source cannot seek.
                    var buffer = ArrayPool<byte>.Shared.Rent(size);
                    try
                    {
                        var got = 0;
                        while (got < size)
                        {
                            var n = await stream.ReadAsync(buffer.AsMemory(got, size - got), failed.Token).ConfigureAwait(false);
                            if (n == 0)
                            {
                                throw new ArgumentException(string.Create(CultureInfo.InvariantCulture,
                                    $"The content stream ended after {offset + got} of the {length} bytes announced."), nameof(length));
                            }

                            got += n;
                        }
                    }
                    catch
                    {
                        ArrayPool<byte>.Shared.Return(buffer);
                        throw;
                    }

                    inFlight.Add(StageBlockAsync(client, container, blob, blockIds[i], buffer.AsMemory(0, size), buffer, failed.Token));
                }

                if (inFlight.Count >= concurrency)
                {
                    var done = await Task.WhenAny(inFlight).ConfigureAwait(false);
                    inFlight.Remove(done);
                    await done.ConfigureAwait(false);
                }
            }

            await Task.WhenAll(inFlight).ConfigureAwait(false);
        }
        catch
        {
            await failed.CancelAsync().ConfigureAwait(false);
            try
            {
                await Task.WhenAll(inFlight).ConfigureAwait(false);
            }
            catch (Exception)
            {
                // The first failure is the one to report; the others were cancelled because of it.
            }

            throw;
        }

        try
        {
            var options = new CommitBlockListOptions
            {
                HttpHeaders = contentType is null ? null : new BlobHttpHeaders { ContentType = contentType },
                Conditions = Conditions(ifMatch, ifNoneMatch),
            };
            var info = (await client.CommitBlockListAsync(blockIds, options, ct).ConfigureAwait(false)).Value;
            return new BlobProperties(info.ETag.ToString("H"), length, info.LastModified, contentType ?? DefaultContentType);
        }
        catch (Exception e) when (Translate(e, "CommitBlockList", container, blob, ct, IsConditionFailure(e, ifMatch, ifNoneMatch)) is { } mapped)
        {
            throw mapped;
        }
    }

    private async Task StageBlockAsync(BlockBlobClient client, string container, string blob, string blockId,
        ReadOnlyMemory<byte> data, byte[]? rented, CancellationToken ct)
    {
        try
        {
            await client.StageBlockAsync(blockId, new MemoryReadStream(data), cancellationToken: ct).ConfigureAwait(false);
        }
        catch (Exception e) when (Translate(e, "StageBlock", container, blob, ct) is { } mapped)
        {
            throw mapped;
        }
        finally
        {
            if (rented is not null)
            {
                ArrayPool<byte>.Shared.Return(rented);
            }
        }
    }

    private BlobContainerClient Container(string container) =>
        _containers.GetOrAdd(container, static (name, service) => service.GetBlobContainerClient(name), _service);

    private BlockBlobClient Blob(string container, string blob)
    {
        if (_blobs.TryGetValue((container, blob), out var cached))
        {
            return cached; // validated when it was added
        }

        BlobNames.ValidateContainer(container);
        BlobNames.ValidateBlob(blob);
        var client = Container(container).GetBlockBlobClient(blob);
        if (Interlocked.Increment(ref _cachedBlobClients) > MaxCachedBlobClients)
        {
            Interlocked.Exchange(ref _cachedBlobClients, 0);
            _blobs.Clear();
        }

        _blobs.TryAdd((container, blob), client);
        return client;
    }

    /// <summary>
    /// The project's exception for an SDK failure, or null to let it pass (the caller's cancellation, the caller's
    /// own stream failing, bad arguments). Retried failures reach here only once the SDK gave up.
    /// </summary>
    private Exception? Translate(Exception e, string operation, string container, string? blob, CancellationToken ct, bool condition = false)
    {
        switch (e)
        {
            case OperationCanceledException when ct.IsCancellationRequested:
                return null;
            case AggregateException { InnerExceptions.Count: > 0 } aggregate:
                // The SDK's retry policy gave up after several failed tries: report the last one.
                return Unavailable(operation, container, blob, Cause(aggregate.InnerExceptions[^1], operation, container, blob));
            case RequestFailedException { Status: 0 } or IOException or TimeoutException or HttpRequestException
                or OperationCanceledException:
                return Unavailable(operation, container, blob, Cause(e, operation, container, blob));
            case RequestFailedException failed when IsTransientStatus(failed.Status):
                return Unavailable(operation, container, blob, Error(failed, operation, container, blob, condition: false));
            case RequestFailedException failed:
                return Error(failed, operation, container, blob, condition);
            case Azure.Identity.AuthenticationFailedException auth:
                return new StorageUnavailableException(
                    $"Blob storage at {_endpointText}: {Describe(operation, container, blob)} failed: no token for the storage account: " +
                    FirstLine(auth.Message), auth);
            default:
                return null;
        }
    }

    /// <summary>What one failed try looked like, as the inner exception of <see cref="StorageUnavailableException"/>.</summary>
    private static Exception Cause(Exception e, string operation, string container, string? blob) => e switch
    {
        RequestFailedException { Status: 0, InnerException: HttpRequestException http } => http,
        RequestFailedException { Status: 0, InnerException: IOException io } => io,
        RequestFailedException { Status: > 0 } failed => Error(failed, operation, container, blob, condition: false),
        OperationCanceledException canceled => new TimeoutException(
            "The try did not complete within the per-try timeout (BlobStoreOptions.TryTimeout).", canceled),
        _ => e,
    };

    private StorageUnavailableException Unavailable(string operation, string container, string? blob, Exception failure) =>
        new(string.Create(CultureInfo.InvariantCulture,
            $"Blob storage at {_endpointText} is unavailable: {Describe(operation, container, blob)} failed after {_options.MaxRetries + 1} attempt(s). Last error: {failure.Message}"),
            failure);

    private static BlobStorageException Error(RequestFailedException e, string operation, string container, string? blob,
        bool condition, string? note = null)
    {
        var code = string.IsNullOrEmpty(e.ErrorCode) ? null : e.ErrorCode;
        var message = string.Create(CultureInfo.InvariantCulture, $"{Describe(operation, container, blob)} failed: HTTP {e.Status}");
        if (code is not null)
        {
            message += " " + code;
        }

        // The SDK's message starts with the service's own message (Azure appends RequestId and Time on further lines).
        var serviceMessage = FirstLine(e.Message);
        if (serviceMessage.Length > 0 && serviceMessage != "Service request failed." && serviceMessage != code)
        {
            message += ": " + serviceMessage;
        }

        if (note is not null)
        {
            message += " (" + note + ")";
        }

        return condition
            ? new BlobConditionFailedException(e.Status, code, message, e)
            : new BlobStorageException(e.Status, code, message, e);
    }

    private static string Describe(string operation, string container, string? blob) => blob is null
        ? $"{operation} of container '{container}'"
        : $"{operation} of blob '{BlobNames.Printable(blob)}' in container '{container}'";

    /// <summary>Status codes the SDK retries (timeouts, throttling and server-side faults): still failing means unavailable.</summary>
    internal static bool IsTransientStatus(int status) => status is 408 or 429 or 500 or 502 or 503 or 504;

    private static bool IsPreconditionFailure(Exception e) => e is RequestFailedException { Status: 412 };

    /// <summary>412, 409 BlobAlreadyExists under If-None-Match, or 404 BlobNotFound under If-Match: the write's condition did not hold.</summary>
    private static bool IsConditionFailure(Exception e, string? ifMatch, string? ifNoneMatch) => e is RequestFailedException failed &&
        failed.Status switch
        {
            412 => true,
            409 => failed.ErrorCode == "BlobAlreadyExists" && ifNoneMatch is not null,
            404 => ifMatch is not null && failed.ErrorCode == "BlobNotFound",
            _ => false,
        };

    /// <summary>The lease is not (or no longer) the caller's: another one is active, none is, or the blob is gone.
    /// (409 for lease operations, 412 for writes under a lease.)</summary>
    private static bool IsLeaseLost(Exception e) => e is RequestFailedException failed && failed.Status switch
    {
        409 or 412 => failed.ErrorCode is { } code && code.StartsWith("Lease", StringComparison.Ordinal),
        404 => failed.ErrorCode == "BlobNotFound",
        _ => false,
    };

    private static BlobRequestConditions? Conditions(string? ifMatch, string? ifNoneMatch) =>
        ifMatch is null && ifNoneMatch is null
            ? null
            : new BlobRequestConditions
            {
                IfMatch = ifMatch is null ? null : new ETag(ifMatch),
                IfNoneMatch = ifNoneMatch is null ? null : new ETag(ifNoneMatch),
            };

    /// <summary>The blob's full length from "bytes 0-99/1234".</summary>
    private static long? TotalLength(string? contentRange)
    {
        if (contentRange is null)
        {
            return null;
        }

        var slash = contentRange.LastIndexOf('/');
        return slash >= 0 && long.TryParse(contentRange.AsSpan(slash + 1), NumberStyles.None, CultureInfo.InvariantCulture, out var total)
            ? total
            : null;
    }

    private static string FirstLine(string text)
    {
        var nl = text.AsSpan().IndexOfAny('\r', '\n');
        return (nl >= 0 ? text[..nl] : text).Trim();
    }

    private static BlobStoreOptions Validated(BlobStoreOptions? options)
    {
        var copy = options?.Clone() ?? new BlobStoreOptions();
        copy.Validate();
        return copy;
    }

    private static (Uri Endpoint, string Text) NormalizeEndpoint(Uri serviceUri)
    {
        var text = serviceUri.GetLeftPart(UriPartial.Path).TrimEnd('/');
        return (new Uri(text, UriKind.Absolute), text);
    }

    /// <summary>The SDK's options for one store: the shared transport, the project's retry promise, no diagnostics.</summary>
    internal static BlobClientOptions ClientOptions(BlobStoreOptions options, ILogger? logger) =>
        StorageTransport.Configure(new BlobClientOptions { Transport = StorageTransport.For(options) }, options, logger);

    /// <summary>Block IDs of one upload: base64(16-byte upload GUID + 4-byte index), all the same length.</summary>
    private static string[] NewBlockIds(int count)
    {
        var raw = new byte[20];
        Guid.NewGuid().TryWriteBytes(raw);
        var ids = new string[count];
        for (var i = 0; i < count; i++)
        {
            BinaryPrimitives.WriteInt32BigEndian(raw.AsSpan(16), i);
            ids[i] = Convert.ToBase64String(raw);
        }

        return ids;
    }

    private static void ValidateConditions(string? contentType, string? ifMatch, string? ifNoneMatch)
    {
        BlobNames.ValidateHeaderValue(contentType, nameof(contentType));
        BlobNames.ValidateHeaderValue(ifMatch, nameof(ifMatch));
        BlobNames.ValidateHeaderValue(ifNoneMatch, nameof(ifNoneMatch));
    }

    /// <summary>A seekable, read-only stream over memory, without copying it (the SDK takes request bodies as streams).</summary>
    private sealed class MemoryReadStream(ReadOnlyMemory<byte> memory) : Stream
    {
        private int _position;

        public override bool CanRead => true;

        public override bool CanSeek => true;

        public override bool CanWrite => false;

        public override long Length => memory.Length;

        public override long Position
        {
            get => _position;
            set => _position = (int)Math.Clamp(value, 0, memory.Length);
        }

        public override int Read(byte[] buffer, int offset, int count) => Read(buffer.AsSpan(offset, count));

        public override int Read(Span<byte> buffer)
        {
            var n = Math.Min(buffer.Length, memory.Length - _position);
            memory.Span.Slice(_position, n).CopyTo(buffer);
            _position += n;
            return n;
        }

        public override Task<int> ReadAsync(byte[] buffer, int offset, int count, CancellationToken cancellationToken) =>
            Task.FromResult(Read(buffer.AsSpan(offset, count)));

        public override ValueTask<int> ReadAsync(Memory<byte> buffer, CancellationToken cancellationToken = default) =>
            ValueTask.FromResult(Read(buffer.Span));

        public override long Seek(long offset, SeekOrigin origin)
        {
            Position = origin switch
            {
                SeekOrigin.Begin => offset,
                SeekOrigin.Current => _position + offset,
                _ => memory.Length + offset,
            };
            return _position;
        }

        public override void Flush()
        {
        }

        public override void SetLength(long value) => throw new NotSupportedException();

        public override void Write(byte[] buffer, int offset, int count) => throw new NotSupportedException();
    }

    /// <summary>
    /// <paramref name="length"/> bytes of a seekable stream from its current position, as a stream of its own
    /// (the SDK sends a stream to its end and rewinds it to its start for a retry).
    /// </summary>
    private sealed class WindowStream(Stream inner, long length) : Stream
    {
        private readonly long _start = inner.Position;
        private long _position;

        public override bool CanRead => true;

        public override bool CanSeek => true;

        public override bool CanWrite => false;

        public override long Length => length;

        public override long Position
        {
            get => _position;
            set
            {
                _position = Math.Clamp(value, 0, length);
                inner.Position = _start + _position;
            }
        }

        public override int Read(byte[] buffer, int offset, int count) => Read(buffer.AsSpan(offset, count));

        public override int Read(Span<byte> buffer)
        {
            var n = inner.Read(buffer[..(int)Math.Min(buffer.Length, length - _position)]);
            _position += n;
            return n;
        }

        public override Task<int> ReadAsync(byte[] buffer, int offset, int count, CancellationToken cancellationToken) =>
            ReadAsync(buffer.AsMemory(offset, count), cancellationToken).AsTask();

        public override async ValueTask<int> ReadAsync(Memory<byte> buffer, CancellationToken cancellationToken = default)
        {
            var n = await inner.ReadAsync(buffer[..(int)Math.Min(buffer.Length, length - _position)], cancellationToken).ConfigureAwait(false);
            _position += n;
            return n;
        }

        public override long Seek(long offset, SeekOrigin origin)
        {
            Position = origin switch
            {
                SeekOrigin.Begin => offset,
                SeekOrigin.Current => _position + offset,
                _ => length + offset,
            };
            return _position;
        }

        public override void Flush()
        {
        }

        public override void SetLength(long value) => throw new NotSupportedException();

        public override void Write(byte[] buffer, int offset, int count) => throw new NotSupportedException();
    }
}
