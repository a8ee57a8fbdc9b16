using System.Security.Cryptography;
using System.Text.Json;
using FaaST.ScaleController.Deploy;
using FaaST.Storage;

namespace FaaST.ScaleController.Tests.Deploy;

/// <summary>The Run-From-Package layout in a real Azurite: versions, app.json, races, restarts, extraction.</summary>
[Collection(DeployCollection.Name)]
public sealed class DeploymentStoreTests(AzuriteFixture fixture) : IDisposable
{
    private readonly TempDirectory _temp = new("faast-store-");

    public void Dispose() => _temp.Dispose();

    private DeploymentStore NewStore() => new(fixture.Store, Apps.Options);

    private MemoryStream SamplePackage(string sample = "python-app")
    {
        var zip = new MemoryStream();
        Packager.Zip(Apps.CopySample(sample, Path.Combine(_temp.Path, Guid.NewGuid().ToString("N"))), zip);
        zip.Position = 0;
        return zip;
    }

    [Fact]
    public async Task AFirstPublish_IsV1_AndAppJsonRecordsItsHashSizeAndSource()
    {
        var app = Apps.NewName("first");
        var zip = SamplePackage();
        var sha = Convert.ToHexStringLower(SHA256.HashData(zip.ToArray()));

        var d = await NewStore().PublishAsync(app, zip, "the test", default);

        Assert.Equal((app, 1, sha, zip.Length, "the test"), (d.App, d.Version, d.Sha256, d.Size, d.Source));
        var record = await fixture.Store.DownloadAsync(DeploymentStore.Container, $"{app}/app.json");
        using var json = JsonDocument.Parse(record!.Data);
        Assert.Equal(app, json.RootElement.GetProperty("app").GetString());
        Assert.Equal(1, json.RootElement.GetProperty("version").GetInt32());
        Assert.Equal(sha, json.RootElement.GetProperty("sha256").GetString());
        Assert.Equal(zip.Length, json.RootElement.GetProperty("size").GetInt64());
        Assert.Equal(d.Deployed, json.RootElement.GetProperty("deployed").GetDateTimeOffset());
        var package = await fixture.Store.DownloadAsync(DeploymentStore.Container, $"{app}/v1.zip");
        Assert.Equal(zip.ToArray(), package!.Data);
    }

    [Fact]
    public async Task AStagedVersion_IsCurrentOnlyOnceMadeCurrent_AndADiscardedOneLeavesNoPackage()
    {
        var app = Apps.NewName("stage");
        var store = NewStore();
        var v1 = await store.PublishAsync(app, SamplePackage(), "one", default);

        var v2 = await store.StageAsync(app, SamplePackage("node-app"), "two", default);
        Assert.Equal(2, v2.Deployment.Version);
        Assert.Equal(v1, await store.CurrentAsync(app, default));
        Assert.Equal(v2.Deployment, await store.MakeCurrentAsync(v2, default));
        Assert.Equal(v2.Deployment, await store.CurrentAsync(app, default));

        var v3 = await store.StageAsync(app, SamplePackage(), "three", default);
        await store.DiscardAsync(v3);
        Assert.Equal(v2.Deployment, await store.CurrentAsync(app, default));
        Assert.Null(await fixture.Store.GetPropertiesAsync(DeploymentStore.Container, $"{app}/v3.zip"));
        Assert.Equal(3, (await store.PublishAsync(app, SamplePackage(), "four", default)).Version);
    }

    [Fact]
    public async Task AStagedVersion_OvertakenByANewerCurrentOne_IsNotMadeCurrent_AndAnOlderOneIsStillReplaced()
    {
        var app = Apps.NewName("overtake");
        var store = NewStore();
        await store.PublishAsync(app, SamplePackage(), "one", default);
        var slow = await store.StageAsync(app, SamplePackage(), "slow", default);      // v2, its instances still starting
        var fast = await store.PublishAsync(app, SamplePackage("node-app"), "fast", default); // v3, current at once

        var e = await Assert.ThrowsAsync<DeployConflictException>(() => store.MakeCurrentAsync(slow, default));
        Assert.Contains("v3", e.Message, StringComparison.Ordinal);
        Assert.Equal(fast, await store.CurrentAsync(app, default));
        Assert.Null(await fixture.Store.GetPropertiesAsync(DeploymentStore.Container, $"{app}/v2.zip"));

        // Two staged at once (v4, v5); v4 becomes current first: v5 is above it, so app.json is read again and replaced.
        var v4 = await store.StageAsync(app, SamplePackage(), "four", default);
        var v5 = await store.StageAsync(app, SamplePackage(), "five", default);
        Assert.Equal((4, 5), (v4.Deployment.Version, v5.Deployment.Version));
        await store.MakeCurrentAsync(v4, default);
        Assert.Equal(v5.Deployment, await store.MakeCurrentAsync(v5, default));
        Assert.Equal(v5.Deployment, await store.CurrentAsync(app, default));
    }

    [Fact]
    public async Task ASecondPublish_IsV2_AndBecomesCurrent_KeepingV1()
    {
        var app = Apps.NewName("second");
        var store = NewStore();
        await store.PublishAsync(app, SamplePackage("python-app"), "one", default);

        var v2 = await store.PublishAsync(app, SamplePackage("node-app"), "two", default);

        Assert.Equal(2, v2.Version);
        Assert.Equal(v2, await store.CurrentAsync(app, default));
        Assert.NotNull(await fixture.Store.GetPropertiesAsync(DeploymentStore.Container, $"{app}/v1.zip"));
    }

    [Fact]
    public async Task APublishFromAStreamThatCannotSeek_StoresTheSameBytes()
    {
        var app = Apps.NewName("noseek");
        var zip = SamplePackage();

        var d = await NewStore().PublishAsync(app, new ForwardOnlyStream(zip.ToArray()), "pipe", default);

        Assert.Equal(zip.Length, d.Size);
        Assert.Equal(zip.ToArray(), (await fixture.Store.DownloadAsync(DeploymentStore.Container, d.Blob))!.Data);
    }

    [Fact]
    public async Task TwoPublishesAtOnce_GetTwoDistinctVersions_AndTheHigherIsCurrent()
    {
        var app = Apps.NewName("race");
        for (var round = 0; round < 3; round++)
        {
            var packages = new[] { SamplePackage("python-app"), SamplePackage("node-app") };
            var results = await Task.WhenAll(packages.Select((p, i) => Task.Run(() => NewStore().PublishAsync(app, p, $"racer {i}", default))));

            Assert.NotEqual(results[0].Version, results[1].Version);
            var current = await NewStore().CurrentAsync(app, default);
            Assert.Equal(results.Max(r => r.Version), current!.Version);
            foreach (var r in results)
            {
                var stored = await fixture.Store.DownloadAsync(DeploymentStore.Container, r.Blob);
                Assert.Equal(r.Sha256, Convert.ToHexStringLower(SHA256.HashData(stored!.Data)));
            }
        }
    }

    [Fact]
    public async Task ADeployerThatLosesTheRaceForAppJson_DropsItsPackageAndTakesTheNextVersion()
    {
        var app = Apps.NewName("loser");
        var gated = new GatedStore(fixture.Store, DeploymentStore.RecordBlob(app));
        var log = new ListLogger();
        var slow = new DeploymentStore(gated, Apps.Options, logger: log);

        var loser = slow.PublishAsync(app, SamplePackage("python-app"), "slow", default);
        await gated.Arrived.Task.WaitAsync(TimeSpan.FromSeconds(30)); // v1.zip written, app.json not yet
        var winner = await NewStore().PublishAsync(app, SamplePackage("node-app"), "fast", default);
        gated.Open.SetResult();
        var second = await loser;

        Assert.Equal((2, 3), (winner.Version, second.Version));
        Assert.Equal(second, await NewStore().CurrentAsync(app, default));
        Assert.Null(await fixture.Store.GetPropertiesAsync(DeploymentStore.Container, $"{app}/v1.zip")); // never current: removed
        Assert.Contains(log.Entries, e => e.EventId == 8051);
    }

    [Fact]
    public async Task ARestartedStore_ListsEveryDeployedAppWithItsCurrentVersion()
    {
        var a = Apps.NewName("lista");
        var b = Apps.NewName("listb");
        await NewStore().PublishAsync(a, SamplePackage(), "x", default);
        await NewStore().PublishAsync(b, SamplePackage(), "x", default);
        var b2 = await NewStore().PublishAsync(b, SamplePackage("node-app"), "y", default);

        using var restarted = new BlobStore(fixture.ConnectionString);
        var apps = await new DeploymentStore(restarted).ListAppsAsync(default);

        Assert.Equal(1, apps.Single(d => d.App == a).Version);
        Assert.Equal(b2, apps.Single(d => d.App == b));
    }

    [Fact]
    public async Task AnAppNeverDeployed_HasNoCurrentDeployment() =>
        Assert.Null(await NewStore().CurrentAsync(Apps.NewName("never"), default));

    [Fact]
    public async Task ACorruptAppJson_IsAnErrorNamingTheBlob()
    {
        var app = Apps.NewName("corrupt");
        await NewStore().PublishAsync(app, SamplePackage(), "x", default);
        await fixture.Store.UploadAsync(DeploymentStore.Container, $"{app}/app.json", """{"app":"x"}"""u8.ToArray());

        var e = await Assert.ThrowsAsync<DeploymentStoreException>(() => NewStore().CurrentAsync(app, default));

        Assert.Contains($"faast-deployments/{app}/app.json", e.Message, StringComparison.Ordinal);
    }

    [Fact]
    public async Task Extract_GivesTheAppFolderNamedAfterTheApp_WithEveryFileByteForByte()
    {
        var app = Apps.NewName("extract");
        var source = Apps.CopySample("node-app", _temp.Path);
        var zip = new MemoryStream();
        Packager.Zip(source, zip);
        zip.Position = 0;
        var d = await NewStore().PublishAsync(app, zip, "x", default);

        var folder = await NewStore().ExtractAsync(d, Path.Combine(_temp.Path, "state"), default);

        Assert.Equal(Path.Combine(_temp.Path, "state", "apps", app, "v1", app), folder);
        Apps.AssertSameFiles(source, folder);
    }

    [Fact]
    public async Task TwoExtractionsAtOnce_EndInOneCompleteFolder()
    {
        var app = Apps.NewName("twice");
        var source = Apps.CopySample("python-app", _temp.Path);
        var zip = new MemoryStream();
        Packager.Zip(source, zip);
        zip.Position = 0;
        var d = await NewStore().PublishAsync(app, zip, "x", default);
        var state = Path.Combine(_temp.Path, "state");

        var folders = await Task.WhenAll(Enumerable.Range(0, 4).Select(_ => Task.Run(() => NewStore().ExtractAsync(d, state, default))));

        Assert.Single(folders.Distinct());
        Apps.AssertSameFiles(source, folders[0]);
        Assert.Equal([Path.Combine(state, "apps", app, "v1")], Directory.GetDirectories(Path.Combine(state, "apps", app)));
    }

    [Fact]
    public async Task Extract_ReusesACompleteExtraction_WithoutStorage()
    {
        var app = Apps.NewName("reuse");
        var d = await NewStore().PublishAsync(app, SamplePackage(), "x", default);
        var state = Path.Combine(_temp.Path, "state");
        var first = await NewStore().ExtractAsync(d, state, default);
        await fixture.Store.DeleteAsync(DeploymentStore.Container, d.Blob);

        var second = await NewStore().ExtractAsync(d, state, default);

        Assert.Equal(first, second);
        Assert.True(File.Exists(Path.Combine(second, "host.json")));
    }

    [Fact]
    public async Task Extract_RefusesAPackageWhoseHashIsNotTheRecords()
    {
        var app = Apps.NewName("tamper");
        var d = await NewStore().PublishAsync(app, SamplePackage(), "x", default);
        await fixture.Store.UploadAsync(DeploymentStore.Container, d.Blob, SamplePackage("node-app").ToArray());
        var state = Path.Combine(_temp.Path, "state");

        var e = await Assert.ThrowsAsync<DeploymentStoreException>(() => NewStore().ExtractAsync(d, state, default));

        Assert.Contains(d.Blob, e.Message, StringComparison.Ordinal);
        Assert.Contains("SHA-256", e.Message, StringComparison.Ordinal);
        Assert.False(Directory.Exists(Path.Combine(state, "apps", app, "v1")));
    }

    [Fact]
    public async Task AnInvalidAppName_IsRefusedBeforeStorage()
    {
        var e = await Assert.ThrowsAsync<ArgumentException>(() => NewStore().PublishAsync("Bad_Name", SamplePackage(), "x", default));

        Assert.Contains("lowercase", e.Message, StringComparison.Ordinal);
    }

    /// <summary>A stream that reads forward only, like a request body.</summary>
    private sealed class ForwardOnlyStream(byte[] data) : MemoryStream(data)
    {
        public override bool CanSeek => false;

        public override long Seek(long offset, SeekOrigin loc) => throw new NotSupportedException();

        public override long Position
        {
            get => base.Position;
            set => throw new NotSupportedException();
        }

        public override long Length => throw new NotSupportedException();
    }
}
