using System.Net;
using System.Security.Cryptography;
using System.Text;
using FaaST.ScaleController.Frontend;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Hosting;
using Microsoft.AspNetCore.Http;
using Microsoft.Extensions.Logging;

namespace FaaST.ScaleController.Tests.Frontend;

/// <summary>
/// A real Kestrel app on a free loopback port standing in for an instance: echo, slow (held at a gate the test
/// opens), status codes and repeated headers, large bodies both ways, and a handler that dies mid-request.
/// </summary>
internal sealed class Backend : IAsyncDisposable
{
    private readonly WebApplication _web;
    private int _hits;
    private int _arrived;

    private Backend(string id, WebApplication web)
    {
        Id = id;
        _web = web;
        Address = new Uri(web.Urls.First());
    }

    public string Id { get; }

    public Uri Address { get; }

    public InstanceEndpoint Endpoint => new(Id, Address, "v1");

    /// <summary>Requests that reached this backend.</summary>
    public int Hits => Volatile.Read(ref _hits);

    /// <summary>Requests waiting at the slow gate (or that passed it).</summary>
    public int Arrived => Volatile.Read(ref _arrived);

    /// <summary>
    /// When set, every request gets what a process that dies mid-request gives: the request is read whole,
    /// then the connection is reset without a response.
    /// </summary>
    public bool Dying { get; set; }

    /// <summary>Opened by the test to let /slow requests finish (and /die-mid-response die).</summary>
    public TaskCompletionSource Gate { get; } = new(TaskCreationOptions.RunContinuationsAsynchronously);

    public static async Task<Backend> StartAsync(string id)
    {
        var builder = WebApplication.CreateSlimBuilder();
        builder.Logging.ClearProviders();
        builder.WebHost.ConfigureKestrel(k =>
        {
            k.Limits.MaxRequestBodySize = null;
            k.Listen(IPAddress.Loopback, 0);
        });
        var web = builder.Build();
        Backend? self = null;
        web.Run(context => self!.HandleAsync(context));
        await web.StartAsync();
        self = new Backend(id, web);
        return self;
    }

    /// <summary>Closes the listener: connects to it are refused from now on.</summary>
    public Task StopAsync() => _web.StopAsync();

    public async ValueTask DisposeAsync()
    {
        Gate.TrySetResult();
        await _web.DisposeAsync();
    }

    private async Task HandleAsync(HttpContext context)
    {
        Interlocked.Increment(ref _hits);
        var request = context.Request;
        var response = context.Response;
        var path = request.Path.Value ?? "";
        response.Headers["X-Instance"] = Id;
        if (Dying)
        {
            await request.Body.CopyToAsync(Stream.Null);
            context.Abort();
            return;
        }
        switch (path)
        {
            case "/slow":
                Interlocked.Increment(ref _arrived);
                await Gate.Task;
                await response.WriteAsync(Id);
                return;
            case "/status/404":
                response.StatusCode = 404;
                response.Headers["X-Custom"] = "missing";
                await response.WriteAsync("no such thing");
                return;
            case "/status/500":
                response.StatusCode = 500;
                await response.WriteAsync("it broke");
                return;
            case "/cookies":
                response.StatusCode = 201;
                response.Headers.Append("Set-Cookie", "a=1; Path=/");
                response.Headers.Append("Set-Cookie", "b=2; Path=/; HttpOnly");
                response.Headers["X-Multi"] = new[] { "one", "two" };
                await response.WriteAsync("cookies");
                return;
            case "/upload":
            {
                using var sha = IncrementalHash.CreateHash(HashAlgorithmName.SHA256);
                var buffer = new byte[64 * 1024];
                long total = 0;
                int read;
                while ((read = await request.Body.ReadAsync(buffer)) > 0)
                {
                    sha.AppendData(buffer, 0, read);
                    total += read;
                }
                await response.WriteAsync($"{total} {Convert.ToHexString(sha.GetHashAndReset())}");
                return;
            }
            case "/download":
            {
                var size = long.Parse(request.Query["size"]!, System.Globalization.CultureInfo.InvariantCulture);
                response.ContentLength = size;
                await Payload.WriteAsync(response.Body, size);
                return;
            }
            case "/die-mid-response":
                response.ContentLength = 1_000_000;
                await response.WriteAsync("partial");
                await response.Body.FlushAsync();
                await Gate.Task; // the test has the response's start, then lets the instance die
                context.Abort();
                return;
            default:
            {
                var text = new StringBuilder()
                    .Append("instance=").Append(Id).Append('\n')
                    .Append("method=").Append(request.Method).Append('\n')
                    .Append("path=").Append(request.Path.Value).Append('\n')
                    .Append("query=").Append(request.QueryString.Value).Append('\n')
                    .Append("host=").Append(request.Host.Value).Append('\n');
                foreach (var header in request.Headers.OrderBy(h => h.Key, StringComparer.OrdinalIgnoreCase))
                    text.Append("header:").Append(header.Key.ToLowerInvariant()).Append('=').Append(header.Value.ToString()).Append('\n');
                await response.WriteAsync(text.ToString());
                return;
            }
        }
    }
}

/// <summary>A deterministic payload of any size, written in 64 KiB blocks each stamped with its index (so a reordering changes the hash).</summary>
internal static class Payload
{
    private const int Block = 64 * 1024;

    private static readonly byte[] Pattern = CreatePattern();

    private static byte[] CreatePattern()
    {
        var bytes = new byte[Block];
        new Random(13).NextBytes(bytes);
        return bytes;
    }

    public static async Task WriteAsync(Stream output, long size)
    {
        var block = new byte[Block];
        Pattern.CopyTo(block, 0);
        for (long index = 0, written = 0; written < size; index++)
        {
            BitConverter.TryWriteBytes(block, index);
            var n = (int)Math.Min(Block, size - written);
            await output.WriteAsync(block.AsMemory(0, n));
            written += n;
        }
    }

    public static string Sha256(long size)
    {
        using var sha = IncrementalHash.CreateHash(HashAlgorithmName.SHA256);
        var block = new byte[Block];
        Pattern.CopyTo(block, 0);
        for (long index = 0, written = 0; written < size; index++)
        {
            BitConverter.TryWriteBytes(block, index);
            var n = (int)Math.Min(Block, size - written);
            sha.AppendData(block, 0, n);
            written += n;
        }
        return Convert.ToHexString(sha.GetHashAndReset());
    }

    /// <summary>A request body of <paramref name="size"/> bytes produced while it is sent (never held whole).</summary>
    public sealed class Content(long size) : HttpContent
    {
        protected override Task SerializeToStreamAsync(Stream stream, TransportContext? context) => WriteAsync(stream, size);

        protected override bool TryComputeLength(out long length)
        {
            length = size;
            return true;
        }
    }
}

/// <summary>The frontend of one app ("app") on a real Kestrel listener on a free loopback port, routed in single-app mode.</summary>
internal sealed class FrontendHost : IAsyncDisposable
{
    private readonly WebApplication _web;

    private FrontendHost(WebApplication web, AppFrontend frontend, ListLogger logs)
    {
        _web = web;
        Frontend = frontend;
        Logs = logs;
        Address = new Uri(web.Urls.First());
        Client = new HttpClient(new SocketsHttpHandler { UseCookies = false, AllowAutoRedirect = false, UseProxy = false })
        {
            BaseAddress = Address,
            Timeout = TimeSpan.FromMinutes(3),
        };
    }

    public AppFrontend Frontend { get; }

    public ListLogger Logs { get; }

    public Uri Address { get; }

    public HttpClient Client { get; }

    public static async Task<FrontendHost> StartAsync(FrontendOptions? options = null, TimeProvider? time = null)
    {
        var logs = new ListLogger(LogLevel.Information);
        var frontend = new AppFrontend("app", options ?? new FrontendOptions(), logs, time);
        var router = AppRouter.SingleApp("app");
        var builder = WebApplication.CreateSlimBuilder();
        builder.Logging.ClearProviders();
        builder.WebHost.ConfigureKestrel(k => k.Listen(IPAddress.Loopback, 0));
        var web = builder.Build();
        web.Run(context => router.TryRoute(context.Request, out _, out var pathAndQuery, out _)
            ? frontend.ForwardAsync(context, pathAndQuery)
            : Task.CompletedTask);
        await web.StartAsync();
        return new FrontendHost(web, frontend, logs);
    }

    public async ValueTask DisposeAsync()
    {
        Client.Dispose();
        await Frontend.DisposeAsync();
        await _web.DisposeAsync();
    }
}
