using System.Text.Json;

namespace FaaST.AppModel;

/// <summary>
/// The programming models without function.json — Python v2 (functions declared with decorators in function_app.py)
/// and Node v4 (@azure/functions' app.http(...) in the files package.json's "main" names): their functions are known
/// only to a worker that imports the app, so the host asks one (FunctionsMetadataRequest, worker indexing) and
/// validates what it answers as it validates a function.json (<see cref="FunctionApp.WithIndex"/>).
/// </summary>
public static class ProgrammingModel
{
    /// <summary>
    /// The file that declares the functions of the app in <paramref name="appDirectory"/> when it has no function.json
    /// folder: PYTHON_SCRIPT_FILE_NAME or function_app.py (Python v2), else package.json with a "main" (Node v4; the
    /// worker expands a glob in it). Null when the app has function.json folders or neither file.
    /// </summary>
    public static string? WorkerIndexedFile(string appDirectory, AppSettings settings)
    {
        var dir = Path.GetFullPath(appDirectory);
        if (Directory.EnumerateDirectories(dir).Any(d => File.Exists(Path.Combine(d, "function.json"))))
            return null;
        var runtime = settings["FUNCTIONS_WORKER_RUNTIME"]?.Trim().ToLowerInvariant();
        if (runtime is null or "python")
        {
            var script = settings["PYTHON_SCRIPT_FILE_NAME"] is { Length: > 0 } named ? named : "function_app.py";
            var python = Path.GetFullPath(Path.Combine(dir, script));
            if (File.Exists(python))
                return python;
        }
        if (runtime is null or "node")
        {
            var package = Path.Combine(dir, "package.json");
            if (File.Exists(package) && HasMain(package))
                return package;
        }
        return null;
    }

    private static bool HasMain(string package)
    {
        try
        {
            using var doc = JsonDocument.Parse(File.ReadAllText(package));
            return doc.RootElement.ValueKind == JsonValueKind.Object && doc.RootElement.TryGetProperty("main", out var main) &&
                main.ValueKind == JsonValueKind.String && main.GetString() is { Length: > 0 };
        }
        catch (JsonException)
        {
            // A package.json that is not JSON declares nothing here; the Node worker names the error if it loads it.
            return false;
        }
    }
}

/// <summary>
/// One function as a worker's FunctionMetadataResponse describes it (RpcFunctionMetadata): its name, the file that
/// registered it, the entry point the worker knows it by, and its bindings as function.json-shaped JSON objects.
/// </summary>
public sealed record IndexedFunction
{
    public required string Name { get; init; }
    public string ScriptFile { get; init; } = "";
    public string EntryPoint { get; init; } = "";
    public required IReadOnlyList<string> RawBindings { get; init; }
}
