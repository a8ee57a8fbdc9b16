using System.Text;
using FaaST.Runtime.Invocation;

namespace FaaST.Runtime.Tests;

/// <summary>How {expressions} resolve from an invocation's data: its binding data, then a JSON payload along property paths.</summary>
public sealed class BindingExpressionTests
{
    /// <summary>Resolves <paramref name="pattern"/> in an invocation with <paramref name="json"/> as its JSON body.</summary>
    private static async Task<(bool Resolved, string Path, string? Missing, string? Why)> ResolveAsync(
        string pattern, string? json, Dictionary<string, string>? bindingData = null)
    {
        await using var invocation = new InvocationContext("f");
        foreach (var (k, v) in bindingData ?? [])
            invocation.BindingData[k] = v;
        if (json is not null)
            invocation.SetJsonPayload(Encoding.UTF8.GetBytes(json), "the JSON body");
        var resolved = BindingTemplate.Parse(pattern, "test").TryResolve(invocation.Lookup, out var path, out var missing, out var why);
        return (resolved, path, missing?.Text, why);
    }

    [Fact]
    public async Task A_dotted_path_resolves_into_nested_objects_of_the_json_body()
    {
        var r = await ResolveAsync("geo/{location.country}/{location.address.city}.txt",
            """{"location": {"country": "fr", "address": {"city": "paris"}}, "n": 1}""");
        Assert.True(r.Resolved, r.Why);
        Assert.Equal("geo/fr/paris.txt", r.Path);
    }

    [Fact]
    public async Task Names_match_case_insensitively_at_every_level_and_an_exact_match_wins()
    {
        Assert.Equal("x/FR", (await ResolveAsync("x/{location.country}", """{"Location": {"COUNTRY": "FR"}}""")).Path);
        Assert.Equal("x/upper", (await ResolveAsync("x/{a.B}", """{"a": {"b": "lower", "B": "upper"}}""")).Path);
        Assert.Equal("x/lower", (await ResolveAsync("x/{A.b}", """{"a": {"b": "lower", "B": "upper"}}""")).Path);
    }

    [Fact]
    public async Task Numbers_and_booleans_resolve_to_their_json_text()
    {
        var r = await ResolveAsync("x/{n}-{p.f}-{p.ok}-{p.no}", """{"n": 42, "p": {"f": 1.5, "ok": true, "no": false}}""");
        Assert.Equal("x/42-1.5-true-false", r.Path);
    }

    [Fact]
    public async Task A_missing_property_along_the_path_is_named_with_the_part_that_exists()
    {
        var r = await ResolveAsync("x/{location.country}", """{"location": {"city": "paris"}}""");
        Assert.False(r.Resolved);
        Assert.Equal("location.country", r.Missing);
        Assert.Equal("the JSON body's \"location\" has no property \"country\"", r.Why);

        var deeper = await ResolveAsync("x/{a.b.c}", """{"a": {"b": {"d": 1}}}""");
        Assert.Equal("the JSON body's \"a.b\" has no property \"c\"", deeper.Why);
    }

    [Fact]
    public async Task A_first_name_the_trigger_did_not_supply_at_all_leaves_the_general_message_to_the_caller()
    {
        var r = await ResolveAsync("x/{location.country}", """{"place": {"country": "fr"}}""");
        Assert.False(r.Resolved);
        Assert.Equal("location.country", r.Missing);
        Assert.Null(r.Why);
        Assert.Null((await ResolveAsync("x/{name}", json: null)).Why);
    }

    [Theory]
    [InlineData("x/{items.name}", """{"items": [{"name": "a"}]}""", "the JSON body's \"items\" is an array; binding expressions name object properties, not array elements")]
    [InlineData("x/{items.0}", """{"items": ["a"]}""", "the JSON body's \"items\" is an array; binding expressions name object properties, not array elements")]
    [InlineData("x/{location.country}", """{"location": "paris"}""", "the JSON body's \"location\" is a string, which has no property \"country\"")]
    [InlineData("x/{location}", """{"location": {"city": "paris"}}""", "the JSON body's \"location\" is an object, not a value; name one of its properties")]
    [InlineData("x/{items}", """{"items": [1, 2]}""", "the JSON body's \"items\" is an array, not a value; name one of its properties")]
    [InlineData("x/{a.b}", """{"a": {"b": null}}""", "the JSON body's \"a.b\" is null")]
    [InlineData("x/{a}", """[1, 2]""", "the JSON body is an array; binding expressions name object properties, not array elements")]
    public async Task A_path_that_ends_at_no_value_says_what_it_found(string pattern, string json, string why)
    {
        var r = await ResolveAsync(pattern, json);
        Assert.False(r.Resolved);
        Assert.Equal(why, r.Why);
    }

    [Fact]
    public async Task Route_and_query_values_come_before_the_body_and_have_no_properties()
    {
        var data = new Dictionary<string, string> { ["id"] = "7" };
        Assert.Equal("x/7", (await ResolveAsync("x/{id}", """{"id": "9"}""", data)).Path);
        var r = await ResolveAsync("x/{ID.part}", """{"id": {"part": "9"}}""", data);
        Assert.False(r.Resolved);
        Assert.Equal("\"ID\" is \"7\", a text value with no properties", r.Why);
    }

    [Fact]
    public async Task A_query_value_named_with_a_dot_is_found_by_its_whole_name_before_the_path()
    {
        var data = new Dictionary<string, string> { ["a.b"] = "query" };
        Assert.Equal("x/query", (await ResolveAsync("x/{a.b}", """{"a": {"b": "body"}}""", data)).Path);
        Assert.Equal("x/body", (await ResolveAsync("x/{a.b}", """{"a": {"b": "body"}}""")).Path);
    }

    [Fact]
    public async Task A_body_that_is_not_json_is_named_with_its_line_and_position_only_when_an_expression_needs_it()
    {
        var data = new Dictionary<string, string> { ["id"] = "7" };
        Assert.Equal("x/7", (await ResolveAsync("x/{id}", "{oops", data)).Path);
        var r = await ResolveAsync("x/{location.country}", "{\n  oops", data);
        Assert.False(r.Resolved);
        Assert.StartsWith("the JSON body is not valid JSON (line 2, position 3", r.Why);
    }

    [Fact]
    public async Task Invalid_utf8_in_a_string_value_is_a_missing_value_not_an_exception()
    {
        await using var invocation = new InvocationContext("f");
        byte[] body = [.. "{\"a\": {\"file\": \"caf"u8, 0xE9, .. "\"}}"u8];
        invocation.SetJsonPayload(body, "the JSON body");
        Assert.False(BindingTemplate.Parse("x/{a.file}", "test").TryResolve(invocation.Lookup, out _, out _, out var why));
        Assert.Equal("the JSON body's \"a.file\" is not valid UTF-8 text", why);
    }

    [Fact]
    public async Task Several_expressions_of_one_invocation_share_one_parse_of_the_body()
    {
        await using var invocation = new InvocationContext("f");
        var body = Encoding.UTF8.GetBytes("""{"a": {"b": "1"}, "c": "2"}""");
        invocation.SetJsonPayload(body, "the JSON body");
        Assert.True(BindingTemplate.Parse("x/{a.b}", "test").TryResolve(invocation.Lookup, out var first, out _, out _));
        // JsonDocument reads the body's bytes in place: breaking the JSON after the first expression
        // would fail a second parse, so the second expression succeeds only on the first parse.
        body[^1] = (byte)' ';
        Assert.True(BindingTemplate.Parse("x/{c}-{a.b}", "test").TryResolve(invocation.Lookup, out var second, out _, out var why), why);
        Assert.Equal(("x/1", "x/2-1"), (first, second));
    }

    [Theory]
    [InlineData("""{"name": null}""", "{name}", true)]
    [InlineData("""{"Name": null}""", "{name}", true)]
    [InlineData("""{"a": {"b": null}}""", "{a.b}", true)]
    [InlineData("""{"other": 1}""", "{name}", false)]
    [InlineData("""{"name": "x"}""", "{name}", false)]
    [InlineData("""{"a": null}""", "{a.b}", false)]
    [InlineData("""[null]""", "{name}", false)]
    public async Task An_expression_is_a_json_null_only_when_its_whole_path_is_there_and_ends_at_null(string json, string expression, bool isNull)
    {
        await using var invocation = new InvocationContext("f");
        invocation.SetJsonPayload(Encoding.UTF8.GetBytes(json), "the JSON body");
        var parsed = BindingTemplate.Parse("c/" + expression, "test").Expressions.Single();
        Assert.Equal(isNull, invocation.IsJsonNull(parsed));
    }

    [Fact]
    public async Task A_route_or_query_value_of_the_same_name_is_never_a_json_null()
    {
        await using var invocation = new InvocationContext("f");
        invocation.BindingData["name"] = "from-route";
        invocation.SetJsonPayload(Encoding.UTF8.GetBytes("""{"name": null}"""), "the JSON body");
        Assert.False(invocation.IsJsonNull(BindingTemplate.Parse("c/{name}", "test").Expressions.Single()));
    }
}
