using System.Text;
using System.Text.Json;
using FaaST.Storage;

namespace FaaST.Runtime.Tests;

/// <summary>
/// Timer triggers: real hosts, real workers, real Azurite. Each run of the test functions writes a blob with what the
/// function received ({pastDue, next}: the payload's IsPastDue and ScheduleStatus.Next, which names the occurrence), so
/// the tests count runs per occurrence instead of timing anything.
/// </summary>
[Collection("azurite-queues")]
public sealed class TimerTriggerTests(QueueAzuriteFixture azurite)
{
    private static string Unique(string prefix) => prefix + Guid.NewGuid().ToString("N")[..12];

    private static TestApp TimerApp(string runtime, string container, string schedule, bool? runOnStartup = null, bool useMonitor = true)
    {
        var app = new TestApp(runtime, settings: new() { ["TICKS"] = container });
        var startup = runOnStartup is { } r ? $", \"runOnStartup\": {(r ? "true" : "false")}" : "";
        var json = $$"""
            { "bindings": [
              { "type": "timerTrigger", "direction": "in", "name": "timer", "schedule": "{{schedule}}", "useMonitor": {{(useMonitor ? "true" : "false")}}{{startup}} },
              { "type": "blob", "direction": "out", "name": "out", "path": "%TICKS%/{rand-guid}.json" } ] }
            """;
        if (runtime == "python")
            app.Function("Tick", json, ("__init__.py", """
                import json
                import azure.functions as func

                def main(timer: func.TimerRequest, out: func.Out[str]) -> None:
                    status = timer.schedule_status or {}
                    out.set(json.dumps({"pastDue": timer.past_due, "next": status.get("Next"), "adjust": (timer.schedule or {}).get("AdjustForDST")}))
                """));
        else
            app.Function("Tick", json, ("index.js", """
                module.exports = async function (context, timer) {
                  const status = timer.scheduleStatus || {};
                  context.bindings.out = JSON.stringify({ pastDue: timer.isPastDue, next: status.next ?? null, adjust: timer.schedule.adjustForDST });
                };
                """));
        return app;
    }

    private static async Task<List<JsonElement>> RunsAsync(BlobStore blobs, string container)
    {
        var runs = new List<JsonElement>();
        try
        {
            await foreach (var item in blobs.ListAsync(container))
            {
                var blob = await blobs.DownloadAsync(container, item.Name);
                if (blob is not null)
                    runs.Add(JsonDocument.Parse(blob.Data).RootElement.Clone());
            }
        }
        catch (BlobStorageException e) when (e.Status == 404)
        {
            // no run yet: the container does not exist
        }
        return runs;
    }

    [Theory]
    [InlineData("python")]
    [InlineData("node")]
    public async Task A_timer_function_runs_at_each_occurrence_of_its_six_field_schedule_with_the_payload_Azure_sends(string runtime)
    {
        var container = Unique("ticks-");
        using var app = TimerApp(runtime, container, "*/2 * * * * *");
        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString);
        List<JsonElement> runs = [];
        await Eventually.TrueAsync(async () => (runs = await RunsAsync(host.Blobs!, container)).Count >= 3, "three timer runs", seconds: 120);
        Assert.All(runs, r => Assert.False(r.GetProperty("pastDue").GetBoolean()));
        Assert.All(runs, r => Assert.True(r.GetProperty("adjust").GetBoolean()));
        // useMonitor: each run gets the status the previous one left, whose Next is this occurrence (an even second).
        var occurrences = runs.Select(r => r.GetProperty("next").GetString()).ToList();
        Assert.All(occurrences, n => Assert.Equal(0, DateTime.Parse(n!, System.Globalization.CultureInfo.InvariantCulture).ToUniversalTime().Second % 2));
        Assert.Equal(occurrences.Count, occurrences.Distinct().Count());
    }

    [Fact]
    public async Task An_occurrence_missed_while_the_app_was_down_runs_once_past_due_when_it_starts_and_the_status_moves_on()
    {
        var container = Unique("missed-");
        using var app = TimerApp("python", container, "0 0 0 1 1 *"); // once a year: no regular run during the test
        var hostId = Http.FunctionKeys.HostId(FunctionApp.Load(app.Directory));
        var missed = DateTime.UtcNow.AddHours(-1);
        using (var store = new BlobStore(azurite.ConnectionString))
        {
            await store.CreateContainerIfNotExistsAsync("azure-webjobs-hosts");
            var status = $$"""{"Last":"{{missed.AddDays(-1):o}}","Next":"{{missed:o}}","LastUpdated":"{{missed.AddDays(-1):o}}"}""";
            await store.UploadAsync("azure-webjobs-hosts", $"timers/{hostId}/Tick/status", Encoding.UTF8.GetBytes(status));
        }
        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString);
        List<JsonElement> runs = [];
        await Eventually.TrueAsync(async () => (runs = await RunsAsync(host.Blobs!, container)).Count >= 1, "the past-due run", seconds: 120);
        var run = Assert.Single(runs);
        Assert.True(run.GetProperty("pastDue").GetBoolean());
        var after = await host.Blobs!.DownloadAsync("azure-webjobs-hosts", $"timers/{hostId}/Tick/status");
        using var written = JsonDocument.Parse(after!.Data);
        var next = DateTime.Parse(written.RootElement.GetProperty("Next").GetString()!, System.Globalization.CultureInfo.InvariantCulture).ToUniversalTime();
        Assert.Equal((1, 1, 0), (next.Month, next.Day, next.Hour));
        Assert.True(next > DateTime.UtcNow, $"the status's Next {next:o} is the next new year, not a past one");
    }

    [Fact]
    public async Task RunOnStartup_runs_the_function_once_as_the_app_starts()
    {
        var container = Unique("startup-");
        using var app = TimerApp("node", container, "0 0 0 1 1 *", runOnStartup: true, useMonitor: false);
        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString);
        List<JsonElement> runs = [];
        await Eventually.TrueAsync(async () => (runs = await RunsAsync(host.Blobs!, container)).Count >= 1, "the start-up run", seconds: 120);
        var run = Assert.Single(runs);
        Assert.False(run.GetProperty("pastDue").GetBoolean());
    }

    [Fact]
    public async Task Two_instances_of_one_app_run_each_occurrence_exactly_once()
    {
        var container = Unique("once-");
        using var app = TimerApp("python", container, "*/2 * * * * *");
        await using var first = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString);
        await using var second = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString);
        List<JsonElement> runs = [];
        await Eventually.TrueAsync(async () => (runs = await RunsAsync(first.Blobs!, container)).Count >= 5, "five timer runs", seconds: 180);
        var perOccurrence = runs.GroupBy(r => r.GetProperty("next").GetString()).ToList();
        Assert.All(perOccurrence, g => Assert.True(g.Count() == 1, $"occurrence {g.Key} ran {g.Count()} times"));
    }

    [Fact]
    public async Task A_malformed_schedule_disables_that_function_naming_the_expression_while_an_http_function_serves()
    {
        using var app = TimerApp("python", Unique("bad-"), "0 */5 * * *"); // five fields: Azure's NCRONTAB has six
        app.Function("Hello", TestApp.HttpFunctionJson, ("__init__.py", """
            import azure.functions as func
            def main(req: func.HttpRequest) -> func.HttpResponse:
                return func.HttpResponse("hello")
            """));
        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString);
        Assert.Equal("hello", await host.Http.GetStringAsync("/api/Hello"));
        var status = await host.Http.GetHostStatusAsync();
        var tick = Assert.Single(status.Functions, f => f.Name == "Tick");
        Assert.True(tick.Disabled);
        Assert.Contains("0 */5 * * *", tick.Error, StringComparison.Ordinal);
    }
}
