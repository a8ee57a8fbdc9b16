using System.Security.Cryptography;
using FaaST.Cachelet.Index;
using FaaST.Protos.Flash;
using FaaST.Runtime.Flash;
using Grpc.Core;
using Grpc.Net.Client;

namespace FaaST.Runtime.Tests.Flash;

/// <summary>
/// The flash tier in the miss path of a real app (issue 22): a real host with a real Python worker on real Azurite,
/// and a real flash server process on a real file (O_DIRECT) on loopback. A working set 4× the cache: what the cache
/// evicts is demoted, and a later miss of it is a flash hit with identical bytes; a new version in storage is never
/// answered with the old flash copy; the server killed mid-load costs no read, and once it is back flash hits resume.
/// </summary>
[Collection("azurite")]
public sealed class FlashTierTests(AzuriteFixture azurite) : IAsyncLifetime
{
    private const int ObjectBytes = 64 * 1024;
    // 2 MiB of cache for 8 MiB of objects; the demotion reserve (1/8 of the cache) holds 4 objects.
    private const int Objects = 128;
    private const string Container = "flashtier";

    private FlashServerProcess _server = null!;

    public async Task InitializeAsync()
    {
        _server = await FlashServerProcess.StartAsync();
        await azurite.Store.CreateContainerIfNotExistsAsync(Container);
    }

    public async Task DisposeAsync() => await _server.DisposeAsync();

    private async Task<(TestApp App, string Token)> AppAsync()
    {
        var tenant = "flash-tier-" + Guid.NewGuid().ToString("N")[..8];
        var token = await _server.RegisterAsync(tenant);
        var app = new TestApp("python", name: tenant, settings: new()
        {
            [FlashRegistration.AddressSetting] = _server.Address.ToString(),
            [FlashRegistration.TokenSetting] = token,
        }).Function("Read", TestApp.BlobReadJson(Container), ("__init__.py", FlashHostTests.PyReadHash));
        // The tests' machine is shared and busy: a generous timeout, so only a dead server is given up.
        File.WriteAllText(Path.Combine(app.Directory, "faast.json"), """
            { "cache": { "cacheCapacity": "2MiB" },
              "flash": { "enabled": true, "timeoutMs": 5000, "retryAfterSeconds": 1 } }
            """);
        return (app, token);
    }

    private async Task<List<(string Name, byte[] Bytes)>> UploadAsync(int count, string prefix)
    {
        var blobs = new List<(string, byte[])>();
        for (var i = 0; i < count; i++)
        {
            var bytes = RandomNumberGenerator.GetBytes(ObjectBytes);
            var name = $"{prefix}-{i:D3}";
            await azurite.Store.UploadAsync(Container, name, bytes);
            blobs.Add((name, bytes));
        }
        return blobs;
    }

    /// <summary>The ETag the flash tier holds for a blob, asked with the app's own token (null: none).</summary>
    private async Task<string?> FlashHoldsAsync(string token, string blob)
    {
        using var channel = GrpcChannel.ForAddress(_server.Address);
        var tier = new FlashTier.FlashTierClient(channel);
        var auth = new Metadata { { "authorization", "Bearer " + token } };
        var flow = await tier.OpenFlowAsync(new OpenFlowRequest { Instance = "test" }, auth);
        try
        {
            using var call = tier.Get(new GetRequest
            {
                Flow = flow.Flow,
                Key = FlashKeys.Of(new BlobKey(azurite.Store.Endpoint.AbsoluteUri, Container, blob)),
            }, auth);
            Assert.True(await call.ResponseStream.MoveNext(CancellationToken.None));
            var header = call.ResponseStream.Current.Header;
            return header.Found ? header.Etag : null;
        }
        finally
        {
            await tier.CloseFlowAsync(new CloseFlowRequest { Flow = flow.Flow }, auth);
        }
    }

    /// <summary>Waits until the tier holds one of the first half of <paramref name="blobs"/> (read first, so evicted
    /// first; a demotion may be dropped when a miss needs its memory first) and returns its index.</summary>
    private async Task<int> ADemotedObjectAsync(string token, List<(string Name, byte[] Bytes)> blobs)
    {
        var found = -1;
        await Eventually.TrueAsync(async () =>
        {
            for (var i = 0; i < blobs.Count / 2 && found < 0; i++)
                if (await FlashHoldsAsync(token, blobs[i].Name) is not null)
                    found = i;
            return found >= 0;
        }, "an evicted object was demoted");
        return found;
    }

    private static async Task ReadAllAsync(HostUnderTest host, IEnumerable<(string Name, byte[] Bytes)> blobs)
    {
        foreach (var (name, bytes) in blobs)
            Assert.Equal(FlashHostTests.Expected(bytes), await host.Http.GetStringAsync($"/api/read/{name}"));
    }

    [Fact]
    public async Task With_a_working_set_four_times_the_cache_a_miss_of_an_evicted_object_is_a_flash_hit_with_identical_bytes()
    {
        var (app, token) = await AppAsync();
        using var _ = app;
        var blobs = await UploadAsync(Objects, "ws");
        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString);

        await ReadAllAsync(host, blobs);
        await ADemotedObjectAsync(token, blobs);
        var afterFirst = await FlashHostTests.FlashStatusAsync(host.Http);
        // Not every eviction is demoted: one the pump has not started when a miss needs its memory is dropped, and how
        // many are depends on the machine's load (with two CPU hogs beside the test, 24-29 of 128; alone, most of them).
        // The claim tested is about the demoted ones: each is a flash hit with identical bytes on the next pass.
        Assert.True(afterFirst.Instance.Demotions >= 1, $"no demotion of {Objects} objects through a 2 MiB cache");
        Assert.Equal(afterFirst.Instance.Demotions * (long)ObjectBytes, afterFirst.Instance.DemotionBytes);

        // The second pass in the same order: every read misses the cache (LRU over a scan), and what was demoted is a flash hit.
        await ReadAllAsync(host, blobs);

        var status = await FlashHostTests.FlashStatusAsync(host.Http);
        var hits = status.Instance.Hits - afterFirst.Instance.Hits;
        // Every object demoted in the first pass is held by the tier (64 MiB, far more than 8 MiB of objects) and every
        // read of the second pass misses the cache, so each is a flash hit (ReadAllAsync compared every hash).
        Assert.True(hits >= afterFirst.Instance.Demotions, $"{hits} flash hits of {Objects} misses, though {afterFirst.Instance.Demotions} objects were demoted before");
        Assert.Equal(hits * ObjectBytes, status.Instance.HitBytes - afterFirst.Instance.HitBytes);
        Assert.Equal((0L, 0L), (status.Instance.Stale, status.Instance.Fallbacks));
        Assert.True(status.Usable);
        // The app's own stats on the server, through /admin/flash.
        Assert.NotNull(status.Server);
        Assert.Equal(app.Directory.Split('/')[^1], status.Server!.Tenant);
        Assert.True(status.Server.Hits >= hits);
    }

    [Fact]
    public async Task An_evicted_object_the_tier_served_is_not_written_to_it_again()
    {
        var (app, token) = await AppAsync();
        using var _ = app;
        var blobs = await UploadAsync(Objects, "held");
        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString);
        await ReadAllAsync(host, blobs);
        await ADemotedObjectAsync(token, blobs);
        var afterFirst = await FlashHostTests.FlashStatusAsync(host.Http);
        Assert.Equal(0, afterFirst.Instance.DemotionsHeld); // every object came from storage: nothing was known held

        // The second pass: the flash hits are evicted again in turn, and the tier already holds those very versions.
        await ReadAllAsync(host, blobs);
        var status = await FlashHostTests.FlashStatusAsync(host.Http);
        var hits = status.Instance.Hits - afterFirst.Instance.Hits;
        var held = status.Instance.DemotionsHeld;
        var demoted = status.Instance.Demotions - afterFirst.Instance.Demotions;
        Assert.True(hits >= afterFirst.Instance.Demotions, $"{hits} flash hits of {Objects} misses, though {afterFirst.Instance.Demotions} objects were demoted before");
        Assert.True(held >= 1, $"no eviction was recognised as held by the tier ({hits} hits, {demoted} demotions in the second pass)");
        // Demoted in the second pass: at most the objects read from storage in it, plus those the first pass left in the
        // cache (2 MiB of 64 KiB objects), which came from storage too. Without the rule the hits would be written again.
        const int CacheObjects = 2 * 1024 * 1024 / ObjectBytes;
        Assert.True(demoted <= Objects - hits + CacheObjects, $"{demoted} demotions in the second pass with {hits} flash hits of {Objects} reads");
        // Bytes were never wrong: every read above compared its hash.
        Assert.Equal((0L, 0L), (status.Instance.Stale, status.Instance.Fallbacks));
    }

    [Fact]
    public async Task A_new_version_written_to_storage_is_never_answered_with_the_old_flash_copy()
    {
        var (app, token) = await AppAsync();
        using var _ = app;
        var old = RandomNumberGenerator.GetBytes(ObjectBytes);
        var target = $"versioned-{Guid.NewGuid():N}";
        var v1 = await azurite.Store.UploadAsync(Container, target, old);
        var fillers = await UploadAsync(48, "filler-" + Guid.NewGuid().ToString("N")[..6]);
        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString);

        // 3 MiB through a 2 MiB cache after the target: it is evicted and demoted, unless a miss needed its memory
        // before the pump took it (then it is dropped, DemotionQueue's rule); then once more until flash holds it.
        await Eventually.TrueAsync(async () =>
        {
            await ReadAllAsync(host, [(target, old)]);
            await ReadAllAsync(host, fillers);
            for (var wait = 0; wait < 20; wait++, await Task.Delay(100))
                if (await FlashHoldsAsync(token, target) == v1.ETag)
                    return true;
            return false;
        }, "the old version was demoted to flash", seconds: 180);

        var fresh = RandomNumberGenerator.GetBytes(ObjectBytes);
        await azurite.Store.UploadAsync(Container, target, fresh);
        var before = await FlashHostTests.FlashStatusAsync(host.Http);
        Assert.Equal(FlashHostTests.Expected(fresh), await host.Http.GetStringAsync($"/api/read/{target}"));

        var status = await FlashHostTests.FlashStatusAsync(host.Http);
        Assert.Equal(before.Instance.Stale + 1, status.Instance.Stale);
        Assert.Equal(before.Instance.Hits, status.Instance.Hits);
    }

    [Fact]
    public async Task With_the_flash_server_killed_mid_load_every_read_succeeds_and_after_its_restart_flash_hits_resume()
    {
        var (app, token) = await AppAsync();
        using var _ = app;
        var blobs = await UploadAsync(Objects, "kill");
        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString);
        await ReadAllAsync(host, blobs);
        var demoted = await ADemotedObjectAsync(token, blobs);

        // Killed in the middle of the second pass: the reads before hit flash, the ones after fall back to storage.
        var load = Task.Run(() => ReadAllAsync(host, blobs));
        await Eventually.TrueAsync(async () => (await FlashHostTests.FlashStatusAsync(host.Http)).Instance.Hits >= 4, "the second pass reached flash");
        await _server.KillAsync();
        await load;
        await ReadAllAsync(host, blobs.Take(8)); // and while it stays down
        var down = await FlashHostTests.FlashStatusAsync(host.Http);
        Assert.True(down.Instance.Fallbacks + down.Instance.SkippedReads >= 1, "reads went around the dead server");

        await _server.RestartAsync(); // same port, state and device: the log is recovered
        Assert.NotNull(await FlashHoldsAsync(token, blobs[demoted].Name));
        // Once the retry period is over the host uses the tier again: a pass over the objects finds hits.
        var i = 0;
        await Eventually.TrueAsync(async () =>
        {
            var (name, bytes) = blobs[i++ % blobs.Count];
            Assert.Equal(FlashHostTests.Expected(bytes), await host.Http.GetStringAsync($"/api/read/{name}"));
            return (await FlashHostTests.FlashStatusAsync(host.Http)).Instance.Hits > down.Instance.Hits;
        }, "flash hits resumed after the server's restart");
    }
}
