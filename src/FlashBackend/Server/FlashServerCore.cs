using System.Collections.Concurrent;
using System.Diagnostics;
using FaaST.FlashBackend.Engine;
using FaaST.FlashBackend.Scheduling;
using Grpc.Core;
using Microsoft.Extensions.Logging;

namespace FaaST.FlashBackend.Server;

/// <summary>
/// What the two gRPC services share: the store, the keys, the dispatcher that owns the scheduler, the tenants and their
/// flows. Registration, SLO changes and deregistration run here (serialized: admin calls are rare); the I/O paths are
/// in <see cref="FlashTierService"/>.
/// </summary>
internal sealed partial class FlashServerCore : IDisposable
{
    /// <summary>
    /// Gets and puts are cut into I/O units of at most this many bytes, each scheduled on its own (issue 22: small
    /// requests never queue behind large ones; En4S §4 prices and dispatches requests by 4 KiB blocks, and a 64 MiB
    /// value dispatched whole would hold the device for its whole transfer while a tenant's 4 KiB read waits behind it).
    /// 128 KiB: 32 cost blocks, the largest I/O the Linux block layer commonly issues unsplit (max_sectors_kb is 128 on
    /// many devices, including this VM's virtio disk), so a unit is one device command's worth; at ~1 GB/s it occupies
    /// the device ~128 µs, far below any p95 SLO, while a 64 MiB value still moves in 512 units, each with one hand-off.
    /// </summary>
    public const int UnitBytes = 128 << 10;

    /// <summary>Get replies carry at most this many bytes each (the proto: at most 64 KiB).</summary>
    public const int MessageBytes = 64 << 10;

    private readonly ConcurrentDictionary<string, TenantEntry> _tenants = new(StringComparer.Ordinal);
    private readonly SemaphoreSlim _admin = new(1, 1);
    private readonly ILogger _log;

    public ServeOptions Options { get; }
    public ServerKeys Keys { get; }
    public FlashStore Store { get; }
    public IoDispatcher Dispatcher { get; }
    public FlowTable Flows { get; } = new();
    public SchedulerLimits Limits { get; } = SchedulerLimits.Default;
    public DeviceProfile Device { get; }
    public CostTable Costs { get; }

    private FlashServerCore(ServeOptions options, ServerKeys keys, FlashStore store, ILogger log)
    {
        Options = options;
        Keys = keys;
        Store = store;
        _log = log;
        // The device and its cost model: a profile `fit` measured on this device (--device-profile), else the i3.xlarge
        // calibration (CostTable.I3XLarge, the paper's device) scaled to --device-tokens. A read costs 1 token on any
        // device by definition, so gets are priced right either way; only writes' prices depend on the fit.
        (Device, Costs) = LoadDevice(options);
        IIoScheduler scheduler = options.Scheduler switch
        {
            SchedulerKind.Reflex => new ReflexScheduler(Costs, Limits, Device),
            SchedulerKind.Fcfs => new FcfsScheduler(Costs, Limits),
            _ => new En4sScheduler(Costs, Limits, Device, En4sSettings.Conservative),
        };
        Dispatcher = new IoDispatcher(scheduler, Limits, log) { Housekeeping = CloseIdleFlows };
    }

    private static (DeviceProfile, CostTable) LoadDevice(ServeOptions options)
    {
        if (options.DeviceProfilePath is not { } path)
            return (DeviceFor(options.DeviceTokensPerSecond), CostTable.I3XLarge);
        try
        {
            var fitted = Calibration.DeviceFitResult.Load(path);
            return (fitted.ToDeviceProfile(), fitted.ToCostTable());
        }
        catch (Exception e) when (e is System.Text.Json.JsonException or ArgumentException or NotSupportedException)
        {
            throw new InvalidDataException($"--device-profile {path}: not a device profile `fit` wrote: {e.Message}", e);
        }
    }

    /// <summary>The i3.xlarge profile's shape scaled to this device's token rate: its latency-bounded rows (which LC
    /// admission reads) keep their proportions, the loosest (3 ms) row being the whole rate.</summary>
    private static DeviceProfile DeviceFor(double tokens)
    {
        DeviceProfile i3 = DeviceProfile.I3XLarge;
        double scale = tokens / i3.TokensPerSecond;
        return i3 with
        {
            TokensPerSecond = tokens,
            TokenLimits = i3.TokenLimits.Select(r => r with { TokensPerSecond = r.TokensPerSecond * scale }).ToList(),
        };
    }

    public static async Task<FlashServerCore> OpenAsync(ServeOptions options, ILogger log)
    {
        options.Validate();
        ServerKeys keys = ServerKeys.Open(options.StateDirectory);
        FlashStore store = FlashStore.Open(new FlashStoreOptions
        {
            Path = options.Device,
            Capacity = options.Capacity,
            SegmentSize = options.SegmentSize,
            Startup = options.Ephemeral ? StartupMode.Ephemeral : StartupMode.Recover,
            UseIoUring = options.UseIoUring,
        });
        if (options.UseIoUring && store.IoUringUnavailable is { } why)
            LogNoIoUring(log, why);
        else if (store.IoUringTaskRun == "default")
            LogRingInterrupted(log);
        var core = new FlashServerCore(options, keys, store, log);
        core.Dispatcher.Start();
        foreach (TenantSpec spec in keys.LoadTenants())
        {
            (_, string cls, string? refusal) = await core.RegisterCoreAsync(spec).ConfigureAwait(false);
            if (refusal is not null)
            {
                // Admitted by an earlier run on a larger --device-tokens: kept (its token must keep working) as BE.
                LogRestoredAsBestEffort(log, spec.Name, refusal);
                await core.RegisterCoreAsync(spec with { IopsSlo = 0, P95LatencyUs = 0 }, keepSpec: spec).ConfigureAwait(false);
            }
            else
            {
                LogTenantRestored(log, spec.Name, cls);
            }
        }
        return core;
    }

    public TenantEntry? Find(string tenant) => _tenants.TryGetValue(tenant, out TenantEntry? e) && !e.Removed ? e : null;

    public IEnumerable<TenantEntry> AllTenants => _tenants.Values.Where(e => !e.Removed);

    /// <summary>RegisterTenant: the token and the class, or RESOURCE_EXHAUSTED with the admission's reason.</summary>
    public async Task<(string Token, string Class)> RegisterAsync(TenantSpec spec)
    {
        await _admin.WaitAsync().ConfigureAwait(false);
        try
        {
            if (_tenants.TryGetValue(spec.Name, out TenantEntry? existing) && existing.Spec == spec)
                return (Keys.TokenFor(spec.Name), existing.Class);
            (TenantEntry entry, string cls, string? refusal) = await RegisterCoreAsync(spec).ConfigureAwait(false);
            if (refusal is not null)
                throw new RpcException(new Status(StatusCode.ResourceExhausted, $"RegisterTenant: {refusal}"));
            Keys.SaveTenants(AllTenants.Select(t => t.Spec));
            LogTenantRegistered(_log, spec.Name, cls, spec.IopsSlo, spec.P95LatencyUs);
            return (Keys.TokenFor(entry.Name), cls);
        }
        finally
        {
            _admin.Release();
        }
    }

    /// <summary>On the dispatcher thread: (re)registers the tenant with the scheduler and, for an LC SLO, runs the
    /// slow admission (§4.3.3) at once, so the caller learns the verdict. A refused new tenant is removed again; a
    /// refused SLO change puts the previous SLO back. Waits until the tenant has nothing queued in the scheduler (the
    /// scheduler refuses to deregister a slot with queued requests).</summary>
    private Task<(TenantEntry Entry, string Class, string? Refusal)> RegisterCoreAsync(TenantSpec spec, TenantSpec? keepSpec = null)
    {
        TenantEntry entry = _tenants.GetOrAdd(spec.Name, _ => new TenantEntry(keepSpec ?? spec, Options.StatsWindow));
        return Dispatcher.InvokeAsync<(TenantEntry, string, string?)>(() =>
        {
            if (entry.Enqueued > entry.Granted)
                return (false, default);
            IIoScheduler s = Dispatcher.Scheduler;
            TenantSpec? previous = entry.SchedulerId >= 0 ? entry.Spec : null;
            if (entry.SchedulerId >= 0)
                s.Deregister(entry.SchedulerId);
            else
                Dispatcher.Tenants.Add(entry);
            (string cls, string? refusal) = Join(s, entry, spec);
            if (refusal is not null)
            {
                s.Deregister(entry.SchedulerId);
                if (previous is not null)
                {
                    Join(s, entry, previous);
                }
                else
                {
                    entry.SchedulerId = -1;
                    Dispatcher.Tenants.Remove(entry);
                    _tenants.TryRemove(new KeyValuePair<string, TenantEntry>(spec.Name, entry));
                }
                return (true, (entry, entry.Class, refusal));
            }
            entry.Spec = keepSpec ?? spec;
            return (true, (entry, cls, null));
        });
    }

    private static (string Class, string? Refusal) Join(IIoScheduler s, TenantEntry entry, TenantSpec spec)
    {
        entry.SchedulerId = s.Register(spec);
        entry.Enqueued = entry.Granted = entry.HeldMark = 0;
        string cls = spec.IsLatencyCritical ? "LC" : "BE";
        if (s is En4sScheduler en4s && spec.IsLatencyCritical)
        {
            foreach (AdmissionDecision d in en4s.RunAdmission(IoDispatcher.NowNs()))
            {
                if (d.Tenant == entry.SchedulerId && !d.Admitted)
                    return ("BE", d.Reason);
            }
        }
        entry.Class = cls;
        return (cls, null);
    }

    /// <summary>DeregisterTenant: refuses its token from now on, waits for its units in flight, closes its flows,
    /// releases its scheduler slot and deletes its objects; NOT_FOUND when it is not registered.</summary>
    public async Task<long> DeregisterAsync(string tenant)
    {
        await _admin.WaitAsync().ConfigureAwait(false);
        try
        {
            if (!_tenants.TryGetValue(tenant, out TenantEntry? entry))
                throw new RpcException(new Status(StatusCode.NotFound, $"DeregisterTenant: tenant '{tenant}' is not registered"));
            entry.Removed = true;
            var clock = Stopwatch.StartNew();
            while (Volatile.Read(ref entry.Pending) > 0)
            {
                if (clock.Elapsed > TimeSpan.FromMinutes(1))
                    throw new RpcException(new Status(StatusCode.Unavailable, $"DeregisterTenant: tenant '{tenant}' still has {entry.Pending} I/O units in flight after a minute; retry"));
                await Task.Delay(1).ConfigureAwait(false);
            }
            foreach (FlowEntry f in Flows.All.Where(f => ReferenceEquals(f.Tenant, entry)).ToList())
                Flows.Remove(f);
            await Dispatcher.InvokeAsync(() =>
            {
                if (entry.Enqueued > entry.Granted)
                    return (false, 0);
                if (entry.SchedulerId >= 0)
                    Dispatcher.Scheduler.Deregister(entry.SchedulerId);
                entry.SchedulerId = -1;
                Dispatcher.Tenants.Remove(entry);
                return (true, 0);
            }).ConfigureAwait(false);
            long deleted = Store.DeleteTenant(tenant);
            _tenants.TryRemove(new KeyValuePair<string, TenantEntry>(tenant, entry));
            Keys.SaveTenants(AllTenants.Select(t => t.Spec));
            LogTenantDeregistered(_log, tenant, deleted);
            return deleted;
        }
        finally
        {
            _admin.Release();
        }
    }

    /// <summary>Opens a flow on the dispatcher thread (the scheduler counts a tenant's flows).</summary>
    public Task<FlowEntry> OpenFlowAsync(TenantEntry tenant, string instance) =>
        Dispatcher.InvokeAsync(() =>
        {
            if (tenant.SchedulerId < 0 || tenant.Removed)
                throw new RpcException(new Status(StatusCode.NotFound, $"OpenFlow: tenant '{tenant.Name}' is not registered"));
            Dispatcher.Scheduler.OpenFlow(tenant.SchedulerId);
            return (true, Flows.Add(tenant, instance));
        });

    public Task CloseFlowAsync(FlowEntry flow) =>
        Dispatcher.InvokeAsync(() =>
        {
            if (Flows.Remove(flow) && flow.Tenant.SchedulerId >= 0)
                Dispatcher.Scheduler.CloseFlow(flow.Tenant.SchedulerId);
            return (true, 0);
        });

    /// <summary>Once a second on the dispatcher thread: flows idle for longer than the timeout are closed.</summary>
    private void CloseIdleFlows(long nowNs)
    {
        long limit = Stopwatch.GetTimestamp() - (long)(Options.FlowIdleTimeout.TotalSeconds * Stopwatch.Frequency);
        foreach (FlowEntry f in Flows.All)
        {
            if (Volatile.Read(ref f.LastUsedTicks) < limit && Flows.Remove(f))
            {
                if (f.Tenant.SchedulerId >= 0)
                    Dispatcher.Scheduler.CloseFlow(f.Tenant.SchedulerId);
                LogFlowIdleClosed(_log, f.Id, f.Tenant.Name, f.Instance);
            }
        }
    }

    public void Dispose()
    {
        Dispatcher.Dispose();
        Store.Dispose();
    }

    [LoggerMessage(EventId = 7001, Level = LogLevel.Information, Message = "flash tenant {Tenant} registered as {Class} (SLO {Iops} IOPS, p95 {P95Us} µs)")]
    private static partial void LogTenantRegistered(ILogger log, string tenant, string @class, double iops, int p95Us);

    [LoggerMessage(EventId = 7002, Level = LogLevel.Information, Message = "flash tenant {Tenant} deregistered; {Deleted} objects deleted")]
    private static partial void LogTenantDeregistered(ILogger log, string tenant, long deleted);

    [LoggerMessage(EventId = 7003, Level = LogLevel.Information, Message = "flash tenant {Tenant} restored from tenants.json as {Class}")]
    private static partial void LogTenantRestored(ILogger log, string tenant, string @class);

    [LoggerMessage(EventId = 7004, Level = LogLevel.Warning, Message = "flash tenant {Tenant} restored as best-effort: admission now refuses its SLO ({Reason})")]
    private static partial void LogRestoredAsBestEffort(ILogger log, string tenant, string reason);

    [LoggerMessage(EventId = 7121, Level = LogLevel.Information, Message = "flash server: this kernel refused IORING_SETUP_COOP_TASKRUN (Linux 5.19+); each read's completion interrupts the ring thread, which costs CPU per get (docs/flash.md, \"Past the edge\")")]
    private static partial void LogRingInterrupted(ILogger log);

    [LoggerMessage(EventId = 7120, Level = LogLevel.Warning, Message = "flash server: io_uring is unavailable ({Why}); small reads use pread")]
    private static partial void LogNoIoUring(ILogger log, string why);

    [LoggerMessage(EventId = 7005, Level = LogLevel.Information, Message = "flash flow {Flow} of tenant {Tenant} (instance {Instance}) closed after its idle time")]
    private static partial void LogFlowIdleClosed(ILogger log, int flow, string tenant, string instance);
}
