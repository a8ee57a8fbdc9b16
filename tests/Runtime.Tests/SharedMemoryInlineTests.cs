using FaaST.Cachelet;
using FaaST.Policy;
using FaaST.Protos.Worker;
using FaaST.Runtime.Bindings;

namespace FaaST.Runtime.Tests;

/// <summary>
/// Copying a shared-memory reference out for a worker that takes blobs inline (issue 10): the
/// workers' user may replace any name in the segment directory, so the host must read the cache's
/// own file or nothing. Real /dev/shm, a real cache.
/// </summary>
[System.Runtime.Versioning.SupportedOSPlatform("linux")]
public sealed class SharedMemoryInlineTests : IDisposable
{
    private readonly string _private = Path.Combine("/dev/shm", "faast-test-" + Guid.NewGuid().ToString("N"));

    public void Dispose()
    {
        if (Directory.Exists(_private))
            Directory.Delete(_private, recursive: true);
    }

    private static BlobCache NewCache() => new("inl" + Guid.NewGuid().ToString("N")[..10], new CachePolicy { CacheCapacity = 64L << 20 });

    private static StorageAccounts NoAccounts() => new(new AppSettings(new Dictionary<string, string>()), null);

    [Fact]
    public async Task A_segment_name_replaced_by_a_link_to_a_root_only_file_is_not_read_out()
    {
        await using var cache = NewCache();
        using var accounts = NoAccounts();
        var provider = new CachingBlobBindingProvider(accounts, cache);
        Directory.CreateDirectory(_private, UnixFileMode.UserRead | UnixFileMode.UserWrite | UnixFileMode.UserExecute);
        var secret = Path.Combine(_private, "secret");
        File.WriteAllBytes(secret, Enumerable.Repeat((byte)'S', 4096).ToArray());
        File.SetUnixFileMode(secret, UnixFileMode.UserRead);
        // A temporary file's name, as a read of an object larger than the cache hands it out.
        File.CreateSymbolicLink(Path.Combine(cache.Directory, "t000009"), secret);

        var refusal = Assert.Throws<IOException>(() => provider.Read(new SharedMemoryRef { Segment = "t000009", Offset = 0, Length = 4096 }));

        Assert.Contains("t000009", refusal.Message, StringComparison.Ordinal);
        Assert.Contains("symbolic link", refusal.Message, StringComparison.Ordinal);
    }

    [Fact]
    public async Task The_caches_own_file_is_read_out_as_it_is()
    {
        await using var cache = NewCache();
        using var accounts = NoAccounts();
        var provider = new CachingBlobBindingProvider(accounts, cache);
        var data = new byte[70_000];
        new Random(3).NextBytes(data);
        File.WriteAllBytes(Path.Combine(cache.Directory, "t000010"), data);

        var read = provider.Read(new SharedMemoryRef { Segment = "t000010", Offset = 1000, Length = 50_000 });

        Assert.Equal(data.AsSpan(1000, 50_000).ToArray(), read.ToByteArray());
    }
}
