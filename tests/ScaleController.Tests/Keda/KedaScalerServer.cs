using System.Collections.Concurrent;
using System.Net;
using FaaST.Protos.Keda;
using FaaST.ScaleController.Keda;
using Grpc.Net.Client;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Hosting;
using Microsoft.AspNetCore.Server.Kestrel.Core;
using Microsoft.Extensions.Logging;

namespace FaaST.ScaleController.Tests.Keda;

/// <summary>
/// The KEDA external scaler on a real Kestrel listener (loopback, cleartext HTTP/2 as KEDA dials it) over
/// <see cref="TestDecisions"/>, and a real gRPC client compiled from protos/externalscaler.proto on its own —
/// what KEDA's external scaler client is.
/// </summary>
internal sealed class KedaScalerServer : IAsyncDisposable
{
    private readonly WebApplication _web;
    private readonly GrpcChannel _channel;

    private KedaScalerServer(WebApplication web, Uri address, TestDecisions decisions, ListLogger logs)
    {
        _web = web;
        Decisions = decisions;
        Logs = logs;
        _channel = GrpcChannel.ForAddress(address);
        Client = new ExternalScaler.ExternalScalerClient(_channel);
    }

    public TestDecisions Decisions { get; }
    public ListLogger Logs { get; }
    public ExternalScaler.ExternalScalerClient Client { get; }

    public static async Task<KedaScalerServer> StartAsync(KedaScalerOptions? options = null)
    {
        var decisions = new TestDecisions();
        var logs = new ListLogger(LogLevel.Information);
        var builder = WebApplication.CreateSlimBuilder();
        builder.Logging.ClearProviders();
        builder.Logging.AddProvider(logs);
        builder.Services.AddKedaExternalScaler(decisions, options);
        builder.WebHost.ConfigureKestrel(k => k.Listen(IPAddress.Loopback, 0, l => l.Protocols = HttpProtocols.Http2));
        var web = builder.Build();
        web.MapKedaExternalScaler();
        await web.StartAsync();
        return new KedaScalerServer(web, new Uri(web.Urls.First()), decisions, logs);
    }

    /// <summary>A ScaledObjectRef as KEDA sends it: the ScaledObject's name and namespace, and every key of the
    /// trigger's metadata (scalerAddress included).</summary>
    public static ScaledObjectRef Ref(string? app, string name = "counter-scaler", string @namespace = "faast")
    {
        var so = new ScaledObjectRef { Name = name, Namespace = @namespace };
        so.ScalerMetadata.Add("scalerAddress", "faast-platform.faast.svc.cluster.local:7100");
        if (app is not null)
            so.ScalerMetadata.Add(ExternalScalerService.AppKey, app);
        return so;
    }

    public async ValueTask DisposeAsync()
    {
        _channel.Dispose();
        await _web.StopAsync();
        await _web.DisposeAsync();
    }
}

/// <summary>A hand-set controller: the decisions the scaler translates, changed by the test.</summary>
internal sealed class TestDecisions : IScaleDecisions
{
    private readonly ConcurrentDictionary<string, AppScaleState> _apps = new(StringComparer.Ordinal);
    private int _lookups;

    private Action<string>? _changed;

    public event Action<string>? Changed
    {
        add { lock (_apps) _changed += value; }
        remove { lock (_apps) _changed -= value; }
    }

    /// <summary>How many handlers are subscribed to <see cref="Changed"/> now (an open stream holds one).</summary>
    public int Subscribers => Volatile.Read(ref _changed)?.GetInvocationList().Length ?? 0;

    /// <summary>How many times the scaler read a decision: lets a test wait until a change was seen.</summary>
    public int Lookups => Volatile.Read(ref _lookups);

    public bool TryGetApp(string app, out AppScaleState state)
    {
        Interlocked.Increment(ref _lookups);
        return _apps.TryGetValue(app, out state);
    }

    public void Set(string app, int desired, string reason = "set by the test")
    {
        _apps[app] = new AppScaleState(desired, reason);
        Volatile.Read(ref _changed)?.Invoke(app);
    }

    public void Remove(string app)
    {
        _apps.TryRemove(app, out _);
        Volatile.Read(ref _changed)?.Invoke(app);
    }
}
