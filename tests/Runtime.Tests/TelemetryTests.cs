using System.Diagnostics;
using System.Globalization;
using System.Net;
using FaaST.Runtime.Telemetry;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Http;
using Microsoft.Extensions.Configuration;
using Microsoft.Extensions.DependencyInjection;
using OpenTelemetry.Trace;

namespace FaaST.Runtime.Tests;

/// <summary>/metrics and traces of a real host: Kestrel, Azurite, the cachelet and Python workers.</summary>
[Collection("azurite")]
[System.Runtime.Versioning.UnsupportedOSPlatform("windows")]
public sealed class TelemetryTests(AzuriteFixture azurite)
{
    private const string PyOk = """
        import azure.functions as func
        def main(req: func.HttpRequest) -> func.HttpResponse:
            return func.HttpResponse("ok")
        """;

    private const string PyFail = """
        def main(req):
            raise ValueError("this function fails on purpose")
        """;

    private const string PyRead = """
        import azure.functions as func
        def main(req: func.HttpRequest, inblob: func.InputStream) -> func.HttpResponse:
            return func.HttpResponse(str(len(inblob.read())))
        """;

    private const string PyCopy = """
        import azure.functions as func
        def main(req: func.HttpRequest, inblob: func.InputStream, outblob: func.Out[bytes]) -> func.HttpResponse:
            data = inblob.read()
            outblob.set(data)
            return func.HttpResponse(str(len(data)))
        """;

    private static string CopyJson(string container) => $$"""
        { "bindings": [
          { "type": "httpTrigger", "direction": "in", "name": "req", "route": "copy/{name}" },
          { "type": "blob", "direction": "in", "name": "inblob", "path": "{{container}}/{name}" },
          { "type": "blob", "direction": "out", "name": "outblob", "path": "{{container}}/{name}.copy" },
          { "type": "http", "direction": "out", "name": "$return" } ] }
        """;

    private static async Task PutAsync(HostUnderTest host, string container, string name, int size)
    {
        await host.Blobs!.CreateContainerIfNotExistsAsync(container);
        await host.Blobs.UploadAsync(container, name, new byte[size]);
    }

    [Fact]
    public async Task Metrics_count_invocations_by_function_and_outcome_with_their_durations_and_cache_reads()
    {
        var container = "tm" + Guid.NewGuid().ToString("N")[..10];
        using var app = new TestApp("python")
            .Function("Ok", TestApp.HttpFunctionJson, ("__init__.py", PyOk))
            .Function("Fail", TestApp.HttpFunctionJson, ("__init__.py", PyFail))
            .Function("Read", TestApp.BlobReadJson(container), ("__init__.py", PyRead));
        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString);
        await PutAsync(host, container, "a.bin", 1000);

        for (var i = 0; i < 5; i++)
            Assert.Equal("ok", await host.Http.GetStringAsync("/api/Ok"));
        for (var i = 0; i < 3; i++)
            Assert.Equal(HttpStatusCode.InternalServerError, (await host.Http.GetAsync("/api/Fail")).StatusCode);
        Assert.Equal("1000", await host.Http.GetStringAsync("/api/read/a.bin")); // a local miss
        Assert.Equal("1000", await host.Http.GetStringAsync("/api/read/a.bin")); // a local hit

        // Scrapes are cached for a moment: wait for one that has seen every invocation.
        var metrics = await ScrapeUntilAsync(host, m => m.Value("faast_invocations_total", ("function", "Read"), ("outcome", "success")) == 2);
        Assert.Equal(5, metrics.Value("faast_invocations_total", ("function", "Ok"), ("outcome", "success")));
        Assert.Equal(3, metrics.Value("faast_invocations_total", ("function", "Fail"), ("outcome", "failure")));
        Assert.Null(metrics.Value("faast_invocations_total", ("function", "Ok"), ("outcome", "failure")));
        Assert.Equal(5, metrics.Value("faast_invocation_duration_seconds_count", ("function", "Ok")));
        Assert.Equal(3, metrics.Value("faast_invocation_duration_seconds_count", ("function", "Fail")));
        Assert.Equal(2, metrics.Value("faast_invocation_duration_seconds_count", ("function", "Read")));
        Assert.True(metrics.Value("faast_invocation_duration_seconds_sum", ("function", "Ok")) > 0);
        foreach (var function in new[] { "Ok", "Fail", "Read" })
            Assert.Equal(0, metrics.Value("faast_invocations_active", ("function", function)));
        Assert.Equal(0, metrics.Value("faast_invocations_queued"));
        Assert.Null(metrics.Value("faast_worker_restarts_total", ("runtime", "python")));
        Assert.Equal(1, metrics.Value("faast_cachelet_reads_total", ("path", "local_miss")));
        Assert.Equal(1, metrics.Value("faast_cachelet_reads_total", ("path", "local_hit")));
        // ASP.NET Core's own request metrics are there too (the scrapes themselves are left out).
        Assert.Equal(5, metrics.Value("http_server_request_duration_seconds_count", ("http_route", "/api/Ok"), ("http_response_status_code", "200")));
        Assert.DoesNotContain(metrics.Samples, s => s.Name.StartsWith("http_server_request_duration", StringComparison.Ordinal) && s.Labels.GetValueOrDefault("http_route") == "/metrics");
        Assert.DoesNotContain("Prometheus scrape endpoint is not served", host.Logs.All);

        // Only on the HTTP port: the peer port (HTTP/2, for the app's other instances) does not serve it.
        var peer = host.Host.Self?.PeerAddress ?? throw new InvalidOperationException("the host has no peer endpoint");
        using var h2 = new HttpClient();
        using var onPeerPort = await h2.SendAsync(new HttpRequestMessage(HttpMethod.Get, new Uri(peer, "/metrics"))
        {
            Version = HttpVersion.Version20,
            VersionPolicy = HttpVersionPolicy.RequestVersionExact,
        });
        Assert.Equal(HttpStatusCode.NotFound, onPeerPort.StatusCode);
    }

    [Fact]
    public async Task A_killed_worker_counts_as_a_restart_and_an_invocation_waiting_for_it_as_queued()
    {
        using var app = new TestApp("python").Function("Ok", TestApp.HttpFunctionJson, ("__init__.py", PyOk));
        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString,
            configure: o => o with { WorkerRestartDelay = TimeSpan.FromSeconds(3) });
        Assert.Equal("ok", await host.Http.GetStringAsync("/api/Ok"));
        using (var worker = Process.GetProcessById(host.Host.WorkerProcessIds.Single()))
            worker.Kill();
        await Eventually.TrueAsync(() => Task.FromResult(host.Host.ReadyWorkers == 0), "the host to see its worker gone");

        // No worker for a few seconds (the restart delay): the invocation waits for one.
        var waiting = host.Http.GetStringAsync("/api/Ok");
        var queued = await ScrapeUntilAsync(host, m => m.Value("faast_invocations_queued") == 1);
        Assert.Equal(1, queued.Value("faast_invocations_active", ("function", "Ok")));
        Assert.Equal("ok", await waiting);

        var after = await ScrapeUntilAsync(host, m => m.Value("faast_invocations_total", ("function", "Ok"), ("outcome", "success")) == 2);
        Assert.Equal(1, after.Value("faast_worker_restarts_total", ("runtime", "python")));
        Assert.Equal(0, after.Value("faast_invocations_queued"));
        Assert.Equal(0, after.Value("faast_invocations_active", ("function", "Ok")));
    }

    [Fact]
    public async Task A_traced_invocation_nests_its_blob_read_worker_call_and_blob_write_under_the_request_span()
    {
        var container = "tt" + Guid.NewGuid().ToString("N")[..10];
        using var app = new TestApp("python").Function("Copy", CopyJson(container), ("__init__.py", PyCopy));
        var spans = new List<Activity>();
        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString,
            configure: o => o with { Tracing = t => t.AddInMemoryExporter(spans) });
        await PutAsync(host, container, "in.bin", 5000);

        // Activity listeners are process-wide (other tests' hosts trace too): this request's trace id picks its spans.
        var traceId = ActivityTraceId.CreateRandom();
        using var request = new HttpRequestMessage(HttpMethod.Get, "/api/copy/in.bin");
        request.Headers.Add("traceparent", $"00-{traceId.ToHexString()}-{ActivitySpanId.CreateRandom().ToHexString()}-01");
        // The test's own HttpClient would start a trace of its own (the listener is process-wide) and send that instead.
        using var client = new HttpClient(new SocketsHttpHandler { ActivityHeadersPropagator = null }) { BaseAddress = host.Http.BaseAddress };
        using var response = await client.SendAsync(request);
        Assert.Equal("5000", await response.Content.ReadAsStringAsync());

        Activity[] trace = [];
        await Eventually.TrueAsync(() =>
        {
            lock (spans)
                trace = spans.Where(s => s.TraceId == traceId).ToArray();
            return Task.FromResult(trace.Any(s => s.Kind == ActivityKind.Server));
        }, "the request's span to end");
        var names = string.Join(", ", trace.Select(s => $"{s.Source.Name}:{s.DisplayName}"));
        var server = Assert.Single(trace, s => s.Kind == ActivityKind.Server);
        var invoke = Assert.Single(trace, s => s.Source.Name == HostMetrics.Name && s.OperationName == "invoke Copy");
        Assert.Equal(server.SpanId, invoke.ParentSpanId);
        Assert.Equal("Copy", invoke.GetTagItem("faast.function"));
        Assert.Equal("http", invoke.GetTagItem("faas.trigger"));
        Assert.Equal("success", invoke.GetTagItem("faast.outcome"));
        Assert.True(Guid.TryParse(invoke.GetTagItem("faas.invocation_id") as string, out _), names);

        var read = Assert.Single(trace, s => s.OperationName == "read");
        var worker = Assert.Single(trace, s => s.OperationName == "worker");
        var write = Assert.Single(trace, s => s.OperationName == "write");
        foreach (var child in new[] { read, worker, write })
            Assert.Equal(invoke.SpanId, child.ParentSpanId);
        Assert.Equal($"{container}/in.bin", read.GetTagItem("faast.blob"));
        Assert.Equal($"{container}/in.bin.copy", write.GetTagItem("faast.blob"));
        // In that order: the read ends before the worker is called, the worker answers before the write.
        Assert.True(read.StartTimeUtc + read.Duration <= worker.StartTimeUtc, names);
        Assert.True(worker.StartTimeUtc + worker.Duration <= write.StartTimeUtc, names);
        // The cachelet's spans sit under the binding's span.
        Assert.Equal(read.SpanId, Assert.Single(trace, s => s.OperationName == "cachelet.read").ParentSpanId);
        Assert.Equal(write.SpanId, Assert.Single(trace, s => s.OperationName == "cachelet.write").ParentSpanId);
    }

    [Fact]
    public async Task A_function_at_route_metrics_wins_over_the_scrape_endpoint_and_the_host_warns()
    {
        using var app = new TestApp("python", hostJson: """{ "version": "2.0", "extensions": { "http": { "routePrefix": "" } } }""")
            .Function("metrics", TestApp.HttpFunctionJson, ("__init__.py", PyOk));
        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString);
        Assert.Equal("ok", await host.Http.GetStringAsync("/metrics"));
        Assert.Contains("Function metrics answers GET /metrics (host.json routePrefix is \"\"), so the Prometheus scrape endpoint is not served there", host.Logs.All);
    }

    [Fact]
    public void Only_app_routes_that_match_GET_metrics_with_their_constraints_shadow_the_scrape_endpoint()
    {
        var builder = WebApplication.CreateSlimBuilder();
        builder.Services.Configure<Microsoft.AspNetCore.Routing.RouteOptions>(r =>
            r.SetParameterPolicy<Microsoft.AspNetCore.Routing.Constraints.RegexInlineRouteConstraint>("regex"));
        using var web = builder.Build();
        RequestDelegate answer = _ => Task.CompletedTask;
        web.Map("/metrics", answer).WithDisplayName("Literal");
        web.Map("/{name}", answer).WithDisplayName("Parameter");
        web.Map("/{id:int}", answer).WithDisplayName("Integer");
        web.Map("/{name:regex(^m.*s$)}", answer).WithDisplayName("Regex");
        web.Map("/{name:regex(^x$)}", answer).WithDisplayName("OtherRegex");
        web.MapMethods("/metrics", ["POST"], answer).WithDisplayName("PostOnly");
        web.MapMethods("/metrics", ["GET"], answer).WithDisplayName("GetOnly");
        web.Map("/api/metrics", answer).WithDisplayName("Prefixed");
        web.Map("/metrics/{*rest}", answer).WithDisplayName("CatchAll");

        var found = TelemetrySetup.FunctionsAnswering(web, "/metrics", "GET");

        Assert.Equal(["Literal", "Parameter", "Regex", "GetOnly", "CatchAll"], found);
    }

    [Fact]
    public void Another_hosts_meters_and_another_apps_cachelet_are_left_out_of_this_hosts_metrics()
    {
        using var services = new ServiceCollection().AddMetrics().BuildServiceProvider();
        using var other = new ServiceCollection().AddMetrics().BuildServiceProvider();
        var own = services.GetRequiredService<System.Diagnostics.Metrics.IMeterFactory>();
        var theirs = other.GetRequiredService<System.Diagnostics.Metrics.IMeterFactory>();
        using var processWide = new System.Diagnostics.Metrics.Meter("System.Net.Http");
        using var cachelet = new System.Diagnostics.Metrics.Meter(FaaST.Cachelet.Telemetry.CacheletMetrics.Name, "1.0", [new("app", "mine")]);
        using var otherCachelet = new System.Diagnostics.Metrics.Meter(FaaST.Cachelet.Telemetry.CacheletMetrics.Name, "1.0", [new("app", "theirs")]);

        Assert.True(TelemetrySetup.BelongsToThisHost(own.Create(new System.Diagnostics.Metrics.MeterOptions(HostMetrics.Name)), own, "mine"));
        Assert.False(TelemetrySetup.BelongsToThisHost(theirs.Create(new System.Diagnostics.Metrics.MeterOptions(HostMetrics.Name)), own, "mine"));
        Assert.True(TelemetrySetup.BelongsToThisHost(processWide, own, "mine"));
        Assert.True(TelemetrySetup.BelongsToThisHost(cachelet, own, "mine"));
        Assert.False(TelemetrySetup.BelongsToThisHost(otherCachelet, own, "mine"));
    }

    [Theory]
    [InlineData(null, null, null, false, false)]
    [InlineData("http://127.0.0.1:4317", null, null, true, true)]
    [InlineData("http://127.0.0.1:4317", "none", null, false, true)]
    [InlineData("http://127.0.0.1:4317", null, "prometheus", true, false)]
    [InlineData("http://127.0.0.1:4317", "otlp", "otlp, prometheus", true, true)]
    [InlineData(null, "otlp", null, true, false)]
    public void The_OTEL_variables_choose_what_goes_out_over_OTLP(string? endpoint, string? traces, string? metrics, bool exportsTraces, bool exportsMetrics)
    {
        var export = TelemetryExport.From(Config(("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint), ("OTEL_TRACES_EXPORTER", traces), ("OTEL_METRICS_EXPORTER", metrics)), Environment);
        Assert.Equal(exportsTraces, export.Traces);
        Assert.Equal(exportsMetrics, export.Metrics);
    }

    [Theory]
    [InlineData("OTEL_EXPORTER_OTLP_ENDPOINT", "127.0.0.1:4317", "not an absolute http:// or https:// address")]
    [InlineData("OTEL_EXPORTER_OTLP_ENDPOINT", "ftp://127.0.0.1", "not an absolute http:// or https:// address")]
    [InlineData("OTEL_TRACES_EXPORTER", "zipkin", "\"zipkin\" is not an exporter FaaST has (it takes otlp, none)")]
    [InlineData("OTEL_TRACES_EXPORTER", "prometheus", "\"prometheus\" is not an exporter FaaST has")]
    [InlineData("OTEL_METRICS_EXPORTER", "otlp,none", "\"none\" cannot be combined")]
    public void A_bad_OTEL_variable_is_a_start_up_error_naming_it(string variable, string value, string expected)
    {
        var e = Assert.Throws<AppConfigException>(() => TelemetryExport.From(Config((variable, value)), Environment));
        Assert.StartsWith($"environment variable {variable} is \"{value}\"", e.Message);
        Assert.Contains(expected, e.Message);
    }

    [Fact]
    public async Task A_bad_OTEL_setting_in_local_settings_stops_the_host_naming_the_file_and_key()
    {
        using var app = new TestApp("python", settings: new() { ["OTEL_TRACES_EXPORTER"] = "zipkin" })
            .Function("Ok", TestApp.HttpFunctionJson, ("__init__.py", PyOk));
        var e = await Assert.ThrowsAsync<AppConfigException>(() => HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString));
        Assert.Equal($"{Path.Combine(app.Directory, "local.settings.json")}: Values.OTEL_TRACES_EXPORTER is \"zipkin\": \"zipkin\" is not an exporter FaaST has (it takes otlp, none)", e.Message);
    }

    [Fact]
    public async Task OTEL_settings_of_the_app_send_its_spans_and_metrics_over_OTLP_to_a_loopback_collector()
    {
        await using var collector = await OtlpCollector.StartAsync();
        using var app = new TestApp("python", settings: new()
        {
            ["OTEL_EXPORTER_OTLP_ENDPOINT"] = collector.Endpoint,
            ["OTEL_EXPORTER_OTLP_PROTOCOL"] = "http/protobuf",
            ["OTEL_METRIC_EXPORT_INTERVAL"] = "200",
            ["OTEL_BSP_SCHEDULE_DELAY"] = "100",
        }).Function("OtlpProbe", TestApp.HttpFunctionJson, ("__init__.py", PyOk));
        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString);
        Assert.Equal("ok", await host.Http.GetStringAsync("/api/OtlpProbe"));

        // OTLP/protobuf carries names as plain UTF-8: the span's name and the counter's name are in the bodies.
        await Eventually.TrueAsync(() => Task.FromResult(
            collector.Received("/v1/traces", "invoke OtlpProbe") && collector.Received("/v1/metrics", "faast.invocations")),
            "the collector to receive the invocation's span and the host's metrics");
        Assert.Contains($"Exporting traces and metrics over OTLP to {collector.Endpoint}", host.Logs.All);
    }

    public static TheoryData<Exception, bool, string> Endings => new()
    {
        { new Invocation.FunctionFailedException("it threw", null), false, "failure" },
        { new Workers.FunctionTimeoutException("ran past functionTimeout"), false, "timeout" },
        { new Workers.WorkerUnavailableException("no python worker"), false, "unavailable" },
        { new FaaST.Storage.StorageUnavailableException("storage is down", null), false, "unavailable" },
        { new Invocation.FunctionUnavailableException("could not be loaded"), false, "unavailable" },
        { new OperationCanceledException(), true, "cancelled" },
        { new OperationCanceledException(), false, "error" },
        { new Invocation.BindingResolutionException("no value for {name}"), false, "error" },
        { new FaaST.Storage.BlobStorageException(403, "AuthorizationFailure", "refused"), false, "error" },
    };

    [Theory]
    [MemberData(nameof(Endings))]
    public void How_an_invocation_ends_names_its_outcome(Exception e, bool callerCancelled, string outcome) =>
        Assert.Equal(outcome, HostMetrics.OutcomeName(HostMetrics.Classify(e, callerCancelled)));

    private static string Environment(string name) => "environment variable " + name;

    private static IConfiguration Config(params (string Key, string? Value)[] values) =>
        new ConfigurationBuilder().AddInMemoryCollection(values.Where(v => v.Value is not null).Select(v => new KeyValuePair<string, string?>(v.Key, v.Value))).Build();

    /// <summary>Scrapes /metrics until <paramref name="ready"/> holds (a scrape is cached for 300 ms).</summary>
    private static async Task<Scrape> ScrapeUntilAsync(HostUnderTest host, Func<Scrape, bool> ready)
    {
        Scrape? last = null;
        try
        {
            await Eventually.TrueAsync(async () =>
            {
                using var response = await host.Http.GetAsync("/metrics");
                Assert.Equal(HttpStatusCode.OK, response.StatusCode);
                last = Scrape.Parse(await response.Content.ReadAsStringAsync());
                return ready(last);
            }, "the metrics to show the invocations");
        }
        catch (Exception) when (last is not null)
        {
            Assert.Fail($"the metrics never showed what the test waits for; the last scrape:\n{last.Text}");
        }
        return last!;
    }

    /// <summary>A Prometheus text exposition: samples by name and labels.</summary>
    private sealed record Scrape(string Text, List<Sample> Samples)
    {
        public static Scrape Parse(string text)
        {
            var samples = new List<Sample>();
            foreach (var line in text.Split('\n'))
            {
                if (line.Length == 0 || line[0] == '#')
                    continue;
                var labels = new Dictionary<string, string>();
                var brace = line.IndexOf('{');
                var space = line.LastIndexOf('}') is var close and >= 0 ? close + 1 : line.IndexOf(' ');
                var name = brace >= 0 ? line[..brace] : line[..space];
                if (brace >= 0)
                {
                    var body = line[(brace + 1)..(space - 1)];
                    var i = 0;
                    while (i < body.Length)
                    {
                        var eq = body.IndexOf('=', i);
                        var key = body[i..eq];
                        var end = body.IndexOf('"', eq + 2);
                        while (body[end - 1] == '\\')
                            end = body.IndexOf('"', end + 1);
                        labels[key] = body[(eq + 2)..end];
                        i = end + 2; // past the quote and the comma
                    }
                }
                var value = line[space..].Trim().Split(' ')[0];
                samples.Add(new Sample(name, labels, double.Parse(value, CultureInfo.InvariantCulture)));
            }
            return new Scrape(text, samples);
        }

        /// <summary>The value of the one sample of <paramref name="name"/> with these labels (and perhaps more); null if none.</summary>
        public double? Value(string name, params (string Key, string Value)[] labels)
        {
            var matches = Samples.Where(s => s.Name == name && labels.All(l => s.Labels.GetValueOrDefault(l.Key) == l.Value)).ToList();
            Assert.True(matches.Count <= 1, $"{matches.Count} samples of {name} match {string.Join(",", labels)}");
            return matches.Count == 0 ? null : matches[0].Value;
        }
    }

    private sealed record Sample(string Name, Dictionary<string, string> Labels, double Value);
}
