namespace FaaST.Runtime.Tests;

/// <summary>Table bindings in function.json: what loads, and bad input refused at load naming the file, the binding's key
/// and what is wrong (no I/O).</summary>
public sealed class TableConfigTests
{
    private static readonly System.Collections.Hashtable NoEnvironment = new();

    private const string Http = """{ "type": "httpTrigger", "direction": "in", "name": "req", "route": "t/{pk}/{rk}" }""";

    [Fact]
    public void Table_bindings_load_with_settings_expanded_and_expressions_kept()
    {
        using var app = new TestApp("python", settings: new() { ["TBL"] = "People" }).Function("F", $$"""
            { "bindings": [ {{Http}},
              { "type": "Table", "direction": "in", "name": "one", "tableName": "%TBL%", "partitionKey": "{pk}", "rowKey": "{rk}" },
              { "type": "table", "direction": "in", "name": "many", "tableName": "People", "partitionKey": "p", "filter": "Age gt 30", "take": 5 },
              { "type": "table", "direction": "out", "name": "$return", "tableName": "Out{pk}", "partitionKey": "fixed" } ] }
            """, ("__init__.py", ""));
        var f = Assert.Single(FunctionApp.Load(app.Directory, NoEnvironment).Functions);
        Assert.Null(f.Error);
        var one = f.Bindings.Single(b => b.Name == "one");
        Assert.Equal(BindingMetadata.Table, one.Type);
        Assert.Equal("People", one.TableSettings!.TableName.Pattern);
        Assert.Equal(["pk"], one.TableSettings.PartitionKey!.ParameterNames);
        Assert.Equal(["rk"], one.TableSettings.RowKey!.ParameterNames);
        var many = f.Bindings.Single(b => b.Name == "many").TableSettings!;
        Assert.Equal(5, many.Take);
        Assert.Equal("Age gt 30", many.Filter);
        Assert.Null(many.RowKey);
        var output = f.Bindings.Single(b => b.Name == "$return");
        Assert.Equal(BindingDirection.Out, output.Direction);
        Assert.Equal("fixed", output.TableSettings!.PartitionKey!.Pattern);
    }

    [Theory]
    [InlineData("""{ "type": "table", "direction": "in", "name": "t" }""", "bindings[1].tableName is missing")]
    [InlineData("""{ "type": "table", "direction": "in", "name": "t", "tableName": "a_b", "partitionKey": "p" }""", "tableName \"a_b\": a table name is 3 to 63 letters and digits")]
    [InlineData("""{ "type": "table", "direction": "in", "name": "t", "tableName": "ab" }""", "3 to 63 letters and digits")]
    [InlineData("""{ "type": "table", "direction": "in", "name": "t", "tableName": "Tables" }""", "\"tables\" is reserved")]
    [InlineData("""{ "type": "table", "direction": "in", "name": "t", "tableName": "People", "partitionKey": "p", "rowKey": "r", "take": 3 }""", "rowKey reads one entity by both keys; it cannot be used with filter or take")]
    [InlineData("""{ "type": "table", "direction": "in", "name": "t", "tableName": "People", "partitionKey": "p", "rowKey": "r", "filter": "A eq 1" }""", "cannot be used with filter or take")]
    [InlineData("""{ "type": "table", "direction": "in", "name": "t", "tableName": "People", "rowKey": "r" }""", "rowKey needs a partitionKey")]
    [InlineData("""{ "type": "table", "direction": "in", "name": "t", "tableName": "People", "take": 0 }""", "take must be a positive whole number, not 0")]
    [InlineData("""{ "type": "table", "direction": "in", "name": "t", "tableName": "People", "partitionKey": "a/b" }""", "partitionKey \"a/b\": a key holds '/'")]
    [InlineData("""{ "type": "table", "direction": "out", "name": "t", "tableName": "People", "rowKey": "r#1" }""", "rowKey \"r#1\": a key holds '#'")]
    [InlineData("""{ "type": "table", "direction": "out", "name": "t", "tableName": "People", "filter": "x eq 1" }""", "filter and take are for a table input")]
    [InlineData("""{ "type": "table", "direction": "inout", "name": "t", "tableName": "People" }""", "a table binding is \"in\"")]
    [InlineData("""{ "type": "table", "direction": "in", "name": "t", "tableName": "%Nope%" }""", "%Nope%")]
    [InlineData("""{ "type": "table", "direction": "in", "name": "t", "tableName": "People", "connection": "Missing" }""", "bindings[1].connection: app setting \"Missing\" (a table binding's connection) is not set")]
    [InlineData("""{ "type": "table", "direction": "in", "name": "t", "tableName": "People", "connection": "BlobOnly" }""", "names no table service")]
    [InlineData("""{ "type": "table", "direction": "in", "name": "t", "tableName": "People", "connection": "Ident" }""", "\"Ident\" is an identity-based connection, which FaaST's table bindings do not support")]
    public void Invalid_table_bindings_are_refused_at_load_naming_the_file_and_key(string binding, string expected)
    {
        using var app = new TestApp("python", settings: new()
        {
            ["BlobOnly"] = "DefaultEndpointsProtocol=http;AccountName=a;AccountKey=a2V5;BlobEndpoint=http://127.0.0.1:1/a",
            ["Ident__tableServiceUri"] = "https://a.table.core.windows.net",
        }).Function("F", $$"""{ "bindings": [ {{Http}}, {{binding}} ] }""", ("__init__.py", ""));
        var f = Assert.Single(FunctionApp.Load(app.Directory, NoEnvironment).Functions);
        Assert.NotNull(f.Error);
        Assert.Contains(expected, f.Error, StringComparison.Ordinal);
        Assert.Contains("function.json", f.Error, StringComparison.Ordinal);
    }

    [Fact]
    public void A_connection_string_with_a_table_endpoint_or_only_an_account_name_reaches_a_table_service()
    {
        using var app = new TestApp("python", settings: new()
        {
            ["WithTables"] = "DefaultEndpointsProtocol=http;AccountName=a;AccountKey=a2V5;BlobEndpoint=http://127.0.0.1:1/a;TableEndpoint=http://127.0.0.1:2/a",
            ["AccountOnly"] = "DefaultEndpointsProtocol=https;AccountName=a;AccountKey=a2V5;EndpointSuffix=core.windows.net",
        }).Function("F", $$"""
            { "bindings": [ {{Http}},
              { "type": "table", "direction": "in", "name": "a", "tableName": "People", "partitionKey": "p", "connection": "WithTables" },
              { "type": "table", "direction": "out", "name": "b", "tableName": "People", "connection": "AccountOnly" } ] }
            """, ("__init__.py", ""));
        Assert.Null(Assert.Single(FunctionApp.Load(app.Directory, NoEnvironment).Functions).Error);
    }
}
