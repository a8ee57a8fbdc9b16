using System.Diagnostics;
using System.Net;
using System.Net.Http.Json;
using FaaST.ScaleController.Deploy;
using FaaST.ScaleController.Platform;
using FaaST.ScaleController.Tests.Platform;
using FaaST.Protos.Flash;
using Grpc.Core;
using Grpc.Net.Client;

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

    /// <summary>Runs `FaaST.FlashBackend.dll fit` on a small scratch file (a real sweep of this disk, cut short).</summary>
    private static async Task<string> FitAsync(string directory)
    {
        var profile = Path.Combine(directory, "fitted-profile.json");
        var psi = new ProcessStartInfo("dotnet") { RedirectStandardOutput = true, RedirectStandardError = true };
        foreach (var a in (string[])[Path.Combine(Repo.Root, "src", "FlashBackend", "bin", "Release", "net10.0", "FaaST.FlashBackend.dll"),
            "fit", "--device", Path.Combine(directory, "fit.dat"), "--out", profile, "--size", "8MiB", "--seconds-per-point", "0.05"])
            psi.ArgumentList.Add(a);
        using var p = Process.Start(psi)!;
        var output = p.StandardOutput.ReadToEndAsync();
        var error = await p.StandardError.ReadToEndAsync();
        await p.WaitForExitAsync();
        Assert.True(p.ExitCode == 0, $"fit exited {p.ExitCode}: {error}{await output}");
        return profile;
    }

    [Fact]
    public async Task The_platforms_flash_server_schedules_with_the_fitted_device_profile()
    {
        using var scratch = new TempDirectory("faast-fit-");
        var profile = await FitAsync(scratch.Path);
        var fitted = System.Text.Json.Nodes.JsonNode.Parse(await File.ReadAllTextAsync(profile))!["tokens_per_second"]!.GetValue<double>();
        var options = _bed.Options() with { FlashCapacity = 64L << 20, FlashDeviceProfile = profile };
        var platform = await _bed.StartPlatformAsync(options);
        using var admin = AdminKey.Client(platform.Address, platform.Keys.AdminKey);
        await _bed.DeployAsync(admin, "fitted", App("fitted", """{ "enabled": true }"""));

        // The server's own answer (FlashAdmin.Stats, with the admin key the platform reads from the server's state).
        var status = await StatusAsync(admin);
        using var channel = GrpcChannel.ForAddress(status.Flash!.Address);
        var key = (await File.ReadAllTextAsync(Path.Combine(options.StateDirectory, "flash", "state", "keys", "admin"))).Trim();
        var stats = await new FlashAdmin.FlashAdminClient(channel).StatsAsync(new ServerStatsRequest(), new Metadata { { "authorization", "Bearer " + key } });
        Assert.Equal(fitted, stats.DeviceTokensPerSecond);
    }

    [Fact]
    public async Task A_device_profile_that_is_not_there_fails_the_flash_deploy_with_503_naming_it_and_how_to_write_it()
    {
        var missing = Path.Combine(_bed.StatePath, "no-such-profile.json");
        var platform = await _bed.StartPlatformAsync(_bed.Options() with { FlashCapacity = 64L << 20, FlashDeviceProfile = missing });
        using var admin = AdminKey.Client(platform.Address, platform.Keys.AdminKey);

        using var refused = await PutAsync(admin, "unfitted", App("unfitted", """{ "enabled": true }"""));

        var body = await refused.Content.ReadAsStringAsync();
        Assert.True(refused.StatusCode == HttpStatusCode.ServiceUnavailable, $"{refused.StatusCode}: {body}{_bed.Tail()}");
        Assert.Contains(missing, body, StringComparison.Ordinal);
        Assert.Contains("./faast flash fit", body, StringComparison.Ordinal);
        Assert.DoesNotContain((await StatusAsync(admin)).Apps, a => a.App == "unfitted");
    }
}
