using FaaST.Cachelet.Consistency;
using FaaST.Policy;

namespace FaaST.Cachelet.Tests;

/// <summary>
/// Faa$T Table 3 as the cachelet enforces it (<see cref="ConsistencyStrategy.Table"/>): each preset's
/// row, and a real cache over real Azurite behaving as its row says.
/// </summary>
[Collection("azurite")]
public sealed class ConsistencyTableTests(AzuriteFixture azurite)
{
    private const string Container = "consistency-table";

    public static TheoryData<string> Presets() => [.. ConsistencyPreset.All.Select(p => p.Name)];

    private static ConsistencyPreset Preset(string name) =>
        ConsistencyPreset.TryParse(name, out var preset) ? preset : throw new ArgumentException(name);

    [Fact]
    public void The_table_has_one_row_per_preset_in_the_papers_order()
    {
        Assert.Equal(ConsistencyPreset.All, ConsistencyStrategy.Table.Select(r => r.Preset));
        foreach (var preset in ConsistencyPreset.All)
            Assert.Same(preset, ConsistencyStrategy.For(preset).Preset);
    }

    [Fact]
    public void Storage_sync_storage_checks_every_hit_with_storage_has_misses_validated_and_writes_through_to_storage()
    {
        var row = ConsistencyStrategy.For(ConsistencyPreset.StorageSyncStorage);
        Assert.Equal(HitCheck.StorageHead, row.HitCheckFor(ownedHere: true));
        Assert.Equal(HitCheck.StorageHead, row.HitCheckFor(ownedHere: false));
        Assert.False(row.OwnerDecidesHit); // no hashing on a hit
        Assert.True(row.MissesValidated);
        Assert.False(row.WritesToOwner(ownedElsewhere: true));
        Assert.Equal(WritePath.Through, row.Write);
        Assert.False(row.TrustsEpoch);
        Assert.True(row.ChecksCopiesWithStorage(ownedHere: false));
    }

    [Fact]
    public void Owner_sync_owner_asks_the_owner_trusts_its_own_copies_within_an_epoch_and_writes_through_to_the_owner()
    {
        var row = ConsistencyStrategy.For(ConsistencyPreset.OwnerSyncOwner);
        Assert.Equal(HitCheck.AskOwner, row.HitCheckFor(ownedHere: false));
        Assert.Equal(HitCheck.StorageHeadOncePerEpoch, row.HitCheckFor(ownedHere: true));
        Assert.True(row.OwnerDecidesHit);
        Assert.True(row.TrustsEpoch);
        Assert.False(row.MissesValidated);
        Assert.True(row.WritesToOwner(ownedElsewhere: true));
        Assert.False(row.WritesToOwner(ownedElsewhere: false));
        Assert.Equal(WritePath.Through, row.Write);
        Assert.True(row.ChecksCopiesWithStorage(ownedHere: true));
        Assert.False(row.ChecksCopiesWithStorage(ownedHere: false)); // the owner's word is the version
    }

    [Fact]
    public void Owner_async_owner_asks_the_owner_serves_its_own_copies_and_writes_behind_through_the_owner()
    {
        var row = ConsistencyStrategy.For(ConsistencyPreset.OwnerAsyncOwner);
        Assert.Equal(HitCheck.AskOwner, row.HitCheckFor(ownedHere: false));
        Assert.Equal(HitCheck.None, row.HitCheckFor(ownedHere: true));
        Assert.False(row.TrustsEpoch);
        Assert.True(row.WritesToOwner(ownedElsewhere: true));
        Assert.Equal(WritePath.Behind, row.Write);
    }

    [Fact]
    public void Owner_sync_local_serves_any_local_copy_and_writes_through_to_the_owner()
    {
        var row = ConsistencyStrategy.For(ConsistencyPreset.OwnerSyncLocal);
        Assert.Equal(HitCheck.None, row.HitCheckFor(ownedHere: false));
        Assert.Equal(HitCheck.None, row.HitCheckFor(ownedHere: true));
        Assert.True(row.WritesToOwner(ownedElsewhere: true));
        Assert.Equal(WritePath.Through, row.Write);
    }

    [Fact]
    public void Local_sync_local_serves_any_local_copy_and_writes_through_to_storage()
    {
        var row = ConsistencyStrategy.For(ConsistencyPreset.LocalSyncLocal);
        Assert.Equal(HitCheck.None, row.HitCheckFor(ownedHere: false));
        Assert.Equal(HitCheck.None, row.HitCheckFor(ownedHere: true));
        Assert.False(row.WritesToOwner(ownedElsewhere: true));
        Assert.Equal(WritePath.Through, row.Write);
    }

    [Fact]
    public void Local_async_local_serves_any_local_copy_and_writes_behind_to_storage()
    {
        var row = ConsistencyStrategy.For(ConsistencyPreset.LocalAsyncLocal);
        Assert.Equal(HitCheck.None, row.HitCheckFor(ownedHere: true));
        Assert.False(row.WritesToOwner(ownedElsewhere: true));
        Assert.Equal(WritePath.Behind, row.Write);
    }

    private async Task<string> NewBlobAsync(byte[] data)
    {
        await azurite.Store.CreateContainerIfNotExistsAsync(Container);
        var name = $"t-{Guid.NewGuid():N}";
        await azurite.Store.UploadAsync(Container, name, data);
        return name;
    }

    private static byte[] Bytes(CachedRead read) => read.Entry is { } e ? e.Extent.Span.ToArray() : read.Bytes.ToArray();

    private async Task<byte[]> ReadAsync(BlobCache cache, string name)
    {
        using var read = await cache.ReadAsync(azurite.Store, Container, name, default) ?? throw new InvalidOperationException("not found");
        return Bytes(read);
    }

    [Theory]
    [MemberData(nameof(Presets))]
    public async Task A_hit_notices_a_version_written_past_the_cache_only_where_its_row_checks_hits_with_storage(string presetName)
    {
        var preset = Preset(presetName);
        await using var cache = new BlobCache($"table-{Guid.NewGuid():N}"[..20], new CachePolicy { Consistency = preset });
        var name = await NewBlobAsync("one"u8.ToArray());
        Assert.Equal("one"u8.ToArray(), await ReadAsync(cache, name));

        await azurite.Store.UploadAsync(Container, name, "two"u8.ToArray()); // past the cache

        var checksEveryHit = ConsistencyStrategy.For(preset).HitCheckFor(ownedHere: true) == HitCheck.StorageHead;
        Assert.Equal(checksEveryHit ? "two"u8.ToArray() : "one"u8.ToArray(), await ReadAsync(cache, name));
    }

    [Fact]
    public async Task Under_owner_sync_owner_an_owner_checks_its_copy_once_after_the_epoch_moves()
    {
        await using var cache = new BlobCache($"table-{Guid.NewGuid():N}"[..20], new CachePolicy { Consistency = ConsistencyPreset.OwnerSyncOwner });
        var name = await NewBlobAsync("one"u8.ToArray());
        Assert.Equal("one"u8.ToArray(), await ReadAsync(cache, name));
        await azurite.Store.UploadAsync(Container, name, "two"u8.ToArray());
        Assert.Equal("one"u8.ToArray(), await ReadAsync(cache, name)); // trusted within the epoch

        cache.OnOwnershipChanged(); // a membership change moves the epoch

        Assert.Equal("two"u8.ToArray(), await ReadAsync(cache, name));
    }

    [Theory]
    [MemberData(nameof(Presets))]
    public async Task A_write_completes_with_storages_version_only_where_its_row_writes_through(string presetName)
    {
        var preset = Preset(presetName);
        await using var cache = new BlobCache($"table-{Guid.NewGuid():N}"[..20], new CachePolicy { Consistency = preset });
        await azurite.Store.CreateContainerIfNotExistsAsync(Container);
        var name = $"w-{Guid.NewGuid():N}";

        var written = await cache.WriteAsync(azurite.Store, Container, name, "written"u8.ToArray(), default);

        if (ConsistencyStrategy.For(preset).Write == WritePath.Through)
        {
            Assert.Equal((await azurite.Store.GetPropertiesAsync(Container, name))?.ETag, written.ETag);
        }
        else
        {
            Assert.StartsWith("\"faast-pending-", written.ETag, StringComparison.Ordinal);
            await Eventually.TrueAsync(async () => (await azurite.Store.DownloadAsync(Container, name))?.Data.AsSpan().SequenceEqual("written"u8) == true,
                "the write-behind reaches storage");
        }
        Assert.Equal("written"u8.ToArray(), await ReadAsync(cache, name));
    }
}
