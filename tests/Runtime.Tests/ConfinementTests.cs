namespace FaaST.Runtime.Tests;

/// <summary>
/// Issue 19, defect 2: every path a function names stays inside its app folder. A scriptFile of "/etc/shadow" once
/// passed (the file exists), then made --isolation auto find that the app's user cannot read it and run every worker
/// of the app as root. Each case is a real app folder on disk, loaded as the host loads it.
/// </summary>
[Collection("azurite")]
[System.Runtime.Versioning.UnsupportedOSPlatform("windows")]
public sealed class ConfinementTests(AzuriteFixture azurite)
{
    private const string PyHello = """
        import azure.functions as func
        def main(req: func.HttpRequest) -> func.HttpResponse:
            return func.HttpResponse("hello")
        """;

    private static string ScriptJson(string scriptFile) => $$"""
        { "scriptFile": "{{scriptFile}}", "bindings": [
          { "type": "httpTrigger", "direction": "in", "name": "req", "authLevel": "anonymous" },
          { "type": "http", "direction": "out", "name": "$return" } ] }
        """;

    private static TestApp App(string? name = null) =>
        new TestApp("python", name: name).Function("Hello", TestApp.HttpFunctionJson, ("__init__.py", PyHello));

    private static FunctionDefinition Load(TestApp app, string function) =>
        Assert.Single(FunctionApp.Load(app.Directory, new System.Collections.Hashtable()).Functions, f => f.Name == function);

    private static void AssertRefused(FunctionDefinition f, string key, string leadsTo)
    {
        Assert.NotNull(f.Error);
        Assert.StartsWith(Path.Combine(f.Directory, "function.json") + ": " + key + " ", f.Error, StringComparison.Ordinal);
        Assert.Contains("leads outside the app folder", f.Error, StringComparison.Ordinal);
        Assert.Contains(leadsTo, f.Error, StringComparison.Ordinal);
    }

    [Fact]
    public void A_scriptFile_naming_an_absolute_path_outside_the_app_is_refused_naming_the_file_the_key_and_the_path()
    {
        using var app = App().Function("Shadow", ScriptJson("/etc/shadow"));

        var f = Load(app, "Shadow");

        AssertRefused(f, "scriptFile", "/etc/shadow");
        Assert.DoesNotContain(FunctionApp.Load(app.Directory, new System.Collections.Hashtable()).Runnable, r => r.Name == "Shadow");
        Assert.Null(Load(app, "Hello").Error);
    }

    [Fact]
    public void A_scriptFile_climbing_out_with_dot_dot_is_refused_even_when_the_file_exists()
    {
        using var app = App().Function("Climb", ScriptJson("../../x.py"));
        var outside = Path.GetFullPath(Path.Combine(app.Directory, "Climb", "../../x.py"));
        File.WriteAllText(outside, "def main(req): return 'escaped'");
        try
        {
            AssertRefused(Load(app, "Climb"), "scriptFile", outside);
        }
        finally
        {
            File.Delete(outside);
        }
    }

    [Fact]
    public void A_script_that_is_a_link_out_of_the_app_is_refused()
    {
        using var app = App().Function("Linked", TestApp.HttpFunctionJson);
        File.CreateSymbolicLink(Path.Combine(app.Directory, "Linked", "__init__.py"), "/etc/shadow");

        AssertRefused(Load(app, "Linked"), "scriptFile", "/etc/shadow");
    }

    [Fact]
    public void A_link_to_a_folder_outside_on_the_way_to_the_script_is_refused()
    {
        using var outside = new TempDirectory("faast-outside-");
        File.WriteAllText(Path.Combine(outside.Path, "x.py"), PyHello);
        using var app = App().Function("Via", ScriptJson("lib/x.py"));
        Directory.CreateSymbolicLink(Path.Combine(app.Directory, "Via", "lib"), outside.Path);

        AssertRefused(Load(app, "Via"), "scriptFile", Path.Combine(outside.Path, "x.py"));
    }

    [Fact]
    public void A_function_folder_that_is_a_link_out_of_the_app_is_refused_unread()
    {
        using var outside = new TempDirectory("faast-outside-");
        File.WriteAllText(Path.Combine(outside.Path, "function.json"), TestApp.HttpFunctionJson);
        File.WriteAllText(Path.Combine(outside.Path, "__init__.py"), PyHello);
        using var app = App();
        Directory.CreateSymbolicLink(Path.Combine(app.Directory, "Elsewhere"), outside.Path);

        AssertRefused(Load(app, "Elsewhere"), "functionDirectory", outside.Path);
    }

    [Fact]
    public void A_link_that_stays_inside_the_app_is_allowed()
    {
        using var app = App().Function("Shared", ScriptJson("../common/hello.py"));
        Directory.CreateDirectory(Path.Combine(app.Directory, "common"));
        File.WriteAllText(Path.Combine(app.Directory, "common", "real.py"), PyHello);
        File.CreateSymbolicLink(Path.Combine(app.Directory, "common", "hello.py"), "real.py");

        var f = Load(app, "Shared");

        Assert.Null(f.Error);
        Assert.Equal(Path.Combine(app.Directory, "common", "hello.py"), f.ScriptFile);
    }

    [Fact]
    public void A_link_cycle_is_refused_rather_than_followed_forever()
    {
        using var app = App().Function("Loop", ScriptJson("a/x.py"));
        Directory.CreateSymbolicLink(Path.Combine(app.Directory, "Loop", "a"), "b");
        Directory.CreateSymbolicLink(Path.Combine(app.Directory, "Loop", "b"), "a");

        AssertRefused(Load(app, "Loop"), "scriptFile", "symbolic links");
    }

    /// <summary>
    /// The host as root with --isolation auto: the escaping functions are not loaded (their reason in the status, as
    /// other disabled functions'), the others serve, and the workers still run as the app's own user: the escaping
    /// path never reached the readability check that would have fallen back to root.
    /// </summary>
    [IsolationFact]
    public async Task At_start_escaping_functions_are_not_loaded_and_workers_still_run_as_the_apps_user()
    {
        using var app = App("isoconfine")
            .Function("Shadow", ScriptJson("/etc/shadow"))
            .Function("Climb", ScriptJson("../../x.py"))
            .Function("Linked", TestApp.HttpFunctionJson);
        File.CreateSymbolicLink(Path.Combine(app.Directory, "Linked", "__init__.py"), "/etc/shadow");

        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString,
            configure: o => o with { WorkerUser = null, Isolation = IsolationMode.Auto });
        var status = await host.Http.GetHostStatusAsync();

        Assert.Equal("faast-isoconfine", status.Isolation.User);
        Assert.NotEmpty(status.WorkerProcessIds);
        Assert.All(status.WorkerProcessIds, pid => Assert.Equal(status.Isolation.Uid!.Value.ToString(System.Globalization.CultureInfo.InvariantCulture), Uid(pid)));
        Assert.All(status.WorkerProcessIds, pid => Assert.NotEqual("0", Uid(pid)));
        foreach (var (name, key) in new[] { ("Shadow", "scriptFile"), ("Climb", "scriptFile"), ("Linked", "scriptFile") })
        {
            var f = Assert.Single(status.Functions, s => s.Name == name);
            Assert.True(f.Disabled, name);
            Assert.Contains($"function.json: {key} ", f.Error, StringComparison.Ordinal);
            Assert.Contains("leads outside the app folder", f.Error, StringComparison.Ordinal);
            Assert.Contains(host.Logs.Lines, l => l.Contains(name, StringComparison.Ordinal) && l.Contains("leads outside the app folder", StringComparison.Ordinal));
        }
        Assert.False(Assert.Single(status.Functions, s => s.Name == "Hello").Disabled);
        Assert.Equal("hello", await host.Http.GetStringAsync("/api/Hello"));
    }

    /// <summary>The real uid of a process (/proc/PID/status).</summary>
    private static string Uid(int pid) =>
        File.ReadLines($"/proc/{pid}/status").First(l => l.StartsWith("Uid:", StringComparison.Ordinal))
            .Split((char[]?)null, StringSplitOptions.RemoveEmptyEntries)[1];
}
