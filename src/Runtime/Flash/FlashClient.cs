using System.Diagnostics;
using FaaST.Policy;
using FaaST.Protos.Flash;
using Grpc.Core;
using Grpc.Net.Client;

namespace FaaST.Runtime.Flash;

/// <summary>
/// This instance's connection to the flash tier: one gRPC channel (HTTP/2, multiplexed; the channel reconnects by
/// itself), the app's tenant token on every call as "authorization: Bearer" (the server takes the tenant from it, so the
/// instance can name only its app's objects), and one flow (En4S schedules a tenant's flows together, §4.2) opened at
/// start and closed at stop. It also keeps the tier's health: after a failure or a timeout the tier is skipped for
/// <see cref="FlashPolicy.RetryAfter"/> (reads go to storage, nothing is demoted), then tried again, the flow reopened
/// first when the server lost it (a restarted server).
/// </summary>
internal sealed class FlashClient : IDisposable
{
    /// <summary>How long OpenFlow, CloseFlow and Stats may take: control calls off the read path, so a generous bound
    /// that still lets a stopping host go on when the server hangs.</summary>
    private static readonly TimeSpan ControlTimeout = TimeSpan.FromSeconds(2);

    private readonly GrpcChannel _channel;
    private readonly FlashTier.FlashTierClient _tier;
    private readonly Metadata _headers;
    private readonly string _instance;
    private readonly long _retryAfterTicks;
    private readonly SemaphoreSlim _opening = new(1, 1);
    private readonly ILogger _logger;
    private readonly LogGate _failureLog = LogGate.PerSecond();
    private int _flow = NoFlow;
    private long _maxValueBytes;
    private long _skipUntil; // Stopwatch ticks; 0: the tier is in use

    private const int NoFlow = -1;

    public FlashClient(Uri address, string token, string instance, FlashPolicy policy, ILogger logger)
    {
        Address = address;
        _channel = GrpcChannel.ForAddress(address, new GrpcChannelOptions
        {
            // Values stream in 64 KiB chunks (flash.proto); a small header message never needs more.
            MaxReceiveMessageSize = 1 << 20,
            HttpHandler = new SocketsHttpHandler
            {
                EnableMultipleHttp2Connections = true,
                // A dead server's connection is noticed by the read timeouts; this keeps an idle one checked.
                KeepAlivePingDelay = TimeSpan.FromSeconds(30),
                KeepAlivePingTimeout = TimeSpan.FromSeconds(10),
                ConnectTimeout = TimeSpan.FromSeconds(2),
            },
        });
        _tier = new FlashTier.FlashTierClient(_channel);
        _headers = new Metadata { { "authorization", "Bearer " + token } };
        _instance = instance;
        Policy = policy;
        _retryAfterTicks = (long)(policy.RetryAfter.TotalSeconds * Stopwatch.Frequency);
        _logger = logger;
    }

    public Uri Address { get; }

    public ILogger Logger => _logger;

    public FlashPolicy Policy { get; }

    /// <summary>The tier's largest value (OpenFlowReply), once a flow is open; 0 before.</summary>
    public long MaxValueBytes => Volatile.Read(ref _maxValueBytes);

    /// <summary>The open flow, or null.</summary>
    public int? Flow => Volatile.Read(ref _flow) is var f and not NoFlow ? f : null;

    /// <summary>False while the tier is skipped after a failure (until <see cref="FlashPolicy.RetryAfter"/> has passed).</summary>
    public bool Usable => Stopwatch.GetTimestamp() >= Volatile.Read(ref _skipUntil);

    /// <summary>When the tier will be tried again, for /admin/flash; null when in use.</summary>
    public TimeSpan? SkippedFor =>
        Volatile.Read(ref _skipUntil) - Stopwatch.GetTimestamp() is var left and > 0 ? TimeSpan.FromSeconds((double)left / Stopwatch.Frequency) : null;

    /// <summary>The tier failed (<paramref name="what"/> names the call and key): skip it for RetryAfter, and forget the
    /// flow when the server no longer knows it (it restarted), so that the next use opens one.</summary>
    public void Failed(string what, Exception e, bool flowLost = false)
    {
        Volatile.Write(ref _skipUntil, Stopwatch.GetTimestamp() + _retryAfterTicks);
        if (flowLost || e is RpcException { StatusCode: StatusCode.Unavailable or StatusCode.NotFound })
            Volatile.Write(ref _flow, NoFlow);
        if (_failureLog.TryPass(out var suppressed))
            Log.TierFailed(_logger, Address, what, Describe(e), Policy.RetryAfter, suppressed);
    }

    /// <summary>The open flow, opening one first when there is none (at start, after a failure); null when the tier
    /// cannot be reached (then it is skipped for RetryAfter).</summary>
    public async ValueTask<int?> FlowAsync(CancellationToken ct)
    {
        if (Flow is { } open)
            return open;
        await _opening.WaitAsync(ct);
        try
        {
            if (Flow is { } opened)
                return opened;
            var reply = await _tier.OpenFlowAsync(new OpenFlowRequest { Instance = _instance }, _headers, DateTime.UtcNow + ControlTimeout,
                cancellationToken: ct);
            Volatile.Write(ref _maxValueBytes, reply.MaxValueBytes);
            Volatile.Write(ref _flow, reply.Flow);
            Log.FlowOpened(_logger, Address, reply.Flow, reply.MaxValueBytes);
            return reply.Flow;
        }
        catch (Exception e) when (e is RpcException or HttpRequestException or IOException or OperationCanceledException && !ct.IsCancellationRequested)
        {
            Failed("OpenFlow", e);
            return null;
        }
        finally
        {
            _opening.Release();
        }
    }

    public AsyncServerStreamingCall<GetReply> Get(GetRequest request, CancellationToken ct) =>
        _tier.Get(request, _headers, cancellationToken: ct);

    public AsyncClientStreamingCall<PutRequest, PutReply> Put(CancellationToken ct) => _tier.Put(_headers, cancellationToken: ct);

    /// <summary>The tenant's own counters on the server (FlashTier.Stats), or the reason they could not be read.</summary>
    public async Task<(TenantStats? Stats, string? Error)> StatsAsync(CancellationToken ct)
    {
        try
        {
            return (await _tier.StatsAsync(new TenantStatsRequest(), _headers, DateTime.UtcNow + ControlTimeout, cancellationToken: ct), null);
        }
        catch (Exception e) when (e is RpcException or HttpRequestException or IOException)
        {
            return (null, Describe(e));
        }
    }

    /// <summary>Closes the flow (best effort: a server that is gone closes idle flows itself).</summary>
    public async Task CloseAsync(CancellationToken ct)
    {
        if (Interlocked.Exchange(ref _flow, NoFlow) is var flow and not NoFlow)
        {
            try
            {
                await _tier.CloseFlowAsync(new CloseFlowRequest { Flow = flow }, _headers, DateTime.UtcNow + ControlTimeout, cancellationToken: ct);
            }
            catch (Exception e) when (e is RpcException or HttpRequestException or IOException)
            {
                Log.CloseFailed(_logger, Address, flow, Describe(e));
            }
        }
    }

    /// <summary>An error as one line: a gRPC status with its detail, else the message.</summary>
    public static string Describe(Exception e) => e switch
    {
        RpcException r => $"{r.StatusCode}: {r.Status.Detail}",
        OperationCanceledException => "timed out",
        _ => e.Message,
    };

    public void Dispose()
    {
        _channel.Dispose();
        _opening.Dispose();
    }
}
