using FaaST.Runtime.Bindings;

namespace FaaST.Runtime.Tests;

public class BindingTemplateTests
{
    [Fact]
    public void Resolves_parameters_from_lookup()
    {
        var t = BindingTemplate.Parse("out/{name}-{id}.txt", "test");
        var values = new Dictionary<string, string> { ["name"] = "a", ["id"] = "7" };
        Assert.True(t.TryResolve(k => values.GetValueOrDefault(k), out var path, out _));
        Assert.Equal("out/a-7.txt", path);
    }

    [Fact]
    public void Reports_the_missing_parameter()
    {
        var t = BindingTemplate.Parse("out/{name}", "test");
        Assert.False(t.TryResolve(_ => null, out _, out var missing));
        Assert.Equal("name", missing);
    }

    [Fact]
    public void Builtins_resolve_to_fresh_values()
    {
        var t = BindingTemplate.Parse("out/{rand-guid}/{DateTime}", "test");
        Assert.True(t.TryResolve(_ => null, out var a, out _));
        Assert.True(t.TryResolve(_ => null, out var b, out _));
        Assert.NotEqual(a, b);
        Assert.Matches(@"^out/[0-9a-f-]{36}/\d{4}-\d\d-\d\dT\d\d-\d\d-\d\dZ$", a);
    }

    [Fact]
    public void Matches_a_blob_path_and_extracts_values()
    {
        var t = BindingTemplate.Parse("in/{name}.{ext}", "test");
        var values = new Dictionary<string, string>();
        Assert.True(t.TryMatch("in/a.b.txt", values));
        Assert.Equal("a.b", values["name"]);
        Assert.Equal("txt", values["ext"]);
        Assert.False(t.TryMatch("other/a.txt", new Dictionary<string, string>()));
    }

    [Fact]
    public void Name_parameter_spans_virtual_folders()
    {
        var values = new Dictionary<string, string>();
        Assert.True(BindingTemplate.Parse("in/{name}", "t").TryMatch("in/x/y/z.bin", values));
        Assert.Equal("x/y/z.bin", values["name"]);
    }

    [Theory]
    [InlineData("out/{name")]
    [InlineData("out/name}")]
    [InlineData("out/{}")]
    public void Malformed_templates_are_rejected_naming_the_place(string pattern)
    {
        var e = Assert.Throws<FormatException>(() => BindingTemplate.Parse(pattern, "fn/function.json: bindings[1].path"));
        Assert.Contains("bindings[1].path", e.Message);
    }

    [Fact]
    public void App_setting_references_expand_or_fail_clearly()
    {
        Assert.Equal("data/x", BindingTemplate.ExpandAppSettings("%C%/x", n => n == "C" ? "data" : null, "w"));
        var e = Assert.Throws<FormatException>(() => BindingTemplate.ExpandAppSettings("%Nope%/x", _ => null, "w"));
        Assert.Contains("%Nope%", e.Message);
    }
}
