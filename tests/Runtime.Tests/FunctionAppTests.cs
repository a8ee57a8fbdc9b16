namespace FaaST.Runtime.Tests;

public class FunctionAppTests
{
    private const string HttpJson = """
        { "bindings": [
          { "type": "httpTrigger", "direction": "in", "name": "req", "methods": ["get"], "route": "items/{id}" },
          { "type": "blob", "direction": "in", "name": "doc", "path": "docs/{id}", "dataType": "binary" },
          { "type": "http", "direction": "out", "name": "$return" } ] }
        """;

    private static readonly System.Collections.Hashtable NoEnvironment = new();

    [Fact]
    public void The_apps_name_is_its_folders_name_however_the_folder_is_written()
    {
        using var app = new TestApp("python", name: "orders");
        Assert.Equal("orders", FunctionApp.Load(app.Directory + "/", NoEnvironment).Name);
        Assert.Equal("orders", FunctionApp.NameOf(app.Directory + "/"));
        Assert.Equal("orders", FunctionApp.NameOf(Path.Combine(app.Directory, "..", "orders")));
    }

    [Fact]
    public void Loads_functions_bindings_and_defaults()
    {
        using var app = new TestApp("python").Function("Get", HttpJson, ("__init__.py", "def main(req): pass"));
        var loaded = FunctionApp.Load(app.Directory, NoEnvironment);
        var f = Assert.Single(loaded.Functions);
        Assert.Null(f.Error);
        Assert.Equal(Path.Combine(app.Directory, "Get", "__init__.py"), f.ScriptFile);
        Assert.Equal("items/{id}", f.Trigger!.Route);
        Assert.Equal(["GET"], f.Trigger.Methods!);
        var blob = f.Bindings.Single(b => b.Type == BindingMetadata.Blob);
        Assert.Equal("binary", blob.DataType);
        Assert.Equal("AzureWebJobsStorage", blob.Connection);
        Assert.Equal("api", loaded.Host.RoutePrefix);
    }

    [Fact]
    public void Malformed_function_json_disables_only_that_function_and_names_the_file()
    {
        using var app = new TestApp("python")
            .Function("Good", HttpJson, ("__init__.py", ""))
            .Function("Broken", "{ \"bindings\": [ ", ("__init__.py", ""));
        var loaded = FunctionApp.Load(app.Directory, NoEnvironment);
        Assert.Null(loaded.Functions.Single(f => f.Name == "Good").Error);
        var broken = loaded.Functions.Single(f => f.Name == "Broken");
        Assert.Contains(Path.Combine("Broken", "function.json"), broken.Error);
        Assert.Contains("not valid JSON", broken.Error);
        Assert.Equal(["Good"], loaded.Runnable.Select(f => f.Name));
    }

    [Fact]
    public void Unknown_binding_type_is_named()
    {
        using var app = new TestApp("python").Function("Q", """
            { "bindings": [ { "type": "serviceBusTrigger", "direction": "in", "name": "msg", "queueName": "q" } ] }
            """, ("__init__.py", ""));
        var f = Assert.Single(FunctionApp.Load(app.Directory, NoEnvironment).Functions);
        Assert.Contains("bindings[0].type \"serviceBusTrigger\" is not a supported binding", f.Error);
    }

    [Fact]
    public void Missing_script_is_an_error_naming_it()
    {
        using var app = new TestApp("node").Function("NoScript", HttpJson);
        var f = Assert.Single(FunctionApp.Load(app.Directory, NoEnvironment).Functions);
        Assert.Contains("scriptFile \"index.js\" does not exist", f.Error);
    }

    [Theory]
    [InlineData("""{ "bindings": [ { "type": "blob", "direction": "in", "name": "b", "path": "cnt/x" } ] }""", "exactly one trigger")]
    [InlineData("""{ "bindings": [ { "type": "httpTrigger", "direction": "in", "name": "req" }, { "type": "blob", "direction": "in", "name": "b" } ] }""", "bindings[1].path is missing")]
    [InlineData("""{ "bindings": [ { "type": "httpTrigger", "direction": "in", "name": "req" }, { "type": "blob", "direction": "sideways", "name": "b", "path": "cnt/x" } ] }""", "direction \"sideways\"")]
    [InlineData("""{ "bindings": [ { "type": "blobTrigger", "direction": "in", "name": "b", "path": "{c}/x" } ] }""", "literal container name")]
    [InlineData("""{ "bindings": [ { "type": "httpTrigger", "direction": "in", "name": "req" }, { "type": "blob", "direction": "in", "name": "b", "path": "Bad_Container/x" } ] }""", "Bad_Container")]
    [InlineData("""{ "bindings": [ { "type": "httpTrigger", "direction": "in", "name": "req" }, { "type": "blob", "direction": "in", "name": "b", "path": "cnt/{x" } ] }""", "without a closing")]
    [InlineData("""{ "bindings": [ { "type": "httpTrigger", "direction": "in", "name": "req" }, { "type": "blob", "direction": "in", "name": "req", "path": "cnt/x" } ] }""", "used twice")]
    [InlineData("""{ "bindings": [ { "type": "httpTrigger", "direction": "in", "name": "req" }, { "type": "blob", "direction": "in", "name": "b", "path": "cnt/x", "dataType": "float" } ] }""", "dataType \"float\"")]
    [InlineData("""{ "bindings": [ { "type": "blobTrigger", "direction": "in", "name": "b", "path": "cnt/{name}" }, { "type": "http", "direction": "out", "name": "res" } ] }""", "needs an httpTrigger")]
    [InlineData("""{ "bindings": [ { "type": "httpTrigger", "direction": "in", "name": "req" }, { "type": "blob", "direction": "out", "name": "b", "path": "%Missing%/x" } ] }""", "%Missing%")]
    public void Invalid_bindings_are_reported_with_the_key(string json, string expected)
    {
        using var app = new TestApp("python").Function("F", json, ("__init__.py", ""));
        var f = Assert.Single(FunctionApp.Load(app.Directory, NoEnvironment).Functions);
        Assert.NotNull(f.Error);
        Assert.Contains(expected, f.Error);
        Assert.Contains("function.json", f.Error);
    }

    [Fact]
    public void Disabled_flag_and_setting_disable_a_function()
    {
        using var app = new TestApp("python", settings: new() { ["AzureWebJobs.B.Disabled"] = "true" })
            // Routes of their own: disabled functions keep their routes, so one route would be a conflict.
            .Function("A", HttpJson.Replace("{ \"bindings\"", "{ \"disabled\": true, \"bindings\"", StringComparison.Ordinal).Replace("items/", "a/", StringComparison.Ordinal), ("__init__.py", ""))
            .Function("B", HttpJson.Replace("items/", "b/", StringComparison.Ordinal), ("__init__.py", ""))
            .Function("C", HttpJson, ("__init__.py", ""));
        var loaded = FunctionApp.Load(app.Directory, NoEnvironment);
        Assert.Equal(["C"], loaded.Runnable.Select(f => f.Name));
    }

    [Fact]
    public void Environment_overrides_local_settings()
    {
        using var app = new TestApp("python", settings: new() { ["Greeting"] = "file" });
        var env = new System.Collections.Hashtable { ["Greeting"] = "env", ["AzureWebJobsStorage"] = "UseDevelopmentStorage=true" };
        var loaded = FunctionApp.Load(app.Directory, env);
        Assert.Equal("env", loaded.Settings["Greeting"]);
        Assert.Equal("UseDevelopmentStorage=true", loaded.Settings["AzureWebJobsStorage"]);
    }

    [Fact]
    public void Bad_host_json_stops_the_app_naming_file_and_key()
    {
        using var app = new TestApp("python", hostJson: """{ "version": "2.0", "functionTimeout": "soon" }""");
        var e = Assert.Throws<AppConfigException>(() => FunctionApp.Load(app.Directory, NoEnvironment));
        Assert.Contains("host.json", e.Message);
        Assert.Contains("functionTimeout", e.Message);
    }

    [Fact]
    public void Unknown_worker_runtime_stops_the_app()
    {
        using var app = new TestApp("java");
        var e = Assert.Throws<AppConfigException>(() => FunctionApp.Load(app.Directory, NoEnvironment));
        Assert.Contains("FUNCTIONS_WORKER_RUNTIME", e.Message);
    }

    [Fact]
    public void Host_json_settings_are_read()
    {
        using var app = new TestApp("node", hostJson: """
            { "version": "2.0", "functionTimeout": "00:00:03",
              "extensions": { "http": { "routePrefix": "" }, "blobs": { "pollingInterval": "00:00:00.5", "maxDequeueCount": 2 } } }
            """);
        var loaded = FunctionApp.Load(app.Directory, NoEnvironment);
        Assert.Equal(TimeSpan.FromSeconds(3), loaded.Host.FunctionTimeout);
        Assert.Equal("", loaded.Host.RoutePrefix);
        Assert.Equal(TimeSpan.FromMilliseconds(500), loaded.Host.BlobPollingInterval);
        Assert.Equal(2, loaded.Host.BlobMaxDequeueCount);
    }

    [Fact]
    public void Command_line_is_validated()
    {
        Assert.Throws<ArgumentException>(() => Program.ParseArguments([]));
        var e = Assert.Throws<ArgumentException>(() => Program.ParseArguments(["app", "--port", "x"]));
        Assert.Contains("--port", e.Message);
        var o = Program.ParseArguments(["app", "--port", "0", "--workers", "2", "--azurite-in-memory", "--no-cache"]);
        Assert.False(o.CacheEnabled);
        Assert.Null(Program.ParseArguments(["app"]).CacheEnabled);
        Assert.Equal(0, o.HttpPort);
        Assert.Equal(2, o.WorkerProcessCount);
        Assert.Null(o.AzuriteDataDirectory);
    }
}
