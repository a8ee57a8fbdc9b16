using System.Net;
using System.Security.Cryptography;
using Xunit.Abstractions;

namespace FaaST.ScaleController.Tests.Frontend;

/// <summary>Runs alone: it measures the process's allocations, which tests running beside it would add to.</summary>
[CollectionDefinition(nameof(StreamingTests), DisableParallelization = true)]
public sealed class StreamingCollection;

/// <summary>
/// 100 MB bodies through the frontend both ways, checked by SHA-256. The frontend, the instance and the client
/// share this process, so the allocations counted include all three: a body that were buffered anywhere
/// would show up as at least its size.
/// </summary>
[Collection(nameof(StreamingTests))]
public sealed class StreamingTests(ITestOutputHelper output)
{
    private const long Size = 100L * 1024 * 1024;

    [Fact]
    public async Task A_100_MB_request_body_streams_to_the_instance_intact_without_being_buffered()
    {
        await using var backend = await Backend.StartAsync("a");
        await using var host = await FrontendHost.StartAsync();
        host.Frontend.AddInstance(backend.Endpoint);
        var expected = Payload.Sha256(Size);
        await host.Client.PostAsync("/upload", new ByteArrayContent([1, 2, 3])); // warm the connections

        var before = GC.GetTotalAllocatedBytes(precise: true);
        using var response = await host.Client.PostAsync("/upload", new Payload.Content(Size));
        var answer = await response.Content.ReadAsStringAsync();
        var allocated = GC.GetTotalAllocatedBytes(precise: true) - before;
        output.WriteLine($"allocated {allocated:N0} bytes for a {Size:N0}-byte request body");

        Assert.Equal(HttpStatusCode.OK, response.StatusCode);
        Assert.Equal($"{Size} {expected}", answer);
        Assert.True(allocated < Size / 8, $"{allocated:N0} bytes allocated while streaming a {Size:N0}-byte body");
    }

    [Fact]
    public async Task A_100_MB_response_streams_back_to_the_client_intact_without_being_buffered()
    {
        await using var backend = await Backend.StartAsync("a");
        await using var host = await FrontendHost.StartAsync();
        host.Frontend.AddInstance(backend.Endpoint);
        var expected = Payload.Sha256(Size);
        (await host.Client.GetAsync("/download?size=3")).Dispose(); // warm the connections
        var buffer = new byte[64 * 1024];

        var before = GC.GetTotalAllocatedBytes(precise: true);
        using var response = await host.Client.GetAsync($"/download?size={Size}", HttpCompletionOption.ResponseHeadersRead);
        using var sha = IncrementalHash.CreateHash(HashAlgorithmName.SHA256);
        long total = 0;
        await using (var stream = await response.Content.ReadAsStreamAsync())
        {
            int read;
            while ((read = await stream.ReadAsync(buffer)) > 0)
            {
                sha.AppendData(buffer, 0, read);
                total += read;
            }
        }
        var allocated = GC.GetTotalAllocatedBytes(precise: true) - before;
        output.WriteLine($"allocated {allocated:N0} bytes for a {Size:N0}-byte response body");

        Assert.Equal(HttpStatusCode.OK, response.StatusCode);
        Assert.Equal(Size, response.Content.Headers.ContentLength);
        Assert.Equal(Size, total);
        Assert.Equal(expected, Convert.ToHexString(sha.GetHashAndReset()));
        Assert.True(allocated < Size / 8, $"{allocated:N0} bytes allocated while streaming a {Size:N0}-byte body");
    }
}
