using FaaST.Cachelet.Policy;
using FaaST.Runtime.App;

namespace FaaST.Runtime.Tests;

/// <summary>A JSON syntax error in any of the app's files names one place: line and position, as an editor counts them.</summary>
public sealed class ConfigJsonErrorTests
{
    private static readonly System.Collections.Hashtable NoEnvironment = new();

    // Line 3 holds a two-byte character before the error: the reader counts bytes, an editor characters.
    private const string Broken = "{\n  \"version\": \"2.0\",\n  \"x\": \"\u00e9\", oops\n}";

    private static void AssertOnePlace(string message, string file)
    {
        Assert.Contains(file, message);
        Assert.Contains("not valid JSON (line 3, position 13): ", message);
        Assert.DoesNotContain("LineNumber", message);
        Assert.DoesNotContain("BytePositionInLine", message);
        Assert.DoesNotContain("\n", message);
    }

    [Fact]
    public void A_syntax_error_in_host_json_names_one_line_and_character_position()
    {
        using var app = new TestApp("python", hostJson: Broken);
        var e = Assert.Throws<AppConfigException>(() => FunctionApp.Load(app.Directory, NoEnvironment));
        AssertOnePlace(e.Message, "host.json");
    }

    [Fact]
    public void A_syntax_error_in_local_settings_json_names_one_line_and_character_position()
    {
        using var app = new TestApp("python");
        File.WriteAllText(Path.Combine(app.Directory, "local.settings.json"), Broken);
        var e = Assert.Throws<AppConfigException>(() => FunctionApp.Load(app.Directory, NoEnvironment));
        AssertOnePlace(e.Message, "local.settings.json");
    }

    [Fact]
    public void A_syntax_error_in_function_json_names_one_line_and_character_position()
    {
        using var app = new TestApp("python").Function("F", Broken, ("__init__.py", ""));
        var f = Assert.Single(FunctionApp.Load(app.Directory, NoEnvironment).Functions);
        AssertOnePlace(f.Error!, Path.Combine("F", "function.json"));
    }

    [Fact]
    public void A_syntax_error_in_faast_json_names_one_line_and_character_position()
    {
        using var app = new TestApp("python");
        File.WriteAllText(Path.Combine(app.Directory, "faast.json"), Broken);
        var e = Assert.Throws<PolicyFileException>(() => CachePolicyFile.Load(app.Directory));
        AssertOnePlace(e.Message, "faast.json");
    }
}
