using System.Text;
using FaaST.Runtime.Hosting;
using FaaST.Runtime.Triggers;
using FaaST.Storage;
using Xunit.Abstractions;

namespace FaaST.Runtime.Tests;

/// <summary>
/// Blob triggers on several real instance processes of one app over one real Azurite: each blob version runs
/// once across all of them (shared receipts under blob leases), also when the instance running it is killed.
/// Side effects are counted in storage: the function writes one output blob per invocation, under a fresh
/// GUID, so a repeated invocation shows as a second output; invocations started are counted in the logs.
/// </summary>
[Collection("azurite")]
[System.Runtime.Versioning.UnsupportedOSPlatform("windows")]
public sealed class BlobTriggerScaleOutTests(AzuriteFixture azurite, ITestOutputHelper output)
{
    private const string Secret = "blob-trigger-scale-out-secret";

    /// <summary>Copies its blob to scale-out/{name}/{rand-guid}; "sleep:S ..." first sleeps S seconds.</summary>
    private const string PyProcess = """
        import time
        import azure.functions as func
        def main(blob: func.InputStream, out: func.Out[bytes]):
            data = blob.read()
            if data.startswith(b"sleep:"):
                time.sleep(float(data[6:].split(b" ")[0]))
            out.set(data)
        """;

    private const string ProcessJson = """
        { "bindings": [
          { "type": "blobTrigger", "direction": "in", "name": "blob", "path": "scale-in/{name}" },
          { "type": "blob", "direction": "out", "name": "out", "path": "scale-out/{name}/{rand-guid}" } ] }
        """;

    /// <summary>An HTTP function that writes its body to scale-in/{name} through an output binding.</summary>
    private const string PutJson = """
        { "bindings": [
          { "type": "httpTrigger", "direction": "in", "name": "req", "route": "put/{name}", "methods": ["post"] },
          { "type": "blob", "direction": "out", "name": "$return", "path": "scale-in/{name}" } ] }
        """;

    private const string PyPut = """
        import azure.functions as func
        def main(req: func.HttpRequest) -> bytes:
            return req.get_body()
        """;

    private static TestApp App(string name, string pollingInterval) =>
        new TestApp("python", hostJson: $$"""{ "version": "2.0", "extensions": { "blobs": { "pollingInterval": "{{pollingInterval}}" } } }""", name: name)
            .Function("Process", ProcessJson, ("__init__.py", PyProcess))
            .Function("Put", PutJson, ("__init__.py", PyPut));

    private async Task<InstanceGroup> StartAsync(TestApp app, int count, Dictionary<string, string>? environment = null)
    {
        var env = new Dictionary<string, string> { ["FAAST_PEER_SECRET"] = Secret };
        foreach (var (k, v) in environment ?? [])
            env[k] = v;
        return await InstanceGroup.StartAsync(new InstanceGroupOptions
        {
            AppDirectory = app.Directory,
            Count = count,
            StorageConnectionString = azurite.ConnectionString,
            Arguments = ["--workers", "1"],
            Environment = env,
            LogDirectory = LogDirectory(app),
        });
    }

    private static string LogDirectory(TestApp app) => Path.Combine(Path.GetDirectoryName(app.Directory)!, "logs");

    /// <summary>Invocations of Process that succeeded (<paramref name="started"/>: that started, failed ones too), for
    /// blob scale-in/<paramref name="blob"/> (any blob when null), per instance log.</summary>
    private static int[] Executions(TestApp app, int instances, string? blob = null, bool started = false)
    {
        var marker = started ? "Executing Process (" : "Executed Process (";
        var needle = blob is null ? "" : $" for blob scale-in/{blob}";
        return Enumerable.Range(0, instances).Select(i => InstanceLog(app, i).Split('\n').Count(l =>
            l.Contains(marker, StringComparison.Ordinal) && l.Contains(needle, StringComparison.Ordinal) &&
            !l.Contains(" failed (attempt", StringComparison.Ordinal))).ToArray();
    }

    private static string InstanceLog(TestApp app, int instance)
    {
        var file = Path.Combine(LogDirectory(app), $"instance-{instance}.log");
        if (!File.Exists(file))
            return "";
        using var reader = new StreamReader(new FileStream(file, FileMode.Open, FileAccess.Read, FileShare.ReadWrite));
        return reader.ReadToEnd();
    }

    /// <summary>Writes the warnings and errors of the instances' logs to the test output (what explains a failure).</summary>
    private void DumpProblems(TestApp app, int instances)
    {
        for (var i = 0; i < instances; i++)
        {
            var lines = InstanceLog(app, i).Split('\n');
            for (var l = 0; l < lines.Length; l++)
                if (lines[l].StartsWith("warn:", StringComparison.Ordinal) || lines[l].StartsWith("fail:", StringComparison.Ordinal) || lines[l].Contains("attempt 2", StringComparison.Ordinal))
                    output.WriteLine($"[{i}] {lines[l]} {(l + 1 < lines.Length ? lines[l + 1].Trim() : "")}");
        }
    }

    private static async Task<int> OutputsAsync(BlobStore store, string name)
    {
        var n = 0;
        try
        {
            await foreach (var _ in store.ListAsync("scale-out", name + "/"))
                n++;
        }
        catch (BlobStorageException e) when (e.Status == 404)
        {
            // no output container yet
        }
        return n;
    }

    /// <summary>The state of every receipt of function Process for blob scale-in/<paramref name="name"/>, one per version.</summary>
    private static async Task<List<ReceiptState>> ReceiptsAsync(BlobStore store, string hostId, string name)
    {
        var receipts = new BlobReceipts(store, hostId, TimeSpan.FromSeconds(60), 5, Microsoft.Extensions.Logging.Abstractions.NullLogger.Instance);
        var states = new List<ReceiptState>();
        try
        {
            await foreach (var item in store.ListAsync(BlobReceipts.Container, receipts.PrefixOf("Process")))
                if (item.Name.EndsWith("/scale-in/" + name, StringComparison.Ordinal))
                    states.Add((await receipts.ReadAsync(item.Name, default))!.Value.State);
        }
        catch (BlobStorageException e) when (e.Status == 404)
        {
            // no receipt written yet, anywhere
        }
        return states;
    }

    [Fact]
    public async Task Sixty_blobs_on_three_instances_each_run_exactly_once_shared_between_them_and_a_changed_blob_runs_once_more()
    {
        using var app = App("scaleout", "00:00:00.5");
        await using var group = await StartAsync(app, 3);
        using var store = new BlobStore(azurite.ConnectionString);
        await store.CreateContainerIfNotExistsAsync("scale-in");
        var prefix = Guid.NewGuid().ToString("N")[..8];
        var names = Enumerable.Range(0, 60).Select(i => $"{prefix}-{i:D2}").ToArray();
        // Each takes a moment, so the instances' scans overlap while work is left.
        await Task.WhenAll(names.Select(n => store.UploadAsync("scale-in", n, Encoding.UTF8.GetBytes("sleep:0.3 " + n))));

        await Eventually.TrueAsync(async () =>
        {
            foreach (var n in names)
                if ((await ReceiptsAsync(store, "scaleout", n)) is not [ReceiptState.Complete])
                    return false;
            return true;
        }, "every receipt to be complete", seconds: 120);

        // Complete receipts are never taken again; a duplicate would have had to start before, and show below.
        foreach (var n in names)
            Assert.Equal(1, await OutputsAsync(store, n));
        // Only this test's blobs: scale-in also holds the other tests' blobs, which this app (a host id of its own) runs too.
        var perInstance = Executions(app, 3, prefix + "-");
        output.WriteLine($"successful invocations per instance: {string.Join(", ", perInstance)}; started: {string.Join(", ", Executions(app, 3, prefix + "-", started: true))}");
        DumpProblems(app, 3);
        // Attempts that failed (storage too slow on a loaded machine, say) are retried; those that succeed: one per blob.
        Assert.Equal(60, perInstance.Sum());
        Assert.True(perInstance.Count(n => n > 0) >= 2, $"the work was not shared: {string.Join(", ", perInstance)}");

        // A new version (new ETag) of one blob runs once more, once.
        var changed = names[7];
        await store.UploadAsync("scale-in", changed, Encoding.UTF8.GetBytes("second version"));
        await Eventually.TrueAsync(async () => await ReceiptsAsync(store, "scaleout", changed) is [ReceiptState.Complete, ReceiptState.Complete],
            "the changed blob's second receipt to be complete", seconds: 60);
        Assert.Equal(2, await OutputsAsync(store, changed));
        Assert.Equal(2, Executions(app, 3, changed).Sum());
        var after = Executions(app, 3, prefix + "-");
        output.WriteLine($"successful invocations per instance at the end: {string.Join(", ", after)}");
        DumpProblems(app, 3);
        foreach (var n in names)
            Assert.True(await OutputsAsync(store, n) == (n == changed ? 2 : 1), $"{n}: {await OutputsAsync(store, n)} outputs");
        Assert.Equal(61, after.Sum());
    }

    [Fact]
    public async Task A_blob_whose_instance_is_killed_mid_invocation_is_finished_by_another_instance_after_the_lease_expires_once()
    {
        using var app = App("leasekill", "00:00:00.5");
        // The shortest lease the service allows; the function runs longer than one lease, so it is renewed.
        await using var group = await StartAsync(app, 3, new Dictionary<string, string> { ["FAAST_BLOB_LEASE_SECONDS"] = "15" });
        using var store = new BlobStore(azurite.ConnectionString);
        await store.CreateContainerIfNotExistsAsync("scale-in");
        var name = "slow-" + Guid.NewGuid().ToString("N")[..8];
        await store.UploadAsync("scale-in", name, Encoding.UTF8.GetBytes("sleep:20 " + name));

        var holder = -1;
        await Eventually.TrueAsync(() =>
        {
            holder = Array.FindIndex(Executions(app, 3, name, started: true), n => n > 0);
            return Task.FromResult(holder >= 0);
        }, "an instance to start the function", seconds: 30);
        await group.KillAsync(holder);
        output.WriteLine($"killed instance {holder} while it ran the function");

        await Eventually.TrueAsync(async () => await ReceiptsAsync(store, "leasekill", name) is [ReceiptState.Complete],
            "another instance to complete the blob", seconds: 120);
        Assert.Equal(1, await OutputsAsync(store, name));
        var started = Executions(app, 3, name, started: true);
        output.WriteLine($"invocations started per instance: {string.Join(", ", started)}");
        DumpProblems(app, 3);
        // The killed attempt and the one that finished, although the function outlived a lease: it was renewed.
        Assert.Equal(1, started[holder]);
        Assert.Equal(2, started.Sum());
        Assert.Equal(1, Executions(app, 3, name).Sum());
        var receipt = Assert.Single(await ReceiptsAsync(store, "leasekill", name));
        Assert.Equal(ReceiptState.Complete, receipt);
    }

    [Fact]
    public async Task A_blob_a_function_writes_fires_at_once_on_the_writing_instance_and_nowhere_else()
    {
        // Scans every 10 minutes: after the first, only the write itself can fire the trigger.
        using var app = App("writerfires", "00:10:00");
        await using var group = await StartAsync(app, 3);
        // Ready is not scanned: an instance whose first scan (after its receipts load) comes after a write would
        // find the blob and could take it first. After every first scan, only the write fires the trigger.
        await Eventually.TrueAsync(() => Task.FromResult(Enumerable.Range(0, 3).All(i => InstanceLog(app, i).Contains("its first scan listed", StringComparison.Ordinal))),
            "every instance's first scan of scale-in", seconds: 60);
        using var http = new HttpClient { Timeout = TimeSpan.FromSeconds(60) };
        var names = new List<string>();
        for (var i = 0; i < 3; i++)
        {
            var name = $"w{i}-" + Guid.NewGuid().ToString("N")[..8];
            names.Add(name);
            using var put = await http.PostAsync(new Uri(group[i].BaseAddress, $"api/put/{name}"), new StringContent("from instance " + i));
            Assert.True(put.IsSuccessStatusCode, $"instance {i}: {(int)put.StatusCode} {await put.Content.ReadAsStringAsync()}");
        }

        using var store = new BlobStore(azurite.ConnectionString);
        for (var i = 0; i < 3; i++)
        {
            var name = names[i];
            await Eventually.TrueAsync(async () => await OutputsAsync(store, name) == 1, $"scale-out/{name}/ to be written", seconds: 30);
            // The instance's log line follows the output blob (it passes through the instance's stdout): waited for.
            await Eventually.TrueAsync(() => Task.FromResult(Executions(app, 3, name).Sum() >= 1), $"the execution for {name} to be logged", seconds: 30);
            var executions = Executions(app, 3, name);
            Assert.True(executions[i] == 1 && executions.Sum() == 1,
                $"{name}, written by instance {i}: executions per instance {string.Join(", ", executions)}");
        }
    }
}
