using System.Collections.Concurrent;
using System.Net;
using System.Net.Http.Json;
using FaaST.ScaleController.Deploy;
using FaaST.ScaleController.Platform;
using FaaST.ScaleController.Providers;
using Microsoft.Extensions.Logging;

namespace FaaST.ScaleController.Tests.Platform;

/// <summary>
/// The platform process's parts together, for real: the frontend on a loopback port, deploy into real Azurite,
/// instances as real runtime host processes with real Python workers, drained and replaced for real. Each test has
/// an Azurite of its own: a platform loads every app deployed in its storage, so tests sharing one would see each
/// other's apps.
/// </summary>
public sealed class PlatformTests : IAsyncLifetime
{
    private Storage.AzuriteProcess _azurite = null!;
    private readonly TempDirectory _state = new("faast-platform-state-");
    private readonly TempDirectory _apps = new("faast-platform-apps-");
    private readonly ConcurrentQueue<string> _output = new();
    private readonly List<PlatformHost> _platforms = [];
    private readonly List<IAsyncDisposable> _disposeLast = [];

    public async Task InitializeAsync() => _azurite = await Storage.AzuriteProcess.StartAsync(Repo.Root);

    public async Task DisposeAsync()
    {
        foreach (var p in _platforms)
            await p.DisposeAsync();
        foreach (var d in _disposeLast)
            await d.DisposeAsync();
        await _azurite.DisposeAsync();
        _state.Dispose();
        _apps.Dispose();
    }

    private async Task<PlatformHost> StartPlatformAsync(LocalProcessProvider? provider = null, TimeSpan? drain = null, string? storage = null,
        IReadOnlyList<string>? instanceArguments = null, int maxInstances = 32, string? state = null)
    {
        var options = new PlatformOptions
        {
            Port = 0,
            StateDirectory = state ?? _state.Path,
            StorageConnectionString = storage ?? _azurite.ConnectionString,
            DevelopmentStorage = true,
            InstanceArguments = instanceArguments ?? ["--isolation", "off"],
            DrainDeadline = drain ?? TimeSpan.FromSeconds(30),
            InstanceOutput = (label, line) => _output.Enqueue($"[{label}] {line}"),
            MaxInstances = maxInstances,
        };
        var platform = await PlatformHost.StartAsync(options, provider ?? Provider(), logging: l => l.ClearProviders());
        _platforms.Add(platform);
        return platform;
    }

    private LocalProcessProvider Provider() => new(new LocalProcessOptions
    {
        RuntimeDll = Path.Combine(AppContext.BaseDirectory, "FaaST.Runtime.dll"),
        RunDirectory = Path.Combine(_state.Path, "run"), // where the platform's own provider keeps the ready files
        Output = (label, line) => _output.Enqueue($"[{label}] {line}"),
    });

    /// <summary>A copy of samples/python-app in a folder named <paramref name="name"/> (the app's name).</summary>
    private string CopySample(string name, string sample = "python-app") => Repo.CopySample(sample, Path.Combine(_apps.Path, name));

    private static MemoryStream Zip(string directory)
    {
        var zip = new MemoryStream();
        Packager.Zip(directory, zip, includeSettings: true);
        zip.Position = 0;
        return zip;
    }

    private static HttpClient Client(PlatformHost platform) => AdminKey.Client(platform.Address, platform.Keys.AdminKey);

    private string Output => string.Join('\n', _output.TakeLast(60));

    [Fact]
    public async Task A_deployed_app_answers_through_the_frontend_under_its_path_and_its_host_name()
    {
        var platform = await StartPlatformAsync();
        using var client = Client(platform);
        using var upload = new StreamContent(Zip(CopySample("greeter")));
        using var deployed = await client.PutAsync("admin/platform/apps/greeter", upload);
        Assert.True(deployed.StatusCode == HttpStatusCode.Created, $"{deployed.StatusCode}: {await deployed.Content.ReadAsStringAsync()}\n{Output}");

        Assert.Equal("Hello, path!", await client.GetStringAsync("greeter/api/Hello?name=path"));
        using var byHost = new HttpRequestMessage(HttpMethod.Get, "api/Hello?name=host");
        byHost.Headers.Host = "greeter.localhost";
        using var hostAnswer = await client.SendAsync(byHost);
        Assert.Equal("Hello, host!", await hostAnswer.Content.ReadAsStringAsync());

        var status = await client.GetFromJsonAsync("admin/platform", PlatformJsonContext.Default.PlatformStatus);
        var app = Assert.Single(status!.Apps);
        Assert.Equal(("greeter", 1), (app.App, app.Version));
        Assert.Equal("ready", Assert.Single(app.Instances).State);
    }

    [Fact]
    public async Task A_bad_deploy_is_refused_naming_the_file_and_key_and_the_running_version_keeps_serving()
    {
        var platform = await StartPlatformAsync();
        using var client = Client(platform);
        var dir = CopySample("steady");
        using (var first = await client.PutAsync("admin/platform/apps/steady", new StreamContent(Zip(dir))))
            Assert.True(first.IsSuccessStatusCode, await first.Content.ReadAsStringAsync());

        File.WriteAllText(Path.Combine(dir, "faast.json"), """{ "scale": { "minInstances": 5, "maxInstances": 2 } }""");
        using var refused = await client.PutAsync("admin/platform/apps/steady", new StreamContent(Zip(dir)));
        Assert.Equal(HttpStatusCode.BadRequest, refused.StatusCode);
        var error = await refused.Content.ReadFromJsonAsync(PlatformJsonContext.Default.PlatformError);
        Assert.Equal("faast.json", Path.GetFileName(error!.File));
        Assert.Contains("minInstances", error.Error, StringComparison.Ordinal);

        var status = await client.GetFromJsonAsync("admin/platform", PlatformJsonContext.Default.PlatformStatus);
        Assert.Equal(1, Assert.Single(status!.Apps).Version);
        Assert.Equal("Hello, still!", await client.GetStringAsync("steady/api/Hello?name=still"));
    }

    [Fact]
    public async Task A_redeploy_under_load_rolls_the_instances_to_the_new_version_without_a_failed_request()
    {
        var platform = await StartPlatformAsync();
        using var client = Client(platform);
        var dir = CopySample("rolling");
        using (var first = await client.PutAsync("admin/platform/apps/rolling", new StreamContent(Zip(dir))))
            Assert.True(first.IsSuccessStatusCode, await first.Content.ReadAsStringAsync());
        var init = Path.Combine(dir, "Hello", "__init__.py");
        File.WriteAllText(init, File.ReadAllText(init).Replace("Hello, ", "Howdy, ", StringComparison.Ordinal));

        using var stop = new CancellationTokenSource();
        var answers = new ConcurrentBag<string>();
        var failures = new ConcurrentBag<string>();
        var load = Enumerable.Range(0, 4).Select(_ => Task.Run(async () =>
        {
            while (!stop.IsCancellationRequested)
            {
                using var response = await client.GetAsync("rolling/api/Hello?name=x");
                var body = await response.Content.ReadAsStringAsync();
                if (response.IsSuccessStatusCode)
                    answers.Add(body);
                else
                    failures.Add($"{(int)response.StatusCode} {body}");
            }
        })).ToArray();
        await Task.Delay(500);
        using (var second = await client.PutAsync("admin/platform/apps/rolling", new StreamContent(Zip(dir))))
            Assert.True(second.StatusCode == HttpStatusCode.OK, await second.Content.ReadAsStringAsync());
        await Task.Delay(500);
        await stop.CancelAsync();
        await Task.WhenAll(load);

        Assert.Empty(failures);
        Assert.Contains("Hello, x!", answers);
        Assert.Contains("Howdy, x!", answers);
        Assert.Equal("Howdy, y!", await client.GetStringAsync("rolling/api/Hello?name=y"));
        var status = await client.GetFromJsonAsync("admin/platform", PlatformJsonContext.Default.PlatformStatus);
        var app = Assert.Single(status!.Apps);
        Assert.Equal(2, app.Version);
        Assert.All(app.Instances, i => Assert.Equal("v2", i.Version));
    }

    [Fact]
    public async Task A_redeploy_whose_instance_cannot_start_fails_with_the_instances_error_and_the_running_version_keeps_serving_under_load()
    {
        // Before issue 19 (defect 7) v2 became current at once, its start failure was ignored while v1 ran, v1 drained,
        // and the app was left with no instance: requests failed.
        var provider = Provider();
        var platform = await StartPlatformAsync(provider);
        using var client = Client(platform);
        var dir = CopySample("steadfast");
        using (var first = await client.PutAsync("admin/platform/apps/steadfast", new StreamContent(Zip(dir))))
            Assert.True(first.IsSuccessStatusCode, await first.Content.ReadAsStringAsync());
        var (v1, _) = Assert.Single(provider.Processes);

        // v2 passes every check a deploy makes; its module, loaded as the instance starts, says why it cannot run and
        // then ends its own host (a failure only the instance can see). It waits until that line has reached the
        // platform (the test lets it go), so that the line is surely among the instance's last ones.
        var go = Path.Combine(_apps.Path, "v2-may-fail");
        var init = Path.Combine(dir, "Hello", "__init__.py");
        File.WriteAllText(init, $$"""
            import os
            import signal
            import sys
            import time

            print("v2 cannot run here: the orders database is unreachable", file=sys.stderr, flush=True)
            while not os.path.exists({{System.Text.Json.JsonSerializer.Serialize(go)}}):
                time.sleep(0.05)
            pid = os.getppid()
            while pid > 1:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if b"FaaST.Runtime.dll" in f.read():
                        os.kill(pid, signal.SIGKILL)
                        os._exit(1)
                with open(f"/proc/{pid}/stat") as f:
                    pid = int(f.read().rsplit(")", 1)[1].split()[1])

            """ + File.ReadAllText(init));
        var release = Task.Run(async () =>
        {
            await Eventually.TrueAsync(() => _output.Any(l => l.Contains("orders database is unreachable", StringComparison.Ordinal)),
                "v2's line in the instance output", () => Output, seconds: 120);
            File.WriteAllText(go, "");
        });

        using var stop = new CancellationTokenSource();
        var answers = new ConcurrentBag<string>();
        var failures = new ConcurrentBag<string>();
        var load = Enumerable.Range(0, 4).Select(_ => Task.Run(async () =>
        {
            while (!stop.IsCancellationRequested)
            {
                using var response = await client.GetAsync("steadfast/api/Hello?name=x");
                var body = await response.Content.ReadAsStringAsync();
                if (response.IsSuccessStatusCode)
                    answers.Add(body);
                else
                    failures.Add($"{(int)response.StatusCode} {body}");
            }
        })).ToArray();
        HttpStatusCode code;
        PlatformError? error;
        try
        {
            using var second = await client.PutAsync("admin/platform/apps/steadfast", new StreamContent(Zip(dir)));
            code = second.StatusCode;
            error = await second.Content.ReadFromJsonAsync(PlatformJsonContext.Default.PlatformError);
            await release;
            // Still serving after the failed roll, not just during it.
            var served = answers.Count;
            await Eventually.TrueAsync(() => answers.Count > served + 20, "more answers after the failed deploy", () => Output);
        }
        finally
        {
            await stop.CancelAsync();
            await Task.WhenAll(load);
        }

        Assert.Equal(HttpStatusCode.UnprocessableEntity, code);
        Assert.Contains("v1 stays current", error!.Error, StringComparison.Ordinal);
        Assert.Contains("the orders database is unreachable", error.Error, StringComparison.Ordinal);
        Assert.Empty(failures);
        Assert.All(answers, a => Assert.Equal("Hello, x!", a));
        var status = await AppAsync(client, "steadfast");
        Assert.Equal(1, status.Version);
        var instance = Assert.Single(status.Instances);
        Assert.Equal((v1, "v1", "ready"), (instance.Id, instance.Version, instance.State));
        Assert.Equal([v1], provider.Processes.Keys);
        using var store = new Storage.BlobStore(_azurite.ConnectionString);
        Assert.Equal(1, (await new DeploymentStore(store, platform.Keys).CurrentAsync("steadfast"))!.Version);

        // The next good deploy takes over as usual.
        File.WriteAllText(init, File.ReadAllText(Path.Combine(Repo.Root, "samples", "python-app", "Hello", "__init__.py")).Replace("Hello, ", "Fixed, ", StringComparison.Ordinal));
        using (var third = await client.PutAsync("admin/platform/apps/steadfast", new StreamContent(Zip(dir))))
            Assert.True(third.IsSuccessStatusCode, await third.Content.ReadAsStringAsync());
        Assert.Equal("Fixed, y!", await client.GetStringAsync("steadfast/api/Hello?name=y"));
    }

    [Fact]
    public async Task A_platform_at_its_instance_budget_refuses_another_apps_deploy_with_503_and_the_first_keeps_serving()
    {
        var provider = Provider();
        var platform = await StartPlatformAsync(provider, maxInstances: 1);
        using var client = Client(platform);
        using (var first = await client.PutAsync("admin/platform/apps/tenant-a", new StreamContent(Zip(CopySample("tenant-a")))))
            Assert.True(first.IsSuccessStatusCode, await first.Content.ReadAsStringAsync());

        using var refused = await client.PutAsync("admin/platform/apps/tenant-b", new StreamContent(Zip(CopySample("tenant-b"))));

        Assert.Equal(HttpStatusCode.ServiceUnavailable, refused.StatusCode);
        Assert.Contains("MaxInstances", (await refused.Content.ReadFromJsonAsync(PlatformJsonContext.Default.PlatformError))!.Error, StringComparison.Ordinal);
        Assert.Single(provider.Processes);
        Assert.Equal("Hello, a!", await client.GetStringAsync("tenant-a/api/Hello?name=a"));
        var status = await client.GetFromJsonAsync("admin/platform", PlatformJsonContext.Default.PlatformStatus);
        Assert.Equal("tenant-a", Assert.Single(status!.Apps).App);
    }

    [Fact]
    public async Task A_function_printing_the_hosts_ready_line_does_not_redirect_its_apps_clients()
    {
        // Before issue 19 (defect 10) the platform took an instance's address from the first output line matching
        // "Host started: ... listening on URL", and a function's own output is in the host's output.
        var dir = CopySample("mimic");
        var init = Path.Combine(dir, "Hello", "__init__.py");
        File.WriteAllText(init, "print(\"Host started: 1 python worker(s), listening on http://127.0.0.1:1/\", flush=True)\n" + File.ReadAllText(init));
        var platform = await StartPlatformAsync();
        using var client = Client(platform);
        using (var deployed = await client.PutAsync("admin/platform/apps/mimic", new StreamContent(Zip(dir))))
            Assert.True(deployed.IsSuccessStatusCode, $"{await deployed.Content.ReadAsStringAsync()}\n{Output}");

        Assert.Equal("Hello, real!", await client.GetStringAsync("mimic/api/Hello?name=real"));
        var instance = Assert.Single((await AppAsync(client, "mimic")).Instances);
        Assert.NotEqual(1, instance.Address.Port);
        Assert.Contains(_output, l => l.Contains("listening on http://127.0.0.1:1/", StringComparison.Ordinal)); // the print did reach the output
        Assert.Empty(Directory.EnumerateFileSystemEntries(Path.Combine(_state.Path, "run"))); // read, then deleted
    }

    [Fact]
    public async Task An_instance_that_dies_is_replaced_and_the_app_keeps_answering()
    {
        var provider = Provider();
        var platform = await StartPlatformAsync(provider);
        using var client = Client(platform);
        using (var first = await client.PutAsync("admin/platform/apps/phoenix", new StreamContent(Zip(CopySample("phoenix")))))
            Assert.True(first.IsSuccessStatusCode, await first.Content.ReadAsStringAsync());
        var (id, process) = Assert.Single(provider.Processes);
        process.Kill(entireProcessTree: true);

        // The first request after the kill may find no ready instance: it waits in the queue for the replacement.
        Assert.Equal("Hello, again!", await client.GetStringAsync("phoenix/api/Hello?name=again"));
        // On a busy machine the controller may also have added an instance for the queued request while the replacement was
        // starting; it drains again once idle. What must hold in the end: one ready instance, not the killed one.
        await Eventually.TrueAsync(async () => (await AppAsync(client, "phoenix")).Instances is [{ State: "ready" } only] && only.Id != id,
            "one ready replacement instance and no other", seconds: 120);
        Assert.False(provider.Processes.ContainsKey(id), "the killed instance's process is still tracked");
    }

    [Fact]
    public async Task A_restarted_platform_serves_every_app_deployed_before_from_storage()
    {
        var first = await StartPlatformAsync();
        using (var client = Client(first))
        using (var deployed = await client.PutAsync("admin/platform/apps/durable", new StreamContent(Zip(CopySample("durable")))))
            Assert.True(deployed.IsSuccessStatusCode, await deployed.Content.ReadAsStringAsync());
        _platforms.Remove(first);
        await first.DisposeAsync();

        var second = await StartPlatformAsync();
        using var again = Client(second);
        Assert.Equal("Hello, back!", await again.GetStringAsync("durable/api/Hello?name=back"));
    }

    [Fact]
    public async Task An_unknown_app_is_a_404_naming_it()
    {
        var platform = await StartPlatformAsync();
        using var client = Client(platform);
        using var response = await client.GetAsync("nosuchapp/api/Hello");
        Assert.Equal(HttpStatusCode.NotFound, response.StatusCode);
        Assert.Contains("nosuchapp", await response.Content.ReadAsStringAsync(), StringComparison.Ordinal);
    }

    /// <summary>bench/apps/scale-bench (a function holding one of 4 worker threads for N ms) with a fast scale policy.</summary>
    private string ScaleApp(string name, string scale)
    {
        var dir = CopySample(name, Path.Combine("..", "bench", "apps", "scale-bench"));
        File.WriteAllText(Path.Combine(dir, "faast.json"), $$"""{ "scale": {{scale}} }""");
        return dir;
    }

    /// <summary>Gives the app a storage account of its own (AzureWebJobsStorage in its settings): tests that put data where the
    /// app reads it, or that shape the app's link to storage. An app on development storage would get an Azurite of its own.</summary>
    private static void UseStorage(string dir, string connectionString)
    {
        var file = Path.Combine(dir, "local.settings.json");
        var settings = System.Text.Json.Nodes.JsonNode.Parse(File.Exists(file) ? File.ReadAllText(file) : "{}")!.AsObject();
        var values = settings["Values"] as System.Text.Json.Nodes.JsonObject ?? new System.Text.Json.Nodes.JsonObject();
        values["AzureWebJobsStorage"] = connectionString;
        settings["Values"] = values;
        File.WriteAllText(file, settings.ToJsonString());
    }

    private static string Describe(AppStatus? app) => app is null ? "(no status)" : string.Join('\n',
        app.Instances.Select(i => $"instance {i.Id} {i.State}")
            .Concat(app.LastVotes.Select(v => $"vote {v.Instance} {v.Policy} {v.Delta}: {v.Reason}"))
            .Concat(app.Decisions.Select(d => $"decision {d.Kind} {d.From}->{d.To}: {d.Reason}")));

    /// <summary>Adds function <paramref name="name"/>: GET /api/<paramref name="route"/>/{name} with blob data/{name} as input, answering <paramref name="body"/>'s value.</summary>
    private static void AddBlobFunction(string dir, string name, string route, string body)
    {
        Directory.CreateDirectory(Path.Combine(dir, name));
        File.WriteAllText(Path.Combine(dir, name, "function.json"), $$"""
            { "bindings": [
              { "type": "httpTrigger", "direction": "in", "name": "req", "authLevel": "anonymous", "methods": ["get"], "route": "{{route}}/{name}" },
              { "type": "blob", "direction": "in", "name": "inblob", "path": "data/{name}", "dataType": "binary" },
              { "type": "http", "direction": "out", "name": "$return" } ] }
            """);
        File.WriteAllText(Path.Combine(dir, name, "__init__.py"), $"""
            import hashlib

            import azure.functions as func


            def main(req: func.HttpRequest, inblob: func.InputStream) -> str:
                {body}
            """);
    }

    private static async Task<AppStatus> AppAsync(HttpClient client, string app) =>
        (await client.GetFromJsonAsync("admin/platform", PlatformJsonContext.Default.PlatformStatus))!.Apps.Single(a => a.App == app);

    [Fact]
    public async Task Load_above_the_band_adds_instances_and_when_it_stops_they_drain_back_to_the_minimum()
    {
        var platform = await StartPlatformAsync();
        using var client = Client(platform);
        var dir = ScaleApp("busy", """
            { "minInstances": 1, "maxInstances": 3, "interval": "00:00:01", "scaleOutCooldown": "00:00:01",
              "scaleInCooldown": "00:00:02", "scaleInRounds": 2, "keepAlive": "01:00:00" }
            """);
        using (var deployed = await client.PutAsync("admin/platform/apps/busy", new StreamContent(Zip(dir))))
            Assert.True(deployed.IsSuccessStatusCode, await deployed.Content.ReadAsStringAsync());

        // 10 clients on 4 worker threads: every thread busy all the time, utilisation 1.0 > 0.8.
        using var stop = new CancellationTokenSource();
        var failures = new ConcurrentBag<string>();
        var load = Enumerable.Range(0, 10).Select(_ => Task.Run(async () =>
        {
            while (!stop.IsCancellationRequested)
            {
                using var response = await client.GetAsync("busy/api/work/300");
                if (!response.IsSuccessStatusCode)
                    failures.Add($"{(int)response.StatusCode} {await response.Content.ReadAsStringAsync()}");
            }
        })).ToArray();
        try
        {
            AppStatus? last = null;
            await Eventually.TrueAsync(() =>
            {
                last = AppAsync(client, "busy").GetAwaiter().GetResult();
                return last.Instances.Count(i => i.State == "ready") >= 2;
            }, "a second ready instance under load", () => Describe(last) + "\n" + Output, seconds: 90);
        }
        finally
        {
            await stop.CancelAsync();
            await Task.WhenAll(load);
        }
        var loaded = await AppAsync(client, "busy");
        Assert.Contains(loaded.Decisions, d => d.Kind == "out" && d.Reason.Contains("compute", StringComparison.Ordinal));
        Assert.Empty(failures);

        // Idle: every policy of every instance votes in; after the rounds and the cool-down one drains at a time.
        await Eventually.TrueAsync(async () => (await AppAsync(client, "busy")).Instances.Count == 1, "a drain back to one instance", seconds: 90);
        var idle = await AppAsync(client, "busy");
        Assert.Contains(idle.Decisions, d => d.Kind == "in");
        Assert.Equal("ready", Assert.Single(idle.Instances).State);
        Assert.Equal("ok", await client.GetStringAsync("busy/api/work/1"));
    }

    [Fact]
    public async Task An_idle_app_is_unloaded_after_its_keep_alive_and_its_next_request_loads_it_again()
    {
        var provider = Provider();
        var platform = await StartPlatformAsync(provider);
        var events = new ConcurrentQueue<AppLifecycleEvent>();
        using var subscription = platform.AppLifecycle.Subscribe("test", (e, _) =>
        {
            events.Enqueue(e);
            return Task.CompletedTask;
        });
        using var client = Client(platform);
        var dir = ScaleApp("sleepy", """{ "keepAlive": "00:00:03", "interval": "00:00:01" }""");
        using (var deployed = await client.PutAsync("admin/platform/apps/sleepy", new StreamContent(Zip(dir))))
            Assert.True(deployed.IsSuccessStatusCode, await deployed.Content.ReadAsStringAsync());
        Assert.Equal("ok", await client.GetStringAsync("sleepy/api/work/1"));

        await Eventually.TrueAsync(async () => await AppAsync(client, "sleepy") is { Unloaded: true, Instances.Count: 0 }, "the unload", seconds: 60);
        Assert.Empty(provider.Processes);
        Assert.Contains((await AppAsync(client, "sleepy")).Decisions, d => d.Kind == "unload");
        await Eventually.TrueAsync(() => events.Any(e => e.Kind == AppLifecycleKind.Unloaded), "the unloaded event");
        Assert.Equal([AppLifecycleKind.Loaded, AppLifecycleKind.InstanceStarted, AppLifecycleKind.Unloading, AppLifecycleKind.InstanceStopped, AppLifecycleKind.Unloaded],
            events.Select(e => e.Kind));

        // A cold start: the request waits in the frontend's queue while an instance starts.
        Assert.Equal("ok", await client.GetStringAsync("sleepy/api/work/1"));
        var loaded = await AppAsync(client, "sleepy");
        Assert.False(loaded.Unloaded);
        Assert.Equal("ready", Assert.Single(loaded.Instances).State);
    }

    [Fact]
    public async Task KEDA_reads_the_controllers_desired_instances_from_the_platforms_control_port()
    {
        var platform = await StartPlatformAsync();
        using var client = Client(platform);
        using (var deployed = await client.PutAsync("admin/platform/apps/kedaapp", new StreamContent(Zip(CopySample("kedaapp")))))
            Assert.True(deployed.IsSuccessStatusCode, await deployed.Content.ReadAsStringAsync());

        using var channel = Grpc.Net.Client.GrpcChannel.ForAddress(platform.ControlAddress);
        var keda = new Protos.Keda.ExternalScaler.ExternalScalerClient(channel);
        var reference = new Protos.Keda.ScaledObjectRef { Name = "kedaapp-instances", Namespace = "faast" };
        reference.ScalerMetadata["app"] = "kedaapp";
        Assert.True((await keda.IsActiveAsync(reference)).Result);
        var spec = Assert.Single((await keda.GetMetricSpecAsync(reference)).MetricSpecs);
        var metrics = await keda.GetMetricsAsync(new Protos.Keda.GetMetricsRequest { ScaledObjectRef = reference, MetricName = spec.MetricName });
        Assert.Equal(1, Assert.Single(metrics.MetricValues).MetricValue_);

        reference.ScalerMetadata["app"] = "nosuch";
        var missing = await Assert.ThrowsAsync<Grpc.Core.RpcException>(async () => await keda.IsActiveAsync(reference));
        Assert.Equal(Grpc.Core.StatusCode.NotFound, missing.StatusCode);
        Assert.Contains("nosuch", missing.Status.Detail, StringComparison.Ordinal);
    }

    [Fact]
    public async Task A_working_set_larger_than_the_cache_makes_the_cache_size_vote_add_an_instance()
    {
        var platform = await StartPlatformAsync();
        using var client = Client(platform);
        // Compute is switched off, so that only the cache-size vote can add the instance.
        var dir = ScaleApp("wide", """
            { "minInstances": 1, "maxInstances": 2, "interval": "00:00:01", "scaleOutCooldown": "00:00:01",
              "scaleInCooldown": "01:00:00", "keepAlive": "01:00:00", "votes": { "compute": false } }
            """);
        AddBlobFunction(dir, "Read", "read", "return str(len(inblob.read()))");
        File.WriteAllText(Path.Combine(dir, "faast.json"), File.ReadAllText(Path.Combine(dir, "faast.json")).Replace(
            "{ \"scale\"", "{ \"cache\": { \"cacheCapacity\": \"1MiB\" }, \"scale\"", StringComparison.Ordinal));
        UseStorage(dir, _azurite.ConnectionString); // the data below is put there
        using (var deployed = await client.PutAsync("admin/platform/apps/wide", new StreamContent(Zip(dir))))
            Assert.True(deployed.IsSuccessStatusCode, await deployed.Content.ReadAsStringAsync());
        using var store = new Storage.BlobStore(_azurite.ConnectionString);
        await store.CreateContainerIfNotExistsAsync("data");
        var names = Enumerable.Range(0, 4).Select(i => $"ws-{i}").ToArray();
        foreach (var name in names)
            await store.UploadAsync("data", name, new byte[400 << 10]);

        // 1.6 MiB read round-robin through a 1 MiB cache: objects come back after being evicted, again and again.
        AppStatus? last = null;
        await Eventually.TrueAsync(async () =>
        {
            foreach (var name in names)
                Assert.Equal("409600", await client.GetStringAsync($"wide/api/read/{name}"));
            last = await AppAsync(client, "wide");
            return last.Decisions.Any(d => d.Kind == "out");
        }, "a scale-out decision", seconds: 60);
        var decision = last!.Decisions.First(d => d.Kind == "out");
        Assert.Contains("cache-size", decision.Reason, StringComparison.Ordinal);
        Assert.Contains("evicted more than once", decision.Reason, StringComparison.Ordinal);
        await Eventually.TrueAsync(async () => (await AppAsync(client, "wide")).Instances.Count(i => i.State == "ready") == 2,
            "the second instance", seconds: 60);
    }

    [Fact]
    public async Task A_large_object_on_slow_storage_makes_its_owner_ask_for_instances_at_once_and_arrives_intact_in_ranges()
    {
        // Storage at 1.5 MB/s per connection (a slow cloud link, far slower than this machine's loopback): a 48 MiB
        // object takes 34 s from one instance, so T_DR (Faa$T §4) says to split it over more, even cold ones, as long
        // as an instance starts in under 13 s (the platform measures it: 2.5 s idle, several seconds more on a busy
        // machine, which at 3 MB/s was enough to make one instance the plan).
        var proxy = new ThrottledProxy(_azurite.Port, 1_500_000);
        _disposeLast.Add(proxy); // after the platform, whose instances still talk to storage as they stop
        var slow = _azurite.ConnectionString.Replace($":{_azurite.Port}/", $":{proxy.Port}/", StringComparison.Ordinal);
        Assert.NotEqual(_azurite.ConnectionString, slow);
        var platform = await StartPlatformAsync(storage: slow);
        using var client = Client(platform);
        var dir = ScaleApp("wide-objects", """
            { "minInstances": 1, "maxInstances": 3, "interval": "00:00:01", "scaleOutCooldown": "00:00:01",
              "scaleInCooldown": "01:00:00", "keepAlive": "01:00:00", "votes": { "compute": false, "cacheSize": false },
              "bandwidth": { "minObjectSize": "16MiB" } }
            """);
        AddBlobFunction(dir, "Digest", "digest", "return hashlib.sha256(inblob.read()).hexdigest()");
        UseStorage(dir, slow); // the app's own account, reached through the throttled link
        using (var deployed = await client.PutAsync("admin/platform/apps/wide-objects", new StreamContent(Zip(dir))))
            Assert.True(deployed.IsSuccessStatusCode, await deployed.Content.ReadAsStringAsync());
        using var store = new Storage.BlobStore(_azurite.ConnectionString); // straight to Azurite: uploads are not what is measured
        await store.CreateContainerIfNotExistsAsync("data");
        var probe = new byte[3 << 20];
        var big = new byte[48 << 20];
        Random.Shared.NextBytes(probe);
        Random.Shared.NextBytes(big);
        await store.UploadAsync("data", "probe", probe);
        await store.UploadAsync("data", "big", big);

        // A first read profiles the instance's storage bandwidth (BW_BS) and is below the threshold: one download.
        Assert.Equal(Convert.ToHexStringLower(System.Security.Cryptography.SHA256.HashData(probe)), await client.GetStringAsync("wide-objects/api/digest/probe"));
        Assert.Single((await AppAsync(client, "wide-objects")).Instances);

        Assert.Equal(Convert.ToHexStringLower(System.Security.Cryptography.SHA256.HashData(big)), await client.GetStringAsync("wide-objects/api/digest/big"));
        var app = await AppAsync(client, "wide-objects");
        var decision = Assert.Single(app.Decisions, d => d.Kind == "out");
        Assert.Contains("bandwidth", decision.Reason, StringComparison.Ordinal);
        Assert.True(decision.To >= 2, $"scaled to {decision.To}");
        Assert.Equal(decision.To, app.Instances.Count(i => i.State == "ready"));
    }

    private static string ScriptJson(string scriptFile) => $$"""
        { "scriptFile": "{{scriptFile}}", "bindings": [
          { "type": "httpTrigger", "direction": "in", "name": "req", "authLevel": "anonymous" },
          { "type": "http", "direction": "out", "name": "$return" } ] }
        """;

    /// <summary>A zip of the sample with one more entry: a symbolic link (Unix mode 0120777) to <paramref name="target"/>.</summary>
    private MemoryStream ZipWithLink(string directory, string entry, string target)
    {
        var zip = Zip(directory);
        using (var archive = new System.IO.Compression.ZipArchive(zip, System.IO.Compression.ZipArchiveMode.Update, leaveOpen: true))
        {
            var link = archive.CreateEntry(entry);
            link.ExternalAttributes = unchecked((int)0xA1FF_0000);
            using var writer = new StreamWriter(link.Open());
            writer.Write(target);
        }
        zip.Position = 0;
        return zip;
    }

    // Issue 19, defect 2: before, a scriptFile of /etc/shadow was deployed (201) and made every worker of the app run as root.
    [Fact]
    public async Task A_deploy_naming_a_path_outside_the_app_is_refused_with_400_naming_the_file_key_and_path_and_nothing_is_deployed()
    {
        var platform = await StartPlatformAsync();
        using var client = Client(platform);
        foreach (var (name, scriptFile) in new[] { ("shadow", "/etc/shadow"), ("climb", "../../x.py") })
        {
            var dir = CopySample(name);
            File.WriteAllText(Path.Combine(dir, "Hello", "function.json"), ScriptJson(scriptFile));
            using var refused = await client.PutAsync($"admin/platform/apps/{name}", new StreamContent(Zip(dir)));
            var body = await refused.Content.ReadAsStringAsync();
            Assert.True(refused.StatusCode == HttpStatusCode.BadRequest, $"{refused.StatusCode}: {body}");
            var error = System.Text.Json.JsonSerializer.Deserialize(body, PlatformJsonContext.Default.PlatformError)!;
            Assert.Equal(("Hello/function.json", "scriptFile"), (error.File, error.Key));
            Assert.Contains($"\"{scriptFile}\" leads outside the app folder", error.Error, StringComparison.Ordinal);
        }

        var linked = CopySample("linked");
        using (var refused = await client.PutAsync("admin/platform/apps/linked", new StreamContent(ZipWithLink(linked, "etc", "/etc"))))
        {
            var body = await refused.Content.ReadAsStringAsync();
            Assert.True(refused.StatusCode == HttpStatusCode.BadRequest, $"{refused.StatusCode}: {body}");
            Assert.Contains("etc", body, StringComparison.Ordinal);
            Assert.Contains("link", body, StringComparison.Ordinal);
        }

        var status = await client.GetFromJsonAsync("admin/platform", PlatformJsonContext.Default.PlatformStatus);
        Assert.Empty(status!.Apps);
    }

    // Issue 19, defect 2: as root the platform starts instances with --isolation required unless the operator said off.
    [Fact]
    public void As_root_instances_get_isolation_required_unless_the_operator_passed_off()
    {
        Assert.Equal(["--workers", "2", "--isolation", "required"], PlatformContext.WithIsolation(["--workers", "2"], root: true));
        Assert.Equal(["--isolation", "required"], PlatformContext.WithIsolation(["--isolation", "auto"], root: true));
        Assert.Equal(["--isolation", "required"], PlatformContext.WithIsolation(["--isolation", "required"], root: true));
        Assert.Equal(["--isolation", "off"], PlatformContext.WithIsolation(["--isolation", "off"], root: true));
        Assert.Equal(["--workers", "2"], PlatformContext.WithIsolation(["--workers", "2"], root: false));
    }

    /// <summary>A platform as root, given no --isolation: its instance's workers run as the app's user (faast-NAME).</summary>
    [IsolationFact]
    [System.Runtime.Versioning.UnsupportedOSPlatform("windows")]
    public async Task A_platform_running_as_root_runs_each_apps_workers_as_that_apps_user()
    {
        // CreateTempSubdirectory makes 0700 folders; the app's user must reach the extracted package below the state.
        File.SetUnixFileMode(_state.Path, (UnixFileMode)0b111_001_001);
        var platform = await StartPlatformAsync(instanceArguments: []);
        using var client = Client(platform);
        using (var deployed = await client.PutAsync("admin/platform/apps/confined", new StreamContent(Zip(CopySample("confined")))))
            Assert.True(deployed.StatusCode == HttpStatusCode.Created, $"{deployed.StatusCode}: {await deployed.Content.ReadAsStringAsync()}\n{Output}");
        Assert.Equal("Hello, root!", await client.GetStringAsync("confined/api/Hello?name=root"));

        var instance = Assert.Single((await AppAsync(client, "confined")).Instances);
        using var status = System.Text.Json.JsonDocument.Parse(await client.GetStringAsync(new Uri(instance.Address, "admin/host/status")));
        var isolation = status.RootElement.GetProperty("isolation");
        Assert.Equal("faast-confined", isolation.GetProperty("user").GetString());
        var uid = isolation.GetProperty("uid").GetInt32();
        Assert.NotEqual(0, uid);
        foreach (var pid in status.RootElement.GetProperty("workerProcessIds").EnumerateArray().Select(p => p.GetInt32()))
            Assert.Equal(uid.ToString(System.Globalization.CultureInfo.InvariantCulture),
                File.ReadLines($"/proc/{pid}/status").First(l => l.StartsWith("Uid:", StringComparison.Ordinal)).Split('\t')[1]);
    }

    /// <summary>An instance that cannot isolate refuses to start (--isolation required), and the deploy says why.</summary>
    [IsolationFact]
    public async Task A_platform_running_as_root_does_not_start_an_instance_its_apps_user_cannot_read()
    {
        // The state folder's parent is 0700 (the platform opens only the state folder itself to the apps' users): the app's
        // user cannot reach the package, so isolation is impossible.
        var parent = Path.Combine(_state.Path, "private");
        if (OperatingSystem.IsLinux())
            Directory.CreateDirectory(parent, UnixFileMode.UserRead | UnixFileMode.UserWrite | UnixFileMode.UserExecute);
        var platform = await StartPlatformAsync(instanceArguments: [], state: Path.Combine(parent, "state"));
        using var client = Client(platform);
        using var deployed = await client.PutAsync("admin/platform/apps/unreachable", new StreamContent(Zip(CopySample("unreachable"))));
        var body = await deployed.Content.ReadAsStringAsync();
        // The deploy fails with the instance's own refusal, and a first deploy that did not start leaves no app behind.
        Assert.True(deployed.StatusCode == HttpStatusCode.UnprocessableEntity, $"{deployed.StatusCode}: {body}\n{Output}");
        Assert.Contains("--isolation required: ", body, StringComparison.Ordinal);
        await Eventually.TrueAsync(() => Output.Contains("--isolation required: ", StringComparison.Ordinal), "the instance's refusal in its output", () => Output);
        Assert.False(platform.Apps.ContainsKey("unreachable"));
    }
}
