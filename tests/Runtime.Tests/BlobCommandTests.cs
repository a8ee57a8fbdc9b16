using System.Globalization;

namespace FaaST.Runtime.Tests;

/// <summary>`./faast blob ls|put|get APPDIR ...` (the host's `blob` command) against real storage: the Azurite of a
/// running host of the app (development storage), or the connection string of the app's settings.</summary>
[Collection("azurite")]
public sealed class BlobCommandTests(AzuriteFixture azurite)
{
    private static readonly Dictionary<string, string> DevelopmentStorage = new() { ["AzureWebJobsStorage"] = "UseDevelopmentStorage=true" };

    [Fact]
    public async Task Put_get_and_ls_reach_the_running_hosts_azurite_and_the_sample_reads_the_blob_as_a_miss_then_a_hit()
    {
        // Under its own name: as root, the workers run as faast-python-app (one user, not one per run).
        using var app = TestApp.CopySample("python-app", keepName: true);
        await using var host = await HostProcess.StartAsync(app.Directory, "UseDevelopmentStorage=true", ["--azurite-in-memory", "--no-peers"]);

        var put = await LauncherTests.HostAsync(["blob", "put", app.Directory, "documents/a.txt", "-"], DevelopmentStorage, "the cat and the hat");
        Assert.True(put.ExitCode == 0, put.StandardError);
        Assert.StartsWith("put documents/a.txt: 19 bytes, ETag ", put.StandardOutput, StringComparison.Ordinal);

        var get = await LauncherTests.HostAsync(["blob", "get", app.Directory, "documents/a.txt"], DevelopmentStorage);
        Assert.Equal(0, get.ExitCode);
        Assert.Equal("the cat and the hat", get.StandardOutput);

        var ls = await LauncherTests.HostAsync(["blob", "ls", app.Directory, "documents"], DevelopmentStorage);
        Assert.Equal(0, ls.ExitCode);
        Assert.Matches(@"^ +19  \d{4}-\d\d-\d\d \d\d:\d\d:\d\d  documents/a\.txt\n$", ls.StandardOutput);

        // The quick start: the sample's WordCount reads documents/a.txt twice; the cache misses, then hits.
        Assert.Contains("\"words\": 5", await host.Http.GetStringAsync("api/wordcount/a.txt"), StringComparison.Ordinal);
        var first = await host.Http.GetCacheStatusAsync();
        Assert.Contains("\"words\": 5", await host.Http.GetStringAsync("api/wordcount/a.txt"), StringComparison.Ordinal);
        var second = await host.Http.GetCacheStatusAsync();
        Assert.Equal(1, first.Reads.GetValueOrDefault("local_miss"));
        Assert.Equal(first.Reads.GetValueOrDefault("local_hit") + 1, second.Reads.GetValueOrDefault("local_hit"));

        // What the function wrote is there to get.
        var counts = await LauncherTests.HostAsync(["blob", "get", app.Directory, "wordcounts/a.txt.json"], DevelopmentStorage);
        Assert.Equal(0, counts.ExitCode);
        Assert.Contains("\"blob\": \"documents/a.txt\"", counts.StandardOutput, StringComparison.Ordinal);

        // A put into pipeline-raw/ is stage 1's input: stage 2 (Normalize) writes pipeline-clean/ once its scan finds it.
        var raw = await LauncherTests.HostAsync(["blob", "put", app.Directory, "pipeline-raw/b.txt", "-"], DevelopmentStorage, "Hello   WORLD");
        Assert.Equal(0, raw.ExitCode);
        ProcessRun clean;
        var deadline = DateTime.UtcNow.AddSeconds(60);
        do
        {
            await Task.Delay(250);
            clean = await LauncherTests.HostAsync(["blob", "get", app.Directory, "pipeline-clean/b.txt"], DevelopmentStorage);
        }
        while (clean.ExitCode != 0 && DateTime.UtcNow < deadline);
        Assert.Equal("hello world", clean.StandardOutput);

        await host.StopAsync();
        // The host is gone, and with it its Azurite: the helper says so instead of failing to connect.
        Assert.False(File.Exists(DevelopmentStorageFile.PathOf(app.Directory)));
        var after = await LauncherTests.HostAsync(["blob", "ls", app.Directory, "documents"], DevelopmentStorage);
        Assert.Equal(4, after.ExitCode);
        Assert.Contains("no host of this app is running", after.StandardError, StringComparison.Ordinal);
        Assert.Single(after.StandardError.Split('\n', StringSplitOptions.RemoveEmptyEntries));
    }

    [Fact]
    public async Task With_a_connection_string_in_the_settings_put_and_get_need_no_host_and_files_round_trip()
    {
        using var app = TestApp.CopySample("python-app");
        using var files = new TempDirectory("faast-blob-files-");
        var source = Path.Combine(files.Path, "in.bin");
        var content = new byte[300_000];
        new Random(7).NextBytes(content);
        File.WriteAllBytes(source, content);
        var storage = new Dictionary<string, string> { ["AzureWebJobsStorage"] = azurite.ConnectionString };
        var container = "blobcli" + Guid.NewGuid().ToString("N")[..8];

        var put = await LauncherTests.HostAsync(["blob", "put", app.Directory, $"{container}/dir/in.bin", source], storage);
        Assert.True(put.ExitCode == 0, put.StandardError);
        Assert.StartsWith(string.Create(CultureInfo.InvariantCulture, $"put {container}/dir/in.bin: {content.Length} bytes"), put.StandardOutput, StringComparison.Ordinal);

        var target = Path.Combine(files.Path, "out.bin");
        var get = await LauncherTests.HostAsync(["blob", "get", app.Directory, $"{container}/dir/in.bin", target], storage);
        Assert.Equal(0, get.ExitCode);
        Assert.Equal(content, File.ReadAllBytes(target));

        var missing = await LauncherTests.HostAsync(["blob", "get", app.Directory, $"{container}/nope.bin", Path.Combine(files.Path, "nope.bin")], storage);
        Assert.Equal(1, missing.ExitCode);
        Assert.Contains($"there is no blob {container}/nope.bin", missing.StandardError, StringComparison.Ordinal);
        Assert.False(File.Exists(Path.Combine(files.Path, "nope.bin")));
        Assert.Equal([target, source], Directory.GetFiles(files.Path).Order().Reverse());
    }

    [Theory]
    [InlineData("\"Bad_Name/x\": Invalid container name 'Bad_Name'", "put", "Bad_Name/x")]
    [InlineData("\"documents\" names no blob: give CONTAINER/BLOB", "get", "documents")]
    public async Task A_bad_path_is_one_line_naming_it(string error, string verb, string path)
    {
        using var app = TestApp.CopySample("python-app");
        var run = await LauncherTests.HostAsync(["blob", verb, app.Directory, path], DevelopmentStorage, "x");
        Assert.Equal(2, run.ExitCode);
        Assert.StartsWith("faast: " + error, run.StandardError, StringComparison.Ordinal);
        Assert.Single(run.StandardError.Split('\n', StringSplitOptions.RemoveEmptyEntries));
    }
}
