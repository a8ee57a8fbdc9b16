namespace FaaST.Runtime.Tests;

/// <summary>
/// Issue 19, defect 10: a worker's output reached the operator's terminal with raw CR and escape sequences, so a
/// function could clear the screen or rewrite the lines before it. A real host process, a real Python worker.
/// </summary>
[Collection("azurite")]
public sealed class WorkerOutputTests(AzuriteFixture azurite)
{
    private const string PyPrint = """
        import sys
        import azure.functions as func
        def main(req: func.HttpRequest) -> func.HttpResponse:
            print("\r\x1b[2Jevil\tafter a tab\x07", flush=True)
            print("\x9b31mred", file=sys.stderr, flush=True)
            return func.HttpResponse("printed")
        """;

    [Fact]
    public async Task A_functions_escape_sequences_reach_the_hosts_log_escaped()
    {
        using var app = new TestApp("python").Function("Print", TestApp.HttpFunctionJson, ("__init__.py", PyPrint));
        await using var host = await HostProcess.StartAsync(app.Directory, azurite.ConnectionString, ["--no-peers"]);

        Assert.Equal("printed", await host.Http.GetStringAsync("/api/Print"));

        await Eventually.TrueAsync(() => host.Output.Any(l => l.Contains("\\x9B31mred", StringComparison.Ordinal)),
            "the worker's stderr line in the host's log", () => string.Join('\n', host.Output));
        await Eventually.TrueAsync(() => host.Output.Any(l => l.Contains("\\x1B[2Jevil\tafter a tab\\x07", StringComparison.Ordinal)),
            "the worker's stdout line in the host's log", () => string.Join('\n', host.Output));
        Assert.DoesNotContain(host.Output, l => l.Any(c => c is '\u001b' or '\u009b' or '\u0007' or '\r'));
    }

    [Fact]
    public void Output_is_escaped_except_for_tabs()
    {
        Assert.Equal("\\r\\x1B[2Jevil\tx\\x9B", LogText.EscapeOutput("\r\u001b[2Jevil\tx\u009b"));
        Assert.Equal("plain line", LogText.EscapeOutput("plain line"));
    }
}
