using System.Text.Json;

namespace FaaST.AppModel;

/// <summary>
/// Apps written for the programming models without function.json — Python v2 (function_app.py with decorators) and
/// Node v4 (@azure/functions' app.http(...) in package.json's "main" or src/functions) — which FaaST does not run yet
/// (a later issue). Such an app used to start with no function and answer 404 everywhere without a word: now
/// `./faast start` and the host say why, and `./faast deploy` refuses it.
/// </summary>
public static class ProgrammingModel
{
    /// <summary>
    /// Why the app in <paramref name="appDirectory"/> loads no function, if it is written for an unsupported model
    /// (naming the file that shows it); null when it is not (it has function.json folders, or is just empty).
    /// </summary>
    public static string? Unsupported(string appDirectory)
    {
        var dir = Path.GetFullPath(appDirectory);
        var hasFunctionJson = Directory.EnumerateDirectories(dir).Any(d => File.Exists(Path.Combine(d, "function.json")));
        if (hasFunctionJson)
            return null;
        var python = Path.Combine(dir, "function_app.py");
        if (File.Exists(python))
            return $"{python}: this app uses the Python v2 programming model (functions declared with decorators in function_app.py, " +
                "no function.json), which FaaST does not support yet; no function is loaded. Use the v1 model (a folder per function " +
                "with function.json and __init__.py), as samples/python-app does";
        if (NodeV4File(dir) is { } node)
            return $"{node}: this app uses the Node.js v4 programming model (functions registered with @azure/functions' app.http(...) etc., " +
                "no function.json), which FaaST does not support yet; no function is loaded. Use the v3 model (a folder per function " +
                "with function.json and index.js), as samples/node-app does";
        return null;
    }

    /// <summary>A script that registers functions with @azure/functions' app object: package.json's "main", else src/functions/*.</summary>
    private static string? NodeV4File(string dir)
    {
        var candidates = new List<string>();
        var package = Path.Combine(dir, "package.json");
        if (File.Exists(package))
        {
            try
            {
                using var doc = JsonDocument.Parse(File.ReadAllText(package));
                if (doc.RootElement.ValueKind == JsonValueKind.Object && doc.RootElement.TryGetProperty("main", out var main) &&
                    main.ValueKind == JsonValueKind.String && main.GetString() is { Length: > 0 } m && !m.Contains('*'))
                    candidates.Add(Path.GetFullPath(Path.Combine(dir, m)));
            }
            catch (JsonException)
            {
                // not ours to judge here: the model check only looks for what it recognises
            }
        }
        foreach (var folder in (string[])["src/functions", "functions", "dist/src/functions"])
        {
            var path = Path.Combine(dir, folder);
            if (Directory.Exists(path))
                candidates.AddRange(Directory.EnumerateFiles(path).Where(f => Path.GetExtension(f) is ".js" or ".mjs" or ".cjs" or ".ts").Order(StringComparer.Ordinal));
        }
        return candidates.FirstOrDefault(f => f.StartsWith(dir + Path.DirectorySeparatorChar, StringComparison.Ordinal) && File.Exists(f) && RegistersFunctions(f));
    }

    private static bool RegistersFunctions(string file)
    {
        if (new FileInfo(file).Length > 1 << 20)
            return false;
        var text = File.ReadAllText(file);
        return text.Contains("@azure/functions", StringComparison.Ordinal) && text.Contains("app.", StringComparison.Ordinal);
    }
}
