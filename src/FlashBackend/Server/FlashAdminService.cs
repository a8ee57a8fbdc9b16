using FaaST.FlashBackend.Scheduling;
using FaaST.Protos.Flash;
using Grpc.Core;

namespace FaaST.FlashBackend.Server;

/// <summary>FlashAdmin (protos/flash.proto): every call takes the server's admin key (<see cref="Auth.Admin"/>), which
/// only the operator's platform reads from the state folder.</summary>
internal sealed class FlashAdminService(FlashServerCore core) : FlashAdmin.FlashAdminBase
{
    public override async Task<RegisterTenantReply> RegisterTenant(RegisterTenantRequest request, ServerCallContext context)
    {
        Auth.Admin(core, context, "RegisterTenant");
        TenantSpec spec = SpecOf(request);
        (string token, string cls) = await core.RegisterAsync(spec).ConfigureAwait(false);
        return new RegisterTenantReply { Token = token, Class = cls };
    }

    public override async Task<DeregisterTenantReply> DeregisterTenant(DeregisterTenantRequest request, ServerCallContext context)
    {
        Auth.Admin(core, context, "DeregisterTenant");
        CheckName(request.Tenant, "DeregisterTenant");
        return new DeregisterTenantReply { ObjectsDeleted = await core.DeregisterAsync(request.Tenant).ConfigureAwait(false) };
    }

    public override Task<ServerStats> Stats(ServerStatsRequest request, ServerCallContext context)
    {
        Auth.Admin(core, context, "Stats");
        var store = core.Store.GetStats();
        var reply = new ServerStats
        {
            Scheduler = core.Dispatcher.Scheduler.Name,
            DevicePath = core.Store.Path,
            DirectIo = core.Store.UsesDirectIO,
            CapacityBytes = core.Options.Capacity,
            LiveObjects = store.LiveObjects,
            ReclaimedSegments = store.ReclaimedSegments,
            EvictedObjects = store.EvictedObjects,
            RecoveredObjects = store.RecoveredObjects,
            TornRecordsSkipped = store.TornRecordsSkipped,
            DeviceTokensPerSecond = core.Device.TokensPerSecond,
            InFlight = core.Dispatcher.InFlight,
        };
        foreach (TenantEntry t in core.AllTenants.OrderBy(t => t.Name, StringComparer.Ordinal))
            reply.Tenants.Add(FlashTierService.StatsOf(core, t));
        return Task.FromResult(reply);
    }

    /// <summary>The platform's app names: lower-case letters, digits and '-', 1 to 60 characters.</summary>
    private static void CheckName(string name, string call)
    {
        if (name.Length is 0 or > 60 || !name.All(c => c is (>= 'a' and <= 'z') or (>= '0' and <= '9') or '-'))
            throw new RpcException(new Status(StatusCode.InvalidArgument, $"{call}: tenant '{name}' is not an app name (lower-case letters, digits and '-', at most 60 characters)"));
    }

    private static TenantSpec SpecOf(RegisterTenantRequest r)
    {
        CheckName(r.Tenant, "RegisterTenant");
        var spec = new TenantSpec(r.Tenant, r.IopsSlo, r.P95LatencyUs, r.HasReadRatioHint ? r.ReadRatioHint : null);
        try
        {
            spec.Validate();
        }
        catch (ArgumentException e)
        {
            throw new RpcException(new Status(StatusCode.InvalidArgument, $"RegisterTenant: {e.Message}"));
        }
        return spec;
    }
}
