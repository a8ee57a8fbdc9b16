using Grpc.Core;

namespace FaaST.FlashBackend.Server;

/// <summary>
/// The two credentials of protos/flash.proto, checked at the top of every handler (each says which it takes):
/// FlashAdmin takes the admin key; FlashTier takes a tenant token whose MAC this server's tenant key made, for a tenant
/// registered now. The tenant comes from the token only. Statuses: no or malformed "authorization: Bearer ..." →
/// UNAUTHENTICATED; the other service's credential or a MAC this server did not make → PERMISSION_DENIED; a valid token
/// of a tenant not (or no longer) registered → NOT_FOUND.
/// </summary>
internal static class Auth
{
    private const string Scheme = "Bearer ";

    private static string Credential(ServerCallContext context, string call)
    {
        string? header = context.RequestHeaders.GetValue("authorization");
        if (header is null)
            throw new RpcException(new Status(StatusCode.Unauthenticated, $"{call}: no credential; send 'authorization: Bearer <credential>'"));
        if (!header.StartsWith(Scheme, StringComparison.OrdinalIgnoreCase) || header.Length == Scheme.Length)
            throw new RpcException(new Status(StatusCode.Unauthenticated, $"{call}: the authorization header is not 'Bearer <credential>'"));
        return header[Scheme.Length..].Trim();
    }

    /// <summary>FlashAdmin: the caller must present the admin key.</summary>
    public static void Admin(FlashServerCore core, ServerCallContext context, string call)
    {
        string credential = Credential(context, call);
        if (core.Keys.IsAdminKey(credential))
            return;
        bool token = core.Keys.CheckToken(credential, out _) == TokenCheck.Valid;
        throw new RpcException(new Status(StatusCode.PermissionDenied, token
            ? $"{call}: a tenant token cannot call FlashAdmin; it takes the server's admin key"
            : $"{call}: the credential is not this server's admin key"));
    }

    /// <summary>FlashTier: the caller must present a token this server made for a registered tenant; returns it.</summary>
    public static TenantEntry Tenant(FlashServerCore core, ServerCallContext context, string call)
    {
        string credential = Credential(context, call);
        switch (core.Keys.CheckToken(credential, out string tenant))
        {
            case TokenCheck.Valid:
                return core.Find(tenant)
                    ?? throw new RpcException(new Status(StatusCode.NotFound, $"{call}: tenant '{tenant}' is not registered (or was deregistered)"));
            case TokenCheck.BadMac:
                throw new RpcException(new Status(StatusCode.PermissionDenied, $"{call}: the tenant token was not made by this server"));
            default:
                if (core.Keys.IsAdminKey(credential))
                    throw new RpcException(new Status(StatusCode.PermissionDenied, $"{call}: the admin key cannot call FlashTier; it takes a tenant token"));
                throw new RpcException(new Status(StatusCode.Unauthenticated, $"{call}: the credential is not a tenant token ('<tenant>.<64 hex digits>')"));
        }
    }
}
