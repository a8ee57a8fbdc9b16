using System.Collections.Concurrent;
using FaaST.ScaleController.Deploy;
using FaaST.ScaleController.Platform;
using FaaST.ScaleController.Providers;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Logging;

namespace FaaST.ScaleController.Tests.Platform;

/// <summary>
/// What the tests of a real platform share: a real Azurite, a state and an apps folder, the instances' output (for a
/// failing assertion's message), and every platform a test started; <see cref="DisposeAsync"/> stops them all.
/// </summary>
internal sealed class PlatformTestBed : IAsyncDisposable
{
    private readonly TempDirectory _state;
    private readonly TempDirectory _apps;
    private readonly List<PlatformHost> _platforms = [];

    private PlatformTestBed(string name, Storage.AzuriteProcess azurite)
    {
        Azurite = azurite;
        _state = new TempDirectory($"faast-{name}-state-");
        _apps = new TempDirectory($"faast-{name}-apps-");
    }

    /// <summary>Starts Azurite; <paramref name="name"/> names the temporary folders (faast-NAME-state-…).</summary>
    public static async Task<PlatformTestBed> StartAsync(string name) => new(name, await Storage.AzuriteProcess.StartAsync(Repo.Root));

    public Storage.AzuriteProcess Azurite { get; }

    /// <summary>The platforms' state folder (STATE), shared by the platforms a test starts one after another.</summary>
    public string StatePath => _state.Path;

    public string AppsPath => _apps.Path;

    /// <summary>Every line the instances printed, labelled with the instance, and whatever a test adds.</summary>
    public ConcurrentQueue<string> Lines { get; } = new();

    /// <summary>The last <paramref name="count"/> lines of <see cref="Lines"/>, for a failure's message.</summary>
    public string Tail(int count = 40) => "\n" + string.Join('\n', Lines.TakeLast(count));

    /// <summary>A platform on a free port, on this Azurite, whose instances run without isolation and print to <see cref="Lines"/>.</summary>
    public PlatformOptions Options() => new()
    {
        Port = 0,
        StateDirectory = StatePath,
        StorageConnectionString = Azurite.ConnectionString,
        DevelopmentStorage = true,
        InstanceArguments = ["--isolation", "off"],
        InstanceOutput = (label, line) => Lines.Enqueue($"[{label}] {line}"),
    };

    /// <summary>Real instance processes (FaaST.Runtime.dll beside the tests), their ready files in STATE/run as the platform's own.</summary>
    public LocalProcessProvider Provider() => new(new LocalProcessOptions
    {
        RuntimeDll = Path.Combine(AppContext.BaseDirectory, "FaaST.Runtime.dll"),
        RunDirectory = Path.Combine(StatePath, "run"),
        Output = (label, line) => Lines.Enqueue($"[{label}] {line}"),
    });

    /// <summary>Starts a platform with <paramref name="provider"/>'s instances (default: <see cref="Provider"/>'s), logging
    /// nowhere unless <paramref name="logging"/> says.</summary>
    public async Task<PlatformHost> StartPlatformAsync(PlatformOptions options, Action<ILoggingBuilder>? logging = null,
        Action<IServiceCollection>? services = null, IInstanceProvider? provider = null)
    {
        var platform = await PlatformHost.StartAsync(options, provider ?? Provider(), logging: logging ?? (l => l.ClearProviders()), services: services);
        _platforms.Add(platform);
        return platform;
    }

    /// <summary>A copy of a sample (a folder under samples/, or ../bench/apps/NAME) as app <paramref name="name"/>.</summary>
    public string CopyApp(string sample, string name) => Repo.CopySample(sample, Path.Combine(AppsPath, name));

    /// <summary>bench/apps/scale-bench (GET /api/work/{ms} answers "ok") as app <paramref name="name"/>, with
    /// <paramref name="scale"/> as its faast.json's scale section.</summary>
    public string ScaleBench(string name, string scale)
    {
        var dir = CopyApp(Path.Combine("..", "bench", "apps", "scale-bench"), name);
        File.WriteAllText(Path.Combine(dir, "faast.json"), $$"""{ "scale": {{scale}} }""");
        return dir;
    }

    /// <summary>Deploys <paramref name="directory"/> (its settings included) as <paramref name="name"/> through the admin
    /// API; a refusal fails the test with the platform's answer and the instances' last lines.</summary>
    public async Task DeployAsync(HttpClient admin, string name, string directory)
    {
        using var zip = new MemoryStream();
        Packager.Zip(directory, zip, includeSettings: true);
        zip.Position = 0;
        using var deployed = await admin.PutAsync($"admin/platform/apps/{name}", new StreamContent(zip));
        Assert.True(deployed.IsSuccessStatusCode, await deployed.Content.ReadAsStringAsync() + Tail());
    }

    public async ValueTask DisposeAsync()
    {
        foreach (var p in _platforms)
            await p.DisposeAsync();
        await Azurite.DisposeAsync();
        _state.Dispose();
        _apps.Dispose();
    }
}
