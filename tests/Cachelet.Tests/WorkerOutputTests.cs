using System.Runtime.Versioning;
using FaaST.Policy;

namespace FaaST.Cachelet.Tests;

/// <summary>
/// Outputs a worker hands over as a file of the segment directory, on the path that does not cache
/// them (issue 10): the same rules as adoption. Real Azurite, real /dev/shm.
/// </summary>
[Collection("azurite")]
[SupportedOSPlatform("linux")]
public sealed class WorkerOutputTests(AzuriteFixture azurite) : IDisposable
{
    private const string Uncached = "nocache";
    private readonly string _private = Path.Combine("/dev/shm", "faast-test-" + Guid.NewGuid().ToString("N"));

    public void Dispose()
    {
        if (Directory.Exists(_private))
            Directory.Delete(_private, recursive: true);
    }

    /// <summary>A cache that keeps everything but the container <see cref="Uncached"/>.</summary>
    private static BlobCache NewCache() => new("wo" + Guid.NewGuid().ToString("N")[..10], new CachePolicy
    {
        CacheCapacity = 64L << 20,
        DoNotCacheGlobs = BlobGlobSet.Create([Uncached + "/*"]),
    });

    private async Task<bool> Exists(string container, string blob) => await azurite.Store.DownloadAsync(container, blob) is not null;

    [Fact]
    public async Task An_uncached_output_named_like_one_of_the_caches_own_files_is_refused_and_the_file_kept()
    {
        await using var cache = NewCache();
        await azurite.Store.CreateContainerIfNotExistsAsync("data");
        await azurite.Store.CreateContainerIfNotExistsAsync(Uncached);
        await cache.WriteAsync(azurite.Store, "data", "kept", new byte[1000], default);
        var segment = Directory.GetFiles(cache.Directory, "s*").Select(Path.GetFileName).Single()!;
        var blob = "seg-" + Guid.NewGuid().ToString("N");

        var refusal = await Assert.ThrowsAsync<InvalidOperationException>(() =>
            cache.WriteFileAsync(azurite.Store, Uncached, blob, segment, 1000, default).AsTask());

        Assert.Contains(segment, refusal.Message, StringComparison.Ordinal);
        Assert.Contains($"{Uncached}/{blob}", refusal.Message, StringComparison.Ordinal);
        Assert.True(File.Exists(Path.Combine(cache.Directory, segment)));
        Assert.False(await Exists(Uncached, blob));
    }

    [Fact]
    public async Task An_uncached_output_that_is_a_link_to_a_root_only_file_is_never_uploaded_and_is_deleted()
    {
        await using var cache = NewCache();
        await azurite.Store.CreateContainerIfNotExistsAsync(Uncached);
        Directory.CreateDirectory(_private, UnixFileMode.UserRead | UnixFileMode.UserWrite | UnixFileMode.UserExecute);
        var secret = Path.Combine(_private, "secret");
        File.WriteAllBytes(secret, new byte[4096]);
        File.SetUnixFileMode(secret, UnixFileMode.UserRead);
        File.CreateSymbolicLink(Path.Combine(cache.Directory, "w8-1"), secret);
        var blob = "link-" + Guid.NewGuid().ToString("N");

        var refusal = await Assert.ThrowsAsync<InvalidOperationException>(() =>
            cache.WriteFileAsync(azurite.Store, Uncached, blob, "w8-1", 4096, default).AsTask());

        Assert.Contains("symbolic link", refusal.Message, StringComparison.Ordinal);
        Assert.False(await Exists(Uncached, blob));
        Assert.Empty(Directory.GetFileSystemEntries(cache.Directory, "w8-*"));
        Assert.True(File.Exists(secret));
    }

    [Theory]
    [InlineData(Uncached, "out")]
    [InlineData(Uncached, "x1-1")]
    [InlineData(Uncached, "w-1")]
    [InlineData(Uncached, "wx-1")]
    [InlineData(Uncached, "w12")]
    [InlineData(Uncached, "../x")]
    [InlineData(Uncached, "l123")]
    [InlineData("data", "out")]
    [InlineData("data", "w-1")]
    public async Task An_output_file_not_named_like_a_workers_output_is_refused_and_never_uploaded(string container, string name)
    {
        await using var cache = NewCache();
        await azurite.Store.CreateContainerIfNotExistsAsync(container);
        if (!name.Contains('/', StringComparison.Ordinal))
            File.WriteAllBytes(Path.Combine(cache.Directory, name), new byte[4096]); // a regular file of the workers' user
        var blob = "named-" + Guid.NewGuid().ToString("N");

        var refusal = await Assert.ThrowsAsync<InvalidOperationException>(() =>
            cache.WriteFileAsync(azurite.Store, container, blob, name, 4096, default).AsTask());

        Assert.Contains(name, refusal.Message, StringComparison.Ordinal);
        Assert.Contains($"{container}/{blob}", refusal.Message, StringComparison.Ordinal);
        Assert.False(await Exists(container, blob));
    }

    [Theory]
    [InlineData(Uncached, 100_000)]
    [InlineData(Uncached, 1 << 20)]
    [InlineData("data", 100_000)]
    [InlineData("data", 1 << 20)]
    public async Task A_workers_output_file_is_uploaded_with_its_bytes_and_its_name_is_gone(string container, int length)
    {
        await using var cache = NewCache();
        await azurite.Store.CreateContainerIfNotExistsAsync(container);
        var data = new byte[length];
        new Random(length).NextBytes(data);
        // Longer than announced: only the announced bytes are the output.
        File.WriteAllBytes(Path.Combine(cache.Directory, "w4-1"), [.. data, 1, 2, 3]);
        var blob = "ok-" + Guid.NewGuid().ToString("N");

        await cache.WriteFileAsync(azurite.Store, container, blob, "w4-1", length, default);

        Assert.Equal(data, (await azurite.Store.DownloadAsync(container, blob))!.Data);
        Assert.Empty(Directory.GetFileSystemEntries(cache.Directory, "w4-*"));
    }
}
