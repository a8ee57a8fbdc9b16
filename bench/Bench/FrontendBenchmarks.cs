using System.Net;
using BenchmarkDotNet.Attributes;
using FaaST.ScaleController.Frontend;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Hosting;
using Microsoft.AspNetCore.Http;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Logging;
using Microsoft.Extensions.Logging.Abstractions;
using Yarp.ReverseProxy.Forwarder;

namespace FaaST.Bench;

/// <summary>
/// The frontend's per-request path (issue 20, "the frontend hop"): one no-op GET forwarded to a real loopback
/// Kestrel instance that answers "ok", by the hand-written forwarder (<see cref="AppFrontend.ForwardAsync"/>) and by
/// YARP's <see cref="IHttpForwarder"/> with a transformer that does what ours does (the client's Host kept,
/// X-Forwarded-For/Proto/Host added, hop-by-hop headers dropped), over the same pooled connection settings. The
/// time includes the loopback round trip and the instance's own work (the same in both); the allocated bytes per
/// operation include the instance's side too (also the same in both), so differences between the rows are the
/// forwarders'. The request context is built fresh per operation as Kestrel would hand one over.
/// </summary>
[MemoryDiagnoser]
public class FrontendBenchmarks
{
    private const string Path = "/api/Noop";
    private static readonly ReadOnlyMemory<byte> Ok = "ok"u8.ToArray();

    private WebApplication _instance = null!;
    private AppFrontend _frontend = null!;
    private IHttpForwarder _yarp = null!;
    private ServiceProvider _yarpServices = null!;
    private HttpMessageInvoker _yarpInvoker = null!;
    private string _prefix = null!;

    [GlobalSetup]
    public void Setup()
    {
        var builder = WebApplication.CreateSlimBuilder();
        builder.Logging.ClearProviders();
        builder.WebHost.UseUrls("http://127.0.0.1:0");
        _instance = builder.Build();
        _instance.Run(context =>
        {
            context.Response.ContentType = "text/plain; charset=utf-8";
            context.Response.ContentLength = 2;
            return context.Response.Body.WriteAsync(Ok).AsTask();
        });
        _instance.StartAsync().GetAwaiter().GetResult();
        var address = new Uri(_instance.Urls.First());
        _prefix = address.GetLeftPart(UriPartial.Authority);

        _frontend = new AppFrontend("bench", new FrontendOptions(), NullLogger.Instance);
        _frontend.AddInstance(new InstanceEndpoint("i1", address, "v1"));

        _yarpServices = new ServiceCollection().AddLogging().AddHttpForwarder().BuildServiceProvider();
        _yarp = _yarpServices.GetRequiredService<IHttpForwarder>();
        // The settings ForwardingTransport gives the frontend's handler.
        _yarpInvoker = new HttpMessageInvoker(new SocketsHttpHandler
        {
            UseProxy = false,
            AllowAutoRedirect = false,
            UseCookies = false,
            AutomaticDecompression = DecompressionMethods.None,
            PooledConnectionIdleTimeout = TimeSpan.FromSeconds(60),
            ConnectCallback = async (context, ct) =>
            {
                var socket = new System.Net.Sockets.Socket(System.Net.Sockets.SocketType.Stream, System.Net.Sockets.ProtocolType.Tcp) { NoDelay = true };
                await socket.ConnectAsync(context.DnsEndPoint, ct);
                return new System.Net.Sockets.NetworkStream(socket, ownsSocket: true);
            },
        });
    }

    [GlobalCleanup]
    public void Cleanup()
    {
        _frontend.DisposeAsync().AsTask().GetAwaiter().GetResult();
        _yarpInvoker.Dispose();
        _yarpServices.Dispose();
        _instance.StopAsync().GetAwaiter().GetResult();
        _instance.DisposeAsync().AsTask().GetAwaiter().GetResult();
    }

    /// <summary>A GET as wrk sends it, from 127.0.0.1, with the headers a browser-like client adds.</summary>
    private static DefaultHttpContext NewContext()
    {
        var context = new DefaultHttpContext();
        var request = context.Request;
        request.Method = HttpMethods.Get;
        request.Scheme = "http";
        request.Host = new HostString("127.0.0.1:7071");
        request.Path = Path;
        request.Headers.UserAgent = "wrk";
        request.Headers.Accept = "*/*";
        context.Connection.RemoteIpAddress = IPAddress.Loopback;
        context.Response.Body = Stream.Null;
        return context;
    }

    /// <summary>The frontend's own forwarder (AppFrontend, ForwardingTransport).</summary>
    [Benchmark(Baseline = true)]
    public Task HandWritten() => _frontend.ForwardAsync(NewContext(), Path);

    /// <summary>YARP 2.3.0's forwarder with a transformer equivalent to ours.</summary>
    [Benchmark]
    public async Task Yarp()
    {
        var context = NewContext();
        var error = await _yarp.SendAsync(context, _prefix, _yarpInvoker, ForwarderRequestConfig.Empty, SameAsFrontend.Instance);
        if (error != ForwarderError.None || context.Response.StatusCode != StatusCodes.Status200OK)
            throw new InvalidOperationException($"YARP forwarded with {error}, status {context.Response.StatusCode}");
    }

    /// <summary>YARP's default header copy (hop-by-hop headers dropped) plus the frontend's Host and X-Forwarded-* rules.</summary>
    private sealed class SameAsFrontend : HttpTransformer
    {
        public static readonly SameAsFrontend Instance = new();

        public override async ValueTask TransformRequestAsync(HttpContext httpContext, HttpRequestMessage proxyRequest, string destinationPrefix, CancellationToken cancellationToken)
        {
            await base.TransformRequestAsync(httpContext, proxyRequest, destinationPrefix, cancellationToken);
            var request = httpContext.Request;
            proxyRequest.Headers.Host = request.Host.Value;
            proxyRequest.Headers.Remove("X-Forwarded-For");
            proxyRequest.Headers.TryAddWithoutValidation("X-Forwarded-For", httpContext.Connection.RemoteIpAddress?.ToString());
            proxyRequest.Headers.Remove("X-Forwarded-Proto");
            proxyRequest.Headers.TryAddWithoutValidation("X-Forwarded-Proto", request.Scheme);
            proxyRequest.Headers.Remove("X-Forwarded-Host");
            proxyRequest.Headers.TryAddWithoutValidation("X-Forwarded-Host", request.Host.Value);
        }
    }
}
