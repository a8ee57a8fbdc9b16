using System.Globalization;
using Xunit.Abstractions;

namespace FaaST.Runtime.Tests;

/// <summary>The host's memory after large request bodies, in a host process of its own (as `./faast start` runs it).</summary>
[Collection("azurite")]
public sealed class BodyMemoryTests(AzuriteFixture azurite, ITestOutputHelper output)
{
    private const long MiB = 1024 * 1024;

    [Fact]
    public async Task The_hosts_memory_comes_back_after_a_100_MiB_request_body()
    {
        using var app = new TestApp("python").Function("Length", TestApp.HttpFunctionJson,
            ("__init__.py", "def main(req):\n    return str(len(req.get_body()))\n"));
        await using var host = await HostProcess.StartAsync(app.Directory, azurite.ConnectionString, ["--no-peers"], httpTimeout: TimeSpan.FromSeconds(120));

        // Warm up the request path, then take the baseline.
        var small = new byte[64 * 1024];
        for (var i = 0; i < 3; i++)
            Assert.Equal("65536", await (await host.Http.PostAsync("api/Length", new ByteArrayContent(small))).Content.ReadAsStringAsync());
        var baseline = host.ResidentBytes();

        var body = new byte[100 * MiB];
        Random.Shared.NextBytes(body);
        var response = await host.Http.PostAsync("api/Length", new ByteArrayContent(body));
        Assert.Equal((100 * MiB).ToString(CultureInfo.InvariantCulture), await response.Content.ReadAsStringAsync());
        var right = host.ResidentBytes();

        // What is resident once the request is done (freed memory goes back to the kernel as the
        // runtime trims it; the bound is on memory, the wait only lets the trimming happen).
        var after = right;
        for (var i = 0; i < 100 && after - baseline >= 200 * MiB; i++)
        {
            await Task.Delay(100);
            after = host.ResidentBytes();
        }
        output.WriteLine($"host RSS: baseline {baseline / MiB} MiB, right after the 100 MiB POST {right / MiB} MiB, settled {after / MiB} MiB");
        Assert.True(after - baseline < 200 * MiB,
            $"the host kept {(after - baseline) / MiB} MiB more than before the 100 MiB request (baseline {baseline / MiB} MiB, now {after / MiB} MiB)");
    }
}
