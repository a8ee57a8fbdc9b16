using System.Diagnostics;
using System.Globalization;
using System.Net;
using System.Net.Http.Json;
using System.Text.Json.Nodes;
using FaaST.ScaleController.Platform;
using FaaST.ScaleController.Telemetry;
using OpenTelemetry.Trace;

namespace FaaST.ScaleController.Tests.Platform;

/// <summary>
/// The platform's own telemetry (issue 20, item 6), from a real platform on a real Azurite with real instances: its
/// scrape and who may read it, the instances as Prometheus targets as they come and go, and a trace that runs from the
/// frontend into the instance (OTLP to a collector on loopback).
/// </summary>
public sealed class PlatformTelemetryTests : IAsyncLifetime
{
    private PlatformTestBed _bed = null!;

    public async Task InitializeAsync() => _bed = await PlatformTestBed.StartAsync("telemetry");

    public async Task DisposeAsync()
    {
        if (_bed is not null)
            await _bed.DisposeAsync();
    }

    private Task<PlatformHost> StartAsync(int? initialInstances = null, Action<TracerProviderBuilder>? tracing = null) =>
        _bed.StartPlatformAsync(_bed.Options() with { InitialInstances = initialInstances, Tracing = tracing });

    /// <summary>bench/apps/scale-bench (GET /api/work/{ms} answers "ok") as app <paramref name="name"/>, deployed.</summary>
    private async Task DeployAsync(HttpClient client, string name, string scale, Dictionary<string, string>? settings = null)
    {
        var dir = _bed.ScaleBench(name, scale);
        if (settings is not null)
        {
            var file = Path.Combine(dir, "local.settings.json");
            var root = JsonNode.Parse(File.Exists(file) ? File.ReadAllText(file) : "{}")!.AsObject();
            var values = root["Values"] as JsonObject ?? [];
            foreach (var (key, value) in settings)
                values[key] = value;
            root["Values"] = values;
            File.WriteAllText(file, root.ToJsonString());
        }
        await _bed.DeployAsync(client, name, dir);
    }

    private string Output => _bed.Tail();

    [Fact]
    public async Task The_platforms_own_metrics_show_its_instances_requests_and_deploys_by_app_and_are_refused_without_the_admin_key()
    {
        var platform = await StartAsync();
        using var client = AdminKey.Client(platform.Address, platform.Keys.AdminKey);
        await DeployAsync(client, "metered", """{ "interval": "00:00:01" }""");
        for (var i = 0; i < 3; i++)
            Assert.Equal("ok", await client.GetStringAsync("metered/api/work/1"));

        var scrape = "";
        try
        {
            await Eventually.TrueAsync(async () =>
            {
                scrape = await client.GetStringAsync(PlatformTelemetry.MetricsPath.TrimStart('/'));
                return Value(scrape, "faast_platform_request_duration_seconds_count", ("app", "metered")) >= 3
                    && Value(scrape, "faast_platform_votes", ("app", "metered"), ("policy", "compute")) >= 1;
            }, "the scrape to show the requests and the controller's votes");
        }
        catch (Exception e)
        {
            throw new InvalidOperationException($"{e.Message}\n{scrape}", e);
        }
        Assert.Equal(1, Value(scrape, "faast_platform_instances", ("app", "metered"), ("state", "ready")));
        Assert.Equal(0, Value(scrape, "faast_platform_instances", ("app", "metered"), ("state", "draining")));
        Assert.Equal(1, Value(scrape, "faast_platform_instances_desired", ("app", "metered")));
        Assert.Equal(1, Value(scrape, "faast_platform_deploys_total", ("app", "metered"), ("outcome", "deployed")));
        Assert.Equal(1, Value(scrape, "faast_platform_instance_starts_total", ("app", "metered"), ("outcome", "ready")));
        Assert.NotNull(Value(scrape, "faast_platform_queue_length", ("app", "metered")));

        // The scrape is the admin API's: no key, no figures (names of apps and their load are the operator's).
        using var anonymous = new HttpClient { BaseAddress = platform.Address };
        using var refused = await anonymous.GetAsync(PlatformTelemetry.MetricsPath.TrimStart('/'));
        Assert.Equal(HttpStatusCode.Unauthorized, refused.StatusCode);
        Assert.DoesNotContain("faast_platform", await refused.Content.ReadAsStringAsync(), StringComparison.Ordinal);
        using var targets = await anonymous.GetAsync(PlatformTelemetry.TargetsPath.TrimStart('/'));
        Assert.Equal(HttpStatusCode.Unauthorized, targets.StatusCode);
    }

    [Fact]
    public async Task The_prometheus_targets_file_lists_every_instance_and_follows_them_down_to_none_at_unload()
    {
        var platform = await StartAsync();
        using var client = AdminKey.Client(platform.Address, platform.Keys.AdminKey);
        await DeployAsync(client, "scraped", """{ "minInstances": 2, "maxInstances": 2, "keepAlive": "00:00:05", "interval": "00:00:01" }""");
        var file = PrometheusTargets.PathIn(_bed.StatePath);

        var status = await StatusAsync(client, "scraped");
        Assert.Equal(2, status.Instances.Count);
        var expected = status.Instances.Select(i => (i.Id, i.Address.Authority)).OrderBy(i => i.Id).ToArray();
        await Eventually.TrueAsync(() => Targets(File.ReadAllText(file)).SequenceEqual(expected), "the file to list both instances",
            () => File.Exists(file) ? File.ReadAllText(file) : "(no file)");
        Assert.Equal(expected, Targets(await client.GetStringAsync(PlatformTelemetry.TargetsPath.TrimStart('/'))));
        var group = JsonNode.Parse(File.ReadAllText(file))!.AsArray()[0]!;
        Assert.Equal("scraped", (string?)group["labels"]!["app"]);
        Assert.Equal("v1", (string?)group["labels"]!["version"]);

        // Idle past its keep-alive: every instance drains, and each leaves the file as it stops.
        await Eventually.TrueAsync(async () => await StatusAsync(client, "scraped") is { Unloaded: true, Instances.Count: 0 }, "the unload", seconds: 120);
        await Eventually.TrueAsync(() => Targets(File.ReadAllText(file)).Length == 0, "the file to list no instance", () => File.ReadAllText(file));
        var scrape = await client.GetStringAsync(PlatformTelemetry.MetricsPath.TrimStart('/'));
        Assert.Equal(1, Value(scrape, "faast_platform_decisions_total", ("app", "scraped"), ("kind", "unload"), ("dimension", "keep-alive")));
        Assert.Equal(0, Value(scrape, "faast_platform_instances", ("app", "scraped"), ("state", "ready")));

        await platform.DisposeAsync();
        Assert.False(File.Exists(file), "a stopped platform left its targets file behind");
    }

    [Fact]
    public async Task A_forwarded_invocation_is_a_frontend_span_whose_child_is_the_instances_span_with_its_worker_call()
    {
        await using var collector = await OtlpCollector.StartAsync();
        var spans = new List<Activity>();
        var platform = await StartAsync(tracing: t => t.AddInMemoryExporter(spans));
        using var admin = AdminKey.Client(platform.Address, platform.Keys.AdminKey);
        await DeployAsync(admin, "traced", """{ "interval": "00:00:05" }""", new()
        {
            ["OTEL_EXPORTER_OTLP_ENDPOINT"] = collector.Endpoint,
            ["OTEL_EXPORTER_OTLP_PROTOCOL"] = "http/protobuf",
            ["OTEL_METRICS_EXPORTER"] = "none",
            ["OTEL_BSP_SCHEDULE_DELAY"] = "100",
        });

        // A client's own trace: the frontend's span joins it, and the instance's joins the frontend's.
        var traceId = ActivityTraceId.CreateRandom();
        using var request = new HttpRequestMessage(HttpMethod.Get, "traced/api/work/1");
        request.Headers.Add("traceparent", $"00-{traceId.ToHexString()}-{ActivitySpanId.CreateRandom().ToHexString()}-01");
        using var client = new HttpClient(new SocketsHttpHandler { ActivityHeadersPropagator = null }) { BaseAddress = platform.Address };
        using var response = await client.SendAsync(request);
        Assert.Equal("ok", await response.Content.ReadAsStringAsync());

        Activity? frontend = null;
        await Eventually.TrueAsync(() =>
        {
            lock (spans)
                frontend = spans.FirstOrDefault(s => s.TraceId == traceId && s.Kind == ActivityKind.Server);
            return frontend is not null;
        }, "the frontend's span to end");
        Assert.Equal("frontend traced", frontend!.DisplayName);
        Assert.Equal("traced", frontend.GetTagItem("faast.app"));

        // The instance's HTTP server span is the frontend span's child, its invocation span the server span's child, and
        // the worker call the invocation's. They may arrive in different exports (the exporter batches every 100 ms and a
        // child ends first), so the collector decodes every span it received rather than looking in one body.
        var trace = traceId.ToHexString();
        await Eventually.TrueAsync(() =>
        {
            var received = collector.Spans().Where(s => s.TraceId == trace).ToList();
            return received.Where(s => s.ParentSpanId == frontend.SpanId.ToHexString())
                .SelectMany(server => received.Where(s => s.Name == "invoke Work" && s.ParentSpanId == server.SpanId))
                .Any(invocation => received.Any(s => s.Name == "worker" && s.ParentSpanId == invocation.SpanId));
        }, "the instance to export its server span under the frontend's, its invocation under that and the worker call under the invocation",
            () => $"frontend span {frontend.SpanId}; " + collector.Describe() + "\n" + Output);
    }

    private static async Task<AppStatus> StatusAsync(HttpClient client, string app) =>
        (await client.GetFromJsonAsync("admin/platform", PlatformJsonContext.Default.PlatformStatus))!.Apps.Single(a => a.App == app);

    private static (string Id, string Authority)[] Targets(string json) =>
        JsonNode.Parse(json)!.AsArray()
            .Select(g => ((string)g!["labels"]!["faast_instance"]!, (string)g["targets"]!.AsArray()[0]!))
            .OrderBy(t => t.Item1).ToArray();

    /// <summary>The value of the sample of <paramref name="metric"/> that has every one of <paramref name="labels"/>, or null.</summary>
    private static double? Value(string scrape, string metric, params (string Name, string Value)[] labels)
    {
        foreach (var line in scrape.Split('\n'))
        {
            if (!line.StartsWith(metric + "{", StringComparison.Ordinal))
                continue;
            if (labels.All(l => line.Contains($"{l.Name}=\"{l.Value}\"", StringComparison.Ordinal)))
                return double.Parse(line[(line.LastIndexOf('}') + 1)..].Trim().Split(' ')[0], CultureInfo.InvariantCulture);
        }
        return null;
    }

    private static byte[] Bytes(string hex) => Convert.FromHexString(hex);
}
