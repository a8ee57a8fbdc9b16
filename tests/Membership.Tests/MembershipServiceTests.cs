using System.Collections.Concurrent;
using System.Globalization;
using System.Text.Json;
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
        Assert.Equal("active", json.RootElement.GetProperty("state").GetString());
        Assert.Equal("application/json; state=active", record.Properties.ContentType);
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
        var clock = new Clock(Fast.HeartbeatInterval);
        var services = new[] { NewService("a", time: clock), NewService("b", time: clock), NewService("c", time: clock) };
        await Task.WhenAll(services.Select(s => s.StartAsync()));
        await clock.StepUntilAsync(services, () => Converged(services), "all three see each other");
        var left = new ConcurrentQueue<string>();
        services[0].Changed += c => { foreach (var m in c.Left) left.Enqueue(m.Id); };

        await services[2].AbandonAsync(); // no deregistration: its blob stays until a peer finds it dead
        var steps = await clock.StepUntilAsync(services[..2], () => Converged(services[..2]), "a and b drop the crashed c");
        Assert.InRange(steps, Fast.MissedHeartbeats, Fast.MissedHeartbeats + 3); // not before its heartbeats were missed
        await ConvergeAsync(services[..2]);
        Assert.Equal(["c"], left);
        Assert.Null(await _store.GetPropertiesAsync(Container, $"{_app}/instances/c")); // deleted by the listing that dropped it
    }

    [Fact]
    public async Task StalledService_WhoseBlobWasDeleted_RegistersAgainWhenItResumes()
    {
        var clock = new Clock(Fast.HeartbeatInterval);
        var a = NewService("a", time: clock);
        var b = NewService("b", time: clock);
        await Task.WhenAll(a.StartAsync(), b.StartAsync());
        await clock.StepUntilAsync([a, b], () => Converged([a, b]), "a and b see each other");

        b.Frozen = true;
        await clock.StepUntilAsync([a, b], () => Ids(a).SequenceEqual(["a"]), "a drops the stalled b");
        Assert.Null(await _store.GetPropertiesAsync(Container, $"{_app}/instances/b")); // a deleted b's blob
        Assert.Contains("b", Ids(b)); // self is always in its own view

        b.Frozen = false;
        await clock.StepUntilAsync([a, b], () => Converged([a, b]), "b registers again and both see each other");
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
        var clock = new Clock(Fast.HeartbeatInterval);
        var cut = new SwitchableStore(_store);
        var a = NewService("a", time: clock);
        var b = NewService("b", store: cut, time: clock);
        var c = NewService("c", time: clock);
        await Task.WhenAll(a.StartAsync(), b.StartAsync(), c.StartAsync());
        await clock.StepUntilAsync([a, b, c], () => Converged([a, b, c]), "all three see each other");

        cut.Broken = true;
        await clock.StepUntilAsync([a, b, c], () => Converged([a, c]) && _logs[b].Contains("failed (3 in a row)"),
            "a and c drop b, which cannot heartbeat and keeps failing");
        Assert.Equal(["a", "b", "c"], Ids(b)); // ...while b keeps the view it had

        cut.Broken = false;
        await clock.StepUntilAsync([a, b, c], () => Converged([a, b, c]), "b is back in every view");
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

    [Fact]
    public async Task Observer_WritesNothing_AndSeesAnInstanceJoinGoDrainingAndLeave()
    {
        var clock = new Clock(Fast.HeartbeatInterval);
        var a = NewService("a", time: clock);
        await a.StartAsync();

        // An observer listing many times on a clock of its own, while a's stands still: a seems to miss its heartbeats,
        // and the observer drops it, but every blob stays as it was (only members delete dead instances' blobs).
        var before = await SnapshotAsync();
        var watch = new Clock(Fast.HeartbeatInterval);
        await using (var watcher = new MembershipObserver(_store, _app, Fast, null, watch))
        {
            await watcher.StartAsync();
            Assert.Equal(["a"], watcher.Members.Select(m => m.Id));
            await watch.StepAsync(Fast.MissedHeartbeats + 2, [], [watcher]);
            Assert.Empty(watcher.Members);
        }

        Assert.Equal(before, await SnapshotAsync());

        await using var observer = new MembershipObserver(_store, _app, Fast, new ListLogger(), clock);
        var changes = new ConcurrentQueue<MembershipChange>();
        observer.Changed += changes.Enqueue;
        await observer.StartAsync();
        Assert.Equal(["a"], observer.Members.Select(m => m.Id));
        Assert.Equal("a", Assert.Single(Assert.Single(changes).Joined).Id); // the first listing
        changes.Clear();

        var b = NewService("b", time: clock);
        await b.StartAsync();
        await clock.StepUntilAsync([a, b], () => observer.Members.Count == 2 && Converged([a, b]), "the observer sees b join", [observer]);
        Assert.Equal("b", Assert.Single(Assert.Single(changes).Joined).Id);

        await b.SetStateAsync(MemberState.Draining);
        await clock.StepUntilAsync([a, b], () => observer.Members.Any(m => m is { Id: "b", State: MemberState.Draining }),
            "the observer sees b draining", [observer]);
        var drained = changes.Last();
        Assert.Equal(("b", MemberState.Draining), (Assert.Single(drained.StateChanged).Id, drained.StateChanged[0].State));
        Assert.Equal(["a"], drained.Ring.Members.Select(m => m.Id)); // a draining member owns nothing

        await b.StopAsync();
        await clock.StepUntilAsync([a], () => observer.Members.Count == 1, "the observer sees b leave", [observer]);
        Assert.Equal("b", Assert.Single(changes.Last().Left).Id);
        Assert.Equal(["a"], observer.Members.Select(m => m.Id));
    }

    [Fact]
    public async Task Observer_DropsACrashedInstanceAfterMissedHeartbeats_ButLeavesItsBlob()
    {
        // An app whose only instance crashed: no member is left to delete its blob, and the observer must not.
        var clock = new Clock(Fast.HeartbeatInterval);
        var a = NewService("a", time: clock);
        await a.StartAsync();
        await using var observer = new MembershipObserver(_store, _app, Fast, null, clock);
        await observer.StartAsync();
        await clock.StepUntilAsync([a], () => observer.Members.Count == 1, "the observer sees a", [observer]);

        await a.AbandonAsync();
        var steps = await clock.StepUntilAsync([], () => observer.Members.Count == 0, "the observer drops the crashed a", [observer]);
        Assert.InRange(steps, Fast.MissedHeartbeats, Fast.MissedHeartbeats + 3);
        Assert.NotNull(await _store.GetPropertiesAsync(Container, $"{_app}/instances/a"));
    }

    [Fact]
    public async Task Observer_OfAnAppWithoutInstances_SeesAnEmptyView_AndCreatesNoContainer()
    {
        var container = "obs-" + Guid.NewGuid().ToString("N")[..20];
        await using var observer = new MembershipObserver(_store, _app, Fast with { Container = container }, null, new Clock(Fast.HeartbeatInterval));
        await observer.StartAsync();
        Assert.Empty(observer.Members);
        Assert.Empty(observer.Ring.Members);
        var ex = await Assert.ThrowsAsync<BlobStorageException>(async () =>
        {
            await foreach (var unused in _store.ListAsync(container))
            {
            }
        });
        Assert.Equal("ContainerNotFound", ex.ErrorCode);
    }

    [Fact]
    public async Task Observer_SeesTheLoadEachInstanceReportsWithItsHeartbeat()
    {
        var clock = new Clock(Fast.HeartbeatInterval);
        var a = NewService("a", time: clock);
        var inFlight = 0;
        a.LoadReport = () => new MemberLoad(Volatile.Read(ref inFlight), 2, 4096);
        await a.StartAsync();
        await using var observer = new MembershipObserver(_store, _app, Fast, null, clock);
        await observer.StartAsync();

        Volatile.Write(ref inFlight, 7);
        await clock.StepUntilAsync([a], () => observer.Members.SingleOrDefault()?.Load?.InFlightInvocations == 7, "the observer reads a's load", [observer]);
        var load = observer.Members.Single().Load!;
        Assert.Equal((7, 2, 4096L), (load.InFlightInvocations, load.QueuedInvocations, load.CachedBytes));
        Assert.True(load.At > new DateTimeOffset(2026, 1, 1, 0, 0, 0, TimeSpan.Zero) && load.At <= clock.GetUtcNow(), $"stamped {load.At:O} by a's clock");
        Assert.Equal(load, a.Self.Load);

        Volatile.Write(ref inFlight, 1);
        await clock.StepUntilAsync([a], () => observer.Members.Single().Load?.InFlightInvocations == 1, "the observer reads a's new load", [observer]);
    }

    [Fact]
    public async Task FailingLoadReport_IsLogged_AndTheHeartbeatCarriesThePreviousLoad()
    {
        var clock = new Clock(Fast.HeartbeatInterval);
        var a = NewService("a", time: clock);
        var fail = false;
        a.LoadReport = () => Volatile.Read(ref fail) ? throw new InvalidOperationException("counters unavailable") : new MemberLoad(3, 0, 10);
        await a.StartAsync();
        await clock.StepUntilAsync([a], () => a.Self.Load?.InFlightInvocations == 3, "a reports its load");
        var reported = a.Self.Load;

        Volatile.Write(ref fail, true);
        await clock.StepUntilAsync([a], () => _logs[a].Contains("The load report of a (app"), "the failure is logged");
        await clock.StepAsync(2, [a]);
        Assert.Equal(reported, a.Self.Load); // the last good report, stamped when it was taken
        var record = await _store.DownloadAsync(Container, $"{_app}/instances/a");
        using var json = JsonDocument.Parse(record!.Data);
        Assert.Equal(3, json.RootElement.GetProperty("load").GetProperty("inFlightInvocations").GetInt32());
        Assert.True(json.RootElement.GetProperty("seq").GetInt64() >= 3); // heartbeats went on
    }

    [Fact]
    public async Task DrainingMember_StaysInTheView_ButOwnsNoKeyOnAnyRing()
    {
        var clock = new Clock(Fast.HeartbeatInterval);
        var services = new[] { NewService("a", time: clock), NewService("b", time: clock), NewService("c", time: clock) };
        await Task.WhenAll(services.Select(s => s.StartAsync()));
        await clock.StepUntilAsync(services, () => Converged(services), "all three see each other");
        var stateChanges = new ConcurrentQueue<Member>();
        services[0].Changed += c => { foreach (var m in c.StateChanged) stateChanges.Enqueue(m); };

        await services[1].SetStateAsync(MemberState.Draining);
        Assert.Equal(["a", "c"], services[1].Ring.Members.Select(m => m.Id)); // its own ring at once
        await clock.StepUntilAsync(services, () => services.All(s => s.Ring.Members.Count == 2), "every ring drops the draining b");
        Assert.True(Converged(services)); // ...while b stays in every view
        Assert.All(services, s => Assert.Equal(MemberState.Draining, s.Members.Single(m => m.Id == "b").State));
        Assert.Equal(("b", MemberState.Draining), (Assert.Single(stateChanges).Id, stateChanges.Single().State));
        for (var k = 0; k < 2000; k++)
        {
            var key = string.Create(CultureInfo.InvariantCulture, $"container/blob-{k}");
            var owner = services[0].Ring.OwnerOf(key).Id;
            Assert.NotEqual("b", owner);
            Assert.All(services, s => Assert.Equal(owner, s.Ring.OwnerOf(key).Id));
        }

        var record = await _store.DownloadAsync(Container, $"{_app}/instances/b");
        Assert.Equal("application/json; state=draining", record!.Properties.ContentType);
        using var json = JsonDocument.Parse(record.Data);
        Assert.Equal("draining", json.RootElement.GetProperty("state").GetString());
    }

    [Fact]
    public async Task JoiningMember_GetsKeysOnlyOnceActive()
    {
        var clock = new Clock(Fast.HeartbeatInterval);
        var a = NewService("a", time: clock);
        var standby = NewService("s", time: clock, state: MemberState.Joining);
        await Task.WhenAll(a.StartAsync(), standby.StartAsync());
        await clock.StepUntilAsync([a, standby], () => Converged([a, standby]), "a and the standby see each other");
        Assert.All(new[] { a, standby }, s => Assert.Equal(["a"], s.Ring.Members.Select(m => m.Id)));

        await standby.SetStateAsync(MemberState.Active);
        await clock.StepUntilAsync([a, standby], () => a.Ring.Members.Count == 2, "a puts the now active s on its ring");
        await Assert.ThrowsAsync<ArgumentException>(() => standby.SetStateAsync(MemberState.Joining));
    }

    [Fact]
    public async Task RecordWithoutStateOrLoad_ReadsAsAnActiveInstance()
    {
        // A record as instances wrote it before states and loads existed (and a plain JSON content type).
        await _store.CreateContainerIfNotExistsAsync(Container);
        var old = """{"id":"old","peerAddress":"http://127.0.0.1:7199/","started":"2026-01-01T00:00:00+00:00","seq":5}"""u8.ToArray();
        var written = await _store.UploadAsync(Container, $"{_app}/instances/old", old, "application/json");
        var clock = new Clock(Fast.HeartbeatInterval);
        var a = NewService("a", time: clock);
        await a.StartAsync();
        await using var observer = new MembershipObserver(_store, _app, Fast, null, clock);
        await observer.StartAsync();

        foreach (var view in new[] { a.Members, observer.Members })
        {
            var member = view.Single(m => m.Id == "old");
            Assert.Equal((MemberState.Active, null, new Uri("http://127.0.0.1:7199/")), (member.State, member.Load, member.PeerAddress));
        }

        Assert.Equal(["a", "old"], a.Ring.Members.Select(m => m.Id));
        Assert.Equal(written.ETag, (await _store.GetPropertiesAsync(Container, $"{_app}/instances/old"))!.ETag);
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

    private MembershipService NewService(string id, MembershipOptions? options = null, IBlobStore? store = null, bool logged = true,
        TimeProvider? time = null, MemberState state = MemberState.Active)
    {
        var port = 7100 + _services.Count;
        var logger = new ListLogger();
        var service = new MembershipService(store ?? _store, _app,
            new Member(id, new Uri(string.Create(CultureInfo.InvariantCulture, $"http://127.0.0.1:{port}/")), DateTimeOffset.UtcNow) { State = state },
            options ?? Fast, logged ? logger : null, time);
        _services.Add(service);
        _logs[service] = logger;
        return service;
    }

    private static string[] Ids(MembershipService s) => s.Members.Select(m => m.Id).ToArray();

    /// <summary>Every membership blob of the app, with its ETag, content type and content.</summary>
    private async Task<List<string>> SnapshotAsync()
    {
        var blobs = new List<string>();
        await foreach (var item in _store.ListAsync(Container, $"{_app}/"))
        {
            var content = await _store.DownloadAsync(Container, item.Name);
            blobs.Add($"{item.Name} {item.Properties.ETag} {item.Properties.ContentType} {System.Text.Encoding.UTF8.GetString(content!.Data)}");
        }

        return blobs;
    }

    /// <summary>True if every service's view is exactly these services.</summary>
    private static bool Converged(IReadOnlyList<MembershipService> services)
    {
        var expected = services.Select(s => s.Self.Id).Order(StringComparer.Ordinal).ToArray();
        return services.All(s => Ids(s).SequenceEqual(expected));
    }

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
