using System.Text.Json.Nodes;

namespace FaaST.Simulator.Tests;

/// <summary>
/// <c>./faast simulate</c>'s command as the script runs it: a trace file with a malformed line, a latency table, the
/// result written under the home (FAAST_HOME, set for this test only: nothing else in this assembly reads it).
/// </summary>
public sealed class SimulateCommandTests : IDisposable
{
    private readonly string _home = Directory.CreateTempSubdirectory("faast-simulate-").FullName;

    public void Dispose() => Directory.Delete(_home, recursive: true);

    private const string Latency = """
        { "metrics": { "storage_read_p50_ms_1": 10.0, "storage_write_p50_ms_1": 20.0, "local_hit_read_p50_ms_1": 1.0, "cache_write_p50_ms_1": 0.5 } }
        """;

    [Fact]
    public async Task The_command_replays_a_trace_file_skips_its_malformed_line_and_writes_the_result_under_the_home()
    {
        var trace = Path.Combine(_home, "trace.csv");
        File.WriteAllLines(trace,
        [
            "Timestamp,AnonRegion,AnonUserId,AnonAppName,AnonFunctionInvocationId,AnonBlobName,BlobType,AnonBlobETag,BlobBytes,Read,Write",
            "1593561600000,r,u,app,1,model,BlockBlob,e1,1024.0,True,False",
            "1593561600010,r,u,app,1,model,BlockBlob,e1,1024.0,True,False",
            "1593561600020,r,u,app,1,model,BlockBlob,e1,not-a-size,True,False",
            "1593561600030,r,u,app,1,model,BlockBlob,e1,1024.0,True,False",
        ]);
        var latency = Path.Combine(_home, "latency.json");
        File.WriteAllText(latency, Latency);
        Environment.SetEnvironmentVariable("FAAST_HOME", _home);
        try
        {
            Assert.Equal(0, await SimulateCommand.RunAsync(["--trace", trace, "--latency", latency, "--quick"]));
        }
        finally
        {
            Environment.SetEnvironmentVariable("FAAST_HOME", null);
        }

        var doc = JsonNode.Parse(File.ReadAllText(Path.Combine(_home, "bench", "results", "simulation.quick.json")))!;
        Assert.Equal(1, doc["config"]!["malformed_lines"]!.GetValue<long>());
        Assert.Equal(3, doc["metrics"]!["accesses"]!.GetValue<long>());
        // One miss then two hits: owner/sync/owner takes 10 + 1 + 1 ms of storage's 30.
        Assert.Equal(60, doc["metrics"]!["owner_avg_improvement_pct_never_128mb"]!.GetValue<double>(), 3);
    }

    [Theory]
    [InlineData("--apps", "0")]
    [InlineData("--figure", "7")]
    [InlineData("--bogus", "")]
    public async Task A_bad_argument_is_refused_before_anything_runs(string option, string value)
    {
        string[] args = value.Length == 0 ? [option] : [option, value];

        Assert.Equal(2, await SimulateCommand.RunAsync(args));
        Assert.False(Directory.Exists(Path.Combine(_home, "bench")));
    }

    [Fact]
    public async Task The_synthetic_trace_options_do_not_apply_to_a_given_trace()
    {
        Assert.Equal(2, await SimulateCommand.RunAsync(["--trace", Path.Combine(_home, "t.csv"), "--apps", "10"]));
    }

    [Fact]
    public async Task A_missing_trace_file_is_an_error_that_names_it_and_writes_nothing()
    {
        var latency = Path.Combine(_home, "latency.json");
        File.WriteAllText(latency, Latency);

        Assert.Equal(1, await SimulateCommand.RunAsync(["--trace", Path.Combine(_home, "missing.csv"), "--latency", latency]));
        Assert.False(Directory.Exists(Path.Combine(_home, "bench")));
    }
}
