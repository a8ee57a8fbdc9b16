using System.Collections.Concurrent;
using FaaST.Hosting;
using FaaST.Policy;
using FaaST.Protos.Flash;
using Grpc.Core;
using Grpc.Net.Client;

namespace FaaST.ScaleController.Platform.Flash;

/// <summary>
/// The platform's flash tier (issue 22). When a deployed app's faast.json enables flash without an address, the
/// platform runs one flash server for all its apps (<see cref="FlashServerChild"/>, started at the first such deploy),
/// registers the app with its SLO at deploy (FlashAdmin, with the admin key the server keeps in its state folder; an
/// SLO admission control refuses fails the deploy with 422 naming the app, the SLO and the server's reason), and gives
/// that app's instances FAAST_FLASH_ADDRESS and FAAST_FLASH_TOKEN — that app's token only, and only to the host: the
/// runtime keeps both from its workers. An app redeployed without flash (or with its own address) is deregistered: its
/// objects are deleted and its token refused. The server stops with the platform (after every instance drained).
/// <para>An app that names its own server (<c>flash.address</c>) gets no token from the platform: its operator gives it
/// FAAST_FLASH_TOKEN as an app setting, which the instance reads from the app's settings (docs/flash.md).</para>
/// </summary>
internal sealed class PlatformFlash : ILifecycleParticipant, IAsyncDisposable
{
    public const string AddressSetting = "FAAST_FLASH_ADDRESS", TokenSetting = "FAAST_FLASH_TOKEN";

    /// <summary>How long an admin call (register, deregister, stats) may take.</summary>
    private static readonly TimeSpan AdminTimeout = TimeSpan.FromSeconds(10);

    private readonly FlashServerChild _server;
    private readonly ILogger _logger;
    private readonly ConcurrentDictionary<string, string> _tokens = new(StringComparer.OrdinalIgnoreCase);

    public PlatformFlash(PlatformOptions options, ILoggerFactory loggers)
    {
        _logger = loggers.CreateLogger("FaaST.Platform.Flash");
        _server = new FlashServerChild(options, _logger);
    }

    /// <summary>The server's address once started; null while no app uses it.</summary>
    public Uri? Address => _server.Address;

    /// <summary>The server process's id, or null (tests kill it to see the platform restart it).</summary>
    public int? ServerPid => _server.Pid;

    /// <summary>The apps registered with the platform's server.</summary>
    public IReadOnlyList<string> Apps => [.. _tokens.Keys];

    public void Participate(IHostLifecycle lifecycle) =>
        // Between the providers and the controller: stopped after every app's instances drained, before the provider
        // (which would kill an instance still using it) is gone. Started lazily, at the first app that needs it.
        lifecycle.Subscribe(nameof(PlatformFlash), PlatformLifecycleStage.Providers + 100,
            new LifecycleObserver(_ => Task.CompletedTask, async _ => await _server.DisposeAsync()));

    /// <summary>
    /// At deploy (and at a restarted platform's reload), before the app's instances start: registers an app whose
    /// faast.json enables flash without an address (starting the server first if need be), or deregisters one that no
    /// longer uses the platform's server.
    /// </summary>
    /// <exception cref="FlashAdmissionException">Admission control refused the app's SLO.</exception>
    /// <exception cref="FlashServerException">The server could not be started or asked.</exception>
    public async Task PrepareAsync(string app, FlashPolicy flash, CancellationToken ct)
    {
        if (!flash.Enabled || flash.Address is not null)
        {
            if (_tokens.TryRemove(app, out _))
                await DeregisterAsync(app, ct);
            return;
        }
        var address = await _server.EnsureStartedAsync(ct);
        var request = new RegisterTenantRequest { Tenant = app, IopsSlo = flash.IopsSlo ?? 0, P95LatencyUs = flash.P95LatencyUs ?? 0 };
        if (flash.ReadRatio is { } ratio)
            request.ReadRatioHint = ratio;
        var slo = flash.LatencyCritical ? $"{flash.IopsSlo} IOPS at p95 {flash.P95LatencyUs} us" : "best-effort, no SLO";
        try
        {
            using var channel = GrpcChannel.ForAddress(address);
            var reply = await new FlashAdmin.FlashAdminClient(channel).RegisterTenantAsync(request, Admin(), DateTime.UtcNow + AdminTimeout, ct);
            _tokens[app] = reply.Token;
            Log.Registered(_logger, app, reply.Class, slo);
        }
        catch (RpcException e) when (e.StatusCode == StatusCode.ResourceExhausted)
        {
            throw new FlashAdmissionException($"app {app}: the flash tier refused its SLO ({slo}, faast.json flash.iopsSlo/flash.p95LatencyUs): {e.Status.Detail}");
        }
        catch (RpcException e)
        {
            throw new FlashServerException($"app {app}: registering with the flash server at {address} failed: {e.StatusCode}: {e.Status.Detail}", e);
        }
    }

    /// <summary>What an instance of <paramref name="app"/> gets: the server's address and the app's own token, when the
    /// app is registered; nothing otherwise.</summary>
    public IEnumerable<KeyValuePair<string, string>> EnvironmentFor(string app)
    {
        if (_tokens.TryGetValue(app, out var token) && _server.Address is { } address)
        {
            yield return new(AddressSetting, address.ToString());
            yield return new(TokenSetting, token);
        }
    }

    /// <summary>The app's counters on the server (FlashAdmin.Stats), for the platform's status; null when it is not registered.</summary>
    public async Task<TenantStats?> StatsOfAsync(string app, CancellationToken ct)
    {
        if (!_tokens.ContainsKey(app) || _server.Address is not { } address)
            return null;
        using var channel = GrpcChannel.ForAddress(address);
        var stats = await new FlashAdmin.FlashAdminClient(channel).StatsAsync(new ServerStatsRequest(), Admin(), DateTime.UtcNow + AdminTimeout, ct);
        return stats.Tenants.FirstOrDefault(t => t.Tenant.Equals(app, StringComparison.OrdinalIgnoreCase));
    }

    private async Task DeregisterAsync(string app, CancellationToken ct)
    {
        if (_server.Address is not { } address)
            return;
        try
        {
            using var channel = GrpcChannel.ForAddress(address);
            var reply = await new FlashAdmin.FlashAdminClient(channel).DeregisterTenantAsync(new DeregisterTenantRequest { Tenant = app }, Admin(),
                DateTime.UtcNow + AdminTimeout, ct);
            Log.Deregistered(_logger, app, reply.ObjectsDeleted);
        }
        catch (Exception e) when (e is RpcException or FlashServerException or HttpRequestException)
        {
            // The token is forgotten here either way; the server's copy of the app's objects goes with its next reclaim.
            Log.DeregisterFailed(_logger, app, e.Message);
        }
    }

    private Metadata Admin() => new() { { "authorization", "Bearer " + _server.AdminKey() } };

    public ValueTask DisposeAsync() => _server.DisposeAsync();
}
