using FaaST.ScaleController.Deploy;

namespace FaaST.ScaleController.Tests.Deploy;

/// <summary>Deploys as the platform runs them, on a real Azurite: good ones publish, bad ones change nothing.</summary>
[Collection(DeployCollection.Name)]
public sealed class DeployServiceTests(AzuriteFixture fixture) : IDisposable
{
    private readonly TempDirectory _temp = new("faast-deploy-");

    public void Dispose() => _temp.Dispose();

    private DeployService NewService() =>
        new(new DeploymentStore(fixture.Store, Apps.Keys, Apps.Options), Apps.Options with { WorkDirectory = Path.Combine(_temp.Path, "work") });

    [Fact]
    public async Task ASampleDeploysAsV1_AndARedeployAsV2_UpdatingAppJson()
    {
        var app = Apps.NewName("sample");
        var dir = Apps.CopySample("python-app", _temp.Path);

        var v1 = await NewService().DeployAsync(app, dir);
        File.AppendAllText(Path.Combine(dir, "Hello", "__init__.py"), "\n# v2\n");
        var v2 = await NewService().DeployAsync(app, dir);

        Assert.Equal((1, 2), (v1.Version, v2.Version));
        Assert.NotEqual(v1.Sha256, v2.Sha256);
        Assert.Equal(v2, await new DeploymentStore(fixture.Store, Apps.Keys).CurrentAsync(app));
        Assert.Equal(Path.GetFullPath(dir), v2.Source);
    }

    [Fact]
    public async Task AnUploadedZip_Deploys_AndExtractsToTheSameFiles()
    {
        var app = Apps.NewName("upload");
        var dir = Apps.CopySample("node-app", _temp.Path);
        var zip = new MemoryStream();
        Packager.Zip(dir, zip, includeSettings: true);
        zip.Position = 0;

        var d = await NewService().DeployAsync(app, zip);
        var folder = await new DeploymentStore(fixture.Store, Apps.Keys).ExtractAsync(d, Path.Combine(_temp.Path, "state"));

        Assert.Equal("upload", d.Source);
        Apps.AssertSameFiles(dir, folder);
    }

    [Theory]
    [InlineData("Hello/function.json", """{ "scriptFile": "__init__.py", "bindings": [ { "type": "httpTrigger", "direction": "sideways", "name": "req" } ] }""", "bindings[0].direction")]
    [InlineData("faast.json", """{ "cache": { "memoryLimit": "lots" } }""", "cache.memoryLimit")]
    [InlineData("host.json", """{ "version": "2.0", "functionTimeout": "99:00:00" }""", "functionTimeout")]
    [InlineData("local.settings.json", """{ "Values": { "FUNCTIONS_WORKER_RUNTIME": "python", "FUNCTIONS_WORKER_PROCESS_COUNT": "lots" } }""", "Values.FUNCTIONS_WORKER_PROCESS_COUNT")]
    public async Task ABrokenFile_IsRefusedNamingFileAndKey_AndStorageIsUnchanged(string file, string content, string key)
    {
        var app = Apps.NewName("broken");
        var dir = Apps.CopySample("python-app", _temp.Path);
        await NewService().DeployAsync(app, dir);
        var before = await Apps.SnapshotAsync(fixture.Store, app);
        File.WriteAllText(Path.Combine(dir, file), content);

        var e = await Assert.ThrowsAsync<DeployValidationException>(() => NewService().DeployAsync(app, dir));

        Assert.Equal((file, key), (e.File, e.Key));
        var after = await Apps.SnapshotAsync(fixture.Store, app);
        Assert.Equal(before.Blobs, after.Blobs);
        Assert.Equal(before.Record, after.Record);
        Assert.Equal(3, before.Blobs.Count); // app.json, v1.zip and v1.settings.json
    }

    [Theory]
    [InlineData("FAAST_QUEUE_MESSAGE_LEASE", "1s")]
    [InlineData("AzureWebJobsSecretStorageType", "files")]
    [InlineData("OTEL_TRACES_EXPORTER", "zipkin")]
    public async Task ASettingAnInstanceRefusesAtStart_IsRefusedAtDeployNamingIt_AndStorageIsUnchanged(string setting, string value)
    {
        // Before issue 19 these passed validation, became current, and every instance of the version exited at start.
        var app = Apps.NewName("startcheck");
        var dir = Apps.CopySample("python-app", _temp.Path);
        await NewService().DeployAsync(app, dir);
        var before = await Apps.SnapshotAsync(fixture.Store, app);
        var settings = Path.Combine(dir, "local.settings.json");
        var json = System.Text.Json.Nodes.JsonNode.Parse(File.ReadAllText(settings))!;
        json["Values"]![setting] = value;
        File.WriteAllText(settings, json.ToJsonString());

        var e = await Assert.ThrowsAsync<DeployValidationException>(() => NewService().DeployAsync(app, dir));

        Assert.Equal("local.settings.json", e.File);
        Assert.Contains(setting, e.Message, StringComparison.Ordinal);
        var after = await Apps.SnapshotAsync(fixture.Store, app);
        Assert.Equal(before.Blobs, after.Blobs);
        Assert.Equal(before.Record, after.Record);
    }

    [Fact]
    public async Task AStagedUpload_IsStoredButNotCurrent()
    {
        var app = Apps.NewName("staged");
        var dir = Apps.CopySample("python-app", _temp.Path);
        var v1 = await NewService().DeployAsync(app, dir);
        var zip = new MemoryStream();
        Packager.Zip(dir, zip);
        zip.Position = 0;

        var staged = await NewService().StageAsync(app, zip);

        Assert.Equal(2, staged.Deployment.Version);
        Assert.Equal(v1, await new DeploymentStore(fixture.Store, Apps.Keys).CurrentAsync(app));
        Assert.NotNull(await fixture.Store.GetPropertiesAsync(DeploymentStore.Container, $"{app}/v2.zip"));
    }

    [Fact]
    public async Task ABrokenFirstDeploy_WritesNothing()
    {
        var app = Apps.NewName("never");
        var dir = Apps.CopySample("node-app", _temp.Path);
        File.Delete(Path.Combine(dir, "Hello", "index.js"));

        var e = await Assert.ThrowsAsync<DeployValidationException>(() => NewService().DeployAsync(app, dir));

        Assert.Equal(("Hello/function.json", "scriptFile"), (e.File, e.Key));
        var after = await Apps.SnapshotAsync(fixture.Store, app);
        Assert.Empty(after.Blobs);
        Assert.Null(after.Record);
    }

    [Fact]
    public async Task AZipSlipUpload_IsRefused_AndStorageIsUnchanged()
    {
        var app = Apps.NewName("slip");
        await NewService().DeployAsync(app, Apps.CopySample("python-app", _temp.Path));
        var before = await Apps.SnapshotAsync(fixture.Store, app);
        var evil = Apps.Zip(("host.json", """{ "version": "2.0" }"""), ("../../escaped.txt", "out"));

        var e = await Assert.ThrowsAsync<PackageException>(() => NewService().DeployAsync(app, evil));

        Assert.Equal("../../escaped.txt", e.Entry);
        var after = await Apps.SnapshotAsync(fixture.Store, app);
        Assert.Equal(before.Blobs, after.Blobs);
        Assert.Equal(before.Record, after.Record);
        Assert.Empty(Directory.GetFiles(_temp.Path, "escaped.txt", SearchOption.AllDirectories));
    }

    [Fact]
    public async Task AFolderWithALinkOutOfIt_IsRefused_AndStorageIsUnchanged()
    {
        var app = Apps.NewName("link");
        var dir = Apps.CopySample("node-app", _temp.Path);
        await NewService().DeployAsync(app, dir);
        var before = await Apps.SnapshotAsync(fixture.Store, app);
        File.CreateSymbolicLink(Path.Combine(dir, "passwd"), "/etc/passwd");

        var e = await Assert.ThrowsAsync<PackageException>(() => NewService().DeployAsync(app, dir));

        Assert.Equal("passwd", e.Entry);
        var after = await Apps.SnapshotAsync(fixture.Store, app);
        Assert.Equal(before.Blobs, after.Blobs);
        Assert.Equal(before.Record, after.Record);
    }

    [Fact]
    public async Task AnInvalidAppName_IsRefused_BeforeTheUploadIsRead()
    {
        var upload = new MemoryStream(new byte[10]);

        var e = await Assert.ThrowsAsync<ArgumentException>(() => NewService().DeployAsync("My App", upload));

        Assert.Contains("lowercase letters", e.Message, StringComparison.Ordinal);
        Assert.Equal(0, upload.Position);
    }

    [Fact]
    public async Task ADeploy_LeavesNoTemporaryFolderBehind()
    {
        var app = Apps.NewName("clean");
        await NewService().DeployAsync(app, Apps.CopySample("node-app", _temp.Path));

        Assert.Empty(Directory.GetFileSystemEntries(Path.Combine(_temp.Path, "work")));
    }
}
