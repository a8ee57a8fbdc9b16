using FaaST.Cachelet.Index;
using FaaST.Policy;
using FaaST.Storage;

namespace FaaST.Cachelet.Tests;

/// <summary>
/// Conditional writes through the cachelet (what an output's "ifMatch" becomes): decided by storage, by the owner over
/// the peer Put, or by this cache under write-behind; real cachelets on real Kestrel listeners over real Azurite.
/// </summary>
[Collection("azurite")]
public sealed class ConditionalWriteTests(AzuriteFixture azurite)
{
    private const string Container = "conditional-writes";

    private static byte[] Bytes(byte value, int size = 20_000)
    {
        var bytes = new byte[size];
        Array.Fill(bytes, value);
        return bytes;
    }

    private async Task<string> NewBlobAsync(byte[]? data)
    {
        await azurite.Store.CreateContainerIfNotExistsAsync(Container);
        var name = $"c-{Guid.NewGuid():N}";
        if (data is not null)
            await azurite.Store.UploadAsync(Container, name, data);
        return name;
    }

    private async Task<string> VersionReadAsync(PeerNode node, string name)
    {
        using var read = await node.Cache.ReadAsync(azurite.Store, Container, name, default) ?? throw new InvalidOperationException($"{name} not found");
        return read.ETag;
    }

    private BlobKey Key(string name) => new(azurite.Store.Endpoint.AbsoluteUri, Container, name);

    [Fact]
    public async Task Under_the_default_preset_storage_decides_and_the_loser_leaves_storage_and_the_cache_with_the_winners_bytes()
    {
        await using var node = await PeerNode.StartAsync("solo", azurite.Store);
        var name = await NewBlobAsync(Bytes(0));
        var read = await VersionReadAsync(node, name);

        await node.Cache.WriteAsync(azurite.Store, Container, name, Bytes(1), default, BlobWriteCondition.Matching(read));
        await Assert.ThrowsAsync<BlobConditionFailedException>(async () =>
            await node.Cache.WriteAsync(azurite.Store, Container, name, Bytes(2), default, BlobWriteCondition.Matching(read)));

        Assert.Equal(Bytes(1), (await azurite.Store.DownloadAsync(Container, name))!.Data);
        using var now = await node.Cache.ReadAsync(azurite.Store, Container, name, default);
        Assert.Equal(Bytes(1), now!.Value.Entry!.Extent.Span.ToArray());
    }

    [Fact]
    public async Task A_conditional_create_succeeds_once_and_fails_once_the_blob_exists()
    {
        await using var node = await PeerNode.StartAsync("solo", azurite.Store);
        var name = await NewBlobAsync(null);

        await node.Cache.WriteAsync(azurite.Store, Container, name, Bytes(1), default, BlobWriteCondition.Absent);
        await Assert.ThrowsAsync<BlobConditionFailedException>(async () =>
            await node.Cache.WriteAsync(azurite.Store, Container, name, Bytes(2), default, BlobWriteCondition.Absent));
        Assert.Equal(Bytes(1), (await azurite.Store.DownloadAsync(Container, name))!.Data);
    }

    [Fact]
    public async Task Under_write_behind_a_provisional_version_still_matches_after_storage_replaced_it_with_its_etag()
    {
        await using var node = await PeerNode.StartAsync("solo", azurite.Store, new CachePolicy { Consistency = ConsistencyPreset.LocalAsyncLocal });
        var name = await NewBlobAsync(Bytes(0));
        var first = (await node.Cache.WriteAsync(azurite.Store, Container, name, Bytes(1), default)).ETag;
        Assert.StartsWith("\"faast-pending-", first, StringComparison.Ordinal);
        // The upload finishes in the background and the entry takes storage's ETag.
        await Eventually.TrueAsync(() => node.Cache.PeekForPeer(Key(name)) is { } peek && peek.Version != first, "the write-behind uploaded");

        // An invocation that read the provisional version writes If-Match it: the same bytes, so it matches.
        await node.Cache.WriteAsync(azurite.Store, Container, name, Bytes(2), default, BlobWriteCondition.Matching(first));
        // And the version it replaced no longer does.
        await Assert.ThrowsAsync<BlobConditionFailedException>(async () =>
            await node.Cache.WriteAsync(azurite.Store, Container, name, Bytes(3), default, BlobWriteCondition.Matching(first)));
        await Eventually.TrueAsync(async () => (await azurite.Store.DownloadAsync(Container, name))!.Data.SequenceEqual(Bytes(2)),
            "storage holds the conditional write");
    }

    [Theory]
    [InlineData("owner/sync/owner")]
    [InlineData("owner/async/owner")]
    public async Task The_owner_decides_a_conditional_write_sent_to_it_and_a_refused_one_is_not_written_to_storage_instead(string presetName)
    {
        Assert.True(ConsistencyPreset.TryParse(presetName, out var preset));
        var policy = new CachePolicy { Consistency = preset };
        await using var owner = await PeerNode.StartAsync("owner", azurite.Store, policy);
        await using var other = await PeerNode.StartAsync("other", azurite.Store, policy);
        other.Owners.Everything = owner.AsPeer;
        other.Cache.OnOwnershipChanged();
        var name = await NewBlobAsync(Bytes(0));
        var read = await VersionReadAsync(other, name); // through the owner

        await other.Cache.WriteAsync(azurite.Store, Container, name, Bytes(1), default, BlobWriteCondition.Matching(read));
        var refused = await Assert.ThrowsAsync<BlobConditionFailedException>(async () =>
            await other.Cache.WriteAsync(azurite.Store, Container, name, Bytes(2), default, BlobWriteCondition.Matching(read)));
        Assert.Contains("the owner owner", refused.Message, StringComparison.Ordinal);
        Assert.Equal(0, other.Cache.PeerFallbacks); // an answer, not a failure: storage was not written instead

        await Eventually.TrueAsync(async () => (await azurite.Store.DownloadAsync(Container, name))!.Data.SequenceEqual(Bytes(1)),
            "storage holds the first conditional write");
        Assert.Equal(Bytes(1), (await azurite.Store.DownloadAsync(Container, name))!.Data);
    }

    [Theory]
    [InlineData(null, null, true)]
    [InlineData("\"v1\"", null, false)]
    [InlineData("\"v1\"", "\"v1\"", true)]
    [InlineData("\"v1\"", "\"v2\"", false)]
    public void A_condition_is_held_by_the_version_it_names_or_for_absent_by_no_blob(string? ifMatch, string? current, bool held)
    {
        var condition = ifMatch is null ? BlobWriteCondition.Absent : BlobWriteCondition.Matching(ifMatch);
        Assert.Equal(held, condition.HeldBy(current));
        Assert.True(BlobWriteCondition.None.HeldBy(current));
        Assert.True(BlobWriteCondition.None.IsNone);
        Assert.Equal(ifMatch is null ? "*" : null, condition.IfNoneMatch);
    }
}
