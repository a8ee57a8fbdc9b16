using System.Collections.Concurrent;
using System.Security.Cryptography;
using FaaST.Cachelet.Bandwidth;
using FaaST.Cachelet.Peers;
using FaaST.Policy;
using FaaST.Peers;
using FaaST.Protos.Peer;
using FaaST.Storage;

namespace FaaST.Cachelet.Tests;

/// <summary>
/// Bandwidth scaling (Faa$T §4): range_from_storage Gets and large misses fetched in parallel ranges by
/// real cachelets on real Kestrel listeners over real Azurite.
/// </summary>
[Collection("azurite")]
public sealed class BandwidthScalingTests(AzuriteFixture azurite)
{
    private const string Container = "bandwidth";
    private static readonly CachePolicy LocalRead = new() { Consistency = ConsistencyPreset.LocalSyncLocal };
    // Small enough that the tests move a few MB, not hundreds.
    private static readonly BandwidthScalingOptions SmallThreshold = new() { MinObjectSize = 1 << 20, InstanceWait = TimeSpan.FromSeconds(20) };

    private static byte[] Random(int n)
    {
        var b = new byte[n];
        System.Random.Shared.NextBytes(b);
        return b;
    }

    private static string Sha(ReadOnlySpan<byte> bytes) => Convert.ToHexString(SHA256.HashData(bytes));

    private async Task<(string Name, string ETag)> PutAsync(byte[] data)
    {
        await azurite.Store.CreateContainerIfNotExistsAsync(Container);
        var name = $"obj-{Guid.NewGuid():N}";
        var written = await azurite.Store.UploadAsync(Container, name, data);
        return (name, written.ETag);
    }

    private BlobRef Ref(string name) => new() { Account = azurite.Store.Endpoint.AbsoluteUri, Container = Container, Blob = name };

    /// <summary>The plan fixed by the test (the T_DR rule itself is unit-tested in Scaling.Tests); records what it was told.</summary>
    private sealed class FixedPlan(int n) : IBandwidthPlanner
    {
        public ConcurrentQueue<long> StorageTransfers { get; } = new();
        public ConcurrentQueue<TimeSpan> Loads { get; } = new();
        public int PlanInstances(long objectBytes, int running) => n;
        public void ObserveStorageTransfer(long bytes, TimeSpan elapsed) => StorageTransfers.Enqueue(bytes);
        public void ObserveInstanceTransfer(long bytes, TimeSpan elapsed)
        {
        }
        public void ObserveLoad(TimeSpan elapsed) => Loads.Enqueue(elapsed);
    }

    /// <summary>The platform's side of a scale-out, as far as this cache can see it: instances joining its view.</summary>
    private sealed class JoiningScaler(FixedOwners view, IReadOnlyList<PeerNode> joining) : IInstanceScaler
    {
        public ConcurrentQueue<(int Target, string Reason)> Requests { get; } = new();

        public Task<int> RequestInstancesAsync(int target, string reason, CancellationToken ct)
        {
            Requests.Enqueue((target, reason));
            _ = Task.Run(async () =>
            {
                await Task.Delay(200, ct);
                foreach (var node in joining)
                    view.View[node.Id] = node.AsPeer;
            }, ct);
            return Task.FromResult(target);
        }
    }

    private static async Task<PeerNode[]> StartHelpersAsync(int count, Func<int, IBlobStore> store, bool bulk = true)
    {
        var nodes = new PeerNode[count];
        for (var i = 0; i < count; i++)
            nodes[i] = await PeerNode.StartAsync($"h{i}", store(i), LocalRead, bulkTransfers: bulk);
        return nodes;
    }

    private static async Task DisposeAllAsync(IEnumerable<PeerNode> nodes)
    {
        foreach (var node in nodes)
            await node.DisposeAsync();
    }

    [Theory]
    [InlineData(true)]
    [InlineData(false)]
    public async Task A_range_from_storage_get_returns_exactly_the_bytes_of_that_range_and_caches_nothing(bool bulk)
    {
        var data = Random((3 << 20) + 11);
        var (name, etag) = await PutAsync(data);
        await using var helper = await PeerNode.StartAsync("helper", azurite.Store, LocalRead);
        using var client = new PeerClient(new PeerOptions { Credentials = PeerNode.NewCredentials(), Timeout = TimeSpan.FromSeconds(30), BulkTransfers = bulk });
        var received = new MemoryStream();

        var header = await client.GetAsync(helper.Address,
            new GetRequest { Blob = Ref(name), IfVersion = etag, Offset = 1_000_003, Length = 777_777, RangeFromStorage = true }, _ => received, default);

        Assert.Equal(ObjectHeader.Types.Status.Ok, header.Status);
        Assert.Equal((etag, data.LongLength, 1_000_003L, 777_777L), (header.Version, header.Length, header.Offset, header.RangeLength));
        Assert.Equal(data.AsSpan(1_000_003, 777_777).ToArray(), received.ToArray());
        Assert.Equal(0, helper.Cache.ObjectCount);
        Assert.Equal(1, helper.Cache.StorageRangesServed);
    }

    [Fact]
    public async Task A_range_from_storage_get_for_another_version_is_refused_naming_both_versions()
    {
        var (name, etag) = await PutAsync(Random(100_000));
        await using var helper = await PeerNode.StartAsync("helper", azurite.Store, LocalRead);
        using var client = new PeerClient(new PeerOptions { Credentials = PeerNode.NewCredentials(), Timeout = TimeSpan.FromSeconds(30) });

        var e = await Assert.ThrowsAsync<PeerException>(() => client.GetAsync(helper.Address,
            new GetRequest { Blob = Ref(name), IfVersion = "\"0xstale\"", Offset = 0, Length = 1000, RangeFromStorage = true }, _ => new MemoryStream(), default));

        Assert.Contains(etag, e.Message, StringComparison.Ordinal);
        Assert.Contains("0xstale", e.Message, StringComparison.Ordinal);
        Assert.Equal(0, helper.Cache.StorageRangesServed);
    }

    [Fact]
    public async Task An_object_above_the_threshold_is_fetched_in_ranges_with_three_peers_and_arrives_intact()
    {
        var data = Random((12 << 20) + 5); // not a multiple of 4: the last range is shorter
        var (name, etag) = await PutAsync(data);
        await using var owner = await PeerNode.StartAsync("owner", azurite.Store, LocalRead);
        var helpers = await StartHelpersAsync(3, _ => azurite.Store);
        try
        {
            foreach (var helper in helpers)
                owner.Owners.View[helper.Id] = helper.AsPeer;
            var plan = new FixedPlan(4);
            owner.Cache.ConnectBandwidthScaling(plan, scaler: null, SmallThreshold);

            using var read = (await owner.Cache.ReadAsync(azurite.Store, Container, name, default))!.Value;

            Assert.Equal(ReadPath.LocalMiss, read.Path);
            Assert.Equal(etag, read.ETag);
            Assert.NotNull(read.Entry); // cached, in the extent the ranges were written into
            Assert.Equal(Sha(data), Sha(read.Entry!.Extent.Span));
            Assert.Equal((1L, 3L, 0L), (owner.Cache.ParallelFetches, owner.Cache.ParallelRanges, owner.Cache.ParallelRangeFallbacks));
            Assert.All(helpers, h => Assert.Equal((1L, 0L), (h.Cache.StorageRangesServed, h.Cache.ObjectCount)));
            Assert.Contains(owner.Logs.Entries, e => e.EventId == 2600 && e.Text.Contains("in 4 parallel ranges", StringComparison.Ordinal));
            Assert.Contains(plan.StorageTransfers, bytes => bytes == (data.Length + 3) / 4); // its own range measured BW_BS
        }
        finally
        {
            await DisposeAllAsync(helpers);
        }
    }

    [Fact]
    public async Task An_object_below_the_threshold_is_one_download_whatever_the_plan()
    {
        var data = Random(512 * 1024);
        var (name, _) = await PutAsync(data);
        await using var owner = await PeerNode.StartAsync("owner", azurite.Store, LocalRead);
        var helpers = await StartHelpersAsync(2, _ => azurite.Store);
        try
        {
            foreach (var helper in helpers)
                owner.Owners.View[helper.Id] = helper.AsPeer;
            owner.Cache.ConnectBandwidthScaling(new FixedPlan(3), scaler: null, SmallThreshold);

            using var read = (await owner.Cache.ReadAsync(azurite.Store, Container, name, default))!.Value;

            Assert.Equal(Sha(data), Sha(read.Entry!.Extent.Span));
            Assert.Equal(0, owner.Cache.ParallelFetches);
            Assert.All(helpers, h => Assert.Equal(0, h.Cache.StorageRangesServed));
        }
        finally
        {
            await DisposeAllAsync(helpers);
        }
    }

    [Fact]
    public async Task No_range_is_smaller_than_a_mebibyte_whatever_the_plan()
    {
        var data = Random((3 << 20) + (1 << 19)); // 3.5 MiB: three ranges at most, though four instances are planned
        var (name, _) = await PutAsync(data);
        await using var owner = await PeerNode.StartAsync("owner", azurite.Store, LocalRead);
        var helpers = await StartHelpersAsync(3, _ => azurite.Store);
        try
        {
            foreach (var helper in helpers)
                owner.Owners.View[helper.Id] = helper.AsPeer;
            owner.Cache.ConnectBandwidthScaling(new FixedPlan(4), scaler: null, SmallThreshold);

            using var read = (await owner.Cache.ReadAsync(azurite.Store, Container, name, default))!.Value;

            Assert.Equal(Sha(data), Sha(read.Entry!.Extent.Span));
            Assert.Equal(2, owner.Cache.ParallelRanges);
            Assert.Equal(2, helpers.Sum(h => h.Cache.StorageRangesServed));
        }
        finally
        {
            await DisposeAllAsync(helpers);
        }
    }

    [Fact]
    public async Task A_plan_above_the_view_asks_for_instances_at_once_and_uses_those_that_join()
    {
        var data = Random(6 << 20);
        var (name, _) = await PutAsync(data);
        await using var owner = await PeerNode.StartAsync("owner", azurite.Store, LocalRead);
        var helpers = await StartHelpersAsync(2, _ => azurite.Store);
        try
        {
            var scaler = new JoiningScaler(owner.Owners, helpers);
            var plan = new FixedPlan(3);
            owner.Cache.ConnectBandwidthScaling(plan, scaler, SmallThreshold);

            using var read = (await owner.Cache.ReadAsync(azurite.Store, Container, name, default))!.Value;

            Assert.Equal(Sha(data), Sha(read.Entry!.Extent.Span));
            var request = Assert.Single(scaler.Requests);
            Assert.Equal(3, request.Target);
            Assert.Contains(name, request.Reason, StringComparison.Ordinal);
            Assert.Equal(2, owner.Cache.ParallelRanges);
            Assert.Single(plan.Loads); // the time the instances took to join: T_Load
        }
        finally
        {
            await DisposeAllAsync(helpers);
        }
    }

    [Theory]
    [InlineData(true)]
    [InlineData(false)]
    public async Task A_peer_dying_mid_range_still_yields_an_intact_object(bool bulk)
    {
        var data = Random(8 << 20);
        var (name, etag) = await PutAsync(data);
        await using var owner = await PeerNode.StartAsync("owner", azurite.Store, LocalRead, bulkTransfers: bulk);
        PeerNode? dying = null;
        var cutShort = new DyingDownloads(azurite.Store, () => dying!.CrashServingAsync());
        var helpers = await StartHelpersAsync(2, i => i == 0 ? cutShort : azurite.Store);
        dying = helpers[0];
        try
        {
            foreach (var helper in helpers)
                owner.Owners.View[helper.Id] = helper.AsPeer;
            owner.Cache.ConnectBandwidthScaling(new FixedPlan(3), scaler: null, SmallThreshold);

            using var read = (await owner.Cache.ReadAsync(azurite.Store, Container, name, default))!.Value;

            Assert.Equal(etag, read.ETag);
            Assert.Equal(Sha(data), Sha(read.Entry!.Extent.Span));
            Assert.True(cutShort.Died, "the helper's range was cut short");
            Assert.Equal((1L, 1L, 1L), (owner.Cache.ParallelFetches, owner.Cache.ParallelRanges, owner.Cache.ParallelRangeFallbacks));
            Assert.Contains(owner.Logs.Entries, e => e.EventId == 2601 && e.Text.Contains("h0", StringComparison.Ordinal));
        }
        finally
        {
            await DisposeAllAsync(helpers);
        }
    }

    [Fact]
    public async Task An_object_changed_in_storage_between_ranges_is_never_assembled_from_two_versions()
    {
        var first = Random(6 << 20);
        var second = Random(6 << 20);
        var (name, firstETag) = await PutAsync(first);
        await using var owner = await PeerNode.StartAsync("owner", azurite.Store, LocalRead);
        // The helpers check the version at once (HEAD) but start their downloads a while later.
        var slow = new SlowDownloads(azurite.Store, TimeSpan.FromSeconds(2));
        var helpers = await StartHelpersAsync(2, _ => slow);
        try
        {
            foreach (var helper in helpers)
                owner.Owners.View[helper.Id] = helper.AsPeer;
            owner.Cache.ConnectBandwidthScaling(new FixedPlan(3), scaler: null, SmallThreshold);

            var reading = owner.Cache.ReadAsync(azurite.Store, Container, name, default).AsTask();
            using (var waited = new CancellationTokenSource(TimeSpan.FromSeconds(30)))
            {
                while (slow.Downloads < 2)
                    await Task.Delay(10, waited.Token);
            }
            var rewritten = await azurite.Store.UploadAsync(Container, name, second);
            using var read = (await reading)!.Value;

            Assert.NotEqual(firstETag, rewritten.ETag);
            Assert.Equal(rewritten.ETag, read.ETag);
            Assert.Equal(Sha(second), Sha(read.Entry!.Extent.Span));
            Assert.Equal(0, owner.Cache.ParallelFetches);
            Assert.Contains(owner.Logs.Entries, e => e.EventId == 2602);
        }
        finally
        {
            await DisposeAllAsync(helpers);
        }
    }

    /// <summary>Azurite, except that a ranged download passes on half its bytes, then its instance crashes.</summary>
    private sealed class DyingDownloads(IBlobStore inner, Func<Task> crash) : DelegatingStore(inner)
    {
        private int _died;

        public bool Died => Volatile.Read(ref _died) == 1;

        public override async Task<BlobProperties?> DownloadToAsync(string container, string blob, Stream destination, BlobRange? range = null,
            string? ifMatch = null, CancellationToken ct = default)
        {
            if (range is not { } r)
                return await base.DownloadToAsync(container, blob, destination, range, ifMatch, ct);
            await base.DownloadToAsync(container, blob, destination, new BlobRange(r.Offset, r.Length / 2), ifMatch, ct);
            await destination.FlushAsync(ct);
            await Task.Delay(200, ct); // the half reaches the requester
            Interlocked.Exchange(ref _died, 1);
            await crash();
            throw new IOException("the instance died mid-range");
        }
    }
}
