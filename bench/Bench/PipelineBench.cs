using System.Globalization;
using System.Text;
using FaaST.Storage;

namespace FaaST.Bench;

/// <summary>
/// Two-stage pipelines on one instance (bench/apps/pipeline-bench, Python, 2 workers): stage 1 (HTTP) hands a
/// timestamp to the host through a queue output or a blob output; stage 2 (queueTrigger / blobTrigger) reads the
/// clock first thing and stores the difference. Both pipelines take turns, message by message, in the same run.
/// </summary>
public static class PipelineBench
{
    public static async Task RunAsync(string home, IDictionary<string, string> env, BlobStore store, bool quick, Report report)
    {
        Console.WriteLine("pipelines: queue output -> queueTrigger vs blob output -> blobTrigger, taking turns, python, 2 workers");
        await store.CreateContainerIfNotExistsAsync("bench-results");
        await using var host = await HostProcess.StartAsync(home, Path.Combine(home, "bench", "apps", "pipeline-bench"), 2, env, "--no-cache");
        using var http = new HttpClient { BaseAddress = host.BaseAddress, Timeout = TimeSpan.FromSeconds(30) };
        var warmup = quick ? 3 : 10;
        var runs = quick ? 25 : 200;
        var queue = new List<double>();
        var blob = new List<double>();
        for (var i = 0; i < warmup + runs; i++)
        {
            var q = await OneAsync(http, host, store, "QueueStart", "q-", $"q{i}-{Guid.NewGuid():N}");
            var b = await OneAsync(http, host, store, "BlobStart", "b-", $"b{i}-{Guid.NewGuid():N}");
            if (i < warmup)
                continue;
            queue.Add(q);
            blob.Add(b);
        }
        queue.Sort();
        blob.Sort();
        report.Add("queue_pipeline_p50_ms", queue[queue.Count / 2],
            $"queue output of function 1 to the start of queue-triggered function 2, one instance, {runs} messages one at a time; goal < 5 ms");
        report.Add("queue_pipeline_p99_ms", queue[(int)(queue.Count * 0.99)], "same");
        report.Add("blob_pipeline_p50_ms", blob[blob.Count / 2],
            $"the same through a blob output and a blobTrigger (fires at once on the runtime's own writes), {runs} blobs, taking turns with the queue");
    }

    /// <summary>Runs stage 1 and waits for stage 2's result blob; returns the latency stage 2 measured.</summary>
    private static async Task<double> OneAsync(HttpClient http, HostProcess host, BlobStore store, string function, string prefix, string id)
    {
        using (var response = await http.GetAsync($"/api/{function}?id={id}"))
            response.EnsureSuccessStatusCode();
        var deadline = DateTime.UtcNow.AddSeconds(30);
        while (true)
        {
            var result = await store.DownloadAsync("bench-results", prefix + id);
            if (result is not null)
                return double.Parse(Encoding.UTF8.GetString(result.Data), CultureInfo.InvariantCulture);
            if (DateTime.UtcNow > deadline)
                throw new InvalidOperationException($"{function}: stage 2 wrote no bench-results/{prefix}{id} within 30 s; the host said:\n{host.Output}");
            await Task.Delay(20); // stage 2 measures the latency itself: polling harder would only load the emulator both stages use
        }
    }
}
