using FaaST.Protos.Flash;

namespace FaaST.FlashBackend.Tests.Server;

/// <summary>`fit` and `serve --device-profile` as processes: the profile the sweep writes is the device the server
/// schedules, and what either refuses is named.</summary>
public sealed class DeviceProfileProcessTests : IDisposable
{
    private readonly ServerFiles _files = new();

    public void Dispose() => _files.Dispose();

    private static async Task<(int Code, string Out, string Err)> RunAsync(params string[] args)
    {
        using var p = ServerProcess.Launch(args);
        Task<string> output = p.StandardOutput.ReadToEndAsync();
        string err = await p.StandardError.ReadToEndAsync();
        await p.WaitForExitAsync();
        return (p.ExitCode, await output, err);
    }

    [Fact]
    public async Task AFitWritesAProfileAndAServerStartedWithItSchedulesTheFittedTokenRate()
    {
        string swept = Path.Combine(_files.Dir, "sweep.dat"), profile = Path.Combine(_files.Dir, "profile.json");

        (int code, string output, string err) = await RunAsync("fit", "--device", swept, "--out", profile, "--size", "8MiB", "--seconds-per-point", "0.05");

        Assert.True(code == 0, $"fit exited {code}: {err}");
        Assert.False(File.Exists(swept), "the sweep deletes the file it created");
        var fitted = FaaST.FlashBackend.Calibration.DeviceFitResult.Load(profile);
        Assert.Equal(18, fitted.Points.Count); // 6 read ratios x queue depths 1, 8, 32
        Assert.Contains("tokens/s", output);

        await using ServerProcess server = await ServerProcess.StartAsync(_files, extra: ["--device-profile", profile]);
        using var c = new FlashClients(server.Address, Path.Combine(_files.State, "keys", "admin"));
        ServerStats stats = await c.Admin.StatsAsync(new ServerStatsRequest(), c.AdminAuth);
        Assert.Equal(fitted.TokensPerSecond, stats.DeviceTokensPerSecond);
    }

    [Fact]
    public async Task AFitRefusesAnExistingFileAndLeavesItsBytesAlone()
    {
        string existing = Path.Combine(_files.Dir, "log.dat");
        byte[] bytes = [1, 2, 3, 4];
        File.WriteAllBytes(existing, bytes);

        (int code, _, string err) = await RunAsync("fit", "--device", existing, "--out", Path.Combine(_files.Dir, "p.json"));

        Assert.Equal(2, code);
        Assert.Contains("--device", err);
        Assert.Contains(existing, err);
        Assert.Equal(bytes, File.ReadAllBytes(existing));
    }

    [Fact]
    public async Task AServerGivenAFileThatIsNotAProfileExits1NamingIt()
    {
        string bogus = Path.Combine(_files.Dir, "bogus.json");
        File.WriteAllText(bogus, "{ \"write_cost_tiers\": 7 }");

        (int code, _, string err) = await RunAsync("serve", "--device", _files.Device, "--capacity", "16MiB", "--state", _files.State,
            "--device-profile", bogus);

        Assert.Equal(1, code);
        Assert.Contains("--device-profile", err);
        Assert.Contains(bogus, err);
    }

    [Fact]
    public async Task ADeviceProfileAndDeviceTokensTogetherAreRefusedAsABadOption()
    {
        (int code, _, string err) = await RunAsync("serve", "--device", _files.Device, "--capacity", "16MiB", "--state", _files.State,
            "--device-tokens", "60000", "--device-profile", Path.Combine(_files.Dir, "p.json"));

        Assert.Equal(2, code);
        Assert.Contains("--device-tokens", err);
    }
}
