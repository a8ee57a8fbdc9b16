using System.Text;

namespace FaaST.Runtime.Tests;

/// <summary>Bad configuration is refused when the app loads, with the file, the key and the reason.</summary>
public class ConfigValidationTests
{
    private static readonly System.Collections.Hashtable NoEnvironment = new();

    private static string HttpJson(string route) => $$"""
        { "bindings": [
          { "type": "httpTrigger", "direction": "in", "name": "req", "route": "{{route}}" },
          { "type": "http", "direction": "out", "name": "$return" } ] }
        """;

    private static FunctionDefinition LoadOne(string route)
    {
        using var app = new TestApp("python").Function("F", HttpJson(route), ("__init__.py", ""));
        return Assert.Single(FunctionApp.Load(app.Directory, NoEnvironment).Functions);
    }

    [Theory]
    [InlineData("items/{id:int}")]
    [InlineData("items/{id:long}/{flag:bool}")]
    [InlineData("w/{word:alpha}/{g:guid}/{d:datetime}")]
    [InlineData("n/{a:decimal}/{b:double}/{c:float}")]
    [InlineData("r/{a:min(1)}/{b:max(9)}/{c:range(1,9)}")]
    [InlineData("s/{a:length(3)}/{b:length(2,4)}/{c:minlength(1)}/{d:maxlength(8)}")]
    [InlineData("x/{id:regex(^[a-z]+$)}")]
    [InlineData("x/{id:int:min(1)}/{rest?}")]
    public void Every_route_constraint_Azure_supports_loads(string route)
    {
        var f = LoadOne(route);
        Assert.Null(f.Error);
        Assert.Equal(route, f.Trigger!.Route);
    }

    [Fact]
    public void An_unknown_route_constraint_disables_only_its_function_naming_the_file_key_and_constraint()
    {
        using var app = new TestApp("python")
            .Function("Good", HttpJson("good/{id:int}"), ("__init__.py", ""))
            .Function("Bad", HttpJson("bad/{id:nosuch}"), ("__init__.py", ""));
        var loaded = FunctionApp.Load(app.Directory, NoEnvironment);
        Assert.Null(loaded.Functions.Single(f => f.Name == "Good").Error);
        var error = loaded.Functions.Single(f => f.Name == "Bad").Error;
        Assert.NotNull(error);
        Assert.Contains(Path.Combine("Bad", "function.json"), error);
        Assert.Contains("bindings[0].route", error);
        Assert.Contains("\"nosuch\"", error);
        Assert.Contains("regex", error); // lists what is supported
        Assert.Equal(["Good"], loaded.Runnable.Select(f => f.Name));
    }

    [Theory]
    [InlineData("a/{id:min(abc)}", "min(abc)")]
    [InlineData("a/{id:range(9,1)}", "range(9,1)")]
    [InlineData("a/{id:length(1,2,3)}", "length(1,2,3)")]
    [InlineData("a/{id:int(5)}", "int(5)")]
    [InlineData("a/{id:regex(([a-z)}", "regex(([a-z)")]
    [InlineData("a/{id:required}", "required")]
    public void A_route_constraint_with_bad_arguments_disables_its_function(string route, string constraint)
    {
        var error = LoadOne(route).Error;
        Assert.NotNull(error);
        Assert.Contains($"\"{constraint}\"", error);
        Assert.Contains("route", error);
    }

    [Fact]
    public void A_malformed_route_template_disables_its_function()
    {
        var error = LoadOne("a/{id").Error;
        Assert.NotNull(error);
        Assert.Contains("not a valid route template", error);
    }

    [Fact]
    public void Invalid_utf8_in_a_function_json_disables_that_function_naming_the_file()
    {
        using var app = new TestApp("python")
            .Function("Good", HttpJson("good"), ("__init__.py", ""))
            .Function("Latin1", HttpJson("x"), ("__init__.py", ""));
        // A route with a Latin-1 "é" (0xE9), which is not UTF-8.
        var bytes = Encoding.UTF8.GetBytes(HttpJson("caf\u0001"));
        bytes[Array.IndexOf(bytes, (byte)1)] = 0xE9;
        File.WriteAllBytes(Path.Combine(app.Directory, "Latin1", "function.json"), bytes);

        var loaded = FunctionApp.Load(app.Directory, NoEnvironment);
        var error = loaded.Functions.Single(f => f.Name == "Latin1").Error;
        Assert.NotNull(error);
        Assert.Contains(Path.Combine("Latin1", "function.json"), error);
        Assert.Contains("not valid UTF-8", error);
        Assert.Contains("line 2", error);
        Assert.Null(loaded.Functions.Single(f => f.Name == "Good").Error);
    }

    [Fact]
    public void An_escape_of_half_a_surrogate_pair_disables_that_function_naming_the_file_and_key()
    {
        using var app = new TestApp("python")
            .Function("Good", HttpJson("good"), ("__init__.py", ""))
            .Function("Half", HttpJson("x"), ("__init__.py", ""));
        File.WriteAllText(Path.Combine(app.Directory, "Half", "function.json"),
            """{"bindings": [{"type": "httpTrigger", "direction": "in\udf27", "name": "req"}]}""");

        var loaded = FunctionApp.Load(app.Directory, NoEnvironment);
        var error = loaded.Functions.Single(f => f.Name == "Half").Error;
        Assert.NotNull(error);
        Assert.Contains(Path.Combine("Half", "function.json"), error);
        Assert.Contains("bindings[0].direction", error);
        Assert.Null(loaded.Functions.Single(f => f.Name == "Good").Error);
    }

    [Fact]
    public void A_nul_in_scriptFile_disables_that_function_naming_the_key()
    {
        using var app = new TestApp("python")
            .Function("Good", HttpJson("good"), ("__init__.py", ""))
            .Function("Nul", HttpJson("x"), ("__init__.py", ""));
        File.WriteAllText(Path.Combine(app.Directory, "Nul", "function.json"),
            """{"scriptFile": "x\u0000y", "bindings": [{"type": "httpTrigger", "direction": "in", "name": "req"}]}""");

        var loaded = FunctionApp.Load(app.Directory, NoEnvironment);
        var error = loaded.Functions.Single(f => f.Name == "Nul").Error;
        Assert.NotNull(error);
        Assert.Contains("scriptFile", error);
        Assert.Null(loaded.Functions.Single(f => f.Name == "Good").Error);
    }

    [Fact]
    public void Invalid_utf8_in_local_settings_json_is_a_startup_error_naming_the_file()
    {
        using var app = new TestApp("python").Function("F", HttpJson("f"), ("__init__.py", ""));
        File.WriteAllBytes(Path.Combine(app.Directory, "local.settings.json"),
            [.. "{ \"Values\": { \"FUNCTIONS_WORKER_RUNTIME\": \"python\", \"Greeting\": \"h"u8, 0xC3, 0x28, .. "\" } }"u8]);
        var e = Assert.Throws<AppConfigException>(() => FunctionApp.Load(app.Directory, NoEnvironment));
        Assert.Contains("local.settings.json", e.Message);
        Assert.Contains("not valid UTF-8", e.Message);
    }

    [Theory]
    [InlineData("garbage")]
    [InlineData("DefaultEndpointsProtocol=https;AccountName=acct")]
    [InlineData("DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=not*base64!")]
    public void A_malformed_AzureWebJobsStorage_is_a_startup_error_naming_the_setting(string connectionString)
    {
        using var app = new TestApp("python", settings: new() { ["AzureWebJobsStorage"] = connectionString })
            .Function("F", HttpJson("f"), ("__init__.py", ""));
        var e = Assert.Throws<AppConfigException>(() => FunctionApp.Load(app.Directory, NoEnvironment));
        Assert.Contains("local.settings.json: Values.AzureWebJobsStorage", e.Message);
        Assert.DoesNotContain("not*base64!", e.Message); // the key is never echoed
        Assert.DoesNotContain("(Parameter", e.Message);
    }

    [Fact]
    public void A_malformed_AzureWebJobsStorage_from_the_environment_names_the_variable()
    {
        using var app = new TestApp("python").Function("F", HttpJson("f"), ("__init__.py", ""));
        var env = new System.Collections.Hashtable { ["AzureWebJobsStorage"] = "AccountName=acct;AccountKey=%%%" };
        var e = Assert.Throws<AppConfigException>(() => FunctionApp.Load(app.Directory, env));
        Assert.Contains("environment variable AzureWebJobsStorage", e.Message);
        Assert.Contains("base64", e.Message);
    }

    [Fact]
    public void A_blob_binding_whose_connection_is_malformed_disables_its_function()
    {
        using var app = new TestApp("python", settings: new() { ["Other"] = "AccountName=x;AccountKey=***" })
            .Function("F", """
                { "bindings": [
                  { "type": "httpTrigger", "direction": "in", "name": "req" },
                  { "type": "blob", "direction": "in", "name": "b", "path": "docs/x", "connection": "Other" },
                  { "type": "http", "direction": "out", "name": "$return" } ] }
                """, ("__init__.py", ""));
        var error = Assert.Single(FunctionApp.Load(app.Directory, NoEnvironment).Functions).Error;
        Assert.NotNull(error);
        Assert.True(error.Contains("bindings[1].connection", StringComparison.Ordinal), error);
        Assert.Contains("Values.Other", error);
    }

    [Theory]
    [InlineData("60.00:00:00")]
    [InlineData("24:00:01")]
    [InlineData("00:00:00.5")]
    public void A_functionTimeout_out_of_range_is_refused(string timeout)
    {
        using var app = new TestApp("python", hostJson: $$"""{ "version": "2.0", "functionTimeout": "{{timeout}}" }""");
        var e = Assert.Throws<AppConfigException>(() => HostConfig.Load(app.Directory));
        Assert.Contains("host.json", e.Message);
        Assert.Contains("functionTimeout", e.Message);
        Assert.Contains("24:00:00", e.Message);
    }

    [Theory]
    [InlineData("-1")]
    [InlineData("00:00:00")]
    public void A_functionTimeout_of_minus_one_means_no_limit(string timeout)
    {
        using var app = new TestApp("python", hostJson: $$"""{ "version": "2.0", "functionTimeout": "{{timeout}}" }""");
        Assert.Equal(Timeout.InfiniteTimeSpan, HostConfig.Load(app.Directory).FunctionTimeout);
    }

    [Fact]
    public void A_functionTimeout_of_a_day_is_accepted()
    {
        using var app = new TestApp("python", hostJson: """{ "version": "2.0", "functionTimeout": "1.00:00:00" }""");
        Assert.Equal(TimeSpan.FromDays(1), HostConfig.Load(app.Directory).FunctionTimeout);
    }

    [Theory]
    [InlineData("../x")]
    [InlineData("api/./v1")]
    [InlineData("a//b")]
    [InlineData("{x}")]
    [InlineData("a?b")]
    [InlineData("a b")]
    public void A_routePrefix_that_is_not_plain_path_segments_is_refused(string prefix)
    {
        using var app = new TestApp("python", hostJson: $$"""{ "version": "2.0", "extensions": { "http": { "routePrefix": "{{prefix}}" } } }""");
        var e = Assert.Throws<AppConfigException>(() => HostConfig.Load(app.Directory));
        Assert.Contains("host.json", e.Message);
        Assert.Contains("extensions.http.routePrefix", e.Message);
    }

    [Theory]
    [InlineData("")]
    [InlineData("v1/api")]
    [InlineData("/api/")]
    public void A_plain_routePrefix_is_accepted(string prefix)
    {
        using var app = new TestApp("python", hostJson: $$"""{ "version": "2.0", "extensions": { "http": { "routePrefix": "{{prefix}}" } } }""");
        Assert.Equal(prefix.Trim('/'), HostConfig.Load(app.Directory).RoutePrefix);
    }

    [Theory]
    [InlineData("FUNCTIONS_WORKER_PROCESS_COUNT", "two")]
    [InlineData("FUNCTIONS_WORKER_PROCESS_COUNT", "0")]
    [InlineData("FUNCTIONS_WORKER_PROCESS_COUNT", "65")]
    [InlineData("FUNCTIONS_REQUEST_BODY_SIZE_LIMIT", "100MB")]
    [InlineData("FUNCTIONS_REQUEST_BODY_SIZE_LIMIT", "-5")]
    [InlineData("FUNCTIONS_REQUEST_BODY_SIZE_LIMIT", "99999999999999")]
    [InlineData("FAAST_BLOB_LEASE_SECONDS", "14")]
    [InlineData("FAAST_BLOB_LEASE_SECONDS", "61")]
    [InlineData("FAAST_BLOB_LEASE_SECONDS", "1m")]
    public void Junk_in_a_numeric_setting_is_a_startup_error_naming_the_file_and_key(string key, string value)
    {
        using var app = new TestApp("python", settings: new() { [key] = value }).Function("F", HttpJson("f"), ("__init__.py", ""));
        var e = Assert.Throws<AppConfigException>(() => FunctionApp.Load(app.Directory, NoEnvironment));
        Assert.Contains($"local.settings.json: Values.{key}", e.Message);
        Assert.Contains($"\"{value}\"", e.Message);
        Assert.Contains("whole number", e.Message);
    }

    [Fact]
    public void Junk_in_a_numeric_setting_from_the_environment_names_the_variable()
    {
        using var app = new TestApp("python").Function("F", HttpJson("f"), ("__init__.py", ""));
        var env = new System.Collections.Hashtable { ["FUNCTIONS_WORKER_PROCESS_COUNT"] = "lots" };
        var e = Assert.Throws<AppConfigException>(() => FunctionApp.Load(app.Directory, env));
        Assert.Contains("environment variable FUNCTIONS_WORKER_PROCESS_COUNT", e.Message);
    }

    [Fact]
    public void Numeric_settings_in_range_are_read()
    {
        using var app = new TestApp("python", settings: new()
        {
            ["FUNCTIONS_WORKER_PROCESS_COUNT"] = "3", ["FUNCTIONS_REQUEST_BODY_SIZE_LIMIT"] = "1048576",
            ["FAAST_BLOB_LEASE_SECONDS"] = "15",
        }).Function("F", HttpJson("f"), ("__init__.py", ""));
        var settings = FunctionApp.Load(app.Directory, NoEnvironment).Settings;
        Assert.Equal(3, settings.WorkerProcessCount);
        Assert.Equal(1048576, settings.RequestBodySizeLimit);
        Assert.Equal(15, settings.BlobLeaseSeconds);
    }

    [Fact]
    public void Unknown_function_names_in_host_json_are_a_warning_naming_them()
    {
        using var app = new TestApp("python", hostJson: """{ "version": "2.0", "functions": ["F", "Nope"] }""")
            .Function("F", HttpJson("f"), ("__init__.py", ""))
            .Function("G", HttpJson("g"), ("__init__.py", ""));
        var loaded = FunctionApp.Load(app.Directory, NoEnvironment);
        Assert.Equal(["F"], loaded.Functions.Select(f => f.Name));
        var warning = Assert.Single(loaded.Warnings);
        Assert.Contains("host.json", warning);
        Assert.Contains("\"Nope\"", warning);
        Assert.DoesNotContain("\"F\"", warning);
    }

    [Fact]
    public void Log_text_escapes_control_characters_and_keeps_clean_text_as_is()
    {
        const string clean = "read/report-2024.txt";
        Assert.Same(clean, LogText.Escape(clean));
        Assert.Equal("a\\rb\\nc\\td\\x1B[2Je\\x7F\\x85\\u2028", LogText.Escape("a\rb\nc\td\u001b[2Je\u007f\u0085\u2028"));
        Assert.Equal("line1\n    line2\\r", LogText.EscapeKeepingLines("line1\nline2\r"));
    }
}
