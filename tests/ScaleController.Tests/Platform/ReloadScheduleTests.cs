using System.Collections.Concurrent;
using System.Net.Http.Json;
using FaaST.ScaleController.Platform;

namespace FaaST.ScaleController.Tests.Platform;

/// <summary>
/// The platform times an app's loads by its idle times (Faa$T §3.3, ATC'20's hybrid histogram): a real platform, real
/// instances, the app's faast.json with second-wide bins so the policy learns in a test's time. Nothing here asserts how
/// long anything took: the sleeps only shape the idle times the policy learns, and every wait is on an observed event.
/// </summary>
public sealed class ReloadScheduleTests : IAsyncLifetime
{
    private PlatformTestBed _bed = null!;

    public async Task InitializeAsync() => _bed = await PlatformTestBed.StartAsync("reload");

    public async Task DisposeAsync()
    {
        if (_bed is not null)
            await _bed.DisposeAsync();
    }

    private static async Task<AppStatus> AppAsync(HttpClient client, string app) =>
        (await client.GetFromJsonAsync("admin/platform", PlatformJsonContext.Default.PlatformStatus))!.Apps.Single(a => a.App == app);

    /// <summary>A platform on the bed's storage, the app events it raises from now on, and an admin client.</summary>
    private async Task<(PlatformHost Platform, ConcurrentQueue<AppLifecycleEvent> Events, IDisposable Subscription, HttpClient Client)> StartAsync(PlatformOptions options)
    {
        var platform = await _bed.StartPlatformAsync(options);
        var events = new ConcurrentQueue<AppLifecycleEvent>();
        var subscription = platform.AppLifecycle.Subscribe("test", (e, _) =>
        {
            events.Enqueue(e);
            return Task.CompletedTask;
        });
        return (platform, events, subscription, AdminKey.Client(platform.Address, platform.Keys.AdminKey));
    }

    /// <summary>
    /// Four invocations of <paramref name="path"/> with idle times of about 9.5, 9.5 and 25.5 s (in the middle of their
    /// one-second bins, whatever a busy machine adds): the head's bin gives a window of at least 8.1 s (9 s less 10 %), more
    /// than two leads of 2 s, so the app is unloaded a lead after the last invocation and loaded again a lead before the
    /// window opens, about 4 s later (with 6.5 s idle times that was 1.4 s, less than stopping an instance took in a CI run
    /// at load average 20); the tail keeps it loaded until about 28 s after the last invocation, long after a slow
    /// instance start.
    /// </summary>
    private static async Task LearnAsync(HttpClient client, string path, string expected)
    {
        foreach (var pause in new[] { 0, 9.5, 9.5, 25.5 })
        {
            await Task.Delay(TimeSpan.FromSeconds(pause));
            Assert.Equal(expected, await client.GetStringAsync(path));
        }
    }

    /// <summary>One-second bins over a minute; three idle times are enough to predict; the reload comes two seconds early.
    /// The fixed keep-alive (10 minutes) keeps the app loaded while the policy has too few idle times.</summary>
    private const string Policy = """
        { "scale": { "minInstances": 1, "maxInstances": 1, "interval": "00:00:01", "keepAlive": "00:10:00" },
          "prewarm": { "reloadLead": "00:00:02",
                       "histogram": { "binWidth": "00:00:01", "range": "00:01:00", "minSamples": 3 } } }
        """;

    [Fact]
    public async Task An_app_with_a_learnt_period_is_unloaded_after_an_invocation_and_loaded_again_before_the_next_and_the_learning_survives_a_restart()
    {
        var options = _bed.Options();
        var (platform, events, subscription, client) = await StartAsync(options);
        using var _ = subscription;
        using var __ = client;
        var dir = _bed.CopyApp(Path.Combine("..", "bench", "apps", "scale-bench"), "periodic");
        File.WriteAllText(Path.Combine(dir, "faast.json"), Policy);
        await _bed.DeployAsync(client, "periodic", dir);

        await LearnAsync(client, "periodic/api/work/1", "ok");
        var learnt = (await AppAsync(client, "periodic")).Load!;
        Assert.Equal(3, learnt.IdleTimes);
        Assert.Equal("Histogram", learnt.Mode);
        Assert.True(learnt.PrewarmWindowSeconds >= 8.1, learnt.Reason);

        // No request from here on: the platform unloads the app, then loads it again by itself.
        // Loaded and its instance's InstanceStarted are raised one after the other: wait for the second, or a busy
        // machine can show the list between the two (CI once saw six events here).
        await Eventually.TrueAsync(() => events.Count(e => e.Kind == AppLifecycleKind.InstanceStarted) == 2
                && events.Any(e => e.Kind == AppLifecycleKind.InstanceStopped),
            "the app unloaded and loaded again ahead of the predicted invocation", () => string.Join(", ", events.Select(e => e.Kind)), seconds: 120);
        var kinds = events.Select(e => e.Kind).ToArray();
        string seen = string.Join(", ", kinds);
        Assert.True(kinds.Take(3).SequenceEqual([AppLifecycleKind.Loaded, AppLifecycleKind.InstanceStarted, AppLifecycleKind.Unloading]), seen);
        int reload = Array.IndexOf(kinds, AppLifecycleKind.Loaded, 1);
        Assert.True(reload > 2 && reload + 1 < kinds.Length && kinds[reload + 1] == AppLifecycleKind.InstanceStarted, seen);
        Assert.True(Array.IndexOf(kinds, AppLifecycleKind.InstanceStopped) > 2, seen);
        // The app is Unloaded when its last instance stopped before the reload began (the usual order); when stopping
        // took longer than the lead (a busy machine), the reload comes first and the app is never empty: no Unloaded.
        int unloaded = Array.IndexOf(kinds, AppLifecycleKind.Unloaded);
        Assert.True(unloaded < 0 || (unloaded > Array.IndexOf(kinds, AppLifecycleKind.InstanceStopped) && unloaded < reload), seen);
        var reloaded = await AppAsync(client, "periodic");
        Assert.Equal(1, reloaded.Load!.Reloads);
        Assert.Contains(reloaded.Decisions, d => d.Kind == "unload" && d.Reason.Contains("unloaded 2 s after an invocation", StringComparison.Ordinal));

        // The invocation the reload was for finds the app loaded: served by the instance the reload started, no other load.
        Assert.Equal("ok", await client.GetStringAsync("periodic/api/work/1"));
        Assert.Equal(2, events.Count(e => e.Kind == AppLifecycleKind.Loaded));
        Assert.Equal(4, (await AppAsync(client, "periodic")).Load!.IdleTimes);

        // A platform stopped and started again on the same storage knows the four idle times.
        await platform.DisposeAsync();
        var again = await _bed.StartPlatformAsync(options);
        using var client2 = AdminKey.Client(again.Address, again.Keys.AdminKey);
        var restored = (await AppAsync(client2, "periodic")).Load!;
        Assert.Equal(4, restored.IdleTimes);
        Assert.Equal("Histogram", restored.Mode);
    }

    [Fact]
    public async Task A_rarely_invoked_app_reloaded_by_the_prediction_finds_its_model_pre_warmed_and_its_next_invocation_is_a_local_hit()
    {
        var (platform, events, subscription, client) = await StartAsync(_bed.Options());
        using var _ = subscription;
        using var __ = client;
        var dir = _bed.CopyApp(Path.Combine("..", "bench", "apps", "scale-bench"), "inference");
        // The app reads its "model" through a blob input binding from storage the test can write.
        Directory.CreateDirectory(Path.Combine(dir, "Infer"));
        File.WriteAllText(Path.Combine(dir, "Infer", "function.json"), """
            { "bindings": [
              { "type": "httpTrigger", "direction": "in", "name": "req", "authLevel": "anonymous", "methods": ["get"], "route": "infer/{name}" },
              { "type": "blob", "direction": "in", "name": "model", "path": "models/{name}", "dataType": "binary" },
              { "type": "http", "direction": "out", "name": "$return" } ] }
            """);
        File.WriteAllText(Path.Combine(dir, "Infer", "__init__.py"), """
            import azure.functions as func


            def main(req: func.HttpRequest, model: func.InputStream) -> str:
                return str(len(model.read()))
            """);
        var settingsFile = Path.Combine(dir, "local.settings.json");
        var settings = System.Text.Json.Nodes.JsonNode.Parse(File.Exists(settingsFile) ? File.ReadAllText(settingsFile) : "{}")!.AsObject();
        var values = settings["Values"] as System.Text.Json.Nodes.JsonObject ?? [];
        values["AzureWebJobsStorage"] = _bed.Azurite.ConnectionString;
        settings["Values"] = values;
        File.WriteAllText(settingsFile, settings.ToJsonString());
        File.WriteAllText(Path.Combine(dir, "faast.json"), Policy);
        var store = new Storage.BlobStore(_bed.Azurite.ConnectionString);
        await store.CreateContainerIfNotExistsAsync("models");
        var model = new byte[2_000_000];
        Random.Shared.NextBytes(model);
        await store.UploadAsync("models", "resnet", model);
        await _bed.DeployAsync(client, "inference", dir);

        // Learning: the model is read by each invocation (a miss, then local hits).
        await LearnAsync(client, "inference/api/infer/resnet", "2000000");
        // The platform unloads the app (the instance leaves its cache's record) and loads it again by itself.
        await Eventually.TrueAsync(() => events.Count(e => e.Kind == AppLifecycleKind.Loaded) == 2,
            "the app unloaded and loaded again ahead of the predicted invocation", seconds: 120);
        await Eventually.TrueAsync(async () => (await PrewarmAsync(client)).GetProperty("done").GetBoolean(), "the new instance's prewarm finished", seconds: 60);
        var loaded = await PrewarmAsync(client);
        Assert.Equal((1, 2_000_000, 0), (loaded.GetProperty("objects").GetInt64(), loaded.GetProperty("bytes").GetInt64(), loaded.GetProperty("hits").GetInt64()));

        // The invocation the reload was for: the model is a local hit in the new instance's cache, no storage read.
        Assert.Equal("2000000", await client.GetStringAsync("inference/api/infer/resnet"));
        using var cache = System.Text.Json.JsonDocument.Parse(await client.GetStringAsync("inference/admin/cache"));
        var reads = cache.RootElement.GetProperty("reads");
        Assert.Equal((1, 0), (reads.GetProperty("local_hit").GetInt64(), reads.GetProperty("local_miss").GetInt64()));
        Assert.Equal(1, (await PrewarmAsync(client)).GetProperty("hits").GetInt64());
        Assert.Equal(2, events.Count(e => e.Kind == AppLifecycleKind.Loaded));
    }

    private static async Task<System.Text.Json.JsonElement> PrewarmAsync(HttpClient client)
    {
        using var doc = System.Text.Json.JsonDocument.Parse(await client.GetStringAsync("inference/admin/prewarm"));
        return doc.RootElement.Clone();
    }
}
