using FaaST.Protos.Flash;
using Grpc.Core;

namespace FaaST.FlashBackend.Tests.Server;

/// <summary>Every refusal of the two credentials (protos/flash.proto's header), on a real server over real gRPC.</summary>
public sealed class ServerAuthTests : IAsyncLifetime
{
    private InProcessServer _s = null!;

    public async Task InitializeAsync() => _s = await InProcessServer.StartAsync();

    public async Task DisposeAsync() => await _s.DisposeAsync();

    private static async Task<RpcException> Refused(Func<Task> call) => await Assert.ThrowsAsync<RpcException>(call);

    [Fact]
    public async Task FlashTierWithoutAnAuthorizationHeaderIsUnauthenticated()
    {
        RpcException e = await Refused(async () => await _s.Tier.OpenFlowAsync(new OpenFlowRequest()));
        Assert.Equal(StatusCode.Unauthenticated, e.StatusCode);
        Assert.Contains("OpenFlow", e.Status.Detail);
    }

    [Fact]
    public async Task FlashAdminWithoutAnAuthorizationHeaderIsUnauthenticated()
    {
        RpcException e = await Refused(async () => await _s.Admin.StatsAsync(new ServerStatsRequest()));
        Assert.Equal(StatusCode.Unauthenticated, e.StatusCode);
    }

    [Theory]
    [InlineData("Basic abc")]
    [InlineData("Bearer ")]
    [InlineData("Bearer not-a-token")]
    [InlineData("Bearer app.zz")]
    public async Task AMalformedCredentialOnFlashTierIsUnauthenticated(string header)
    {
        var md = new Metadata { { "authorization", header } };
        RpcException e = await Refused(async () => await _s.Tier.OpenFlowAsync(new OpenFlowRequest(), md));
        Assert.Equal(StatusCode.Unauthenticated, e.StatusCode);
    }

    [Fact]
    public async Task AWrongAdminKeyIsPermissionDenied()
    {
        string wrong = new string('0', 64);
        RpcException e = await Refused(async () => await _s.Admin.StatsAsync(new ServerStatsRequest(), FlashClients.Bearer(wrong)));
        Assert.Equal(StatusCode.PermissionDenied, e.StatusCode);
        Assert.Contains("admin key", e.Status.Detail);
    }

    [Fact]
    public async Task TheAdminKeyOnFlashTierIsPermissionDenied()
    {
        RpcException e = await Refused(async () => await _s.Tier.OpenFlowAsync(new OpenFlowRequest(), _s.AdminAuth));
        Assert.Equal(StatusCode.PermissionDenied, e.StatusCode);
        Assert.Contains("admin key cannot call FlashTier", e.Status.Detail);
    }

    [Fact]
    public async Task ATenantTokenOnFlashAdminIsPermissionDenied()
    {
        TenantClient a = await _s.TenantAsync("app-a");
        RpcException e = await Refused(async () => await _s.Admin.RegisterTenantAsync(new RegisterTenantRequest { Tenant = "app-x" }, a.Auth));
        Assert.Equal(StatusCode.PermissionDenied, e.StatusCode);
        Assert.Contains("tenant token cannot call FlashAdmin", e.Status.Detail);
    }

    [Fact]
    public async Task ATokenWhoseMacThisServerDidNotMakeIsPermissionDenied()
    {
        TenantClient a = await _s.TenantAsync("app-a");
        // The same tenant with another MAC, and app-a's MAC presented as app-b's.
        string forged = "app-a." + new string('a', 64);
        string renamed = "app-b" + a.Token["app-a".Length..];
        foreach (string token in new[] { forged, renamed })
        {
            RpcException e = await Refused(async () => await _s.Tier.OpenFlowAsync(new OpenFlowRequest(), FlashClients.Bearer(token)));
            Assert.Equal(StatusCode.PermissionDenied, e.StatusCode);
        }
    }

    [Fact]
    public async Task AValidTokenOfATenantNeverRegisteredOrDeregisteredIsNotFound()
    {
        TenantClient a = await _s.TenantAsync("app-a");
        await _s.Admin.DeregisterTenantAsync(new DeregisterTenantRequest { Tenant = "app-a" }, _s.AdminAuth);

        RpcException e = await Refused(() => a.GetAsync("k"));
        Assert.Equal(StatusCode.NotFound, e.StatusCode);
        Assert.Contains("'app-a' is not registered", e.Status.Detail);
    }

    [Fact]
    public async Task TenantAsTokenNamingTenantBsKeyReadsOnlyItsOwnNamespace()
    {
        TenantClient a = await _s.TenantAsync("app-a");
        TenantClient b = await _s.TenantAsync("app-b");
        byte[] secret = "b's bytes"u8.ToArray();
        await b.PutAsync("secret", "\"1\"", secret);

        (GetHeader header, byte[] data, _) = await a.GetAsync("secret");

        Assert.False(header.Found);
        Assert.Empty(data);
        Assert.Equal(secret, (await b.GetAsync("secret")).Data);
    }

    [Fact]
    public async Task TenantACannotDeleteTenantBsObject()
    {
        TenantClient a = await _s.TenantAsync("app-a");
        TenantClient b = await _s.TenantAsync("app-b");
        await b.PutAsync("k", "\"1\"", [1, 2, 3]);

        Assert.False(await a.DeleteAsync("k"));
        Assert.True((await b.GetAsync("k")).Header.Found);
    }

    [Fact]
    public async Task TenantACannotUseTenantBsFlow()
    {
        TenantClient a = await _s.TenantAsync("app-a");
        TenantClient b = await _s.TenantAsync("app-b");
        RpcException e = await Refused(async () => await a.Tier.Get(new GetRequest { Flow = b.Flow, Key = TenantClient.Key("k") }, a.Auth).ResponseStream.MoveNext());
        Assert.Equal(StatusCode.NotFound, e.StatusCode);
        Assert.Contains($"flow {b.Flow} is not open for tenant 'app-a'", e.Status.Detail);
    }

    [Fact]
    public async Task RegisteringAgainWithTheSameSloReturnsTheSameToken()
    {
        var request = new RegisterTenantRequest { Tenant = "app-a" };
        RegisterTenantReply first = await _s.Admin.RegisterTenantAsync(request, _s.AdminAuth);
        RegisterTenantReply again = await _s.Admin.RegisterTenantAsync(request, _s.AdminAuth);
        Assert.Equal(first.Token, again.Token);
        Assert.StartsWith("app-a.", first.Token);
        Assert.Equal("BE", first.Class);
    }

    [Fact]
    public async Task ATenantNameThatIsNotAnAppNameIsInvalidArgument()
    {
        RpcException e = await Refused(async () => await _s.Admin.RegisterTenantAsync(new RegisterTenantRequest { Tenant = "App.A" }, _s.AdminAuth));
        Assert.Equal(StatusCode.InvalidArgument, e.StatusCode);
        Assert.Contains("'App.A'", e.Status.Detail);
    }
}
