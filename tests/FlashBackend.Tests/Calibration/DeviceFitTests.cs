using FaaST.FlashBackend.Calibration;
using FaaST.FlashBackend.Scheduling;

namespace FaaST.FlashBackend.Tests.Calibration;

/// <summary>The cost-model fit on a small real file in /var/tmp (O_DIRECT): the structure and sanity of what it writes,
/// never its timings.</summary>
public sealed class DeviceFitTests : IDisposable
{
    private readonly string _dir = Directory.CreateTempSubdirectory("faast-fit-").FullName;

    public DeviceFitTests()
    {
        // Directory.CreateTempSubdirectory follows TMPDIR; the device must be disk-backed, so move under /var/tmp.
        Directory.Delete(_dir);
        _dir = Path.Combine("/var/tmp", Path.GetFileName(_dir));
        Directory.CreateDirectory(_dir);
    }

    public void Dispose() => Directory.Delete(_dir, recursive: true);

    [Fact]
    public async Task ASweepOfASmallFileWritesAProfileWhoseCostTableAndLimitsTheSchedulerAccepts()
    {
        string file = Path.Combine(_dir, "device.dat"), output = Path.Combine(_dir, "profile.json");
        var log = new StringWriter();
        var result = await DeviceFit.RunAsync(new DeviceFitOptions
        {
            Path = file,
            SizeBytes = 16 << 20,
            ReadRatios = [1.0, 0.75, 0.5, 0.0],
            QueueDepths = [1, 4],
            PointDuration = TimeSpan.FromMilliseconds(200),
            OutputPath = output,
        }, log);

        Assert.Equal(8, result.Points.Count);
        Assert.All(result.Points, p => Assert.True(p.Iops > 0, $"no I/O at read {p.ReadRatio} qd {p.QueueDepth}"));
        Assert.Equal(result.Points.Where(p => p.ReadRatio == 1.0).Max(p => p.Iops), result.TokensPerSecond, 0);
        // Tiers: 0.75, 0.5, then the last moved to 0 so every ratio has a cost; never below a read, never falling.
        Assert.Equal([0.75, 0.5, 0.0], result.WriteCostTiers.Select(t => t.MinReadRatio));
        for (int i = 0; i < result.WriteCostTiers.Count; i++)
        {
            Assert.True(result.WriteCostTiers[i].WriteCost >= 1);
            if (i > 0) Assert.True(result.WriteCostTiers[i].WriteCost >= result.WriteCostTiers[i - 1].WriteCost);
        }
        Assert.NotEmpty(result.TokenLimits);
        var profile = result.ToDeviceProfile();
        profile.Validate();
        _ = new En4sScheduler(result.ToCostTable(), SchedulerLimits.Default, profile, En4sSettings.Conservative);
        // The JSON the server loads is the same profile, and the swept file (created by the tool) is gone.
        var loaded = DeviceFitResult.Load(output);
        Assert.Equal(result.TokensPerSecond, loaded.TokensPerSecond);
        Assert.Equal(result.WriteCostTiers, loaded.WriteCostTiers);
        Assert.False(File.Exists(file));
        Assert.Contains("qd 4", log.ToString());
    }

    [Fact]
    public void TheFitSolvesTheWriteCostFromTheReadPeakAndKeepsItFromFallingWithMoreWrites()
    {
        var points = new List<SweepPoint>
        {
            new(1.0, 32, 100_000, 80, 200, 0),
            new(0.9, 32, 50_000, 80, 300, 100),  // 50K·(0.9 + 0.1·C) = 100K → C = 11
            new(0.5, 32, 40_000, 80, 300, 100),  // 40K·(0.5 + 0.5·C) = 100K → C = 4, below 11: kept at 11
            new(0.0, 32, 5_000, 0, 0, 100),      // C = 20
            new(1.0, 1, 10_000, 70, 100, 0),
        };
        var fit = DeviceFit.Fit("synthetic", points);
        Assert.Equal(100_000, fit.TokensPerSecond);
        Assert.Equal(32, fit.PeakQueueDepth);
        Assert.Equal([new FittedTier(0.9, 11), new FittedTier(0.5, 11), new FittedTier(0, 20)], fit.WriteCostTiers);
        Assert.Equal([new FittedLimit(100, 10_000), new FittedLimit(200, 100_000)], fit.TokenLimits);
    }

    [Fact]
    public async Task ABlockDeviceIsRefusedWithoutConsentToOverwriteItNamingIt()
    {
        var e = await Assert.ThrowsAsync<InvalidOperationException>(() =>
            DeviceFit.RunAsync(new DeviceFitOptions { Path = "/dev/faast-no-such-disk" }, TextWriter.Null));
        Assert.Contains("/dev/faast-no-such-disk", e.Message);
        Assert.Contains("AllowWritesToBlockDevice", e.Message);
    }

    [Fact]
    public async Task OptionsWithoutAReadOnlyRatioAreRefused()
    {
        var e = await Assert.ThrowsAsync<ArgumentException>(() =>
            DeviceFit.RunAsync(new DeviceFitOptions { Path = Path.Combine(_dir, "x"), ReadRatios = [0.5] }, TextWriter.Null));
        Assert.Contains("include 1.0", e.Message);
    }
}
