using System.Net;
using System.Net.Http.Json;
using FaaST.ScaleController.Deploy;
using FaaST.ScaleController.Platform;
using FaaST.ScaleController.Tests.Platform;

namespace FaaST.ScaleController.Tests.Flash;

/// <summary>
/// The platform's side of the flash tier (issue 22), on a real platform with real instances and the real flash server
/// it starts: an SLO the server's admission control refuses fails the deploy with 422 naming the app, the SLO and the
/// server's reason; each app's instances get the server's address and their own app's token, never another's; an app
/// redeployed without flash is deregistered.
/// </summary>
public sealed class FlashDeployTests : IAsyncLifetime
{
    private PlatformTestBed _bed = null!;

    public async Task InitializeAsync() => _bed = await PlatformTestBed.StartAsync("flash");

    public async Task DisposeAsync() => await _bed.DisposeAsync();

    /// <summary>A 64 MiB device (four 16 MiB segments): what the tests need, not the default 1 GiB.</summary>
    private Task<PlatformHost> StartAsync() => _bed.StartPlatformAsync(_bed.Options() with { FlashCapacity = 64L << 20 });

    private string App(string name, string flash)
    {
        var dir = _bed.CopyApp("python-app", name);
        File.WriteAllText(Path.Combine(dir, "faast.json"), $$"""{ "flash": {{flash}} }""");
        return dir;
    }

    private static async Task<HttpResponseMessage> PutAsync(HttpClient admin, string name, string directory)
    {
        using var zip = new MemoryStream();
        Packager.Zip(directory, zip, includeSettings: true);
        zip.Position = 0;
        return await admin.PutAsync($"admin/platform/apps/{name}", new StreamContent(zip));
    }

    private static async Task<PlatformStatus> StatusAsync(HttpClient admin) =>
        (await admin.GetFromJsonAsync("admin/platform", PlatformJsonContext.Default.PlatformStatus))!;

    /// <summary>The instance's environment as the kernel holds it (the platform gave it at exec).</summary>
    private static Dictionary<string, string> EnvironmentOf(int pid) =>
        File.ReadAllText($"/proc/{pid}/environ").Split('\0', StringSplitOptions.RemoveEmptyEntries)
            .Select(e => e.Split('=', 2)).Where(kv => kv.Length == 2).GroupBy(kv => kv[0]).ToDictionary(g => g.Key, g => g.Last()[1]);

    [Fact]
    public async Task An_slo_the_flash_server_cannot_carry_fails_the_deploy_with_422_naming_the_app_the_slo_and_the_reason()
    {
        var platform = await StartAsync();
        using var admin = AdminKey.Client(platform.Address, platform.Keys.AdminKey);

        using var refused = await PutAsync(admin, "greedy", App("greedy", """{ "enabled": true, "iopsSlo": 10000000, "p95LatencyUs": 100 }"""));

        var body = await refused.Content.ReadAsStringAsync();
        Assert.True(refused.StatusCode == HttpStatusCode.UnprocessableEntity, $"{refused.StatusCode}: {body}{_bed.Tail()}");
        var error = (await refused.Content.ReadFromJsonAsync(PlatformJsonContext.Default.PlatformError))!.Error;
        Assert.Contains("app greedy", error, StringComparison.Ordinal);
        Assert.Contains("10000000 IOPS at p95 100 us", error, StringComparison.Ordinal);
        Assert.Contains("refused", error, StringComparison.Ordinal);
        var status = await StatusAsync(admin);
        Assert.DoesNotContain(status.Apps, a => a.App == "greedy");
        Assert.DoesNotContain("greedy", status.Flash!.Apps);
    }

    [Fact]
    public async Task Each_apps_instances_get_the_flash_address_and_their_own_token_only_and_an_app_redeployed_without_flash_is_deregistered()
    {
        var platform = await StartAsync();
        using var admin = AdminKey.Client(platform.Address, platform.Keys.AdminKey);
        await _bed.DeployAsync(admin, "alpha", App("alpha", """{ "enabled": true }"""));
        await _bed.DeployAsync(admin, "beta", App("beta", """{ "enabled": true, "iopsSlo": 1000, "p95LatencyUs": 5000 }"""));

        var status = await StatusAsync(admin);
        Assert.Equal(["alpha", "beta"], status.Flash!.Apps.Order(StringComparer.Ordinal));
        var alpha = EnvironmentOf(Assert.Single(status.Apps.Single(a => a.App == "alpha").Instances).ProcessId);
        var beta = EnvironmentOf(Assert.Single(status.Apps.Single(a => a.App == "beta").Instances).ProcessId);
        Assert.Equal(status.Flash.Address.ToString(), alpha["FAAST_FLASH_ADDRESS"]);
        Assert.Equal(status.Flash.Address.ToString(), beta["FAAST_FLASH_ADDRESS"]);
        // A token is "<tenant>.<mac>": each instance holds its own app's, and nothing of the other's.
        Assert.StartsWith("alpha.", alpha["FAAST_FLASH_TOKEN"], StringComparison.Ordinal);
        Assert.StartsWith("beta.", beta["FAAST_FLASH_TOKEN"], StringComparison.Ordinal);
        Assert.DoesNotContain(alpha.Values, v => v.Contains(beta["FAAST_FLASH_TOKEN"], StringComparison.Ordinal));
        Assert.DoesNotContain(beta.Values, v => v.Contains(alpha["FAAST_FLASH_TOKEN"], StringComparison.Ordinal));

        await _bed.DeployAsync(admin, "alpha", App("alpha", """{ "enabled": false }"""));

        status = await StatusAsync(admin);
        Assert.Equal(["beta"], status.Flash!.Apps);
        var redeployed = EnvironmentOf(Assert.Single(status.Apps.Single(a => a.App == "alpha").Instances).ProcessId);
        Assert.False(redeployed.ContainsKey("FAAST_FLASH_TOKEN"));
        Assert.False(redeployed.ContainsKey("FAAST_FLASH_ADDRESS"));
    }
}
