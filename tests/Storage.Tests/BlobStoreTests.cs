using System.Net;
using System.Security.Cryptography;
using System.Text;
using Azure.Storage.Blobs.Specialized;

namespace FaaST.Storage.Tests;

/// <summary>BlobStore against a real Azurite (which checks the SDK's SharedKey signature on every request).</summary>
[Collection(AzuriteCollection.Name)]
public sealed class BlobStoreTests(AzuriteFixture fixture) : IDisposable
{
    private readonly BlobStore _store = fixture.CreateStore();

    public void Dispose() => _store.Dispose();

    [Fact]
    public async Task CreateContainer_IsIdempotent()
    {
        var container = "idem" + Guid.NewGuid().ToString("N")[..12];
        await _store.CreateContainerIfNotExistsAsync(container);
        await _store.CreateContainerIfNotExistsAsync(container);
        await _store.UploadAsync(container, "x", new byte[] { 1 });
        Assert.NotNull(await _store.GetPropertiesAsync(container, "x"));
    }

    [Theory]
    [InlineData(0)]
    [InlineData(1)]
    [InlineData(600)]
    public async Task SmallBlobs_RoundTrip(int size)
    {
        var container = await fixture.NewContainerAsync(_store);
        var data = RandomBytes(size);
        var put = await _store.UploadAsync(container, "small.bin", data, "application/x-test");
        Assert.StartsWith("\"", put.ETag, StringComparison.Ordinal);
        Assert.Equal(size, put.Length);

        var head = await _store.GetPropertiesAsync(container, "small.bin");
        Assert.NotNull(head);
        Assert.Equal(put.ETag, head.ETag);
        Assert.Equal(size, head.Length);
        Assert.Equal("application/x-test", head.ContentType);
        Assert.True(head.LastModified > DateTimeOffset.UtcNow.AddMinutes(-5));

        var whole = await _store.DownloadAsync(container, "small.bin");
        Assert.NotNull(whole);
        Assert.Equal(data, whole.Data);
        Assert.Equal(put.ETag, whole.Properties.ETag);

        using var ms = new MemoryStream();
        var props = await _store.DownloadToAsync(container, "small.bin", ms);
        Assert.NotNull(props);
        Assert.Equal(data, ms.ToArray());
    }

    [Theory]
    [InlineData("dir/")]
    [InlineData("/lead")]
    [InlineData("a//b")]
    [InlineData("a/b/")]
    public async Task Blob_names_with_empty_path_segments_round_trip(string name)
    {
        var container = await fixture.NewContainerAsync(_store);
        await _store.UploadAsync(container, name, new byte[] { 7, 8 });
        using var read = new MemoryStream();
        Assert.NotNull(await _store.DownloadToAsync(container, name, read));
        Assert.Equal(new byte[] { 7, 8 }, read.ToArray());
    }

    /// <summary>The HTTP fuzzer's find: a binding path resolved to the blob "/", which reached storage and came back
    /// as an HTTP 400 the host answered 502. It is refused before any request, as other bad names are.</summary>
    [Theory]
    [InlineData("/")]
    [InlineData("//")]
    public async Task A_blob_name_made_only_of_slashes_is_refused_before_any_request(string name)
    {
        var container = await fixture.NewContainerAsync(_store);
        var e = await Assert.ThrowsAsync<ArgumentException>(() => _store.DownloadToAsync(container, name, Stream.Null));
        Assert.Contains("other than '/'", e.Message, StringComparison.Ordinal);
    }

    [Fact]
    public async Task LargeBlob_40MiB_RoundTrip()
    {
        var container = await fixture.NewContainerAsync(_store);
        var data = RandomBytes(40 * 1024 * 1024);
        await _store.UploadAsync(container, "large.bin", data);

        using var ms = new MemoryStream();
        var props = await _store.DownloadToAsync(container, "large.bin", ms);
        Assert.Equal(data.Length, props!.Length);
        Assert.Equal(SHA256.HashData(data), SHA256.HashData(ms.ToArray()));

        var whole = await _store.DownloadAsync(container, "large.bin");
        Assert.Equal(data.Length, whole!.Data.Length);
        Assert.Equal(SHA256.HashData(data), SHA256.HashData(whole.Data));
    }

    [Theory]
    [InlineData(true)]
    [InlineData(false)]
    public async Task StreamUpload_RoundTrip_ReadsExactlyLength(bool seekable)
    {
        var container = await fixture.NewContainerAsync(_store);
        var data = RandomBytes(300_000);
        var source = new byte[data.Length + 1000]; // extra bytes after `length` must not be sent
        data.CopyTo(source, 0);
        using Stream stream = seekable ? new MemoryStream(source) : new NonSeekableStream(source);
        var put = await _store.UploadAsync(container, "stream.bin", stream, data.Length, "text/plain");
        Assert.Equal(data.Length, put.Length);
        Assert.Equal(data, (await _store.DownloadAsync(container, "stream.bin"))!.Data);
    }

    [Fact]
    public async Task StreamShorterThanLength_IsRejected()
    {
        var container = await fixture.NewContainerAsync(_store);
        using var seekable = new MemoryStream(new byte[10]);
        await Assert.ThrowsAsync<ArgumentException>(() => _store.UploadAsync(container, "short", seekable, 11));
        using var nonSeekable = new NonSeekableStream(new byte[10]);
        var ex = await Assert.ThrowsAsync<ArgumentException>(() => _store.UploadAsync(container, "short", nonSeekable, 11));
        Assert.Contains("ended after 10 of the 11 bytes", ex.Message, StringComparison.Ordinal);
        Assert.Null(await _store.GetPropertiesAsync(container, "short"));
    }

    [Theory]
    [InlineData(true)]
    [InlineData(false)]
    public async Task BlockUpload_AboveThreshold_CommitsAllBlocks(bool fromStream)
    {
        using var store = fixture.CreateStore(new BlobStoreOptions
        {
            SingleUploadThreshold = 1024 * 1024,
            BlockSize = 256 * 1024,
            BlockUploadConcurrency = 3,
        });
        var container = await fixture.NewContainerAsync(store);
        var data = RandomBytes((3 * 1024 * 1024) + 12345); // 13 blocks, the last one short
        BlobProperties put;
        if (fromStream)
        {
            using var stream = new NonSeekableStream(data);
            put = await store.UploadAsync(container, "blocks.bin", stream, data.Length, "application/x-blocks");
        }
        else
        {
            put = await store.UploadAsync(container, "blocks.bin", data, "application/x-blocks");
        }

        Assert.Equal(data.Length, put.Length);
        Assert.Equal(13, await CommittedBlockCountAsync(store, container, "blocks.bin"));
        var head = await store.GetPropertiesAsync(container, "blocks.bin");
        Assert.Equal(put.ETag, head!.ETag);
        Assert.Equal("application/x-blocks", head.ContentType);
        Assert.Equal(data, (await store.DownloadAsync(container, "blocks.bin"))!.Data);
    }

    [Fact]
    public async Task SmallUpload_BelowThreshold_IsASinglePutBlob()
    {
        using var store = fixture.CreateStore(new BlobStoreOptions { SingleUploadThreshold = 1024 * 1024, BlockSize = 256 * 1024 });
        var container = await fixture.NewContainerAsync(store);
        await store.UploadAsync(container, "single.bin", RandomBytes(1024 * 1024));
        Assert.Equal(0, await CommittedBlockCountAsync(store, container, "single.bin"));
    }

    [Fact]
    public async Task BlockUpload_IfNoneMatchStar_IsCreateOnly()
    {
        using var store = fixture.CreateStore(new BlobStoreOptions { SingleUploadThreshold = 100_000, BlockSize = 64 * 1024 });
        var container = await fixture.NewContainerAsync(store);
        var first = RandomBytes(200_000);
        await store.UploadAsync(container, "once.bin", first, ifNoneMatch: "*");
        var ex = await Assert.ThrowsAsync<BlobConditionFailedException>(
            () => store.UploadAsync(container, "once.bin", RandomBytes(200_000), ifNoneMatch: "*"));
        Assert.Equal(409, ex.Status);
        Assert.Equal(first, (await store.DownloadAsync(container, "once.bin"))!.Data);
    }

    [Fact]
    public async Task RangeDownload_ReturnsTheSliceAndWholeLength()
    {
        var container = await fixture.NewContainerAsync(_store);
        var data = RandomBytes(10_000);
        await _store.UploadAsync(container, "r.bin", data);

        using var ms = new MemoryStream();
        var props = await _store.DownloadToAsync(container, "r.bin", ms, new BlobRange(1234, 4321));
        Assert.Equal(data.AsSpan(1234, 4321).ToArray(), ms.ToArray());
        Assert.Equal(10_000, props!.Length);

        using var tail = new MemoryStream();
        await _store.DownloadToAsync(container, "r.bin", tail, new BlobRange(9_990, 100));
        Assert.Equal(data.AsSpan(9_990).ToArray(), tail.ToArray());

        var ex = await Assert.ThrowsAsync<BlobStorageException>(
            () => _store.DownloadToAsync(container, "r.bin", Stream.Null, new BlobRange(20_000, 10)));
        Assert.Equal(416, ex.Status);
        await Assert.ThrowsAsync<ArgumentOutOfRangeException>(
            () => _store.DownloadToAsync(container, "r.bin", Stream.Null, new BlobRange(0, 0)));
    }

    [Fact]
    public async Task DestinationFactory_SeesLengthAndETag_BeforeTheBodyArrives()
    {
        var container = await fixture.NewContainerAsync(_store);
        var data = RandomBytes(70_000);
        var uploaded = await _store.UploadAsync(container, "f.bin", data);

        BlobProperties? seen = null;
        var target = new MemoryStream();
        var props = await _store.DownloadToAsync(container, "f.bin", p =>
        {
            seen = p;
            target = new MemoryStream(new byte[p.Length], 0, (int)p.Length, writable: true, publiclyVisible: true);
            return target;
        });
        Assert.Equal(70_000, seen!.Length);
        Assert.Equal(uploaded.ETag, seen.ETag);
        Assert.Equal(data, target.GetBuffer());
        Assert.Equal(uploaded.ETag, props!.ETag);
        Assert.Null(await _store.DownloadToAsync(container, "missing.bin", _ => throw new InvalidOperationException("not called")));
    }

    [Fact]
    public async Task DestinationFactory_ThatThrows_EndsTheCallUnretried()
    {
        var container = await fixture.NewContainerAsync(_store);
        await _store.UploadAsync(container, "t.bin", RandomBytes(10));
        var calls = 0;
        var ex = await Assert.ThrowsAsync<InvalidOperationException>(() => _store.DownloadToAsync(container, "t.bin", _ =>
        {
            calls++;
            throw new InvalidOperationException("no room");
        }));
        Assert.Equal("no room", ex.Message);
        Assert.Equal(1, calls);
    }

    [Fact]
    public async Task IfMatch_SucceedsOnCurrentETag_AndFailsOnStaleOne()
    {
        var container = await fixture.NewContainerAsync(_store);
        var v1 = await _store.UploadAsync(container, "cas.bin", Encoding.UTF8.GetBytes("v1"));
        var v2 = await _store.UploadAsync(container, "cas.bin", Encoding.UTF8.GetBytes("v2"), ifMatch: v1.ETag);
        Assert.NotEqual(v1.ETag, v2.ETag);

        var stale = await Assert.ThrowsAsync<BlobConditionFailedException>(
            () => _store.UploadAsync(container, "cas.bin", Encoding.UTF8.GetBytes("v3"), ifMatch: v1.ETag));
        Assert.Equal(412, stale.Status);
        Assert.Contains("cas.bin", stale.Message, StringComparison.Ordinal);

        using var ms = new MemoryStream();
        Assert.NotNull(await _store.DownloadToAsync(container, "cas.bin", ms, ifMatch: v2.ETag));
        Assert.Equal("v2", Encoding.UTF8.GetString(ms.ToArray()));
        var download = await Assert.ThrowsAsync<BlobConditionFailedException>(
            () => _store.DownloadToAsync(container, "cas.bin", Stream.Null, ifMatch: v1.ETag));
        Assert.Equal(412, download.Status);

        await Assert.ThrowsAsync<BlobConditionFailedException>(() => _store.DeleteAsync(container, "cas.bin", ifMatch: v1.ETag));
        Assert.True(await _store.DeleteAsync(container, "cas.bin", ifMatch: v2.ETag));
    }

    [Fact]
    public async Task IfNoneMatchStar_CreatesOnlyOnce()
    {
        var container = await fixture.NewContainerAsync(_store);
        await _store.UploadAsync(container, "lock", Encoding.UTF8.GetBytes("owner-1"), ifNoneMatch: "*");
        var ex = await Assert.ThrowsAsync<BlobConditionFailedException>(
            () => _store.UploadAsync(container, "lock", Encoding.UTF8.GetBytes("owner-2"), ifNoneMatch: "*"));
        Assert.True(ex.Status is 409 or 412);
        Assert.Equal("owner-1", Encoding.UTF8.GetString((await _store.DownloadAsync(container, "lock"))!.Data));
    }

    [Fact]
    public async Task List_FollowsMarkersAcrossSmallPages_WithPrefix()
    {
        using var store = fixture.CreateStore(new BlobStoreOptions { ListPageSize = 2 });
        var container = await fixture.NewContainerAsync(store);
        var expected = new List<string>();
        for (var i = 0; i < 5; i++)
        {
            var name = $"p/item-{i} ü";
            expected.Add(name);
            await store.UploadAsync(container, name, RandomBytes(i * 10), "text/x-" + i);
        }

        await store.UploadAsync(container, "other/x", RandomBytes(3));
        await store.UploadAsync(container, "q", RandomBytes(3));

        var items = new List<BlobItem>();
        await foreach (var item in store.ListAsync(container, "p/"))
        {
            items.Add(item);
        }

        Assert.Equal(expected, items.Select(i => i.Name));
        for (var i = 0; i < 5; i++)
        {
            Assert.Equal(i * 10, items[i].Properties.Length);
            Assert.Equal("text/x-" + i, items[i].Properties.ContentType);
            var head = await store.GetPropertiesAsync(container, items[i].Name);
            Assert.Equal(head!.ETag, items[i].Properties.ETag);
            Assert.Equal(head.LastModified, items[i].Properties.LastModified);
        }

        var all = new List<string>();
        await foreach (var item in store.ListAsync(container))
        {
            all.Add(item.Name);
        }

        Assert.Equal(7, all.Count);
        Assert.Empty(await ToListAsync(store.ListAsync(container, "nothing-here/")));
    }

    [Fact]
    public async Task Delete_ReturnsTrueThenFalse()
    {
        var container = await fixture.NewContainerAsync(_store);
        await _store.UploadAsync(container, "d.bin", RandomBytes(5));
        Assert.True(await _store.DeleteAsync(container, "d.bin"));
        Assert.Null(await _store.GetPropertiesAsync(container, "d.bin"));
        Assert.False(await _store.DeleteAsync(container, "d.bin"));
    }

    [Fact]
    public async Task MissingBlob_IsNullOrFalse_AndDestinationUntouched()
    {
        var container = await fixture.NewContainerAsync(_store);
        Assert.Null(await _store.GetPropertiesAsync(container, "missing"));
        Assert.Null(await _store.DownloadAsync(container, "missing"));
        using var ms = new MemoryStream();
        Assert.Null(await _store.DownloadToAsync(container, "missing", ms));
        Assert.Equal(0, ms.Length);
        Assert.False(await _store.DeleteAsync(container, "missing"));
    }

    [Theory]
    [InlineData("with space.txt")]
    [InlineData("dir/sub dir/ünïcødé 日本語 😀.bin")]
    [InlineData("a+b=c&d?e#f%g;h@i,j'k(l)!$.txt")]
    [InlineData("deep/ly/nested/path/file")]
    public async Task AwkwardNames_RoundTripAndList(string name)
    {
        var container = await fixture.NewContainerAsync(_store);
        var data = Encoding.UTF8.GetBytes(name);
        await _store.UploadAsync(container, name, data);
        Assert.Equal(data.Length, (await _store.GetPropertiesAsync(container, name))!.Length);
        Assert.Equal(data, (await _store.DownloadAsync(container, name))!.Data);
        var listed = await ToListAsync(_store.ListAsync(container, name[..3]));
        Assert.Equal(name, Assert.Single(listed).Name);

        var uri = _store.GetBlobUri(container, name);
        Assert.Equal(name, Uri.UnescapeDataString(uri.AbsolutePath[(fixture.Azurite.BlobEndpoint.AbsolutePath.Length + container.Length + 2)..]));
        Assert.True(await _store.DeleteAsync(container, name));
    }

    [Fact]
    public async Task MissingContainer_ErrorNamesOperationContainerAndBlob()
    {
        var ex = await Assert.ThrowsAsync<BlobStorageException>(
            () => _store.UploadAsync("no-such-container", "dir/file.bin", RandomBytes(3)));
        Assert.Equal(404, ex.Status);
        Assert.Equal("ContainerNotFound", ex.ErrorCode);
        Assert.Contains("Upload", ex.Message, StringComparison.Ordinal);
        Assert.Contains("'no-such-container'", ex.Message, StringComparison.Ordinal);
        Assert.Contains("'dir/file.bin'", ex.Message, StringComparison.Ordinal);
        Assert.IsNotType<BlobConditionFailedException>(ex);

        var list = await Assert.ThrowsAsync<BlobStorageException>(() => ToListAsync(_store.ListAsync("no-such-container")));
        Assert.Equal(404, list.Status);
        Assert.Contains("List of container 'no-such-container'", list.Message, StringComparison.Ordinal);
    }

    [Fact]
    public async Task WrongAccountKey_IsRejectedByAzurite_NotRetried()
    {
        var badKey = Convert.ToBase64String(RandomBytes(64));
        var cs = $"DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey={badKey};BlobEndpoint={fixture.Azurite.BlobEndpoint}";
        using var store = new BlobStore(cs, new BlobStoreOptions { RetryBaseDelay = TimeSpan.FromSeconds(5) });
        var started = DateTime.UtcNow;
        var ex = await Assert.ThrowsAsync<BlobStorageException>(() => store.GetPropertiesAsync("anything", "x"));
        Assert.Equal(403, ex.Status);
        // Azure says AuthenticationFailed, Azurite AuthorizationFailure: either way a signature rejection.
        Assert.Contains(ex.ErrorCode, new[] { "AuthenticationFailed", "AuthorizationFailure" });
        Assert.True(DateTime.UtcNow - started < TimeSpan.FromSeconds(4), "a 403 must not be retried");
    }

    [Fact]
    public async Task InvalidContainerName_IsRejectedBeforeAnyRequest()
    {
        var ex = await Assert.ThrowsAsync<ArgumentException>(() => _store.CreateContainerIfNotExistsAsync("Bad_Name"));
        Assert.Contains("'Bad_Name'", ex.Message, StringComparison.Ordinal);
        Assert.Throws<ArgumentException>(() => _store.ListAsync("x"));
    }

    [Fact]
    public async Task GetBlobUri_IsTheUriTheSdkReaches_AndNeedsNoCredential_WithASas()
    {
        // The URI the bindings hand to functions is the one the SDK itself uses for the blob.
        var container = await fixture.NewContainerAsync(_store);
        await _store.UploadAsync(container, "raw ü.bin", RandomBytes(7));
        var blob = _store.ServiceClient.GetBlobContainerClient(container).GetBlobClient("raw ü.bin");
        Assert.Equal(blob.Uri, _store.GetBlobUri(container, "raw ü.bin"));
        var sas = blob.GenerateSasUri(Azure.Storage.Sas.BlobSasPermissions.Read, DateTimeOffset.UtcNow.AddMinutes(5));
        using var http = new HttpClient();
        using var response = await http.SendAsync(new HttpRequestMessage(HttpMethod.Head, sas));
        Assert.Equal(HttpStatusCode.OK, response.StatusCode);
        Assert.Equal(7, response.Content.Headers.ContentLength);
    }

    internal static async Task<int> CommittedBlockCountAsync(BlobStore store, string container, string blob)
    {
        var list = await store.ServiceClient.GetBlobContainerClient(container).GetBlockBlobClient(blob)
            .GetBlockListAsync(Azure.Storage.Blobs.Models.BlockListTypes.Committed);
        return list.Value.CommittedBlocks.Count();
    }

    internal static byte[] RandomBytes(int size)
    {
        var data = new byte[size];
        Random.Shared.NextBytes(data);
        return data;
    }

    private static async Task<List<BlobItem>> ToListAsync(IAsyncEnumerable<BlobItem> items)
    {
        var list = new List<BlobItem>();
        await foreach (var item in items)
        {
            list.Add(item);
        }

        return list;
    }
}

/// <summary>A read-only stream that cannot seek (like a network or pipe stream).</summary>
internal sealed class NonSeekableStream(byte[] data) : Stream
{
    private int _position;

    public int ReadCount { get; private set; }

    public override bool CanRead => true;

    public override bool CanSeek => false;

    public override bool CanWrite => false;

    public override long Length => throw new NotSupportedException();

    public override long Position
    {
        get => throw new NotSupportedException();
        set => throw new NotSupportedException();
    }

    public override int Read(byte[] buffer, int offset, int count) => Read(buffer.AsSpan(offset, count));

    public override int Read(Span<byte> buffer)
    {
        ReadCount++;
        var n = Math.Min(buffer.Length, data.Length - _position);
        data.AsSpan(_position, n).CopyTo(buffer);
        _position += n;
        return n;
    }

    public override ValueTask<int> ReadAsync(Memory<byte> buffer, CancellationToken cancellationToken = default) =>
        ValueTask.FromResult(Read(buffer.Span));

    public override Task<int> ReadAsync(byte[] buffer, int offset, int count, CancellationToken cancellationToken) =>
        Task.FromResult(Read(buffer.AsSpan(offset, count)));

    public override void Flush()
    {
    }

    public override long Seek(long offset, SeekOrigin origin) => throw new NotSupportedException();

    public override void SetLength(long value) => throw new NotSupportedException();

    public override void Write(byte[] buffer, int offset, int count) => throw new NotSupportedException();
}
