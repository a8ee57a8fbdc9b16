using FaaST.Policy;

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

    /// <summary>Broken's text with its "é" in Latin-1 (0xE9), which is not UTF-8, and the syntax error gone.</summary>
    private static byte[] Latin1()
    {
        var bytes = System.Text.Encoding.UTF8.GetBytes(Broken.Replace("oops", "\"y\": 1", StringComparison.Ordinal).Replace("\u00e9", "\u0001", StringComparison.Ordinal));
        bytes[Array.IndexOf(bytes, (byte)1)] = 0xE9;
        return bytes;
    }

    [Fact]
    public void Invalid_utf8_in_host_json_and_faast_json_names_one_line_and_character_position_and_the_byte()
    {
        using var app = new TestApp("python");
        // A valid policy but for the byte: read as text, it loaded with U+FFFD in the glob.
        File.WriteAllBytes(Path.Combine(app.Directory, "faast.json"), [.. "{\n  \"cache\": { \"doNotCache\": [\"caf"u8, 0xE9, .. "/*\"] }\n}"u8]);
        var policy = Assert.Throws<PolicyFileException>(() => CachePolicyFile.Load(app.Directory));
        Assert.Equal($"{Path.Combine(app.Directory, "faast.json")}: not valid UTF-8 (line 2, position 33): byte 0xE9 is not UTF-8; save it as UTF-8", policy.Message);

        File.WriteAllBytes(Path.Combine(app.Directory, "host.json"), Latin1());
        var host = Assert.Throws<AppConfigException>(() => FunctionApp.Load(app.Directory, NoEnvironment));
        Assert.Equal($"{Path.Combine(app.Directory, "host.json")}: not valid UTF-8 (line 3, position 9): byte 0xE9 is not UTF-8; save it as UTF-8", host.Message);
    }

    [Fact]
    public void Faast_json_with_a_byte_order_mark_still_loads()
    {
        using var app = new TestApp("python");
        File.WriteAllBytes(Path.Combine(app.Directory, "faast.json"), [.. System.Text.Encoding.UTF8.Preamble, .. "{ \"cache\": { \"enabled\": false } }"u8]);
        Assert.False(CachePolicyFile.Load(app.Directory).Enabled);
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
