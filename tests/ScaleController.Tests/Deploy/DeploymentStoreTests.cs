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

    private DeploymentStore NewStore() => new(fixture.Store, Apps.Keys, Apps.Options);

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

        var v2 = await store.StageAsync(app, SamplePackage("node-app"), null, "two", default);
        Assert.Equal(2, v2.Deployment.Version);
        Assert.Equal(v1, await store.CurrentAsync(app, default));
        Assert.Equal(v2.Deployment, await store.MakeCurrentAsync(v2, default));
        Assert.Equal(v2.Deployment, await store.CurrentAsync(app, default));

        var v3 = await store.StageAsync(app, SamplePackage(), null, "three", default);
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
        var slow = await store.StageAsync(app, SamplePackage(), null, "slow", default);      // v2, its instances still starting
        var fast = await store.PublishAsync(app, SamplePackage("node-app"), "fast", default); // v3, current at once

        var e = await Assert.ThrowsAsync<DeployConflictException>(() => store.MakeCurrentAsync(slow, default));
        Assert.Contains("v3", e.Message, StringComparison.Ordinal);
        Assert.Equal(fast, await store.CurrentAsync(app, default));
        Assert.Null(await fixture.Store.GetPropertiesAsync(DeploymentStore.Container, $"{app}/v2.zip"));

        // Two staged at once (v4, v5); v4 becomes current first: v5 is above it, so app.json is read again and replaced.
        var v4 = await store.StageAsync(app, SamplePackage(), null, "four", default);
        var v5 = await store.StageAsync(app, SamplePackage(), null, "five", default);
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
        var slow = new DeploymentStore(gated, Apps.Keys, Apps.Options, logger: log);

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
        var apps = await new DeploymentStore(restarted, Apps.Keys).ListAppsAsync(default);

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
        var d = await NewStore().PublishAsync(app, zip, DeployService.SettingsOf(source), "x", default);

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
        var d = await NewStore().PublishAsync(app, zip, DeployService.SettingsOf(source), "x", default);
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
    [System.Runtime.Versioning.UnsupportedOSPlatform("windows")]
    public async Task A_deploy_stores_the_settings_apart_signed_the_package_without_them_and_the_extraction_writes_them_0600()
    {
        var app = Apps.NewName("settings");
        var dir = Apps.CopySample("python-app", _temp.Path);
        var d = await new DeployService(NewStore(), Apps.Options with { WorkDirectory = Path.Combine(_temp.Path, "work") }).DeployAsync(app, dir);

        var package = await fixture.Store.DownloadAsync(DeploymentStore.Container, d.Blob);
        using (var zip = new System.IO.Compression.ZipArchive(new MemoryStream(package!.Data)))
        {
            Assert.DoesNotContain(zip.Entries, e => e.FullName == "local.settings.json");
            Assert.Contains(zip.Entries, e => e.FullName == "host.json");
        }
        var stored = await fixture.Store.DownloadAsync(DeploymentStore.Container, $"{app}/v1.settings.json");
        using (var json = JsonDocument.Parse(stored!.Data))
            Assert.Equal(64, json.RootElement.GetProperty("signature").GetString()!.Length);

        var folder = await NewStore().ExtractAsync(d, Path.Combine(_temp.Path, "state"), default);
        var settings = Path.Combine(folder, "local.settings.json");
        Assert.Equal(File.ReadAllBytes(Path.Combine(dir, "local.settings.json")), File.ReadAllBytes(settings));
        Assert.Equal(UnixFileMode.UserRead | UnixFileMode.UserWrite, File.GetUnixFileMode(settings));
    }

    [Fact]
    public async Task Settings_not_signed_by_the_platform_are_refused_naming_the_blob_and_the_version_is_not_extracted()
    {
        var app = Apps.NewName("forgedsettings");
        var dir = Apps.CopySample("python-app", _temp.Path);
        var d = await new DeployService(NewStore(), Apps.Options with { WorkDirectory = Path.Combine(_temp.Path, "work") }).DeployAsync(app, dir);
        var forged = $$"""{"app":"{{app}}","version":1,"settings":"{{Convert.ToBase64String("""{"Values":{"FUNCTIONS_WORKER_RUNTIME":"python","EVIL":"1"}}"""u8.ToArray())}}"}""";
        await fixture.Store.UploadAsync(DeploymentStore.Container, $"{app}/v1.settings.json", System.Text.Encoding.UTF8.GetBytes(forged));
        var state = Path.Combine(_temp.Path, "state");

        var e = await Assert.ThrowsAsync<DeploymentStoreException>(() => NewStore().ExtractAsync(d, state, default));

        Assert.Contains($"{app}/v1.settings.json", e.Message, StringComparison.Ordinal);
        Assert.Contains("unsigned", e.Message, StringComparison.Ordinal);
        Assert.False(Directory.Exists(Path.Combine(state, "apps", app, "v1")));
    }

    [RootFact("gives the extraction to the app user's group")]
    [System.Runtime.Versioning.UnsupportedOSPlatform("windows")]
    public async Task As_root_an_extraction_is_the_platforms_with_the_app_users_group_0750_0640_settings_0600_and_another_apps_user_cannot_read_it()
    {
        var app = Apps.NewName("confined");
        var dir = Apps.CopySample("python-app", _temp.Path);
        var d = await new DeployService(NewStore(), Apps.Options with { WorkDirectory = Path.Combine(_temp.Path, "work") }).DeployAsync(app, dir);
        var state = Path.Combine(_temp.Path, "state");
        Directory.CreateDirectory(state);
        File.SetUnixFileMode(_temp.Path, File.GetUnixFileMode(_temp.Path) | UnixFileMode.OtherExecute); // /tmp/faast-store-*: 0700

        var folder = await NewStore().ExtractAsync(d, state, default);

        var own = WorkerIdentity.Ensure(WorkerIdentity.UserNameFor(app));
        var other = WorkerIdentity.Ensure(WorkerIdentity.UserNameFor(Apps.NewName("othertenant")));
        const UnixFileMode rwx = UnixFileMode.UserRead | UnixFileMode.UserWrite | UnixFileMode.UserExecute;
        Assert.Equal(rwx | UnixFileMode.GroupExecute | UnixFileMode.OtherExecute, File.GetUnixFileMode(Path.Combine(state, "apps")));
        var version = Path.GetDirectoryName(folder)!;
        foreach (var path in new[] { Path.Combine(state, "apps", app), version, folder, Path.Combine(folder, "Hello") })
        {
            Assert.Equal(rwx | UnixFileMode.GroupRead | UnixFileMode.GroupExecute, File.GetUnixFileMode(path));
            Assert.Equal((0, own.GroupId), Owner(path));
        }
        var script = Path.Combine(folder, "Hello", "__init__.py");
        Assert.Equal(UnixFileMode.UserRead | UnixFileMode.UserWrite | UnixFileMode.GroupRead, File.GetUnixFileMode(script));
        Assert.Equal((0, own.GroupId), Owner(script));
        var settings = Path.Combine(folder, "local.settings.json");
        Assert.Equal(UnixFileMode.UserRead | UnixFileMode.UserWrite, File.GetUnixFileMode(settings));
        Assert.Equal(0, Owner(settings).Uid);

        // test(1) as each user: the app's own reads its code, not its settings; another app's reads nothing of it.
        Assert.Null(own.FirstUnreadable([folder, Path.Combine(folder, "Hello"), script]));
        Assert.Equal(settings, own.FirstUnreadable([settings]));
        Assert.Equal(folder, other.FirstUnreadable([folder]));
        Assert.Equal(script, other.FirstUnreadable([script]));
    }

    private static (int Uid, int Gid) Owner(string path)
    {
        var fields = System.Diagnostics.Process.Start(new System.Diagnostics.ProcessStartInfo("stat", ["-c", "%u %g", path]) { RedirectStandardOutput = true })!
            .StandardOutput.ReadToEnd().Trim().Split(' ');
        return (int.Parse(fields[0], System.Globalization.CultureInfo.InvariantCulture), int.Parse(fields[1], System.Globalization.CultureInfo.InvariantCulture));
    }

    [Fact]
    public async Task Pruning_keeps_only_the_running_and_the_previous_versions_extraction_and_removes_crashed_work_folders()
    {
        var app = Apps.NewName("prune");
        var state = Path.Combine(_temp.Path, "state");
        var store = NewStore();
        var deployments = new List<Deployment>();
        for (var i = 0; i < 4; i++)
        {
            var d = await store.PublishAsync(app, SamplePackage(), "x", default);
            await store.ExtractAsync(d, state, default);
            deployments.Add(d);
        }
        var appRoot = Path.Combine(state, "apps", app);
        Directory.CreateDirectory(Path.Combine(appRoot, ".v5-0123456789abcdef")); // an extraction that crashed

        store.Prune(app, state, current: 4);

        Assert.Equal(["v3", "v4"], Directory.GetDirectories(appRoot).Select(Path.GetFileName).Order(StringComparer.Ordinal));
        Assert.True(File.Exists(Path.Combine(await store.ExtractAsync(deployments[3], state, default), "host.json")));
    }

    [Fact]
    public async Task An_app_json_the_platform_did_not_sign_is_refused_naming_the_blob_and_left_out_of_the_apps_a_restart_loads()
    {
        var app = Apps.NewName("forgedrecord");
        var d = await NewStore().PublishAsync(app, SamplePackage(), "x", default);
        Assert.Equal(d, await NewStore().CurrentAsync(app, default));
        var record = await fixture.Store.DownloadAsync(DeploymentStore.Container, $"{app}/app.json");
        using (var json = JsonDocument.Parse(record!.Data))
            Assert.Equal(64, json.RootElement.GetProperty("signature").GetString()!.Length);
        // A tenant with the storage account (or an older platform) writes a record of its own: unsigned.
        await fixture.Store.UploadAsync(DeploymentStore.Container, $"{app}/app.json", DeploymentStore.Serialize(d with { Version = 7 }));

        var e = await Assert.ThrowsAsync<DeploymentStoreException>(() => NewStore().CurrentAsync(app, default));

        Assert.Contains($"faast-deployments/{app}/app.json", e.Message, StringComparison.Ordinal);
        Assert.Contains("unsigned", e.Message, StringComparison.Ordinal);
        Assert.DoesNotContain(await NewStore().ListAppsAsync(default), a => a.App == app);
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
