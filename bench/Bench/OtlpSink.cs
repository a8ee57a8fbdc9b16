using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Hosting;
using Microsoft.Extensions.Logging;

namespace FaaST.Bench;

/// <summary>
/// An OTLP/HTTP collector on loopback that accepts and drops what it is sent, so that a host can
/// run with its OTLP exporter on (the cost measured is the host's, not a collector's).
/// </summary>
public sealed class OtlpSink : IAsyncDisposable
{
    private readonly WebApplication _web;
    private long _requests;

    private OtlpSink(WebApplication web) => _web = web;

    public string Endpoint => _web.Urls.Single();

    /// <summary>Export requests received (traces and metrics).</summary>
    public long Requests => Interlocked.Read(ref _requests);

    public static async Task<OtlpSink> StartAsync()
    {
        var builder = WebApplication.CreateSlimBuilder();
        builder.WebHost.UseUrls("http://127.0.0.1:0");
        builder.Logging.ClearProviders();
        var sink = new OtlpSink(builder.Build());
        sink._web.MapPost("/v1/{signal}", async context =>
        {
            await context.Request.Body.CopyToAsync(Stream.Null);
            Interlocked.Increment(ref sink._requests);
            context.Response.ContentType = "application/x-protobuf";
        });
        await sink._web.StartAsync();
        return sink;
    }

    public async ValueTask DisposeAsync()
    {
        await _web.StopAsync();
        await _web.DisposeAsync();
    }
}
