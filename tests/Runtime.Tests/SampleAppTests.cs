using System.Net;
using System.Text;
using System.Text.Json;

namespace FaaST.Runtime.Tests;

/// <summary>The samples, unchanged, on the real host with real workers and real Azurite.</summary>
[Collection("azurite")]
public sealed class SampleAppTests(AzuriteFixture azurite)
{
    [Theory]
    [InlineData("python-app")]
    [InlineData("node-app")]
    public async Task Hello_answers_with_the_name_from_query_or_json_body(string sample)
    {
        using var app = TestApp.CopySample(sample);
        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString);
        Assert.Equal("Hello, World!", await host.Http.GetStringAsync("/api/Hello?name=World"));
        var post = await host.Http.PostAsync("/api/Hello", new StringContent("""{"name":"Json"}""", Encoding.UTF8, "application/json"));
        Assert.Equal("Hello, Json!", await post.Content.ReadAsStringAsync());
        var missing = await host.Http.GetAsync("/api/Hello");
        Assert.Equal(HttpStatusCode.BadRequest, missing.StatusCode);
        var wrongMethod = await host.Http.DeleteAsync("/api/Hello?name=x");
        Assert.Equal(HttpStatusCode.MethodNotAllowed, wrongMethod.StatusCode);
    }

    [Theory]
    [InlineData("python-app")]
    [InlineData("node-app")]
    public async Task WordCount_reads_an_input_blob_and_writes_an_output_blob(string sample)
    {
        using var app = TestApp.CopySample(sample);
        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString);
        var name = $"{sample}-{Guid.NewGuid():N}.txt";
        await host.Blobs!.CreateContainerIfNotExistsAsync("documents");
        await host.Blobs.UploadAsync("documents", name, Encoding.UTF8.GetBytes("the cat and the hat and the bat"));

        var response = await host.Http.GetAsync($"/api/wordcount/{name}");
        Assert.Equal(HttpStatusCode.OK, response.StatusCode);
        using var json = JsonDocument.Parse(await response.Content.ReadAsStringAsync());
        Assert.Equal(8, json.RootElement.GetProperty("words").GetInt32());
        Assert.Equal("the", json.RootElement.GetProperty("top")[0][0].GetString());

        var stored = await host.Blobs.DownloadAsync("wordcounts", name + ".json");
        Assert.NotNull(stored);
        using var storedJson = JsonDocument.Parse(stored.Data);
        Assert.Equal(8, storedJson.RootElement.GetProperty("words").GetInt32());
    }

    [Theory]
    [InlineData("python-app")]
    [InlineData("node-app")]
    public async Task A_missing_input_blob_reaches_the_function_as_null(string sample)
    {
        using var app = TestApp.CopySample(sample);
        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString);
        var response = await host.Http.GetAsync($"/api/wordcount/nothing-{Guid.NewGuid():N}");
        Assert.Equal(HttpStatusCode.NotFound, response.StatusCode);
        Assert.Contains("does not exist", await response.Content.ReadAsStringAsync());
    }

    [Theory]
    [InlineData("python-app")]
    [InlineData("node-app")]
    public async Task Pipeline_stage_two_fires_from_the_blob_stage_one_wrote(string sample)
    {
        using var app = TestApp.CopySample(sample);
        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString);
        var name = $"{Guid.NewGuid():N}.txt";
        var post = await host.Http.PostAsync($"/api/ingest/{name}", new StringContent("Hello   WORLD\n of  Functions"));
        Assert.Equal(HttpStatusCode.Accepted, post.StatusCode);
        string? clean = null;
        await Eventually.TrueAsync(async () =>
        {
            var blob = await host.Blobs!.DownloadAsync("pipeline-clean", name);
            clean = blob is null ? null : Encoding.UTF8.GetString(blob.Data);
            return clean is not null;
        }, "pipeline-clean/" + name);
        Assert.Equal("hello world of functions", clean);
    }

    [Theory]
    [InlineData("python-app")]
    [InlineData("node-app")]
    public async Task Blob_trigger_fires_for_a_blob_written_by_someone_else(string sample)
    {
        using var app = TestApp.CopySample(sample);
        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString);
        var name = $"external-{Guid.NewGuid():N}.txt";
        await host.Blobs!.CreateContainerIfNotExistsAsync("pipeline-raw");
        await host.Blobs.UploadAsync("pipeline-raw", name, Encoding.UTF8.GetBytes("FROM  Outside"));
        await Eventually.TrueAsync(async () => await host.Blobs.GetPropertiesAsync("pipeline-clean", name) is not null,
            "the polled blob trigger to write pipeline-clean/" + name);
        var blob = await host.Blobs.DownloadAsync("pipeline-clean", name);
        Assert.Equal("from outside", Encoding.UTF8.GetString(blob!.Data));
    }
}
