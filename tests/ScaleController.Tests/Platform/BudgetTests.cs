using System.Collections.Concurrent;
using System.Net;
using System.Net.Http.Json;
using FaaST.ScaleController.Deploy;
using FaaST.ScaleController.Platform;
using FaaST.ScaleController.Providers;
using Microsoft.Extensions.Logging;

namespace FaaST.ScaleController.Tests.Platform;

/// <summary>
/// The platform-wide budget (issue 19, defect 6) as the platform applies it: a real platform on a real Azurite with
/// real deploys, but instances from a provider that answers at once (the logic under test is the platform's
/// counting, not the processes; PlatformTests has the check with real instances).
/// </summary>
public sealed class BudgetTests : IAsyncLifetime
{
    private PlatformTestBed _bed = null!;
    private readonly ListLogger _log = new(LogLevel.Information);

    public async Task InitializeAsync() => _bed = await PlatformTestBed.StartAsync("budget");

    public async Task DisposeAsync()
    {
        if (_bed is not null)
            await _bed.DisposeAsync();
    }

    private async Task<(PlatformHost Platform, FakeProvider Provider)> StartAsync(int maxInstances, int maxWorkers = 128, params string[] arguments)
    {
        var provider = new FakeProvider();
        var platform = await _bed.StartPlatformAsync(_bed.Options() with
        {
            InstanceArguments = arguments,
            MaxInstances = maxInstances,
            MaxWorkers = maxWorkers,
        }, l =>
        {
            l.ClearProviders();
            l.AddProvider(_log);
        }, provider: provider);
        return (platform, provider);
    }

    /// <summary>samples/python-app as app <paramref name="name"/>, allowed up to 8 instances by its own policy.</summary>
    private MemoryStream App(string name)
    {
        var dir = _bed.CopyApp("python-app", name);
        File.WriteAllText(Path.Combine(dir, "faast.json"), """{ "scale": { "minInstances": 1, "maxInstances": 8, "keepAlive": "01:00:00" } }""");
        var zip = new MemoryStream();
        Packager.Zip(dir, zip, includeSettings: true);
        zip.Position = 0;
        return zip;
    }

    private static async Task<HttpResponseMessage> DeployAsync(PlatformHost platform, string name, Stream zip)
    {
        using var client = AdminKey.Client(platform.Address, platform.Keys.AdminKey);
        return await client.PutAsync($"admin/platform/apps/{name}", new StreamContent(zip));
    }

    [Fact]
    public async Task A_scale_out_beyond_the_platforms_instance_budget_is_capped_and_logged_with_the_reason()
    {
        var (platform, provider) = await StartAsync(maxInstances: 3);
        using (var a = await DeployAsync(platform, "alpha", App("alpha")))
            Assert.Equal(HttpStatusCode.Created, a.StatusCode);
        using (var b = await DeployAsync(platform, "beta", App("beta")))
            Assert.Equal(HttpStatusCode.Created, b.StatusCode);

        var alpha = platform.Apps["alpha"];
        await alpha.ScaleToAsync(5, "the test asks for 5", CancellationToken.None);
        await alpha.WhenStartedAsync(CancellationToken.None);

        Assert.Equal(2, alpha.CurrentInstances);
        Assert.Equal(2, alpha.Desired);
        Assert.Equal(3, provider.Running);
        Assert.Contains(_log.Entries, e => e.EventId == 8252 && e.Text.Contains("alpha", StringComparison.Ordinal)
            && e.Text.Contains("asked for 5", StringComparison.Ordinal) && e.Text.Contains("MaxInstances", StringComparison.Ordinal));
    }

    [Fact]
    public async Task A_deploy_that_cannot_get_one_instance_is_refused_with_503_and_leaves_no_app_until_room_is_given_back()
    {
        var (platform, provider) = await StartAsync(maxInstances: 2);
        using (var a = await DeployAsync(platform, "alpha", App("alpha")))
            Assert.Equal(HttpStatusCode.Created, a.StatusCode);
        using (var b = await DeployAsync(platform, "beta", App("beta")))
            Assert.Equal(HttpStatusCode.Created, b.StatusCode);

        using (var refused = await DeployAsync(platform, "gamma", App("gamma")))
        {
            Assert.Equal(HttpStatusCode.ServiceUnavailable, refused.StatusCode);
            Assert.NotNull(refused.Headers.RetryAfter);
            var error = await refused.Content.ReadFromJsonAsync(PlatformJsonContext.Default.PlatformError);
            Assert.Contains("gamma", error!.Error, StringComparison.Ordinal);
            Assert.Contains("MaxInstances", error.Error, StringComparison.Ordinal);
        }
        Assert.False(platform.Apps.ContainsKey("gamma"));
        using var store = new Storage.BlobStore(_bed.Azurite.ConnectionString);
        Assert.Null(await new DeploymentStore(store, platform.Keys).CurrentAsync("gamma"));
        Assert.Equal(2, provider.Running);

        // An app unloaded gives its room back.
        await platform.Apps["beta"].UnloadAsync("the test", CancellationToken.None);
        await Eventually.TrueAsync(() => provider.Running == 1, "beta's instance stopped");
        using (var again = await DeployAsync(platform, "gamma", App("gamma")))
            Assert.Equal(HttpStatusCode.Created, again.StatusCode);
    }

    [Fact]
    public async Task The_worker_budget_counts_every_worker_of_every_instance()
    {
        // 2 workers per instance, 5 at most: two instances fit (4), a third (6) does not.
        var (platform, provider) = await StartAsync(maxInstances: 32, maxWorkers: 5, "--workers", "2");
        using (var a = await DeployAsync(platform, "alpha", App("alpha")))
            Assert.Equal(HttpStatusCode.Created, a.StatusCode);

        var alpha = platform.Apps["alpha"];
        await alpha.ScaleToAsync(4, "the test asks for 4", CancellationToken.None);
        await alpha.WhenStartedAsync(CancellationToken.None);

        Assert.Equal(2, alpha.CurrentInstances);
        Assert.Equal(2, provider.Running);
        Assert.Contains(_log.Entries, e => e.EventId == 8252 && e.Text.Contains("MaxWorkers", StringComparison.Ordinal));
    }

    [Fact]
    public async Task A_redeploy_at_the_budget_rolls_on_the_room_left_and_with_none_keeps_the_running_version()
    {
        var (platform, provider) = await StartAsync(maxInstances: 1);
        using (var a = await DeployAsync(platform, "alpha", App("alpha")))
            Assert.Equal(HttpStatusCode.Created, a.StatusCode);

        // No room for a new instance beside the running one: refused, v1 stays.
        using (var refused = await DeployAsync(platform, "alpha", App("alpha")))
            Assert.Equal(HttpStatusCode.ServiceUnavailable, refused.StatusCode);
        Assert.Equal(1, platform.Apps["alpha"].Deployment.Version);
        using var store = new Storage.BlobStore(_bed.Azurite.ConnectionString);
        Assert.Equal(1, (await new DeploymentStore(store, platform.Keys).CurrentAsync("alpha"))!.Version);
        Assert.Equal(1, provider.Running);
    }

    /// <summary>Instances that are ready the moment they are asked for; nothing listens at their addresses.</summary>
    private sealed class FakeProvider : IInstanceProvider
    {
        private readonly ConcurrentDictionary<string, InstanceHandle> _running = new();
        private int _n;

        public int Running => _running.Count;

        public event Action<InstanceHandle, string>? Exited
        {
            add { }
            remove { }
        }

        public Task<InstanceHandle> StartAsync(InstanceSpec spec, CancellationToken ct)
        {
            var n = Interlocked.Increment(ref _n);
            var handle = new InstanceHandle($"{spec.App}-v{spec.Version}-{n}", spec.App, spec.Version, new Uri($"http://127.0.0.1:{n}/"), null, 0,
                DateTimeOffset.UtcNow);
            _running[handle.Id] = handle;
            return Task.FromResult(handle);
        }

        public Task StopAsync(InstanceHandle instance, TimeSpan deadline, CancellationToken ct)
        {
            _running.TryRemove(instance.Id, out _);
            return Task.CompletedTask;
        }

        public Task<InstanceHandle?> AdoptAsync(InstanceHandle recorded, FaaST.Peers.PeerAuth credentials, CancellationToken ct) => Task.FromResult<InstanceHandle?>(null);

        public ValueTask DisposeAsync() => ValueTask.CompletedTask;
    }
}
