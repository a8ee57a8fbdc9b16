using System.Text.Json;

namespace FaaST.Runtime.Tests;

/// <summary>
/// Issue 19, defect 3: workers inherited the host's whole environment (the platform's storage key, FAAST_PEER_SECRET,
/// anything in the operator's shell). Now they get an allow-list of it, plus the app's settings. Real host processes
/// with a real Python and a real Node worker, each function answering with its own environment.
/// </summary>
[Collection("azurite")]
public sealed class WorkerEnvironmentTests(AzuriteFixture azurite)
{
    private const string PeerSecret = "the-hosts-peer-secret-no-worker-may-hold-0123456789";
    private const string OperatorSecret = "an-operator-secret-from-the-shell";

    private const string PyEnv = """
        import json, os
        import azure.functions as func
        def main(req: func.HttpRequest) -> func.HttpResponse:
            return func.HttpResponse(json.dumps(dict(os.environ)))
        """;

    private const string NodeEnv = """
        module.exports = async function (context, req) {
          return { body: JSON.stringify(process.env) };
        };
        """;

    private static readonly Dictionary<string, string> Settings = new()
    {
        ["Greeting"] = "an app setting",
        // An app listing a host-only setting does not hand it to its workers either.
        ["FAAST_SCALE_CONTROLLER"] = "http://127.0.0.1:1/",
    };

    [Theory]
    [InlineData("python", "__init__.py", PyEnv)]
    [InlineData("node", "index.js", NodeEnv)]
    public async Task A_workers_environment_has_the_app_settings_and_neither_the_peer_secret_nor_the_operators_variables(
        string runtime, string file, string code)
    {
        using var app = new TestApp(runtime, settings: Settings).Function("Env", TestApp.HttpFunctionJson, (file, code));
        await using var host = await HostProcess.StartAsync(app.Directory, azurite.ConnectionString, ["--no-peers"],
            environment: new Dictionary<string, string> { ["FAAST_PEER_SECRET"] = PeerSecret, ["SOME_OPERATOR_SECRET"] = OperatorSecret });

        var environment = JsonSerializer.Deserialize<Dictionary<string, string>>(await host.Http.GetStringAsync("/api/Env"))!;

        Assert.Equal("an app setting", environment["Greeting"]);
        Assert.Equal(azurite.ConnectionString, environment["AzureWebJobsStorage"]);
        Assert.Equal(runtime, environment["FUNCTIONS_WORKER_RUNTIME"]);
        Assert.True(environment.ContainsKey("PATH"));
        Assert.False(environment.ContainsKey("FAAST_PEER_SECRET"));
        Assert.False(environment.ContainsKey("SOME_OPERATOR_SECRET"));
        Assert.False(environment.ContainsKey("FAAST_SCALE_CONTROLLER"));
        Assert.False(environment.ContainsKey("FAAST_HOME"));
        Assert.DoesNotContain(environment.Values, v => v.Contains(PeerSecret, StringComparison.Ordinal) || v.Contains(OperatorSecret, StringComparison.Ordinal));
    }
}
