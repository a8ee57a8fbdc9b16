using FaaST.FlashBackend.Server;
using FaaST.FlashBackend.Scheduling;

namespace FaaST.FlashBackend.Tests.Server;

public sealed class ServerKeysTests : IDisposable
{
    private readonly ServerFiles _files = new();

    public void Dispose() => _files.Dispose();

    [Fact]
    public void SixtyFourCharactersThatAreNotTheKeyAreRefusedEvenWhenTheyTakeMoreBytesInUtf8()
    {
        ServerKeys keys = ServerKeys.Open(_files.State);
        Assert.False(keys.IsAdminKey(new string('é', 64)));
        Assert.False(keys.IsAdminKey(new string('0', 64)));
        Assert.True(keys.IsAdminKey(File.ReadAllText(keys.AdminKeyPath).Trim()));
    }

    [Fact]
    public void ATokenVerifiesForItsTenantOnlyAndUnderTheSameKeysAfterReopening()
    {
        string token = ServerKeys.Open(_files.State).TokenFor("app-a");
        ServerKeys reopened = ServerKeys.Open(_files.State);

        Assert.Equal(TokenCheck.Valid, reopened.CheckToken(token, out string tenant));
        Assert.Equal("app-a", tenant);
        Assert.Equal(TokenCheck.BadMac, reopened.CheckToken("app-b" + token["app-a".Length..], out _));
        Assert.Equal(TokenCheck.Malformed, reopened.CheckToken(token[..^1], out _));
    }

    [Fact]
    public void TenantsSavedAreLoadedWithTheirSlos()
    {
        ServerKeys keys = ServerKeys.Open(_files.State);
        keys.SaveTenants([new TenantSpec("lc", 1000, 2000, 0.9), new TenantSpec("be")]);

        Assert.Equal([new TenantSpec("be"), new TenantSpec("lc", 1000, 2000, 0.9)], ServerKeys.Open(_files.State).LoadTenants());
    }
}
