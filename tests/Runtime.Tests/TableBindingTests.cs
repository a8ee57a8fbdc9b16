using System.Net;
using System.Text;
using System.Text.Json;

namespace FaaST.Runtime.Tests;

/// <summary>
/// Table input and output bindings: real host, real workers, real Azurite (its table service), checked through
/// Azure.Data.Tables. One app per runtime: Put (HTTP POST, a table output keyed by the route), PutMany (an array
/// through $return), Get (one entity by both keys from the route), List (partitionKey + filter + take).
/// </summary>
[Collection("azurite-queues")]
public sealed class TableBindingTests(QueueAzuriteFixture azurite)
{
    private static TestApp TableApp(string runtime, string table)
    {
        var app = new TestApp(runtime, settings: new() { ["PEOPLE"] = table });
        var put = """
            { "bindings": [
              { "type": "httpTrigger", "direction": "in", "name": "req", "authLevel": "anonymous", "methods": ["post"], "route": "people/{pk}/{rk}" },
              { "type": "table", "direction": "out", "name": "row", "tableName": "%PEOPLE%", "partitionKey": "{pk}", "rowKey": "{rk}" },
              { "type": "http", "direction": "out", "name": "$return" } ] }
            """;
        var putMany = """
            { "bindings": [
              { "type": "httpTrigger", "direction": "in", "name": "req", "authLevel": "anonymous", "methods": ["post"], "route": "many/{pk}" },
              { "type": "table", "direction": "out", "name": "$return", "tableName": "%PEOPLE%", "partitionKey": "{pk}" } ] }
            """;
        var get = """
            { "bindings": [
              { "type": "httpTrigger", "direction": "in", "name": "req", "authLevel": "anonymous", "methods": ["get"], "route": "people/{pk}/{rk}" },
              { "type": "table", "direction": "in", "name": "person", "tableName": "%PEOPLE%", "partitionKey": "{pk}", "rowKey": "{rk}" },
              { "type": "http", "direction": "out", "name": "$return" } ] }
            """;
        var list = """
            { "bindings": [
              { "type": "httpTrigger", "direction": "in", "name": "req", "authLevel": "anonymous", "methods": ["get"], "route": "people/{pk}" },
              { "type": "table", "direction": "in", "name": "people", "tableName": "%PEOPLE%", "partitionKey": "{pk}", "filter": "age gt 20", "take": 2 },
              { "type": "http", "direction": "out", "name": "$return" } ] }
            """;
        if (runtime == "python")
        {
            app.Function("Put", put, ("__init__.py", """
                import json
                import azure.functions as func
                def main(req: func.HttpRequest, row: func.Out[str]) -> func.HttpResponse:
                    row.set(json.dumps(req.get_json()))
                    return func.HttpResponse("stored", status_code=201)
                """));
            app.Function("PutMany", putMany, ("__init__.py", """
                import json
                import azure.functions as func
                def main(req: func.HttpRequest) -> str:
                    return json.dumps([{"RowKey": r["id"], "age": r["age"]} for r in req.get_json()])
                """));
            app.Function("Get", get, ("__init__.py", """
                import azure.functions as func
                def main(req: func.HttpRequest, person: str) -> func.HttpResponse:
                    if person is None:
                        return func.HttpResponse("none", status_code=404)
                    return func.HttpResponse(person, mimetype="application/json")
                """));
            app.Function("List", list, ("__init__.py", """
                import azure.functions as func
                def main(req: func.HttpRequest, people: str) -> func.HttpResponse:
                    return func.HttpResponse(people, mimetype="application/json")
                """));
        }
        else
        {
            app.Function("Put", put, ("index.js", """
                module.exports = async function (context, req) {
                  context.bindings.row = req.body;
                  return { status: 201, body: 'stored' };
                };
                """));
            app.Function("PutMany", putMany, ("index.js", """
                module.exports = async function (context, req) {
                  return req.body.map((r) => ({ RowKey: r.id, age: r.age }));
                };
                """));
            app.Function("Get", get, ("index.js", """
                module.exports = async function (context, req) {
                  const person = context.bindings.person;
                  if (person === null || person === undefined) return { status: 404, body: 'none' };
                  return { headers: { 'content-type': 'application/json' }, body: JSON.stringify(person) };
                };
                """));
            app.Function("List", list, ("index.js", """
                module.exports = async function (context, req) {
                  return { headers: { 'content-type': 'application/json' }, body: JSON.stringify(context.bindings.people) };
                };
                """));
        }
        return app;
    }

    private static StringContent Json(string json) => new(json, Encoding.UTF8, "application/json");

    [Theory]
    [InlineData("python")]
    [InlineData("node")]
    public async Task Entities_written_by_an_output_are_read_by_keys_and_by_a_filtered_query_and_a_missing_one_reads_as_null(string runtime)
    {
        var table = "people" + Guid.NewGuid().ToString("N")[..10];
        using var app = TableApp(runtime, table);
        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString);
        foreach (var (rk, age) in new[] { ("a", 30), ("b", 10), ("c", 40) })
        {
            using var put = await host.Http.PostAsync($"/api/people/team/{rk}", Json($$"""{ "name": "{{rk}}", "age": {{age}} }"""));
            Assert.True(put.StatusCode == HttpStatusCode.Created, await put.Content.ReadAsStringAsync());
        }
        using (var many = await host.Http.PostAsync("/api/many/team", Json("""[{ "id": "d", "age": 50 }, { "id": "e", "age": 60 }]""")))
            Assert.True(many.IsSuccessStatusCode, await many.Content.ReadAsStringAsync());

        // What the bindings wrote, read with Azure.Data.Tables itself.
        var tables = new Azure.Data.Tables.TableClient(azurite.ConnectionString, table);
        var stored = tables.Query<Azure.Data.Tables.TableEntity>(e => e.PartitionKey == "team").ToDictionary(e => e.RowKey);
        Assert.Equal(["a", "b", "c", "d", "e"], stored.Keys.Order());
        Assert.Equal(30, stored["a"].GetInt32("age"));
        Assert.Equal("a", stored["a"].GetString("name"));
        Assert.Equal(60, stored["e"].GetInt32("age"));

        using (var one = JsonDocument.Parse(await host.Http.GetStringAsync("/api/people/team/c")))
        {
            Assert.Equal("team", one.RootElement.GetProperty("PartitionKey").GetString());
            Assert.Equal("c", one.RootElement.GetProperty("RowKey").GetString());
            Assert.Equal(40, one.RootElement.GetProperty("age").GetInt32());
        }
        using (var missing = await host.Http.GetAsync("/api/people/team/zzz"))
            Assert.Equal(HttpStatusCode.NotFound, missing.StatusCode);
        using (var list = JsonDocument.Parse(await host.Http.GetStringAsync("/api/people/team")))
        {
            var ages = list.RootElement.EnumerateArray().Select(e => e.GetProperty("age").GetInt32()).ToList();
            Assert.Equal(2, ages.Count); // take
            Assert.All(ages, a => Assert.True(a > 20, $"the filter let age {a} through"));
        }
    }

    [Theory]
    [InlineData("python")]
    [InlineData("node")]
    public async Task An_entity_over_Azures_limits_or_one_that_exists_fails_the_invocation_naming_the_binding_and_nothing_is_written(string runtime)
    {
        var table = "limits" + Guid.NewGuid().ToString("N")[..10];
        using var app = TableApp(runtime, table);
        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString);
        var big = new string('x', 40_000); // 80,000 bytes as UTF-16: over the 64 KiB of a string property
        using (var refused = await host.Http.PostAsync("/api/people/team/big", Json($$"""{ "text": "{{big}}" }""")))
        {
            var body = await refused.Content.ReadAsStringAsync();
            Assert.Equal(HttpStatusCode.InternalServerError, refused.StatusCode);
            Assert.Contains("table output \\u0022row\\u0022", body, StringComparison.Ordinal);
            Assert.Contains("64 KiB", body, StringComparison.Ordinal);
        }
        using (var first = await host.Http.PostAsync("/api/people/team/a", Json("""{ "age": 1 }""")))
            Assert.Equal(HttpStatusCode.Created, first.StatusCode);
        using (var again = await host.Http.PostAsync("/api/people/team/a", Json("""{ "age": 2 }""")))
        {
            var body = await again.Content.ReadAsStringAsync();
            Assert.Equal(HttpStatusCode.InternalServerError, again.StatusCode);
            Assert.Contains("(team, a) exists already", body, StringComparison.Ordinal);
        }
        var tables = new Azure.Data.Tables.TableClient(azurite.ConnectionString, table);
        var stored = tables.Query<Azure.Data.Tables.TableEntity>().ToList();
        var only = Assert.Single(stored);
        Assert.Equal(1, only.GetInt32("age"));
    }

    [Fact]
    public async Task A_table_binding_with_a_bad_table_name_or_a_row_key_without_a_partition_key_disables_its_function_naming_the_key()
    {
        using var app = new TestApp("python");
        app.Function("BadName", """
            { "bindings": [
              { "type": "httpTrigger", "direction": "in", "name": "req", "authLevel": "anonymous" },
              { "type": "table", "direction": "in", "name": "t", "tableName": "no-dashes", "partitionKey": "p" },
              { "type": "http", "direction": "out", "name": "$return" } ] }
            """, ("__init__.py", "def main(req, t):\n    return 'x'\n"));
        app.Function("RowOnly", """
            { "bindings": [
              { "type": "httpTrigger", "direction": "in", "name": "req", "authLevel": "anonymous" },
              { "type": "table", "direction": "in", "name": "t", "tableName": "people", "rowKey": "r" },
              { "type": "http", "direction": "out", "name": "$return" } ] }
            """, ("__init__.py", "def main(req, t):\n    return 'x'\n"));
        app.Function("Hello", TestApp.HttpFunctionJson, ("__init__.py", "import azure.functions as func\ndef main(req: func.HttpRequest) -> func.HttpResponse:\n    return func.HttpResponse('hello')\n"));
        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString);
        Assert.Equal("hello", await host.Http.GetStringAsync("/api/Hello"));
        var status = await host.Http.GetHostStatusAsync();
        Assert.Contains("tableName \"no-dashes\"", Assert.Single(status.Functions, f => f.Name == "BadName").Error, StringComparison.Ordinal);
        Assert.Contains("rowKey needs a partitionKey", Assert.Single(status.Functions, f => f.Name == "RowOnly").Error, StringComparison.Ordinal);
    }

    [Fact]
    public async Task An_app_reaches_only_its_own_accounts_tables()
    {
        // Two apps without configured storage each get the development storage of their own (as the platform gives
        // each app its own Azurite account): an entity app A writes is not what app B's input of the same table and
        // keys reads.
        var table = "people" + Guid.NewGuid().ToString("N")[..10];
        using var appA = TableApp("python", table);
        using var appB = TableApp("python", table);
        await using var a = await HostUnderTest.StartAsync(appA.Directory, storage: null);
        await using var b = await HostUnderTest.StartAsync(appB.Directory, storage: null);
        Assert.NotEqual(a.Host.StorageConnectionString, b.Host.StorageConnectionString);
        using (var put = await a.Http.PostAsync("/api/people/team/secret", Json("""{ "name": "alpha" }""")))
            Assert.True(put.StatusCode == HttpStatusCode.Created, await put.Content.ReadAsStringAsync());
        using (var fromB = await b.Http.GetAsync("/api/people/team/secret"))
            Assert.Equal(HttpStatusCode.NotFound, fromB.StatusCode);
        // The entity is there, in A's own account, and A reads it.
        Assert.Contains("alpha", await a.Http.GetStringAsync("/api/people/team/secret"), StringComparison.Ordinal);
        var mine = new Azure.Data.Tables.TableClient(a.Host.StorageConnectionString, table);
        Assert.Equal("alpha", (await mine.GetEntityAsync<Azure.Data.Tables.TableEntity>("team", "secret")).Value.GetString("name"));
    }
}
