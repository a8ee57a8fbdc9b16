using System.Diagnostics;
using System.Net;
using System.Text;
using System.Text.Json;

namespace FaaST.Runtime.Tests;

/// <summary>
/// samples/node-ts-app, built as its author would (npm run build: tsc from npm) into a temporary copy,
/// on the real host with real Node workers and real Azurite. Its functions are TypeScript default exports
/// (compiled to exports.default) with scriptFile pointing into dist/, as Microsoft's v3 TypeScript template.
/// </summary>
[Collection("azurite")]
public sealed class TypeScriptAppTests(AzuriteFixture azurite)
{
    [Fact]
    public async Task A_TypeScript_app_built_with_tsc_answers_HTTP_and_reads_and_writes_blobs()
    {
        using var app = TestApp.CopySample("node-ts-app");
        await BuildAsync(app.Directory);
        Assert.True(File.Exists(Path.Combine(app.Directory, "dist", "Hello", "index.js")), "tsc wrote dist/Hello/index.js");

        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString);
        var hello = await host.Http.GetAsync("/api/Hello?name=World");
        Assert.True(hello.StatusCode == HttpStatusCode.OK, $"{(int)hello.StatusCode}: {await hello.Content.ReadAsStringAsync()}");
        Assert.Equal("Hello, World!", await hello.Content.ReadAsStringAsync());
        var post = await host.Http.PostAsync("/api/Hello", new StringContent("""{"name":"Json"}""", Encoding.UTF8, "application/json"));
        Assert.Equal("Hello, Json!", await post.Content.ReadAsStringAsync());
        Assert.Equal(HttpStatusCode.BadRequest, (await host.Http.GetAsync("/api/Hello")).StatusCode);

        var name = $"ts-{Guid.NewGuid():N}.txt";
        await host.Blobs!.CreateContainerIfNotExistsAsync("documents");
        await host.Blobs.UploadAsync("documents", name, Encoding.UTF8.GetBytes("the cat and the hat and the bat"));
        var counted = await host.Http.GetAsync($"/api/wordcount/{name}");
        var text = await counted.Content.ReadAsStringAsync();
        Assert.True(counted.StatusCode == HttpStatusCode.OK, $"{(int)counted.StatusCode}: {text}");
        using (var json = JsonDocument.Parse(text))
        {
            Assert.Equal(8, json.RootElement.GetProperty("words").GetInt32());
            Assert.Equal("the", json.RootElement.GetProperty("top")[0][0].GetString());
        }
        var stored = await host.Blobs.DownloadAsync("wordcounts", name + ".json");
        Assert.NotNull(stored);
        using var storedJson = JsonDocument.Parse(stored.Data);
        Assert.Equal(8, storedJson.RootElement.GetProperty("words").GetInt32());

        var missing = await host.Http.GetAsync($"/api/wordcount/nothing-{Guid.NewGuid():N}");
        Assert.Equal(HttpStatusCode.NotFound, missing.StatusCode);
    }

    [Fact]
    public async Task A_TypeScript_app_that_was_not_built_names_the_missing_dist_script()
    {
        using var app = TestApp.CopySample("node-ts-app");
        DeleteBuildOutput(app.Directory);
        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString);
        var response = await host.Http.GetAsync("/api/Hello?name=World");
        Assert.Equal(HttpStatusCode.InternalServerError, response.StatusCode);
        var body = await response.Content.ReadAsStringAsync();
        Assert.Contains("../dist/Hello/index.js", body);
        Assert.Contains("does not exist", body);
    }

    private static void DeleteBuildOutput(string app)
    {
        // A checkout where someone built the sample in place: the copy starts unbuilt all the same.
        foreach (var dir in new[] { "dist", "node_modules" })
            if (Directory.Exists(Path.Combine(app, dir)))
                Directory.Delete(Path.Combine(app, dir), recursive: true);
    }

    /// <summary>npm run build in the copy, with the repository's packages (typescript, @azure/functions types)
    /// linked in as node_modules, as ./faast setup installed them.</summary>
    private static async Task BuildAsync(string app)
    {
        DeleteBuildOutput(app);
        var packages = Path.Combine(Repo.Root, "node_modules");
        if (!File.Exists(Path.Combine(packages, "typescript", "bin", "tsc")))
            Assert.Fail($"{packages}/typescript is not installed: run ./faast setup (npm ci installs the root package.json's devDependencies)");
        Directory.CreateSymbolicLink(Path.Combine(app, "node_modules"), packages);
        var start = new ProcessStartInfo("npm", ["run", "build"])
        {
            WorkingDirectory = app,
            RedirectStandardOutput = true,
            RedirectStandardError = true,
        };
        using var npm = Process.Start(start)!;
        var stdout = npm.StandardOutput.ReadToEndAsync();
        var stderr = npm.StandardError.ReadToEndAsync();
        using var timeout = new CancellationTokenSource(TimeSpan.FromMinutes(3));
        try
        {
            await npm.WaitForExitAsync(timeout.Token);
        }
        catch (OperationCanceledException)
        {
            npm.Kill(entireProcessTree: true);
            Assert.Fail($"npm run build did not finish within 3 minutes in {app}");
        }
        Assert.True(npm.ExitCode == 0, $"npm run build failed ({npm.ExitCode}):\n{await stdout}\n{await stderr}");
    }
}
