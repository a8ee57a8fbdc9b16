using System.Buffers;
using System.Globalization;
using System.Net;
using System.Xml;

namespace FaaST.Storage;

// One class per REST operation. An operation object lives for all tries of one call and carries the
// state a retry needs (e.g. how much of a download already reached the caller).
public sealed partial class BlobStore
{
    private abstract class OperationBase(BlobStore store, string name, string container, string? blob)
    {
        protected BlobStore Store { get; } = store;

        public string Name { get; } = name;

        public string Container { get; } = container;

        public string? Blob { get; } = blob;

        /// <summary>The per-try token source; bodies push its timeout forward while they make progress.</summary>
        public CancellationTokenSource? AttemptCts { get; set; }

        /// <summary>A failure of the caller's own stream: rethrown as is, never retried.</summary>
        public Exception? Fatal { get; set; }

        /// <summary>Why another try is impossible (e.g. a non-seekable source already read), or null.</summary>
        public virtual string? RetryBlocker => null;

        public string Describe() => Blob is null
            ? $"{Name} of container '{Container}'"
            : $"{Name} of blob '{BlobNames.Printable(Blob)}' in container '{Container}'";

        /// <summary>Pushes the per-try deadline forward: a body that keeps moving is not timed out.</summary>
        public void KeepAlive() => AttemptCts?.CancelAfter(Store._options.TryTimeout);

        /// <summary>Stops the per-try clock while the caller's own stream is busy (its slowness is not a storage fault).</summary>
        public void Pause() => AttemptCts?.CancelAfter(Timeout.InfiniteTimeSpan);

        public CancellationToken AttemptToken => AttemptCts?.Token ?? CancellationToken.None;

        protected Task<BlobStorageException> ErrorAsync(HttpResponseMessage response, bool condition = false, string? note = null) =>
            CreateErrorAsync(this, response, condition, AttemptToken, note);
    }

    private abstract class Operation<T>(BlobStore store, string name, string container, string? blob)
        : OperationBase(store, name, container, blob)
    {
        public abstract HttpRequestMessage CreateRequest(int attempt);

        /// <summary>Handles a non-transient response; throws <see cref="BlobStorageException"/> for errors.</summary>
        public abstract Task<T> ReadResponseAsync(HttpResponseMessage response, CancellationToken callerCt);
    }

    private sealed class CreateContainerOperation(BlobStore store, string container)
        : Operation<bool>(store, "CreateContainer", container, null)
    {
        public override HttpRequestMessage CreateRequest(int attempt)
        {
            var p = new RequestParts { Method = "PUT", Container = Container, Restype = "container" };
            return Store.CreateRequest(HttpMethod.Put, p, null);
        }

        public override async Task<bool> ReadResponseAsync(HttpResponseMessage response, CancellationToken callerCt)
        {
            if (response.StatusCode == HttpStatusCode.Created)
            {
                return true;
            }

            if (response.StatusCode == HttpStatusCode.Conflict
                && GetHeader(response, "x-ms-error-code") == "ContainerAlreadyExists")
            {
                return false;
            }

            throw await ErrorAsync(response).ConfigureAwait(false);
        }
    }

    private sealed class GetPropertiesOperation(BlobStore store, string container, string blob, string encoded)
        : Operation<BlobProperties?>(store, "GetProperties", container, blob)
    {
        public override HttpRequestMessage CreateRequest(int attempt)
        {
            var p = new RequestParts { Method = "HEAD", Container = Container, EncodedBlob = encoded };
            return Store.CreateRequest(HttpMethod.Head, p, null);
        }

        public override async Task<BlobProperties?> ReadResponseAsync(HttpResponseMessage response, CancellationToken callerCt)
        {
            return response.StatusCode switch
            {
                HttpStatusCode.OK => ReadProperties(response),
                HttpStatusCode.NotFound => null,
                _ => throw await ErrorAsync(response).ConfigureAwait(false),
            };
        }
    }

    /// <summary>
    /// Get Blob into the caller's stream (through a pooled buffer) or into one exact-size array. After a transient
    /// fault mid-body the next try asks only for the remaining bytes, pinned by If-Match to the first ETag.
    /// </summary>
    private sealed class DownloadOperation(BlobStore store, string container, string blob, string encoded,
        BlobRange? range, string? ifMatch, Stream? destination, Func<BlobProperties, Stream>? destinationFactory = null)
        : Operation<BlobProperties?>(store, "Download", container, blob)
    {
        private BlobProperties? _properties;
        private long _expected;  // body bytes of the first response
        private long _written;   // bytes already handed to the caller

        public byte[]? Array { get; private set; }

        public override HttpRequestMessage CreateRequest(int attempt)
        {
            var p = new RequestParts { Method = "GET", Container = Container, EncodedBlob = encoded, IfMatch = ifMatch };
            var start = range?.Offset ?? 0;
            if (_properties is not null && _written > 0)
            {
                p.IfMatch ??= _properties.ETag;
                p.Range = string.Create(CultureInfo.InvariantCulture, $"bytes={start + _written}-{start + _expected - 1}");
            }
            else if (range is { } r)
            {
                p.Range = string.Create(CultureInfo.InvariantCulture, $"bytes={r.Offset}-{r.Offset + r.Length - 1}");
            }

            return Store.CreateRequest(HttpMethod.Get, p, null);
        }

        public override async Task<BlobProperties?> ReadResponseAsync(HttpResponseMessage response, CancellationToken callerCt)
        {
            var status = response.StatusCode;
            if (status is not (HttpStatusCode.OK or HttpStatusCode.PartialContent))
            {
                var resumed = _written > 0;
                if (status == HttpStatusCode.NotFound && !resumed)
                {
                    return null;
                }

                if (resumed && status is HttpStatusCode.NotFound or HttpStatusCode.PreconditionFailed)
                {
                    throw await ErrorAsync(response, condition: true, note: string.Create(CultureInfo.InvariantCulture,
                        $"the blob changed or was deleted after {_written} bytes had been downloaded")).ConfigureAwait(false);
                }

                throw await ErrorAsync(response, condition: status == HttpStatusCode.PreconditionFailed).ConfigureAwait(false);
            }

            var contentLength = response.Content.Headers.ContentLength
                ?? throw new IOException("The Get Blob response has no Content-Length.");
            if (_properties is null)
            {
                _properties = ReadProperties(response);
                _expected = contentLength;
                if (destinationFactory is not null)
                {
                    try
                    {
                        // The caller sizes its destination (e.g. a shared-memory extent) from the first response.
                        destination = destinationFactory(_properties);
                    }
                    catch (Exception ex)
                    {
                        Fatal = ex;
                        throw;
                    }
                }
                else if (destination is null)
                {
                    if (contentLength > System.Array.MaxLength)
                    {
                        throw new InvalidOperationException(
                            $"{Describe()}: the blob has {contentLength} bytes, too many for one array; use DownloadToAsync.");
                    }

                    Array = GC.AllocateUninitializedArray<byte>((int)contentLength);
                }
            }
            else if (contentLength != _expected - _written)
            {
                throw new IOException(string.Create(CultureInfo.InvariantCulture,
                    $"The resumed download returned {contentLength} bytes instead of the {_expected - _written} remaining."));
            }

            var body = await response.Content.ReadAsStreamAsync(AttemptToken).ConfigureAwait(false);
            await using (body.ConfigureAwait(false))
            {
                if (Array is not null)
                {
                    await ReadIntoArrayAsync(body).ConfigureAwait(false);
                }
                else
                {
                    await CopyToDestinationAsync(body, destination!, callerCt).ConfigureAwait(false);
                }
            }

            if (_written != _expected)
            {
                throw new IOException(string.Create(CultureInfo.InvariantCulture,
                    $"The response body ended after {_written} of {_expected} bytes."));
            }

            return _properties;
        }

        private async Task ReadIntoArrayAsync(Stream body)
        {
            var array = Array!;
            while (_written < _expected)
            {
                KeepAlive();
                var n = await body.ReadAsync(array.AsMemory((int)_written), AttemptToken).ConfigureAwait(false);
                if (n == 0)
                {
                    return;
                }

                _written += n;
            }
        }

        private async Task CopyToDestinationAsync(Stream body, Stream target, CancellationToken callerCt)
        {
            var size = (int)Math.Clamp(_expected - _written, 1, Store._options.CopyBufferSize);
            var buffer = ArrayPool<byte>.Shared.Rent(size);
            try
            {
                while (true)
                {
                    KeepAlive();
                    var n = await body.ReadAsync(buffer.AsMemory(0, size), AttemptToken).ConfigureAwait(false);
                    if (n == 0)
                    {
                        return;
                    }

                    try
                    {
                        Pause();
                        await target.WriteAsync(buffer.AsMemory(0, n), callerCt).ConfigureAwait(false);
                    }
                    catch (Exception ex)
                    {
                        Fatal = ex; // the caller's stream failed: not ours to retry
                        throw;
                    }

                    _written += n;
                }
            }
            finally
            {
                ArrayPool<byte>.Shared.Return(buffer);
            }
        }
    }

    /// <summary>Put Blob (BlockBlob) from memory or from a stream of known length.</summary>
    private sealed class PutBlobOperation(BlobStore store, string container, string blob, string encoded,
        ReadOnlyMemory<byte> memory, Stream? stream, long length, string? contentType, string? ifMatch, string? ifNoneMatch)
        : Operation<BlobProperties>(store, "Upload", container, blob)
    {
        private readonly long _startPosition = stream is { CanSeek: true } ? stream.Position : 0;

        public long SourceBytesRead { get; set; }

        public override string? RetryBlocker => stream is { CanSeek: false } && SourceBytesRead > 0
            ? $"its source stream is not seekable and {SourceBytesRead} bytes of it were already read"
            : null;

        public override HttpRequestMessage CreateRequest(int attempt)
        {
            if (stream is { CanSeek: true } && stream.Position != _startPosition)
            {
                stream.Position = _startPosition; // rewind for a retry
            }

            var p = new RequestParts
            {
                Method = "PUT",
                Container = Container,
                EncodedBlob = encoded,
                ContentLength = length,
                BlobType = "BlockBlob",
                BlobContentType = contentType,
                IfMatch = ifMatch,
                IfNoneMatch = ifNoneMatch,
            };
            var content = new UploadContent(this, memory, stream, length, Store._options.CopyBufferSize);
            return Store.CreateRequest(HttpMethod.Put, p, content);
        }

        public override async Task<BlobProperties> ReadResponseAsync(HttpResponseMessage response, CancellationToken callerCt)
        {
            if (response.StatusCode == HttpStatusCode.Created)
            {
                return ReadProperties(response, length, contentType ?? DefaultContentType);
            }

            throw await ErrorAsync(response, IsConditionFailure(response, ifMatch, ifNoneMatch)).ConfigureAwait(false);
        }
    }

    private sealed class PutBlockOperation(BlobStore store, string container, string blob, string encoded,
        string blockId, ReadOnlyMemory<byte> data)
        : Operation<bool>(store, "PutBlock", container, blob)
    {
        public override HttpRequestMessage CreateRequest(int attempt)
        {
            var p = new RequestParts
            {
                Method = "PUT",
                Container = Container,
                EncodedBlob = encoded,
                Comp = "block",
                BlockId = blockId,
                ContentLength = data.Length,
            };
            return Store.CreateRequest(HttpMethod.Put, p, new UploadContent(this, data, null, data.Length, 0));
        }

        public override async Task<bool> ReadResponseAsync(HttpResponseMessage response, CancellationToken callerCt)
        {
            if (response.StatusCode == HttpStatusCode.Created)
            {
                return true;
            }

            throw await ErrorAsync(response).ConfigureAwait(false);
        }
    }

    private sealed class PutBlockListOperation(BlobStore store, string container, string blob, string encoded,
        byte[] xml, long length, string? contentType, string? ifMatch, string? ifNoneMatch)
        : Operation<BlobProperties>(store, "PutBlockList", container, blob)
    {
        public override HttpRequestMessage CreateRequest(int attempt)
        {
            var p = new RequestParts
            {
                Method = "PUT",
                Container = Container,
                EncodedBlob = encoded,
                Comp = "blocklist",
                ContentLength = xml.Length,
                BlobContentType = contentType,
                IfMatch = ifMatch,
                IfNoneMatch = ifNoneMatch,
            };
            return Store.CreateRequest(HttpMethod.Put, p, new UploadContent(this, xml, null, xml.Length, 0));
        }

        public override async Task<BlobProperties> ReadResponseAsync(HttpResponseMessage response, CancellationToken callerCt)
        {
            if (response.StatusCode == HttpStatusCode.Created)
            {
                return ReadProperties(response, length, contentType ?? DefaultContentType);
            }

            throw await ErrorAsync(response, IsConditionFailure(response, ifMatch, ifNoneMatch)).ConfigureAwait(false);
        }
    }

    private sealed class DeleteOperation(BlobStore store, string container, string blob, string encoded, string? ifMatch)
        : Operation<bool>(store, "Delete", container, blob)
    {
        public override HttpRequestMessage CreateRequest(int attempt)
        {
            var p = new RequestParts
            {
                Method = "DELETE",
                Container = Container,
                EncodedBlob = encoded,
                DeleteSnapshots = "include",
                IfMatch = ifMatch,
            };
            return Store.CreateRequest(HttpMethod.Delete, p, null);
        }

        public override async Task<bool> ReadResponseAsync(HttpResponseMessage response, CancellationToken callerCt)
        {
            return response.StatusCode switch
            {
                HttpStatusCode.Accepted or HttpStatusCode.OK => true,
                HttpStatusCode.NotFound when GetHeader(response, "x-ms-error-code") != "ContainerNotFound" => false,
                _ => throw await ErrorAsync(response, response.StatusCode == HttpStatusCode.PreconditionFailed)
                    .ConfigureAwait(false),
            };
        }
    }

    private sealed record ListPage(List<BlobItem> Items, string? NextMarker);

    /// <summary>One page of List Blobs, parsed from the response stream by an XmlReader (no DOM).</summary>
    private sealed class ListOperation(BlobStore store, string container, string? prefix, string? marker, int pageSize)
        : Operation<ListPage>(store, "List", container, null)
    {
        public override HttpRequestMessage CreateRequest(int attempt)
        {
            var p = new RequestParts
            {
                Method = "GET",
                Container = Container,
                Restype = "container",
                Comp = "list",
                Prefix = prefix,
                Marker = marker,
                MaxResults = pageSize,
            };
            return Store.CreateRequest(HttpMethod.Get, p, null);
        }

        public override async Task<ListPage> ReadResponseAsync(HttpResponseMessage response, CancellationToken callerCt)
        {
            if (response.StatusCode != HttpStatusCode.OK)
            {
                throw await ErrorAsync(response).ConfigureAwait(false);
            }

            var body = await response.Content.ReadAsStreamAsync(AttemptToken).ConfigureAwait(false);
            await using (body.ConfigureAwait(false))
            {
                return await ParseAsync(new TimedReadStream(body, this)).ConfigureAwait(false);
            }
        }

        // <EnumerationResults><Blobs><Blob><Name/><Properties><Last-Modified/><Etag/><Content-Length/>
        // <Content-Type/>...</Properties></Blob>...</Blobs><NextMarker/></EnumerationResults>
        private async Task<ListPage> ParseAsync(Stream body)
        {
            var items = new List<BlobItem>();
            string? nextMarker = null;
            string? name = null, etag = null, length = null, contentType = null, lastModified = null;
            var nameEncoded = false;
            string? field = null; // the leaf element whose text we are collecting
            string? text = null;

            using var reader = XmlReader.Create(body, XmlSettings);
            while (await reader.ReadAsync().ConfigureAwait(false))
            {
                switch (reader.NodeType)
                {
                    case XmlNodeType.Element:
                        var local = reader.LocalName;
                        field = null;
                        text = null;
                        if (reader.Depth == 2 && local == "Blob")
                        {
                            name = etag = length = contentType = lastModified = null;
                            nameEncoded = false;
                        }
                        else if (reader.Depth == 3 && local == "Name")
                        {
                            nameEncoded = reader.GetAttribute("Encoded") == "true";
                            field = reader.IsEmptyElement ? null : "Name";
                        }
                        else if (reader.Depth == 4 && local is "Etag" or "Content-Length" or "Content-Type" or "Last-Modified")
                        {
                            field = reader.IsEmptyElement ? null : local;
                        }
                        else if (reader.Depth == 1 && local == "NextMarker")
                        {
                            field = reader.IsEmptyElement ? null : local;
                        }

                        break;

                    case XmlNodeType.Text or XmlNodeType.CDATA or XmlNodeType.Whitespace or XmlNodeType.SignificantWhitespace:
                        if (field is not null)
                        {
                            text += reader.Value;
                        }

                        break;

                    case XmlNodeType.EndElement:
                        switch (field)
                        {
                            case "Name": name = text; break;
                            case "Etag": etag = text; break;
                            case "Content-Length": length = text; break;
                            case "Content-Type": contentType = text; break;
                            case "Last-Modified": lastModified = text; break;
                            case "NextMarker": nextMarker = text; break;
                        }

                        field = null;
                        text = null;
                        if (reader.Depth == 2 && reader.LocalName == "Blob" && name is not null)
                        {
                            if (nameEncoded)
                            {
                                name = Uri.UnescapeDataString(name);
                            }

                            etag ??= string.Empty;
                            if (etag.Length > 0 && etag[0] != '"')
                            {
                                etag = "\"" + etag + "\""; // quoted, as HEAD/GET return it
                            }

                            var properties = new BlobProperties(
                                etag,
                                long.TryParse(length, NumberStyles.None, CultureInfo.InvariantCulture, out var l) ? l : 0,
                                ParseHttpDate(lastModified),
                                string.IsNullOrEmpty(contentType) ? null : contentType);
                            items.Add(new BlobItem(name, properties));
                        }

                        break;
                }
            }

            return new ListPage(items, string.IsNullOrEmpty(nextMarker) ? null : nextMarker);
        }
    }

    /// <summary>
    /// A response body whose reads honour the per-try timeout (pushed forward on each read), for readers such as
    /// XmlReader that do not pass a token of their own.
    /// </summary>
    private sealed class TimedReadStream(Stream inner, OperationBase owner) : Stream
    {
        public override bool CanRead => true;

        public override bool CanSeek => false;

        public override bool CanWrite => false;

        public override long Length => throw new NotSupportedException();

        public override long Position
        {
            get => throw new NotSupportedException();
            set => throw new NotSupportedException();
        }

        public override ValueTask<int> ReadAsync(Memory<byte> buffer, CancellationToken cancellationToken = default)
        {
            owner.KeepAlive();
            return inner.ReadAsync(buffer, owner.AttemptToken);
        }

        public override Task<int> ReadAsync(byte[] buffer, int offset, int count, CancellationToken cancellationToken) =>
            ReadAsync(buffer.AsMemory(offset, count), cancellationToken).AsTask();

        public override int Read(byte[] buffer, int offset, int count) => inner.Read(buffer, offset, count);

        public override void Flush()
        {
        }

        public override long Seek(long offset, SeekOrigin origin) => throw new NotSupportedException();

        public override void SetLength(long value) => throw new NotSupportedException();

        public override void Write(byte[] buffer, int offset, int count) => throw new NotSupportedException();
    }

    /// <summary>412, 409 BlobAlreadyExists, or 404 under If-Match: the write's condition did not hold.</summary>
    private static bool IsConditionFailure(HttpResponseMessage response, string? ifMatch, string? ifNoneMatch)
    {
        var code = GetHeader(response, "x-ms-error-code");
        return response.StatusCode switch
        {
            HttpStatusCode.PreconditionFailed => true,
            HttpStatusCode.Conflict => code == "BlobAlreadyExists" && ifNoneMatch is not null,
            HttpStatusCode.NotFound => ifMatch is not null && code == "BlobNotFound",
            _ => false,
        };
    }

    /// <summary>
    /// A request body of known length from memory (written in 1 MiB slices, no copy) or from the caller's stream
    /// (through a pooled buffer). Each chunk pushes the per-try timeout forward.
    /// </summary>
    private sealed class UploadContent : HttpContent
    {
        private const int MemoryChunk = 1024 * 1024;
        private readonly OperationBase _owner;
        private readonly ReadOnlyMemory<byte> _memory;
        private readonly Stream? _stream;
        private readonly long _length;
        private readonly int _bufferSize;

        public UploadContent(OperationBase owner, ReadOnlyMemory<byte> memory, Stream? stream, long length, int bufferSize)
        {
            _owner = owner;
            _memory = memory;
            _stream = stream;
            _length = length;
            _bufferSize = bufferSize;
            Headers.ContentLength = length;
        }

        protected override Task SerializeToStreamAsync(Stream stream, TransportContext? context) =>
            SerializeToStreamAsync(stream, context, CancellationToken.None);

        protected override async Task SerializeToStreamAsync(Stream stream, TransportContext? context, CancellationToken cancellationToken)
        {
            if (_stream is null)
            {
                var remaining = _memory;
                while (!remaining.IsEmpty)
                {
                    var chunk = remaining[..Math.Min(remaining.Length, MemoryChunk)];
                    _owner.KeepAlive();
                    await stream.WriteAsync(chunk, cancellationToken).ConfigureAwait(false);
                    remaining = remaining[chunk.Length..];
                }

                return;
            }

            if (_length == 0)
            {
                return;
            }

            var size = (int)Math.Min(_length, _bufferSize);
            var buffer = ArrayPool<byte>.Shared.Rent(size);
            try
            {
                var left = _length;
                while (left > 0)
                {
                    int n;
                    try
                    {
                        _owner.Pause();
                        n = await _stream.ReadAsync(buffer.AsMemory(0, (int)Math.Min(size, left)), cancellationToken)
                            .ConfigureAwait(false);
                    }
                    catch (Exception ex) when (ex is not OperationCanceledException)
                    {
                        _owner.Fatal = ex;
                        throw;
                    }

                    if (n == 0)
                    {
                        var ex = new ArgumentException(string.Create(CultureInfo.InvariantCulture,
                            $"The content stream ended after {_length - left} of the {_length} bytes announced."), "length");
                        _owner.Fatal = ex;
                        throw ex;
                    }

                    if (_owner is PutBlobOperation put)
                    {
                        put.SourceBytesRead += n;
                    }

                    _owner.KeepAlive();
                    await stream.WriteAsync(buffer.AsMemory(0, n), cancellationToken).ConfigureAwait(false);
                    left -= n;
                }
            }
            finally
            {
                ArrayPool<byte>.Shared.Return(buffer);
            }
        }

        protected override bool TryComputeLength(out long length)
        {
            length = _length;
            return true;
        }
    }
}
