using System.Buffers;
using System.Buffers.Binary;
using System.Net;
using System.Runtime.CompilerServices;
using System.Text;

namespace FaaST.Storage;

/// <summary>
/// A lean Azure Blob Storage REST client (also for Azurite): SharedKey or SAS authentication, one pooled
/// <see cref="SocketsHttpHandler"/>, bodies streamed through pooled buffers, retries with exponential
/// backoff and jitter. Thread-safe; create one per process and dispose it at shutdown.
/// </summary>
public sealed partial class BlobStore : IBlobStore, IDisposable
{
    /// <summary>The x-ms-version every request is sent with.</summary>
    public const string ServiceVersion = "2021-08-06";

    private const int MaxBlocks = 50_000;
    private const long MaxBlockSize = 1024L * 1024 * 1024; // pooled block buffers are arrays; the service allows 4000 MiB
    private const string DefaultContentType = "application/octet-stream";

    private readonly HttpClient _http;
    private readonly BlobStoreOptions _options;
    private readonly string _origin;               // "http://127.0.0.1:10000"
    private readonly string _endpointPath;         // "/devstoreaccount1", or "" for host-style endpoints
    private readonly string _resourcePrefix;       // "/" + account + _endpointPath
    private readonly string? _authorizationPrefix; // "SharedKey account:"
    private readonly byte[]? _key;
    private readonly string? _sas;

    /// <summary>Creates a store from a connection string (see <see cref="StorageConnectionString"/>).</summary>
    public BlobStore(string connectionString, BlobStoreOptions? options = null)
        : this(StorageConnectionString.Parse(connectionString), options)
    {
    }

    /// <summary>Creates a store from a parsed connection string.</summary>
    public BlobStore(StorageConnectionString connection, BlobStoreOptions? options = null)
    {
        ArgumentNullException.ThrowIfNull(connection);
        _options = options?.Clone() ?? new BlobStoreOptions();
        _options.Validate();

        Connection = connection;
        var endpoint = connection.BlobEndpoint;
        _origin = endpoint.GetLeftPart(UriPartial.Authority);
        _endpointPath = endpoint.AbsolutePath.TrimEnd('/');
        _resourcePrefix = "/" + connection.AccountName + _endpointPath;
        _key = connection.AccountKey;
        _authorizationPrefix = _key is null ? null : "SharedKey " + connection.AccountName + ":";
        _sas = connection.SharedAccessSignature;

        var handler = new SocketsHttpHandler
        {
            PooledConnectionLifetime = _options.PooledConnectionLifetime,
            MaxConnectionsPerServer = _options.MaxConnectionsPerServer,
            AutomaticDecompression = DecompressionMethods.None,
            UseCookies = false,
            AllowAutoRedirect = false,
            ConnectTimeout = _options.TryTimeout,
            Expect100ContinueTimeout = TimeSpan.Zero,
            // A proxy from the environment must not capture traffic to a local emulator.
            UseProxy = !endpoint.IsLoopback,
        };
        _http = new HttpClient(handler, disposeHandler: true)
        {
            Timeout = Timeout.InfiniteTimeSpan, // per-try timeouts are ours
            DefaultRequestVersion = HttpVersion.Version11,
            DefaultVersionPolicy = HttpVersionPolicy.RequestVersionOrLower,
        };
        _http.DefaultRequestHeaders.ExpectContinue = false;
    }

    /// <inheritdoc />
    public Uri Endpoint => Connection.BlobEndpoint;

    /// <summary>The parsed connection this store talks to.</summary>
    public StorageConnectionString Connection { get; }

    /// <summary>The options in force (a copy of those given).</summary>
    internal BlobStoreOptions Options => _options;

    /// <inheritdoc />
    public Uri GetBlobUri(string container, string blob)
    {
        BlobNames.ValidateContainer(container);
        BlobNames.ValidateBlob(blob);
        return new Uri(_origin + _endpointPath + "/" + container + "/" + BlobNames.EncodePath(blob), UriKind.Absolute);
    }

    /// <inheritdoc />
    public Task CreateContainerIfNotExistsAsync(string container, CancellationToken ct = default)
    {
        BlobNames.ValidateContainer(container);
        return ExecuteAsync(new CreateContainerOperation(this, container), ct);
    }

    /// <inheritdoc />
    public Task<BlobProperties?> GetPropertiesAsync(string container, string blob, CancellationToken ct = default)
    {
        var encoded = ValidateAndEncode(container, blob);
        return ExecuteAsync(new GetPropertiesOperation(this, container, blob, encoded), ct);
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
        var encoded = ValidateAndEncode(container, blob);
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
        return ExecuteAsync(new DownloadOperation(this, container, blob, encoded, range, ifMatch, destination), ct);
    }

    /// <inheritdoc />
    public Task<BlobProperties?> DownloadToAsync(string container, string blob, Func<BlobProperties, Stream> destinationFactory,
        string? ifMatch = null, CancellationToken ct = default)
    {
        var encoded = ValidateAndEncode(container, blob);
        ArgumentNullException.ThrowIfNull(destinationFactory);
        BlobNames.ValidateHeaderValue(ifMatch, nameof(ifMatch));
        return ExecuteAsync(new DownloadOperation(this, container, blob, encoded, null, ifMatch, null, destinationFactory), ct);
    }

    /// <inheritdoc />
    public async Task<BlobContent?> DownloadAsync(string container, string blob, CancellationToken ct = default)
    {
        var encoded = ValidateAndEncode(container, blob);
        var op = new DownloadOperation(this, container, blob, encoded, null, null, destination: null);
        var properties = await ExecuteAsync(op, ct).ConfigureAwait(false);
        return properties is null ? null : new BlobContent(op.Array!, properties);
    }

    /// <inheritdoc />
    public Task<BlobProperties> UploadAsync(string container, string blob, ReadOnlyMemory<byte> content,
        string? contentType = null, string? ifMatch = null, string? ifNoneMatch = null, CancellationToken ct = default)
    {
        var encoded = ValidateAndEncode(container, blob);
        ValidateConditions(contentType, ifMatch, ifNoneMatch);
        if (content.Length > _options.SingleUploadThreshold)
        {
            return UploadBlocksAsync(container, blob, encoded, content, null, content.Length, contentType, ifMatch, ifNoneMatch, ct);
        }

        return ExecuteAsync(new PutBlobOperation(this, container, blob, encoded, content, null, content.Length,
            contentType, ifMatch, ifNoneMatch), ct);
    }

    /// <inheritdoc />
    /// <remarks>
    /// Reads exactly <paramref name="length"/> bytes from the stream's current position. A seekable stream is
    /// rewound for a retry; a non-seekable one is retried only if the failed try read none of it (blocks of a
    /// block upload are buffered and always retryable).
    /// </remarks>
    public Task<BlobProperties> UploadAsync(string container, string blob, Stream content, long length,
        string? contentType = null, string? ifMatch = null, string? ifNoneMatch = null, CancellationToken ct = default)
    {
        var encoded = ValidateAndEncode(container, blob);
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
        if (length > _options.SingleUploadThreshold)
        {
            return UploadBlocksAsync(container, blob, encoded, default, content, length, contentType, ifMatch, ifNoneMatch, ct);
        }

        return ExecuteAsync(new PutBlobOperation(this, container, blob, encoded, default, content, length,
            contentType, ifMatch, ifNoneMatch), ct);
    }

    /// <inheritdoc />
    public Task<bool> DeleteAsync(string container, string blob, string? ifMatch = null, CancellationToken ct = default)
    {
        var encoded = ValidateAndEncode(container, blob);
        BlobNames.ValidateHeaderValue(ifMatch, nameof(ifMatch));
        return ExecuteAsync(new DeleteOperation(this, container, blob, encoded, ifMatch), ct);
    }

    /// <inheritdoc />
    /// <remarks>
    /// Pages are fetched lazily, <see cref="BlobStoreOptions.ListPageSize"/> at a time, each parsed by a streaming
    /// XML reader. ETags are returned quoted, as HEAD returns them. A missing container throws 404 ContainerNotFound.
    /// </remarks>
    public IAsyncEnumerable<BlobItem> ListAsync(string container, string? prefix = null, CancellationToken ct = default)
    {
        BlobNames.ValidateContainer(container);
        return ListCoreAsync(container, prefix, ct);
    }

    /// <summary>Closes the pooled connections.</summary>
    public void Dispose() => _http.Dispose();

    private async IAsyncEnumerable<BlobItem> ListCoreAsync(string container, string? prefix,
        [EnumeratorCancellation] CancellationToken ct)
    {
        string? marker = null;
        do
        {
            var page = await ExecuteAsync(new ListOperation(this, container, prefix, marker, _options.ListPageSize ?? 0), ct)
                .ConfigureAwait(false);
            foreach (var item in page.Items)
            {
                yield return item;
            }

            marker = page.NextMarker;
        }
        while (!string.IsNullOrEmpty(marker));
    }

    private async Task<BlobProperties> UploadBlocksAsync(string container, string blob, string encoded,
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
                    inFlight.Add(PutBlockAsync(container, blob, encoded, blockIds[i], memory.Slice((int)offset, size), null,
                        failed.Token));
                }
                else
                {
                    // Buffer one block so that it can be retried even when the source stream cannot seek.
                    var buffer = ArrayPool<byte>.Shared.Rent(size);
                    try
                    {
                        await stream.ReadExactlyAsync(buffer.AsMemory(0, size), failed.Token).ConfigureAwait(false);
                    }
                    catch (EndOfStreamException ex)
                    {
                        ArrayPool<byte>.Shared.Return(buffer);
                        throw new ArgumentException(
                            $"The content stream ended before the {length} bytes announced (block {i} at offset {offset}).",
                            nameof(length), ex);
                    }
                    catch
                    {
                        ArrayPool<byte>.Shared.Return(buffer);
                        throw;
                    }

                    inFlight.Add(PutBlockAsync(container, blob, encoded, blockIds[i], buffer.AsMemory(0, size), buffer,
                        failed.Token));
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

        var xml = BuildBlockList(blockIds);
        return await ExecuteAsync(new PutBlockListOperation(this, container, blob, encoded, xml, length, contentType,
            ifMatch, ifNoneMatch), ct).ConfigureAwait(false);
    }

    private async Task PutBlockAsync(string container, string blob, string encoded, string blockId,
        ReadOnlyMemory<byte> data, byte[]? rented, CancellationToken ct)
    {
        try
        {
            await ExecuteAsync(new PutBlockOperation(this, container, blob, encoded, blockId, data), ct).ConfigureAwait(false);
        }
        finally
        {
            if (rented is not null)
            {
                ArrayPool<byte>.Shared.Return(rented);
            }
        }
    }

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

    private static byte[] BuildBlockList(string[] blockIds)
    {
        var sb = new StringBuilder(64 + (blockIds.Length * 46));
        sb.Append("<?xml version=\"1.0\" encoding=\"utf-8\"?><BlockList>");
        foreach (var id in blockIds)
        {
            sb.Append("<Latest>").Append(id).Append("</Latest>");
        }

        sb.Append("</BlockList>");
        return Encoding.UTF8.GetBytes(sb.ToString());
    }

    private static string ValidateAndEncode(string container, string blob)
    {
        BlobNames.ValidateContainer(container);
        BlobNames.ValidateBlob(blob);
        return BlobNames.EncodePath(blob);
    }

    private static void ValidateConditions(string? contentType, string? ifMatch, string? ifNoneMatch)
    {
        BlobNames.ValidateHeaderValue(contentType, nameof(contentType));
        BlobNames.ValidateHeaderValue(ifMatch, nameof(ifMatch));
        BlobNames.ValidateHeaderValue(ifNoneMatch, nameof(ifNoneMatch));
    }
}
