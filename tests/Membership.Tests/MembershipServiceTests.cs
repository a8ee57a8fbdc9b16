using System.Collections.Concurrent;
using System.Globalization;
using System.Text.Json;
using FaaST.Membership;
using FaaST.Storage;
using Xunit.Abstractions;

namespace FaaST.Membership.Tests;

/// <summary>Membership services of one app against a real Azurite: joins, leaves, crashes, stalls, outages.</summary>
[Collection(MembershipCollection.Name)]
public sealed class MembershipServiceTests(AzuriteFixture fixture, ITestOutputHelper output) : IAsyncLifetime
{
    private const string Container = "faast-membership";
    private static readonly MembershipOptions Fast = new() { HeartbeatInterval = TimeSpan.FromMilliseconds(150) };

    private readonly BlobStore _store = AzuriteFixture.CreateStore(fixture.Azurite.ConnectionString);
    private readonly string _app = "app-" + Guid.NewGuid().ToString("N")[..12];
    private readonly List<MembershipService> _services = [];
    private readonly Dictionary<MembershipService, ListLogger> _logs = [];

    public Task InitializeAsync() => Task.CompletedTask;

    public async Task DisposeAsync()
    {
        await Task.WhenAll(_services.Select(s => s.DisposeAsync().AsTask()));
        _store.Dispose();
    }

    [Fact]
    public async Task TwoServices_ConvergeOnTheSameViewAndRing()
    {
        var changes = new ConcurrentQueue<MembershipChange>();
        var a = NewService("a");
        a.Changed += changes.Enqueue;
        await a.StartAsync();
        Assert.Equal(["a"], Ids(a)); // self is in the view from the start

        var b = NewService("b");
        await b.StartAsync();
        Assert.Equal(["a", "b"], Ids(b)); // StartAsync did the first listing

        await ConvergeAsync([a, b]);
        var joined = Assert.Single(changes);
        Assert.Equal("b", Assert.Single(joined.Joined).Id);
        Assert.Empty(joined.Left);
        Assert.Same(a.Ring, joined.Ring);
        Assert.Equal(new Uri("http://127.0.0.1:7101/"), a.Members.Single(m => m.Id == "b").PeerAddress);

        var record = await _store.DownloadAsync(Container, $"{_app}/instances/a");
        using var json = JsonDocument.Parse(record!.Data);
        Assert.Equal("a", json.RootElement.GetProperty("id").GetString());
        Assert.Equal("http://127.0.0.1:7100/", json.RootElement.GetProperty("peerAddress").GetString());
        Assert.True(json.RootElement.GetProperty("seq").GetInt64() >= 1);
        Assert.Equal(a.Self.Started, json.RootElement.GetProperty("started").GetDateTimeOffset());
    }

    [Fact]
    public async Task FiveServices_ConvergeOnTheSameViewAndRing()
    {
        var services = Enumerable.Range(0, 5).Select(i => NewService($"m{i}")).ToArray();
        await Task.WhenAll(services.Select(s => s.StartAsync()));
        await ConvergeAsync(services);
    }

    [Fact]
    public async Task StoppedService_LeavesEveryView_WithoutWaitingForItsHeartbeatsToTimeOut()
    {
        // So many missed heartbeats that only the deleted blob can make c leave.
        var patient = Fast with { MissedHeartbeats = 10_000 };
        var services = new[] { NewService("a", patient), NewService("b", patient), NewService("c", patient) };
        await Task.WhenAll(services.Select(s => s.StartAsync()));
        await ConvergeAsync(services);

        await services[2].StopAsync();
        Assert.Null(await _store.GetPropertiesAsync(Container, $"{_app}/instances/c"));
        await ConvergeAsync(services[..2]);
    }

    [Fact]
    public async Task CrashedService_LeavesAfterMissedHeartbeats_AndItsBlobIsDeleted()
    {
        var services = new[] { NewService("a"), NewService("b"), NewService("c") };
        await Task.WhenAll(services.Select(s => s.StartAsync()));
        await ConvergeAsync(services);
        var left = new ConcurrentQueue<string>();
        services[0].Changed += c => { foreach (var m in c.Left) left.Enqueue(m.Id); };

        await services[2].AbandonAsync(); // no deregistration: its blob stays until a peer finds it dead
        await ConvergeAsync(services[..2]);
        Assert.Equal(["c"], left);
        await Eventually.TrueAsync(async () => await _store.GetPropertiesAsync(Container, $"{_app}/instances/c") is null,
            "the crashed instance's blob is deleted");
    }

    [Fact]
    public async Task StalledService_WhoseBlobWasDeleted_RegistersAgainWhenItResumes()
    {
        var a = NewService("a");
        var b = NewService("b");
        await Task.WhenAll(a.StartAsync(), b.StartAsync());
        await ConvergeAsync([a, b]);

        b.Frozen = true;
        await Eventually.TrueAsync(() => Ids(a).SequenceEqual(["a"]), "a drops the stalled b", () => string.Join(",", Ids(a)));
        await Eventually.TrueAsync(async () => await _store.GetPropertiesAsync(Container, $"{_app}/instances/b") is null,
            "a deletes b's blob");
        Assert.Contains("b", Ids(b)); // self is always in its own view

        b.Frozen = false;
        await ConvergeAsync([a, b]);
        Assert.True(_logs[b].Contains("registering again"), string.Join(Environment.NewLine, _logs[b].Lines));
        Assert.NotNull(await _store.GetPropertiesAsync(Container, $"{_app}/instances/b"));
    }

    [Fact]
    public async Task ConcurrentRegistrations_NeverOverwriteAnotherInstancesBlob()
    {
        var services = Enumerable.Range(0, 30).Select(i => NewService($"r{i:D2}")).ToArray();
        await Task.WhenAll(services.Select(s => s.StartAsync()));
        await ConvergeAsync(services);

        var names = new List<string>();
        await foreach (var item in _store.ListAsync(Container, $"{_app}/instances/"))
        {
            names.Add(item.Name);
            var json = JsonDocument.Parse((await _store.DownloadAsync(Container, item.Name))!.Data);
            Assert.Equal(item.Name[(item.Name.LastIndexOf('/') + 1)..], json.RootElement.GetProperty("id").GetString());
        }

        Assert.Equal(30, names.Count);

        // A second instance claiming a live id is refused, and the first one's record stays as it was.
        var impostor = new MembershipService(_store, _app, new Member("r07", new Uri("http://127.0.0.1:7999/"), DateTimeOffset.UtcNow), Fast);
        var ex = await Assert.ThrowsAsync<InvalidOperationException>(() => impostor.StartAsync());
        Assert.Contains("already registered by another instance", ex.Message, StringComparison.Ordinal);
        var kept = JsonDocument.Parse((await _store.DownloadAsync(Container, $"{_app}/instances/r07"))!.Data);
        Assert.Equal(services[7].Self.PeerAddress.ToString(), kept.RootElement.GetProperty("peerAddress").GetString());
        await ConvergeAsync(services);
    }

    [Fact]
    public async Task HundredInstances_Converge_ThenTenCrash_AndTheRestConvergeToNinety()
    {
        // One Azurite on a small machine serves 100 listings of 100 blobs per interval far slower than asked, so
        // everything runs late: long timeouts, and one client whose busy pool never churns connections (a connection
        // storm overflows Azurite's accept queue, and a dropped SYN costs seconds).
        var options = new MembershipOptions { HeartbeatInterval = TimeSpan.FromMilliseconds(500) };
        using var store = new BlobStore(fixture.Azurite.ConnectionString, new BlobStoreOptions { TryTimeout = TimeSpan.FromMinutes(2) });
        var services = Enumerable.Range(0, 100).Select(i => NewService($"n{i:D3}", options, store, logged: false)).ToArray();
        var clock = System.Diagnostics.Stopwatch.StartNew();
        await Task.WhenAll(services.Select(s => s.StartAsync()));

        output.WriteLine($"100 started after {clock.Elapsed.TotalSeconds:F1} s");
        await ConvergeAsync(services, seconds: 300);
        output.WriteLine($"100 views of 100 after {clock.Elapsed.TotalSeconds:F1} s");
        clock.Restart();

        var crashed = services.Where((_, i) => i % 10 == 3).ToArray();
        await Task.WhenAll(crashed.Select(s => s.AbandonAsync()));
        var alive = services.Except(crashed).ToArray();
        await ConvergeAsync(alive, seconds: 300);
        output.WriteLine($"90 views of 90 {clock.Elapsed.TotalSeconds:F1} s after the crash");
        Assert.Equal(90, alive[0].Members.Count);
        await Task.WhenAll(alive.Select(s => s.StopAsync())); // before the store goes
    }

    [Fact]
    public async Task InstanceThatLosesStorage_KeepsItsLastView_AndComesBack()
    {
        var cut = new SwitchableStore(_store);
        var a = NewService("a");
        var b = NewService("b", store: cut);
        var c = NewService("c");
        await Task.WhenAll(a.StartAsync(), b.StartAsync(), c.StartAsync());
        await ConvergeAsync([a, b, c]);

        cut.Broken = true;
        await ConvergeAsync([a, c]); // b cannot heartbeat: the others drop it...
        await Eventually.TrueAsync(() => _logs[b].Contains("failed (3 in a row)"), "b keeps failing");
        Assert.Equal(["a", "b", "c"], Ids(b)); // ...while b keeps the view it had

        cut.Broken = false;
        await ConvergeAsync([a, b, c]);
        Assert.True(_logs[b].Contains("registering again"), string.Join(Environment.NewLine, _logs[b].Lines));
    }

    [Fact]
    public async Task StorageRestart_KeepsTheLastView_ThenEveryoneRegistersAgain()
    {
        // An Azurite of its own: it is killed and restarted (in memory, so the restart loses every blob and the container).
        var azurite = await AzuriteProcess.StartAsync(AzuriteFixture.RepoRoot);
        var port = azurite.Port;
        using var store = AzuriteFixture.CreateStore(azurite.ConnectionString);
        var a = NewService("a", store: store);
        var b = NewService("b", store: store);
        try
        {
            await Task.WhenAll(a.StartAsync(), b.StartAsync());
            await ConvergeAsync([a, b]);

            azurite.Kill();
            await Eventually.TrueAsync(() => _logs[a].Contains("failed (2 in a row)") && _logs[b].Contains("failed (2 in a row)"),
                "both notice the outage");
            Assert.Equal(["a", "b"], Ids(a));
            Assert.Equal(["a", "b"], Ids(b));

            azurite.Dispose();
            azurite = await AzuriteProcess.StartAsync(AzuriteFixture.RepoRoot, port);
            await Eventually.TrueAsync(async () =>
                    await store.GetPropertiesAsync(Container, $"{_app}/instances/a") is not null
                    && await store.GetPropertiesAsync(Container, $"{_app}/instances/b") is not null,
                "both blobs are back");
            await ConvergeAsync([a, b]);
        }
        finally
        {
            await a.DisposeAsync();
            await b.DisposeAsync();
            azurite.Dispose();
        }
    }

    [Theory]
    [InlineData("", "x")]
    [InlineData("a/b", "x")]
    [InlineData(".hidden", "x")]
    [InlineData("app", "with space")]
    [InlineData("app", "..")]
    [InlineData("app", "a/b")]
    public void UnusableNames_AreRejected_WithAClearError(string app, string id)
    {
        var ex = Assert.Throws<ArgumentException>(() =>
            new MembershipService(_store, app, new Member(id, new Uri("http://127.0.0.1:1/"), DateTimeOffset.UtcNow)));
        Assert.Contains("cannot name a membership blob", ex.Message, StringComparison.Ordinal);
        Assert.Throws<ArgumentException>(() => new MembershipService(_store, "app",
            new Member("ok", new Uri("http://127.0.0.1:1/"), DateTimeOffset.UtcNow), new MembershipOptions { Container = "Bad_Name" }));
    }

    private MembershipService NewService(string id, MembershipOptions? options = null, IBlobStore? store = null, bool logged = true)
    {
        var port = 7100 + _services.Count;
        var logger = new ListLogger();
        var service = new MembershipService(store ?? _store, _app,
            new Member(id, new Uri(string.Create(CultureInfo.InvariantCulture, $"http://127.0.0.1:{port}/")), DateTimeOffset.UtcNow),
            options ?? Fast, logged ? logger : null);
        _services.Add(service);
        _logs[service] = logger;
        return service;
    }

    private static string[] Ids(MembershipService s) => s.Members.Select(m => m.Id).ToArray();

    /// <summary>Waits until every service's view is exactly these services, then checks their rings agree.</summary>
    private static async Task ConvergeAsync(IReadOnlyList<MembershipService> services, int seconds = 30)
    {
        var expected = services.Select(s => s.Self.Id).Order(StringComparer.Ordinal).ToArray();
        await Eventually.TrueAsync(() => services.All(s => Ids(s).SequenceEqual(expected)),
            $"all {services.Count} views are [{string.Join(",", expected.Take(10))}{(expected.Length > 10 ? ",..." : "")}]",
            () => string.Join("; ", services.Select(s => $"{s.Self.Id}: {s.Members.Count}").Take(20)), seconds);

        var rings = services.Select(s => s.Ring).ToArray();
        for (var k = 0; k < 2000; k++)
        {
            var key = string.Create(CultureInfo.InvariantCulture, $"container/blob-{k}");
            var owner = rings[0].OwnerOf(key).Id;
            Assert.All(rings, r => Assert.Equal(owner, r.OwnerOf(key).Id));
        }
    }
}
