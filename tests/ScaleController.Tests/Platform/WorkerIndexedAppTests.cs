using System.Collections.Concurrent;
using System.Diagnostics;
using System.Globalization;
using System.Text.Json;

namespace FaaST.ScaleController.Tests.Platform;

/// <summary>
/// Apps of the Python v2 and Node v4 programming models (no function.json) as a user runs them: `./faast start` and
/// `./faast deploy`. Their functions are what a real worker of the app declares (FunctionsMetadataRequest, issue 24),
/// validated as function.json files are: the runtime indexes the app before it serves, the platform's deploy check
/// (`FaaST.Runtime.dll check --index`) before anything changes.
/// </summary>
public sealed class WorkerIndexedAppTests : IDisposable
{
    private readonly TempDirectory _apps = new("faast-indexed-");

    public void Dispose() => _apps.Dispose();

    private const string PythonApp = """
        import azure.functions as func

        app = func.FunctionApp(http_auth_level=func.AuthLevel.ANONYMOUS)


        @app.route(route="hello", methods=["GET"])
        def hello(req: func.HttpRequest) -> func.HttpResponse:
            return func.HttpResponse("hello " + req.params.get("name", "world"))


        @app.route(route="store/{word}")
        @app.blob_output(arg_name="out", path="words/{word}.txt", connection="AzureWebJobsStorage")
        def store(req: func.HttpRequest, out: func.Out[str]) -> str:
            out.set("word " + req.route_params["word"])
            return "stored"


        @app.route(route="read/{word}")
        @app.blob_input(arg_name="data", path="words/{word}.txt", connection="AzureWebJobsStorage")
        def read(req: func.HttpRequest, data: str) -> str:
            return data


        @app.route(route="people/{pk}/{rk}", methods=["POST"])
        @app.table_output(arg_name="row", connection="AzureWebJobsStorage", table_name="people", partition_key="{pk}", row_key="{rk}")
        def put_person(req: func.HttpRequest, row: func.Out[str]) -> func.HttpResponse:
            row.set(req.get_body().decode())
            return func.HttpResponse("stored", status_code=201)


        @app.route(route="people/{pk}/{rk}", methods=["GET"])
        @app.table_input(arg_name="person", connection="AzureWebJobsStorage", table_name="people", partition_key="{pk}", row_key="{rk}")
        def get_person(req: func.HttpRequest, person: str) -> func.HttpResponse:
            return func.HttpResponse(person or "none", status_code=200 if person else 404)
        """;

    private string App(string name, string runtime, params (string Path, string Text)[] files)
    {
        var app = Path.Combine(_apps.Path, name);
        Directory.CreateDirectory(app);
        File.WriteAllText(Path.Combine(app, "host.json"), """{ "version": "2.0" }""");
        File.WriteAllText(Path.Combine(app, "local.settings.json"),
            $$"""{ "IsEncrypted": false, "Values": { "FUNCTIONS_WORKER_RUNTIME": "{{runtime}}", "AzureWebJobsStorage": "UseDevelopmentStorage=true" } }""");
        foreach (var (path, text) in files)
        {
            var file = Path.Combine(app, path);
            Directory.CreateDirectory(Path.GetDirectoryName(file)!);
            File.WriteAllText(file, text);
        }
        return app;
    }

    private static async Task StartAndServeAsync(string app, Func<HttpClient, Task> requests)
    {
        var port = Ports.Free();
        var output = new ConcurrentQueue<string>();
        using var process = PlatformCommand.Start(["start", app, "--port", port.ToString(CultureInfo.InvariantCulture), "--azurite-in-memory", "--isolation", "off"], output);
        try
        {
            await Eventually.TrueAsync(() => output.Any(l => l.Contains("is served at", StringComparison.Ordinal)) || process.HasExited,
                "the platform to serve the app", () => string.Join('\n', output), seconds: 180);
            Assert.False(process.HasExited, string.Join('\n', output));
            using var http = new HttpClient { BaseAddress = new Uri($"http://127.0.0.1:{port}/"), Timeout = TimeSpan.FromSeconds(60) };
            await requests(http);
            Assert.Contains(output, l => l.Contains("the worker declared", StringComparison.Ordinal));
        }
        finally
        {
            if (!process.HasExited)
                process.Kill(entireProcessTree: true);
            await process.WaitForExitAsync();
        }
    }

    [Fact]
    public async Task A_Python_v2_app_runs_unchanged_through_faast_start_with_http_and_blob_bindings_from_its_decorators()
    {
        var app = App("pyvtwo", "python", ("function_app.py", PythonApp));
        var validated = FaaST.ScaleController.Deploy.AppValidator.Validate(app);
        Assert.Equal(Path.Combine(app, "function_app.py"), validated.IndexedFrom);

        await StartAndServeAsync(app, async http =>
        {
            Assert.Equal("hello v2", await http.GetStringAsync("api/hello?name=v2"));
            Assert.Equal("stored", await http.GetStringAsync("api/store/apple"));
            Assert.Equal("word apple", await http.GetStringAsync("api/read/apple"));
            await TablesRoundTripAsync(http);
        });
    }

    [Fact]
    public async Task A_Node_v4_app_using_azure_functions_from_npm_runs_unchanged_through_faast_start()
    {
        var app = App("nodevfour", "node",
            ("package.json", """{ "name": "nodevfour", "version": "1.0.0", "main": "src/functions/*.js", "dependencies": { "@azure/functions": "^4.0.0" } }"""),
            ("src/functions/hello.js", """
                const { app, input, output } = require('@azure/functions');

                app.http('hello', {
                  methods: ['GET'],
                  authLevel: 'anonymous',
                  handler: async (request) => ({ body: `hello ${request.query.get('name') || 'world'}` }),
                });

                const wordOut = output.storageBlob({ path: 'words/{word}.txt', connection: 'AzureWebJobsStorage' });
                app.http('store', {
                  route: 'store/{word}',
                  authLevel: 'anonymous',
                  extraOutputs: [wordOut],
                  handler: async (request, context) => {
                    context.extraOutputs.set(wordOut, `word ${request.params.word}`);
                    return { body: 'stored' };
                  },
                });

                const wordIn = input.storageBlob({ path: 'words/{word}.txt', connection: 'AzureWebJobsStorage' });
                const personOut = output.table({ tableName: 'people', partitionKey: '{pk}', rowKey: '{rk}', connection: 'AzureWebJobsStorage' });
                app.http('putPerson', {
                  methods: ['POST'],
                  route: 'people/{pk}/{rk}',
                  authLevel: 'anonymous',
                  extraOutputs: [personOut],
                  handler: async (request, context) => {
                    context.extraOutputs.set(personOut, await request.json());
                    return { status: 201, body: 'stored' };
                  },
                });

                const personIn = input.table({ tableName: 'people', partitionKey: '{pk}', rowKey: '{rk}', connection: 'AzureWebJobsStorage' });
                app.http('getPerson', {
                  methods: ['GET'],
                  route: 'people/{pk}/{rk}',
                  authLevel: 'anonymous',
                  extraInputs: [personIn],
                  handler: async (request, context) => {
                    const person = context.extraInputs.get(personIn);
                    return person ? { body: JSON.stringify(person) } : { status: 404, body: 'none' };
                  },
                });

                app.http('read', {
                  route: 'read/{word}',
                  authLevel: 'anonymous',
                  extraInputs: [wordIn],
                  handler: async (request, context) => ({ body: context.extraInputs.get(wordIn).toString() }),
                });
                """));
        // The real @azure/functions 4.x from npm (./faast setup installs it for the Node worker's tests), in the app's
        // own node_modules as `npm install` leaves it.
        CopyTree(Path.Combine(Repo.Root, "workers", "node", "test-support", "v4-deps", "node_modules"), Path.Combine(app, "node_modules"));

        await StartAndServeAsync(app, async http =>
        {
            Assert.Equal("hello v4", await http.GetStringAsync("api/hello?name=v4"));
            Assert.Equal("stored", await http.GetStringAsync("api/store/pear"));
            Assert.Equal("word pear", await http.GetStringAsync("api/read/pear"));
            await TablesRoundTripAsync(http);
        });
    }

    /// <summary>samples/python-v2-app and samples/node-v4-app as the README starts them: HTTP, a blob-triggered pipeline, blob
    /// input and output through the cache, and a queue, each checked by what it wrote (`FaaST.Runtime.dll blob`, which finds
    /// the platform's Azurite as `./faast blob` does).</summary>
    [Theory]
    [InlineData("python-v2-app")]
    [InlineData("node-v4-app")]
    public async Task The_v2_and_v4_samples_run_unchanged_through_faast_start_with_http_blob_pipeline_and_queue(string sample)
    {
        if (sample == "node-v4-app" && !Directory.Exists(Path.Combine(Repo.Root, "samples", sample, "node_modules", "@azure", "functions")))
            Assert.Fail($"samples/{sample}/node_modules has no @azure/functions: ./faast setup installs it (npm ci there)");
        var app = Repo.CopySample(sample, Path.Combine(_apps.Path, sample.Replace("-", "", StringComparison.Ordinal)));
        // The heartbeat timer every 2 s instead of the sample's 5 minutes (its schedule is an app setting).
        var settings = Path.Combine(app, "local.settings.json");
        File.WriteAllText(settings, File.ReadAllText(settings).Replace("0 */5 * * * *", "*/2 * * * * *", StringComparison.Ordinal));
        await StartAndServeAsync(app, async http =>
        {
            Assert.Equal("Hello, sample!", await http.GetStringAsync("api/Hello?name=sample"));
            using (var missing = await http.GetAsync("api/wordcount/none.txt"))
                Assert.Equal(System.Net.HttpStatusCode.NotFound, missing.StatusCode);
            Assert.Contains("put documents/d.txt", await BlobAsync(app, "put", "documents/d.txt", "hello world hello"), StringComparison.Ordinal);
            var counted = await http.GetStringAsync("api/wordcount/d.txt");
            Assert.Contains("\"words\":3", counted.Replace(" ", "", StringComparison.Ordinal), StringComparison.Ordinal);
            Assert.Contains("\"words\":3", (await BlobAsync(app, "get", "wordcounts/d.txt.json")).Replace(" ", "", StringComparison.Ordinal), StringComparison.Ordinal);

            using (var ingested = await http.PostAsync("api/ingest/a.txt", new StringContent("The Quick  BROWN fox")))
                Assert.Equal(System.Net.HttpStatusCode.Accepted, ingested.StatusCode);
            using (var queued = await http.PostAsync("api/enqueue/apple", new StringContent("note one")))
                Assert.Equal(System.Net.HttpStatusCode.Accepted, queued.StatusCode);
            string clean = "", tally = "";
            await Eventually.TrueAsync(async () => (clean = await BlobAsync(app, "get", "pipeline-clean/a.txt")).Contains("the quick brown fox", StringComparison.Ordinal),
                $"the blob-triggered stage's output in pipeline-clean/a.txt", seconds: 120);
            await Eventually.TrueAsync(async () => (tally = await BlobAsync(app, "get", "tallies/apple.json")).Contains("note one", StringComparison.Ordinal),
                $"the queue-triggered function's blob tallies/apple.json", seconds: 120);
            string beat = "";
            await Eventually.TrueAsync(async () => (beat = await BlobAsync(app, "get", "heartbeats/latest.json")).Contains("\"past_due\":", StringComparison.Ordinal),
                "the timer's heartbeats/latest.json", seconds: 120);
            Assert.Contains("\"past_due\":false", beat.Replace(" ", "", StringComparison.Ordinal), StringComparison.Ordinal);
        });
    }

    /// <summary>`FaaST.Runtime.dll blob put|get APP PATH` (what `./faast blob` runs); put sends <paramref name="text"/>.
    /// Returns what it printed (the blob's bytes for get), or its error output when it failed.</summary>
    private static async Task<string> BlobAsync(string app, string verb, string path, string? text = null)
    {
        var info = new ProcessStartInfo("dotnet") { RedirectStandardOutput = true, RedirectStandardError = true, RedirectStandardInput = true, UseShellExecute = false };
        foreach (var a in (string[])[Path.Combine(AppContext.BaseDirectory, "FaaST.Runtime.dll"), "blob", verb, app, path])
            info.ArgumentList.Add(a);
        if (text is not null)
            info.ArgumentList.Add("-");
        using var process = Process.Start(info)!;
        var stdout = process.StandardOutput.ReadToEndAsync();
        var stderr = process.StandardError.ReadToEndAsync();
        if (text is not null)
            await process.StandardInput.WriteAsync(text);
        process.StandardInput.Close();
        using var timeout = new CancellationTokenSource(TimeSpan.FromSeconds(120));
        await process.WaitForExitAsync(timeout.Token);
        return process.ExitCode == 0 ? await stdout + await stderr : "failed: " + await stderr;
    }

    [Fact]
    public async Task A_Python_v2_app_that_raises_at_import_starts_with_no_function_and_its_status_names_the_file_and_the_error()
    {
        var app = App("pyvtworaises", "python", ("function_app.py", PythonApp + "\nraise RuntimeError(\"the model file is missing\")\n"));
        var port = Ports.Free();
        var url = $"http://127.0.0.1:{port}";
        var output = new ConcurrentQueue<string>();
        using var process = PlatformCommand.Start(["start", app, "--port", port.ToString(CultureInfo.InvariantCulture), "--azurite-in-memory", "--isolation", "off"], output);
        try
        {
            await Eventually.TrueAsync(() => output.Any(l => l.Contains("is served at", StringComparison.Ordinal)) || process.HasExited,
                "the platform to serve the app", () => string.Join('\n', output), seconds: 180);
            Assert.False(process.HasExited, string.Join('\n', output));
            using var http = AdminKey.Client(new Uri(url + "/"), AdminKey.Published(url), TimeSpan.FromSeconds(60));
            using (var missing = await http.GetAsync("api/hello"))
                Assert.Equal(System.Net.HttpStatusCode.NotFound, missing.StatusCode);
            using var status = JsonDocument.Parse(await http.GetStringAsync("admin/host/status"));
            var error = status.RootElement.GetProperty("indexError").GetString()!;
            Assert.Contains("function_app.py", error, StringComparison.Ordinal);
            Assert.Contains("the model file is missing", error, StringComparison.Ordinal);
            Assert.Empty(status.RootElement.GetProperty("functions").EnumerateArray());
            Assert.Contains(output, l => l.Contains("the model file is missing", StringComparison.Ordinal));
        }
        finally
        {
            if (!process.HasExited)
                process.Kill(entireProcessTree: true);
            await process.WaitForExitAsync();
        }
    }

    /// <summary>A table output's entity read back by a table input, both keyed by the route (decorators / @azure/functions).</summary>
    private static async Task TablesRoundTripAsync(HttpClient http)
    {
        using (var put = await http.PostAsync("api/people/team/ada", new StringContent("""{ "name": "Ada", "age": 36 }""", System.Text.Encoding.UTF8, "application/json")))
            Assert.True(put.StatusCode == System.Net.HttpStatusCode.Created, await put.Content.ReadAsStringAsync());
        using (var person = JsonDocument.Parse(await http.GetStringAsync("api/people/team/ada")))
        {
            Assert.Equal("ada", person.RootElement.GetProperty("RowKey").GetString());
            Assert.Equal("Ada", person.RootElement.GetProperty("name").GetString());
            Assert.Equal(36, person.RootElement.GetProperty("age").GetInt32());
        }
        using var missing = await http.GetAsync("api/people/team/nobody");
        Assert.Equal(System.Net.HttpStatusCode.NotFound, missing.StatusCode);
    }

    [Fact]
    public async Task Deploy_refuses_a_Python_v2_app_that_raises_at_import_naming_the_file_and_the_error_and_the_deployed_version_keeps_serving()
    {
        using var state = new TempDirectory("faast-indexed-platform-");
        var port = Ports.Free();
        var url = $"http://127.0.0.1:{port}";
        var output = new ConcurrentQueue<string>();
        using var platform = PlatformCommand.Start(["platform", "--port", port.ToString(CultureInfo.InvariantCulture), "--state", state.Path, "--isolation", "off"], output);
        try
        {
            await Eventually.TrueAsync(() => output.Any(l => l.StartsWith("faast: platform at ", StringComparison.Ordinal)) || platform.HasExited,
                "the platform", () => string.Join('\n', output), seconds: 180);
            Assert.False(platform.HasExited, string.Join('\n', output));
            var app = App("pyvtwodeploy", "python", ("function_app.py", PythonApp));
            var deployed = await PlatformCommand.RunAsync("deploy", app, "--platform", url);
            Assert.True(deployed.Code == 0, deployed.Output + "\n" + string.Join('\n', output.TakeLast(40)));
            using var http = new HttpClient { BaseAddress = new Uri(url + "/"), Timeout = TimeSpan.FromSeconds(60) };
            Assert.Equal("hello one", await http.GetStringAsync("pyvtwodeploy/api/hello?name=one"));

            File.WriteAllText(Path.Combine(app, "function_app.py"), PythonApp + "\nraise RuntimeError(\"the model file is missing\")\n");
            var refused = await PlatformCommand.RunAsync("deploy", app, "--platform", url);
            Assert.True(refused.Code != 0, refused.Output);
            Assert.Contains("function_app.py", refused.Output, StringComparison.Ordinal);
            Assert.Contains("the model file is missing", refused.Output, StringComparison.Ordinal);
            Assert.Equal("hello two", await http.GetStringAsync("pyvtwodeploy/api/hello?name=two"));
        }
        finally
        {
            await PlatformCommand.StopAsync(platform);
        }
    }

    [Fact]
    public async Task The_runtimes_check_disables_a_decorated_function_whose_binding_is_wrong_naming_it_while_the_others_pass()
    {
        var app = App("pyvtwocheck", "python", ("function_app.py", """
            import azure.functions as func

            app = func.FunctionApp(http_auth_level=func.AuthLevel.ANONYMOUS)


            @app.route(route="fine")
            def fine(req: func.HttpRequest) -> func.HttpResponse:
                return func.HttpResponse("fine")


            @app.route(route="broken")
            @app.blob_input(arg_name="data", path="no-container-here", connection="AzureWebJobsStorage")
            def broken(req: func.HttpRequest, data: str) -> str:
                return data
            """));
        var problem = Assert.Single(await CheckProblemsAsync(app));
        Assert.Contains("function_app.py (function 'broken')", problem, StringComparison.Ordinal);
        Assert.Contains("path \"no-container-here\" must be \"container/blob\"", problem, StringComparison.Ordinal);
    }

    [Fact]
    public async Task The_runtimes_check_names_an_unknown_binding_type_and_a_route_conflict_of_decorated_functions_and_passes_the_rest()
    {
        var app = App("pyvtwomany", "python", ("function_app.py", """
            import azure.functions as func

            app = func.FunctionApp(http_auth_level=func.AuthLevel.ANONYMOUS)


            @app.route(route="items")
            def first(req: func.HttpRequest) -> func.HttpResponse:
                return func.HttpResponse("first")


            @app.route(route="items")
            def second(req: func.HttpRequest) -> func.HttpResponse:
                return func.HttpResponse("second")


            @app.route(route="cosmos")
            @app.generic_input_binding(arg_name="doc", type="cosmosDB", database_name="db", container_name="c")
            def cosmos(req: func.HttpRequest, doc: str) -> str:
                return doc


            @app.route(route="fine")
            def fine(req: func.HttpRequest) -> func.HttpResponse:
                return func.HttpResponse("fine")
            """));
        var problems = await CheckProblemsAsync(app);
        Assert.Equal(2, problems.Length);
        Assert.Contains(problems, p => p.Contains("(function 'cosmos')", StringComparison.Ordinal) && p.Contains("\"cosmosDB\" is not a supported binding", StringComparison.Ordinal));
        Assert.Contains(problems, p => p.Contains("second", StringComparison.Ordinal) && p.Contains("first", StringComparison.Ordinal));
        Assert.DoesNotContain(problems, p => p.Contains("'fine'", StringComparison.Ordinal));
    }

    [Fact]
    public async Task The_runtimes_check_refuses_a_Node_v4_app_whose_main_glob_matches_nothing_naming_the_glob()
    {
        var app = App("nodevfournomatch", "node",
            ("package.json", """{ "name": "nodevfournomatch", "version": "1.0.0", "main": "dist/functions/*.js" }"""));
        var problem = Assert.Single(await CheckProblemsAsync(app));
        Assert.Contains("package.json", problem, StringComparison.Ordinal);
        Assert.Contains("dist/functions/*.js", problem, StringComparison.Ordinal);
    }

    /// <summary>`FaaST.Runtime.dll check APP --index`: the problems it prints (the check must run). As root it runs the app's
    /// code as the app's own user, who must reach the app: the temporary folder (0700) gets o+x.</summary>
    private async Task<string[]> CheckProblemsAsync(string app)
    {
        if (!OperatingSystem.IsWindows())
            File.SetUnixFileMode(_apps.Path, File.GetUnixFileMode(_apps.Path) | UnixFileMode.OtherExecute);
        var (code, stdout, stderr) = await RunCheckAsync(app);
        Assert.True(code == 0, stderr);
        return JsonSerializer.Deserialize<string[]>(stdout)!;
    }

    private static async Task<(int Code, string Stdout, string Stderr)> RunCheckAsync(string app)
    {
        var info = new ProcessStartInfo("dotnet") { RedirectStandardOutput = true, RedirectStandardError = true, UseShellExecute = false };
        foreach (var a in (string[])[Path.Combine(AppContext.BaseDirectory, "FaaST.Runtime.dll"), "check", app, "--index"])
            info.ArgumentList.Add(a);
        using var process = Process.Start(info)!;
        var stdout = process.StandardOutput.ReadToEndAsync();
        var stderr = process.StandardError.ReadToEndAsync();
        using var timeout = new CancellationTokenSource(TimeSpan.FromSeconds(180));
        await process.WaitForExitAsync(timeout.Token);
        return (process.ExitCode, await stdout, await stderr);
    }

    private static void CopyTree(string from, string to)
    {
        Directory.CreateDirectory(to);
        foreach (var file in Directory.EnumerateFiles(from, "*", SearchOption.AllDirectories))
        {
            var target = Path.Combine(to, Path.GetRelativePath(from, file));
            Directory.CreateDirectory(Path.GetDirectoryName(target)!);
            File.Copy(file, target);
        }
    }
}
