using FaaST.ScaleController.Deploy;

namespace FaaST.ScaleController.Tests.Deploy;

/// <summary>AppValidator on real app folders: the samples, and copies of them broken one file at a time.</summary>
public sealed class AppValidatorTests : IDisposable
{
    private readonly TempDirectory _temp = new("faast-validate-");

    public void Dispose() => _temp.Dispose();

    [Theory]
    [InlineData("python-app", "python")]
    [InlineData("node-app", "node")]
    public void TheSamples_AreValid_WithTheirFunctionsRuntimeAndPolicy(string sample, string runtime)
    {
        var app = AppValidator.Validate(Apps.CopySample(sample, _temp.Path), Apps.NoEnvironment);

        Assert.Equal(sample, app.Name);
        Assert.Equal(runtime, app.WorkerRuntime);
        Assert.Equal(["Hello", "Ingest", "Normalize", "WordCount"], app.Functions);
        Assert.Equal(FaaST.Policy.CachePolicy.Default, app.Policy);
    }

    [Fact]
    public void AnUnsupportedBindingType_IsRefused_NamingTheFunctionJsonAndTheKey()
    {
        var dir = Apps.CopySample("python-app", _temp.Path);
        File.WriteAllText(Path.Combine(dir, "Hello", "function.json"),
            """{ "bindings": [ { "type": "kafkaTrigger", "direction": "in", "name": "req" } ] }""");

        var e = Assert.Throws<DeployValidationException>(() => AppValidator.Validate(dir, Apps.NoEnvironment));

        Assert.Equal("Hello/function.json", e.File);
        Assert.Equal("bindings[0].type", e.Key);
        Assert.Contains("\"kafkaTrigger\" is not a supported binding", e.Reason, StringComparison.Ordinal);
        Assert.StartsWith("Hello/function.json: bindings[0].type: \"kafkaTrigger\"", e.Message, StringComparison.Ordinal);
    }

    [Fact]
    public void AMissingScriptFile_IsRefused_NamingScriptFile_WithoutTheUploadsTemporaryPath()
    {
        var dir = Apps.CopySample("node-app", _temp.Path);
        File.Delete(Path.Combine(dir, "WordCount", "index.js"));

        var e = Assert.Throws<DeployValidationException>(() => AppValidator.Validate(dir, Apps.NoEnvironment));

        Assert.Equal("WordCount/function.json", e.File);
        Assert.Equal("scriptFile", e.Key);
        Assert.Contains("does not exist", e.Reason, StringComparison.Ordinal);
        Assert.DoesNotContain(_temp.Path, e.Message, StringComparison.Ordinal);
    }

    [Fact]
    public void AFunctionJsonThatIsNotJson_IsRefused_NamingTheFile()
    {
        var dir = Apps.CopySample("python-app", _temp.Path);
        File.WriteAllText(Path.Combine(dir, "Ingest", "function.json"), "{ \"bindings\": [ ");

        var e = Assert.Throws<DeployValidationException>(() => AppValidator.Validate(dir, Apps.NoEnvironment));

        Assert.Equal("Ingest/function.json", e.File);
        Assert.Null(e.Key);
        Assert.StartsWith("not valid JSON", e.Reason, StringComparison.Ordinal);
    }

    [Fact]
    public void AnUnsupportedHostJsonVersion_IsRefused_NamingVersion()
    {
        var dir = Apps.CopySample("python-app", _temp.Path);
        File.WriteAllText(Path.Combine(dir, "host.json"), """{ "version": "1.0" }""");

        var e = Assert.Throws<DeployValidationException>(() => AppValidator.Validate(dir, Apps.NoEnvironment));

        Assert.Equal(("host.json", "version"), (e.File, e.Key));
        Assert.Equal("\"1.0\" is not supported; use \"2.0\"", e.Reason);
    }

    [Fact]
    public void AMissingHostJson_IsRefused()
    {
        var dir = Apps.CopySample("node-app", _temp.Path);
        File.Delete(Path.Combine(dir, "host.json"));

        var e = Assert.Throws<DeployValidationException>(() => AppValidator.Validate(dir, Apps.NoEnvironment));

        Assert.Equal("host.json", e.File);
        Assert.StartsWith("missing", e.Reason, StringComparison.Ordinal);
    }

    [Fact]
    public void AnUnsupportedWorkerRuntime_IsRefused_NamingTheSetting()
    {
        var dir = Apps.CopySample("python-app", _temp.Path);
        File.WriteAllText(Path.Combine(dir, "local.settings.json"), """{ "Values": { "FUNCTIONS_WORKER_RUNTIME": "java" } }""");

        var e = Assert.Throws<DeployValidationException>(() => AppValidator.Validate(dir, Apps.NoEnvironment));

        Assert.Equal(("local.settings.json", "Values.FUNCTIONS_WORKER_RUNTIME"), (e.File, e.Key));
        Assert.Contains("\"java\"", e.Reason, StringComparison.Ordinal);
    }

    [Fact]
    public void AnInvalidLocalSettingsValue_IsRefused_NamingTheKey()
    {
        var dir = Apps.CopySample("python-app", _temp.Path);
        File.WriteAllText(Path.Combine(dir, "local.settings.json"), """{ "Values": { "FUNCTIONS_WORKER_RUNTIME": "python", "X": [1] } }""");

        var e = Assert.Throws<DeployValidationException>(() => AppValidator.Validate(dir, Apps.NoEnvironment));

        Assert.Equal(("local.settings.json", "Values.X"), (e.File, e.Key));
    }

    [Fact]
    public void AnInvalidFaastJson_IsRefused_WithThePolicyParsersKeyPath()
    {
        var dir = Apps.CopySample("node-app", _temp.Path);
        File.WriteAllText(Path.Combine(dir, "faast.json"), """{ "cache": { "eviction": { "policy": "fifo-ish" } } }""");

        var e = Assert.Throws<DeployValidationException>(() => AppValidator.Validate(dir, Apps.NoEnvironment));

        Assert.Equal(("faast.json", "cache.eviction.policy"), (e.File, e.Key));
        Assert.Contains("fifo-ish", e.Reason, StringComparison.Ordinal);
    }

    [Fact]
    public void AValidFaastJson_IsTheValidatedAppsPolicy()
    {
        var dir = Apps.CopySample("node-app", _temp.Path);
        File.WriteAllText(Path.Combine(dir, "faast.json"), """{ "cache": { "memoryLimit": "64MiB" } }""");

        Assert.Equal(64L << 20, AppValidator.Validate(dir, Apps.NoEnvironment).Policy.MemoryLimit);
    }

    [Fact]
    public void EveryBadFile_IsListed_InTheOrderHostSettingsPolicyFunctions()
    {
        var dir = Apps.CopySample("python-app", _temp.Path);
        File.WriteAllText(Path.Combine(dir, "faast.json"), """{ "cache": { "headroom": 2 } }""");
        File.Delete(Path.Combine(dir, "Hello", "__init__.py"));
        File.WriteAllText(Path.Combine(dir, "WordCount", "function.json"), """{ "bindings": [] }""");

        var e = Assert.Throws<DeployValidationException>(() => AppValidator.Validate(dir, Apps.NoEnvironment));

        Assert.Equal(["faast.json", "Hello/function.json", "WordCount/function.json"], e.Problems.Select(p => p.File));
        Assert.Equal(3, e.Message.Split('\n').Length);
        Assert.Equal(e.Problems[0].ToString(), e.Message.Split('\n')[0]);
    }

    [Fact]
    public void TwoFunctionsOnOneRoute_AreRefused_NamingTheSecond()
    {
        var dir = Apps.CopySample("python-app", _temp.Path);
        Apps.CopyDirectory(Path.Combine(dir, "Hello"), Path.Combine(dir, "Hello2"));
        var file = Path.Combine(dir, "Hello2", "function.json");
        File.WriteAllText(file, File.ReadAllText(file).Replace("\"name\": \"req\"", "\"name\": \"req\", \"route\": \"Hello\"", StringComparison.Ordinal));

        var e = Assert.Throws<DeployValidationException>(() => AppValidator.Validate(dir, Apps.NoEnvironment));

        Assert.Equal("Hello2/function.json", Assert.Single(e.Problems).File);
        Assert.Contains("conflicts", e.Reason, StringComparison.Ordinal);
    }

    [Fact]
    public void ASettingFromTheEnvironment_IsValidatedToo_NamingTheVariable()
    {
        var dir = Apps.CopySample("node-app", _temp.Path);

        var e = Assert.Throws<DeployValidationException>(() =>
            AppValidator.Validate(dir, new Dictionary<string, string> { ["FUNCTIONS_WORKER_PROCESS_COUNT"] = "0" }));

        Assert.Equal(("local.settings.json", null), (e.File, e.Key));
        Assert.StartsWith("environment variable FUNCTIONS_WORKER_PROCESS_COUNT is \"0\"", e.Reason, StringComparison.Ordinal);
    }

    [Fact]
    public void AFunctionDisabledOnPurpose_IsNotAnError()
    {
        var dir = Apps.CopySample("python-app", _temp.Path);
        var file = Path.Combine(dir, "Hello", "function.json");
        File.WriteAllText(file, File.ReadAllText(file).Replace("\"scriptFile\"", "\"disabled\": true, \"scriptFile\"", StringComparison.Ordinal));

        var app = AppValidator.Validate(dir, Apps.NoEnvironment);

        Assert.True(app.App.Functions.Single(f => f.Name == "Hello").Disabled);
    }

    [Fact]
    public void AnAppWithoutFunctions_IsRefused()
    {
        var dir = Path.Combine(_temp.Path, "empty");
        Directory.CreateDirectory(dir);
        File.WriteAllText(Path.Combine(dir, "host.json"), """{ "version": "2.0" }""");
        File.WriteAllText(Path.Combine(dir, "local.settings.json"), """{ "Values": { "FUNCTIONS_WORKER_RUNTIME": "node" } }""");

        var e = Assert.Throws<DeployValidationException>(() => AppValidator.Validate(dir, Apps.NoEnvironment));

        Assert.Contains("no function", e.Reason, StringComparison.Ordinal);
    }

    [Theory]
    [InlineData("python-app")]
    [InlineData("a")]
    [InlineData("app-2")]
    public void LowercaseNamesWithDigitsAndDashes_AreAppNames(string name) => Assert.Null(AppNames.Problem(name));

    [Theory]
    [InlineData("", "required")]
    [InlineData("Python", "lowercase")]
    [InlineData("my_app", "'_'")]
    [InlineData("-app", "start and end")]
    [InlineData("app/../x", "'/'")]
    [InlineData("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "at most 60")]
    public void OtherNames_AreRefused_SayingWhy(string name, string why) =>
        Assert.Contains(why, AppNames.Problem(name), StringComparison.Ordinal);

    private static string ScriptJson(string scriptFile) => $$"""
        { "scriptFile": "{{scriptFile}}", "bindings": [
          { "type": "httpTrigger", "direction": "in", "name": "req", "authLevel": "anonymous" },
          { "type": "http", "direction": "out", "name": "$return" } ] }
        """;

    // Issue 19, defect 2: before, "/etc/shadow" passed (the file exists) and "../../x.py" passed when it existed.
    [Theory]
    [InlineData("/etc/shadow", "/etc/shadow")]
    [InlineData("../../x.py", "x.py")]
    public void AScriptFileOutsideTheApp_IsRefused_NamingTheFunctionJsonScriptFileAndThePath(string scriptFile, string leadsTo)
    {
        var dir = Apps.CopySample("python-app", _temp.Path);
        File.WriteAllText(Path.Combine(_temp.Path, "x.py"), "def main(req): return 'escaped'");
        File.WriteAllText(Path.Combine(dir, "Hello", "function.json"), ScriptJson(scriptFile));

        var e = Assert.Throws<DeployValidationException>(() => AppValidator.Validate(dir, Apps.NoEnvironment));

        var problem = Assert.Single(e.Problems);
        Assert.Equal(("Hello/function.json", "scriptFile"), (problem.File, problem.Key));
        Assert.Contains($"\"{scriptFile}\" leads outside the app folder", problem.Reason, StringComparison.Ordinal);
        Assert.Contains(leadsTo, problem.Reason, StringComparison.Ordinal);
    }

    [Fact]
    public void AScriptThatIsALinkOutOfTheApp_IsRefused_AsScriptFileAndAsALink()
    {
        var dir = Apps.CopySample("python-app", _temp.Path);
        var script = Path.Combine(dir, "Hello", "__init__.py");
        File.Delete(script);
        File.CreateSymbolicLink(script, "/etc/shadow");

        var e = Assert.Throws<DeployValidationException>(() => AppValidator.Validate(dir, Apps.NoEnvironment));

        Assert.Equal(("Hello/function.json", "scriptFile"), (e.File, e.Key));
        Assert.Contains("(to /etc/shadow)", e.Reason, StringComparison.Ordinal);
        Assert.Contains(e.Problems, p => p.File == "Hello/__init__.py" && p.Reason.Contains("symbolic link leading outside the app folder (to /etc/shadow)", StringComparison.Ordinal));
    }

    [Fact]
    public void ALinkAnywhereInTheAppLeadingOut_IsRefused_NamingTheLink()
    {
        var dir = Apps.CopySample("python-app", _temp.Path);
        Directory.CreateDirectory(Path.Combine(dir, "lib"));
        Directory.CreateSymbolicLink(Path.Combine(dir, "lib", "etc"), "/etc");

        var e = Assert.Throws<DeployValidationException>(() => AppValidator.Validate(dir, Apps.NoEnvironment));

        var problem = Assert.Single(e.Problems);
        Assert.Equal("lib/etc", problem.File);
        Assert.Contains("leading outside the app folder (to /etc)", problem.Reason, StringComparison.Ordinal);
    }

    [Fact]
    public void AFunctionFolderThatIsALinkOutOfTheApp_IsRefused()
    {
        var dir = Apps.CopySample("python-app", _temp.Path);
        var outside = Path.Combine(_temp.Path, "outside");
        Directory.Move(Path.Combine(dir, "Hello"), outside);
        Directory.CreateSymbolicLink(Path.Combine(dir, "Hello"), outside);

        var e = Assert.Throws<DeployValidationException>(() => AppValidator.Validate(dir, Apps.NoEnvironment));

        Assert.Equal(("Hello/function.json", "functionDirectory"), (e.File, e.Key));
        Assert.Contains(outside, e.Reason, StringComparison.Ordinal);
    }

    [Fact]
    public void ALinkThatStaysInsideTheApp_IsValid()
    {
        var dir = Apps.CopySample("python-app", _temp.Path);
        File.CreateSymbolicLink(Path.Combine(dir, "Hello", "alias.py"), "__init__.py");
        Directory.CreateDirectory(Path.Combine(dir, "common"));
        Directory.CreateSymbolicLink(Path.Combine(dir, "lib"), "common");

        Assert.Equal("python-app", AppValidator.Validate(dir, Apps.NoEnvironment).Name);
    }
}
