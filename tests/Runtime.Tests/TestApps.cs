namespace FaaST.Runtime.Tests;

/// <summary>Writes small function apps into temporary folders.</summary>
public sealed class TestApp : IDisposable
{
    /// <summary>function.json of an HTTP function (any method, route = its name) answering with its return value.</summary>
    public const string HttpFunctionJson = """
        { "bindings": [
          { "type": "httpTrigger", "direction": "in", "name": "req", "authLevel": "anonymous" },
          { "type": "http", "direction": "out", "name": "$return" } ] }
        """;

    private readonly string _root;

    /// <summary>function.json of a function at route read/{name} with the blob <paramref name="container"/>/{name} as input "inblob".</summary>
    public static string BlobReadJson(string container) => $$"""
        { "bindings": [
          { "type": "httpTrigger", "direction": "in", "name": "req", "route": "read/{name}" },
          { "type": "blob", "direction": "in", "name": "inblob", "path": "{{container}}/{name}" },
          { "type": "http", "direction": "out", "name": "$return" } ] }
        """;

    public TestApp(string runtime, string? hostJson = null, Dictionary<string, string>? settings = null, string? name = null)
    {
        _root = Path.Combine(Path.GetTempPath(), "faast-test-" + Guid.NewGuid().ToString("N")[..12]);
        Directory = name is null ? _root : Path.Combine(_root, name);
        System.IO.Directory.CreateDirectory(Directory);
        File.WriteAllText(Path.Combine(Directory, "host.json"), hostJson ?? """{ "version": "2.0" }""");
        var values = new Dictionary<string, string> { ["FUNCTIONS_WORKER_RUNTIME"] = runtime };
        foreach (var (k, v) in settings ?? [])
            values[k] = v;
        File.WriteAllText(Path.Combine(Directory, "local.settings.json"),
            System.Text.Json.JsonSerializer.Serialize(new { IsEncrypted = false, Values = values }));
    }

    public string Directory { get; }

    /// <summary>Adds a function folder with function.json and its files (name -> content).</summary>
    public TestApp Function(string name, string functionJson, params (string File, string Content)[] files)
    {
        var dir = Path.Combine(Directory, name);
        System.IO.Directory.CreateDirectory(dir);
        File.WriteAllText(Path.Combine(dir, "function.json"), functionJson);
        foreach (var (file, content) in files)
            File.WriteAllText(Path.Combine(dir, file), content);
        return this;
    }

    private TestApp(string root, string directory)
    {
        _root = root;
        Directory = directory;
    }

    /// <summary>apps/counter (Faa$T Table 6's shared counter) under <paramref name="name"/>, with the given consistency preset.</summary>
    public static TestApp Counter(string preset, string name = "counter")
    {
        var app = new TestApp("python", name: name);
        foreach (var dir in System.IO.Directory.EnumerateDirectories(Path.Combine(Repo.Root, "apps", "counter")))
        {
            var function = Path.GetFileName(dir);
            app.Function(function, File.ReadAllText(Path.Combine(dir, "function.json")),
                ("__init__.py", File.ReadAllText(Path.Combine(dir, "__init__.py"))));
        }
        File.WriteAllText(Path.Combine(app.Directory, "faast.json"), $$"""{ "cache": { "consistency": "{{preset}}" } }""");
        return app;
    }

    public static TestApp CopySample(string sample, bool keepName = false)
    {
        var root = Path.Combine(Path.GetTempPath(), "faast-sample-" + Guid.NewGuid().ToString("N")[..12]);
        var target = Repo.CopySample(sample, keepName ? Path.Combine(root, sample) : root);
        return new TestApp(root, target);
    }

    public void Dispose()
    {
        try
        {
            System.IO.Directory.Delete(_root, recursive: true);
        }
        catch (IOException)
        {
            // best effort
        }
    }
}
