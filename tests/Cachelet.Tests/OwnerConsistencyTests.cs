using System.Collections.Concurrent;
using FaaST.Policy;

namespace FaaST.Cachelet.Tests;

/// <summary>
/// owner/sync/owner stays strong while ownership moves (an owner crashed and the views disagree for
/// a while), and reads racing writes of one key never fail: real cachelets on real Kestrel listeners,
/// over real Azurite; ownership changes are made by hand (FixedOwners), as a membership change would.
/// </summary>
[Collection("azurite")]
public sealed class OwnerConsistencyTests(AzuriteFixture azurite)
{
    private const string Container = "owner-consistency";
    private static readonly CachePolicy Strong = new() { Consistency = ConsistencyPreset.OwnerSyncOwner };

    private static byte[] Version(int n, int size = 50_000)
    {
        var bytes = new byte[size];
        Array.Fill(bytes, (byte)n);
        return bytes;
    }

    private async Task<string> NewBlobAsync(byte[] data)
    {
        await azurite.Store.CreateContainerIfNotExistsAsync(Container);
        var name = $"k-{Guid.NewGuid():N}";
        await azurite.Store.UploadAsync(Container, name, data);
        return name;
    }

    private async Task<byte[]> ReadAsync(PeerNode node, string name)
    {
        using var read = await node.Cache.ReadAsync(azurite.Store, Container, name, default) ?? throw new InvalidOperationException($"{name} not found");
        return read.Entry is { } e ? e.Extent.Span.ToArray() : read.Bytes.ToArray();
    }

    private async Task<byte[]> StorageAsync(string name) => (await azurite.Store.DownloadAsync(Container, name))!.Data;

    /// <summary>Makes <paramref name="node"/> see <paramref name="owner"/> (null: itself) as every key's owner, as a new view would.</summary>
    private static void Owns(PeerNode node, PeerNode? owner)
    {
        node.Owners.Everything = owner?.AsPeer;
        node.Cache.OnOwnershipChanged();
    }

    [Fact]
    public async Task A_new_owner_does_not_serve_the_copy_it_held_before_the_old_owner_took_more_writes()
    {
        await using var old = await PeerNode.StartAsync("old", azurite.Store, Strong);
        await using var heir = await PeerNode.StartAsync("heir", azurite.Store, Strong);
        await using var writer = await PeerNode.StartAsync("writer", azurite.Store, Strong);
        var name = await NewBlobAsync(Version(1));
        Owns(heir, old);
        Owns(writer, old);
        Assert.Equal(Version(1), await ReadAsync(heir, name)); // the heir keeps a copy of version 1
        await writer.Cache.WriteAsync(azurite.Store, Container, name, Version(2), default); // through the old owner

        await old.CrashServingAsync(); // it crashed; the heir's view drops it first
        Owns(heir, null);
        Assert.Equal(Version(2), await ReadAsync(heir, name));
    }

    [Fact]
    public async Task An_instance_that_still_sees_the_old_owner_gets_storages_version_from_the_heir_it_asks()
    {
        await using var old = await PeerNode.StartAsync("old", azurite.Store, Strong);
        await using var heir = await PeerNode.StartAsync("heir", azurite.Store, Strong);
        await using var writer = await PeerNode.StartAsync("writer", azurite.Store, Strong);
        await using var reader = await PeerNode.StartAsync("reader", azurite.Store, Strong);
        var name = await NewBlobAsync(Version(1));
        Owns(heir, old);
        Owns(writer, old);
        Assert.Equal(Version(1), await ReadAsync(heir, name));
        await writer.Cache.WriteAsync(azurite.Store, Container, name, Version(2), default);

        // The old owner crashed; the reader's view already makes the heir the owner, the heir's does not yet.
        await old.CrashServingAsync();
        Owns(reader, heir);
        Assert.Equal(Version(2), await ReadAsync(reader, name));
        Assert.Equal(0, reader.Cache.PeerFallbacks); // the heir answered
    }

    [Fact]
    public async Task A_write_that_cannot_reach_its_owner_is_seen_by_the_instance_that_already_took_the_key_over()
    {
        await using var old = await PeerNode.StartAsync("old", azurite.Store, Strong);
        await using var heir = await PeerNode.StartAsync("heir", azurite.Store, Strong);
        await using var writer = await PeerNode.StartAsync("writer", azurite.Store, Strong);
        await using var reader = await PeerNode.StartAsync("reader", azurite.Store, Strong);
        var name = await NewBlobAsync(Version(1));
        await old.CrashServingAsync();
        // The heir and the reader already see the heir as the owner; the writer still sees the old one.
        Owns(heir, null);
        Owns(reader, heir);
        Owns(writer, old);
        foreach (var node in new[] { old, heir, reader })
            writer.Owners.View[node.Id] = node.AsPeer;
        Assert.Equal(Version(1), await ReadAsync(heir, name)); // validated by the heir as owner
        Assert.Equal(Version(1), await ReadAsync(reader, name));

        await writer.Cache.WriteAsync(azurite.Store, Container, name, Version(3), default); // the old owner is down: to storage
        Assert.Equal(Version(3), await StorageAsync(name));
        Assert.Equal(1, writer.Cache.PeerFallbacks);
        Assert.Equal(Version(3), await ReadAsync(heir, name));
        Assert.Equal(Version(3), await ReadAsync(reader, name));
    }

    public static TheoryData<string> OwnerPresets => new() { ConsistencyPreset.OwnerSyncOwner.Name, ConsistencyPreset.OwnerAsyncOwner.Name };

    /// <summary>
    /// Defect 5: a read that fetched a version, racing a write of the same key that replaced it before
    /// the read pinned it, failed ("...is no longer cached; look it up again"). Readers and writers of
    /// one key on the owner and a non-owner: every read succeeds and returns one whole written version.
    /// </summary>
    [Theory]
    [MemberData(nameof(OwnerPresets))]
    public async Task Reads_racing_writes_of_one_key_never_fail_and_return_whole_versions(string presetName)
    {
        Assert.True(ConsistencyPreset.TryParse(presetName, out var preset));
        var policy = new CachePolicy { Consistency = preset };
        await using var owner = await PeerNode.StartAsync("owner", azurite.Store, policy);
        await using var other = await PeerNode.StartAsync("other", azurite.Store, policy);
        Owns(other, owner);
        const int size = 16_384;
        var name = await NewBlobAsync(Version(0, size));
        var failures = new ConcurrentQueue<string>();
        var reads = 0;
        // Bounded by writes (async writes return at once, and their uploads queue up) and by time.
        const int maxWrites = 3000;
        var deadline = DateTime.UtcNow.AddSeconds(20);
        var written = 0;
        var writing = 0;

        async Task ReadLoop(PeerNode node)
        {
            while (Volatile.Read(ref writing) > 0 && failures.IsEmpty)
            {
                try
                {
                    var bytes = await ReadAsync(node, name);
                    if (bytes.Length != size || bytes.AsSpan().IndexOfAnyExcept(bytes[0]) >= 0)
                        failures.Enqueue($"{node.Id} read a torn object ({bytes.Length} bytes, first {bytes[0]})");
                    Interlocked.Increment(ref reads);
                }
                catch (Exception e)
                {
                    failures.Enqueue($"{node.Id} read: {e.GetType().Name}: {e.Message}");
                }
            }
        }

        async Task WriteLoop(PeerNode node)
        {
            while (DateTime.UtcNow < deadline && failures.IsEmpty && Volatile.Read(ref written) < maxWrites)
            {
                var n = Interlocked.Increment(ref written);
                try
                {
                    await node.Cache.WriteAsync(azurite.Store, Container, name, Version(n % 251, size), default);
                }
                catch (Exception e)
                {
                    failures.Enqueue($"{node.Id} write: {e.GetType().Name}: {e.Message}");
                }
            }
        }

        // Many readers on the non-owner: after each write they all find their copy old and fetch the
        // new version from the owner at once, each adding it (and replacing the others' additions).
        var loops = new List<Task>();
        writing = 3;
        foreach (var (node, readers, writers) in new[] { (other, 12, 1), (owner, 2, 2) })
        {
            for (var i = 0; i < readers; i++)
                loops.Add(Task.Run(() => ReadLoop(node)));
            for (var i = 0; i < writers; i++)
                loops.Add(Task.Run(async () =>
                {
                    try
                    {
                        await WriteLoop(node);
                    }
                    finally
                    {
                        Interlocked.Decrement(ref writing);
                    }
                }));
        }
        await Task.WhenAll(loops);
        Assert.True(failures.IsEmpty, $"{failures.Count} failures in {reads} reads, {written} writes; first: {failures.FirstOrDefault()}");
        Assert.True(reads > 1000, $"only {reads} reads ran");
        // Reads' pins are released; write-behind uploads hold theirs until done.
        await Eventually.TrueAsync(() => owner.Cache.PinnedBytes == 0 && other.Cache.PinnedBytes == 0, "every pin is released", seconds: 120);
    }
}
