namespace FaaST.Runtime.Tests;

public class BindingTemplateTests
{
    /// <summary>A lookup in a plain dictionary, as route and query values are.</summary>
    private static BindingLookup From(Dictionary<string, string> values) => (BindingExpression e, out string? why) =>
    {
        why = null;
        return values.GetValueOrDefault(e.Text);
    };

    private static readonly BindingLookup Nothing = (BindingExpression _, out string? why) =>
    {
        why = null;
        return null;
    };

    [Fact]
    public void Resolves_parameters_from_lookup()
    {
        var t = BindingTemplate.Parse("out/{name}-{id}.txt", "test");
        var values = new Dictionary<string, string> { ["name"] = "a", ["id"] = "7" };
        Assert.True(t.TryResolve(From(values), out var path, out _, out _));
        Assert.Equal("out/a-7.txt", path);
    }

    [Fact]
    public void Reports_the_missing_parameter()
    {
        var t = BindingTemplate.Parse("out/{name}", "test");
        Assert.False(t.TryResolve(Nothing, out _, out var missing, out _));
        Assert.Equal("name", missing!.Text);
    }

    [Fact]
    public void Builtins_resolve_to_fresh_values()
    {
        var t = BindingTemplate.Parse("out/{rand-guid}/{DateTime}", "test");
        Assert.True(t.TryResolve(Nothing, out var a, out _, out _));
        Assert.True(t.TryResolve(Nothing, out var b, out _, out _));
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
    [InlineData("out/{a..b}")]
    [InlineData("out/{.a}")]
    [InlineData("out/{a.}")]
    [InlineData("out/{a. b}")]
    [InlineData("out/{items[0]}")]
    public void Malformed_templates_are_rejected_naming_the_place(string pattern)
    {
        var e = Assert.Throws<FormatException>(() => BindingTemplate.Parse(pattern, "fn/function.json: bindings[1].path"));
        Assert.Contains("bindings[1].path", e.Message);
    }

    [Fact]
    public void A_dotted_expression_is_parsed_into_its_property_path_and_built_ins_are_not()
    {
        var t = BindingTemplate.Parse("out/{location.country}/{sys.randguid}/{name}", "test");
        var expressions = t.Expressions.ToList();
        Assert.Equal(["location", "country"], expressions[0].Segments);
        Assert.Equal("location", expressions[0].Name);
        Assert.True(expressions[0].IsPath);
        Assert.False(expressions[1].IsPath);
        Assert.False(expressions[2].IsPath);
    }

    [Fact]
    public void The_lookup_explains_why_an_expression_has_no_value()
    {
        var t = BindingTemplate.Parse("out/{a}/{b.c}", "test");
        BindingLookup lookup = (BindingExpression e, out string? why) =>
        {
            why = e.IsPath ? "the reason" : null;
            return e.IsPath ? null : "x";
        };
        Assert.False(t.TryResolve(lookup, out _, out var missing, out var reason));
        Assert.Equal("b.c", missing!.Text);
        Assert.Equal("the reason", reason);
    }

    [Fact]
    public void App_setting_references_expand_or_fail_clearly()
    {
        Assert.Equal("data/x", BindingTemplate.ExpandAppSettings("%C%/x", n => n == "C" ? "data" : null, "w"));
        var e = Assert.Throws<FormatException>(() => BindingTemplate.ExpandAppSettings("%Nope%/x", _ => null, "w"));
        Assert.Contains("%Nope%", e.Message);
    }
}
