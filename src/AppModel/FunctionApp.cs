using System.Text.Json;
using FaaST.Storage;

namespace FaaST.AppModel;

/// <summary>A loaded function app: host.json, settings, and one definition per function folder.</summary>
public sealed class FunctionApp
{
    public required string Directory { get; init; }

    /// <summary>The app's name: its folder's name. It names the app to its peers, its membership
    /// folder, its shared-memory segments and its workers' user.</summary>
    public string Name => NameOf(Directory);

    /// <summary>The name of the app in <paramref name="appDirectory"/> (relative, or with a trailing slash).</summary>
    public static string NameOf(string appDirectory) =>
        Path.GetFileName(Path.TrimEndingDirectorySeparator(Path.GetFullPath(appDirectory)));
    public required HostConfig Host { get; init; }
    public required AppSettings Settings { get; init; }

    /// <summary>python or node (FUNCTIONS_WORKER_RUNTIME).</summary>
    public required string WorkerRuntime { get; init; }
    public required IReadOnlyList<FunctionDefinition> Functions { get; init; }

    /// <summary>Problems that do not stop the app (e.g. host.json names functions it does not have); logged at start.</summary>
    public IReadOnlyList<string> Warnings { get; init; } = [];

    /// <summary>
    /// The file that declares the app's functions when it has no function.json (Python v2's function_app.py or
    /// PYTHON_SCRIPT_FILE_NAME, Node v4's package.json "main"): the functions are then known only by asking a worker
    /// (FunctionsMetadataRequest), and this app has none until <see cref="WithIndex"/> gives them. Null for a
    /// function.json app.
    /// </summary>
    public string? IndexedFrom { get; init; }

    /// <summary>Why indexing the app found no function (the worker's error naming the file, or the time it took);
    /// the app then serves nothing and its status says this.</summary>
    public string? IndexError { get; init; }

    /// <summary>Functions that can run: enabled and without errors.</summary>
    public IEnumerable<FunctionDefinition> Runnable => Functions.Where(f => !f.Disabled && f.Error is null);

    public static readonly string[] SupportedRuntimes = ["python", "node"];

    /// <summary>
    /// Reads the app. host.json and local.settings.json problems stop the load
    /// (<see cref="AppConfigException"/>); a bad function.json only marks that function with an error.
    /// </summary>
    public static FunctionApp Load(string appDirectory, System.Collections.IDictionary? environment = null)
    {
        var dir = Path.TrimEndingDirectorySeparator(Path.GetFullPath(appDirectory));
        if (!System.IO.Directory.Exists(dir))
            throw new AppConfigException($"{dir}: no such app directory");
        var host = HostConfig.Load(dir);
        var settings = AppSettings.Load(dir, environment);
        var folders = System.IO.Directory.GetDirectories(dir)
            .Where(d => File.Exists(Path.Combine(d, "function.json")))
            .OrderBy(d => d, StringComparer.Ordinal)
            .ToList();
        var warnings = new List<string>();
        var indexedFrom = folders.Count == 0 ? ProgrammingModel.WorkerIndexedFile(dir, settings) : null;
        if (host.Functions is { } only)
        {
            var unknown = only.Where(n => !folders.Any(d => Path.GetFileName(d).Equals(n, StringComparison.OrdinalIgnoreCase))).ToList();
            if (unknown.Count > 0)
                warnings.Add($"{Path.Combine(dir, "host.json")}: functions names {string.Join(", ", unknown.Select(n => $"\"{LogText.Escape(n)}\""))}, " +
                    $"which {(unknown.Count == 1 ? "is not a function" : "are not functions")} of this app (a folder with a function.json); ignored");
            folders = folders.Where(d => only.Contains(Path.GetFileName(d), StringComparer.OrdinalIgnoreCase)).ToList();
        }
        // A malformed storage connection string used to surface only when a store was first opened,
        // on a background task, and kill the process: refuse it here, naming the setting.
        if (StorageAccounts.ConnectionProblem(settings, "AzureWebJobsStorage") is { } storageProblem)
            throw new AppConfigException(storageProblem);
        var realRoot = AppPaths.RealPath(dir);
        // A function folder that is a link out of the app is not looked into, not even for its file names.
        var runtime = settings["FUNCTIONS_WORKER_RUNTIME"]?.Trim().ToLowerInvariant() ??
            (indexedFrom is { } declared ? (declared.EndsWith(".py", StringComparison.Ordinal) ? "python" : "node")
                : InferRuntime(dir, folders.Where(f => AppPaths.Outside(realRoot, f) is null).ToList()));
        if (!SupportedRuntimes.Contains(runtime))
            throw new AppConfigException(
                $"{Path.Combine(dir, "local.settings.json")}: Values.FUNCTIONS_WORKER_RUNTIME is \"{runtime}\"; FaaST runs \"python\" or \"node\"");
        var functions = RouteTemplates.MarkConflicts(folders.Select(f => LoadFunction(f, runtime, settings, realRoot)).ToList());
        return new FunctionApp
        {
            Directory = dir, Host = host, Settings = settings, WorkerRuntime = runtime, Functions = functions, Warnings = warnings,
            IndexedFrom = indexedFrom,
        };
    }

    /// <summary>
    /// This worker-indexed app with the functions a worker reported (<see cref="IndexedFunction"/>), each validated
    /// exactly as a function.json is: the same checks and messages, with "FILE (function 'NAME')" in place of the
    /// function.json's path. A function in error is disabled with its reason; the others serve. host.json's
    /// "functions" list and the AzureWebJobs.NAME.Disabled settings apply as for function.json apps.
    /// </summary>
    public FunctionApp WithIndex(IReadOnlyList<IndexedFunction> indexed)
    {
        if (IndexedFrom is null)
            throw new InvalidOperationException($"{Directory}: the app has function.json folders; it is not indexed by a worker");
        var realRoot = AppPaths.RealPath(Directory);
        var warnings = new List<string>(Warnings);
        var selected = indexed;
        if (Host.Functions is { } only)
        {
            var unknown = only.Where(n => !indexed.Any(f => f.Name.Equals(n, StringComparison.OrdinalIgnoreCase))).ToList();
            if (unknown.Count > 0)
                warnings.Add($"{Path.Combine(Directory, "host.json")}: functions names {string.Join(", ", unknown.Select(n => $"\"{LogText.Escape(n)}\""))}, " +
                    $"which {(unknown.Count == 1 ? "is not a function" : "are not functions")} {IndexedFrom} registers; ignored");
            selected = indexed.Where(f => only.Contains(f.Name, StringComparer.OrdinalIgnoreCase)).ToList();
        }
        var seen = new HashSet<string>(StringComparer.OrdinalIgnoreCase);
        var functions = new List<FunctionDefinition>(selected.Count);
        foreach (var f in selected)
        {
            var label = $"{IndexedFrom} (function '{LogText.Escape(f.Name)}')";
            var definition = DefineIndexed(f, label, realRoot);
            if (!seen.Add(f.Name))
                definition = definition with { Error = $"{label}: a second function of this name; function names must be unique in an app" };
            functions.Add(definition);
        }
        return new FunctionApp
        {
            Directory = Directory, Host = Host, Settings = Settings, WorkerRuntime = WorkerRuntime, Warnings = warnings,
            IndexedFrom = IndexedFrom, Functions = RouteTemplates.MarkConflicts(functions),
        };
    }

    /// <summary>This worker-indexed app with no function: indexing failed (<paramref name="error"/> names the file
    /// and what the worker said, or the time it took).</summary>
    public FunctionApp WithIndexError(string error) => new()
    {
        Directory = Directory, Host = Host, Settings = Settings, WorkerRuntime = WorkerRuntime, Warnings = Warnings,
        IndexedFrom = IndexedFrom, IndexError = error, Functions = [],
    };

    private FunctionDefinition DefineIndexed(IndexedFunction f, string label, string realRoot)
    {
        var defaultScript = WorkerRuntime == "python" ? "function_app.py" : "index.js";
        try
        {
            if (!IsFunctionName(f.Name))
                throw new AppConfigException($"{label}: the name must be letters, digits, _ and - and start with a letter");
            // The metadata becomes the function.json it stands for, and goes through the same checks.
            var buffer = new System.Buffers.ArrayBufferWriter<byte>();
            using (var w = new Utf8JsonWriter(buffer))
            {
                w.WriteStartObject();
                w.WriteString("scriptFile", f.ScriptFile);
                w.WriteString("entryPoint", f.EntryPoint);
                w.WriteStartArray("bindings");
                for (var i = 0; i < f.RawBindings.Count; i++)
                {
                    try
                    {
                        w.WriteRawValue(f.RawBindings[i]);
                    }
                    catch (JsonException e)
                    {
                        throw new AppConfigException($"{label}: bindings[{i}] is not JSON ({e.Message})");
                    }
                }
                w.WriteEndArray();
                w.WriteEndObject();
            }
            using var doc = JsonDocument.Parse(buffer.WrittenMemory);
            return Define(f.Name, Directory, label, doc.RootElement, WorkerRuntime, Settings, realRoot, defaultScript);
        }
        catch (Exception e) when (e is AppConfigException or FormatException)
        {
            return new FunctionDefinition
            {
                Name = f.Name, Directory = Directory, ScriptFile = Path.Combine(Directory, defaultScript), Bindings = [], Error = e.Message,
                DefinedIn = label,
            };
        }
    }

    /// <summary>Azure's rule for a function's name: a letter, then letters, digits, _ and -, at most 127 characters.</summary>
    private static bool IsFunctionName(string name) =>
        name.Length is > 0 and <= 127 && char.IsAsciiLetter(name[0]) && name.All(c => char.IsAsciiLetterOrDigit(c) || c is '_' or '-');

    private static string InferRuntime(string dir, List<string> folders)
    {
        var py = folders.Any(f => System.IO.Directory.EnumerateFiles(f, "*.py").Any());
        var js = folders.Any(f => System.IO.Directory.EnumerateFiles(f, "*.js").Any());
        if (py != js)
            return py ? "python" : "node";
        throw new AppConfigException(
            $"{Path.Combine(dir, "local.settings.json")}: Values.FUNCTIONS_WORKER_RUNTIME is not set (\"python\" or \"node\")");
    }

    /// <param name="realRoot">The app folder's real path (<see cref="AppPaths.RealPath"/>): every path the function
    /// names must stay below it.</param>
    internal static FunctionDefinition LoadFunction(string folder, string runtime, AppSettings settings, string realRoot)
    {
        var name = Path.GetFileName(folder);
        var file = Path.Combine(folder, "function.json");
        var defaultScript = runtime == "python" ? "__init__.py" : "index.js";
        try
        {
            // The function's folder and its function.json are read before anything else: a link out of the app
            // (a folder linked to /etc, a function.json linked to another app's settings) is refused unread.
            if (AppPaths.Outside(realRoot, folder) is { } folderOut)
                throw new AppConfigException($"{file}: functionDirectory \"{LogText.Escape(name)}\" leads outside the app folder " +
                    $"(to {LogText.Escape(folderOut)}); a function's files must be inside its app");
            if (AppPaths.Outside(realRoot, file) is { } fileOut)
                throw new AppConfigException($"{file}: function.json leads outside the app folder (to {LogText.Escape(fileOut)}); " +
                    "a function's files must be inside its app");
            using var doc = AppJson.Parse(file);
            return Define(name, folder, file, doc.RootElement, runtime, settings, realRoot, defaultScript);
        }
        catch (Exception e) when (e is AppConfigException or FormatException)
        {
            return new FunctionDefinition
            {
                Name = name, Directory = folder, ScriptFile = Path.Combine(folder, defaultScript),
                Bindings = [], Error = e.Message,
            };
        }
    }

    /// <summary>
    /// One function from its function.json (or the function.json a worker's metadata stands for): every check and
    /// message of the function.json model, with <paramref name="file"/> naming where it came from. Throws
    /// <see cref="AppConfigException"/> for what stops the function from loading.
    /// </summary>
    private static FunctionDefinition Define(string name, string folder, string file, JsonElement root, string runtime, AppSettings settings,
        string realRoot, string defaultScript)
    {
        if (root.ValueKind != JsonValueKind.Object)
            throw new AppConfigException($"{file}: the top level must be a JSON object");
        var script = AppJson.GetString(root, "scriptFile", file, "") ?? defaultScript;
        if (script.Length == 0 || script.Contains('\0', StringComparison.Ordinal))
            throw new AppConfigException($"{file}: scriptFile must be a file path, not \"{LogText.Escape(script)}\"");
        var scriptPath = Path.GetFullPath(Path.Combine(folder, script));
        // Checked before the file's existence, and so before the isolation check reads it: a scriptFile outside
        // the app (absolute, "..", or through a link) is never read, and never makes --isolation auto find that
        // the app's user cannot read it and fall back to the host's user.
        if (AppPaths.Outside(realRoot, scriptPath) is { } scriptOut)
            throw new AppConfigException($"{file}: scriptFile \"{LogText.Escape(script)}\" leads outside the app folder " +
                $"(to {LogText.Escape(scriptOut)}); a function's script must be inside its app");
        // entryPoint names no file: the Python worker looks it up as an attribute path in the script's module, the
        // Node worker as an export of the script, so scriptFile is the only file a function.json names.
        var entry = AppJson.GetString(root, "entryPoint", file, "") ?? "";
        var disabled = root.TryGetProperty("disabled", out var d) && (d.ValueKind == JsonValueKind.True ||
            (d.ValueKind == JsonValueKind.String && bool.TryParse(d.GetString(), out var ds) && ds));
        string? disabledBy = disabled ? $"{file}: \"disabled\" is true" : null;
        if (bool.TryParse(settings[$"AzureWebJobs.{name}.Disabled"], out var sd) && sd)
        {
            disabled = true;
            disabledBy = $"the app setting AzureWebJobs.{name}.Disabled is true";
        }
        if (!root.TryGetProperty("bindings", out var bindingsJson) || bindingsJson.ValueKind != JsonValueKind.Array)
            throw new AppConfigException($"{file}: \"bindings\" must be an array");
        var bindings = new List<BindingMetadata>();
        // A binding of a type FaaST does not run disables the function, but the others still load:
        // an HTTP trigger's route then answers with the reason instead of an empty 404.
        string? unsupported = null;
        var i = 0;
        foreach (var b in bindingsJson.EnumerateArray())
        {
            var where = $"bindings[{i++}].";
            var type = TypeOf(b, file, where);
            if (type.Canonical is { } canonical)
                bindings.Add(ParseBinding(b, canonical, file, where, name, settings));
            else
                unsupported ??= $"{file}: {where}type \"{type.Written}\" is not a supported binding (binding \"{NameOf(b)}\"; " +
                    $"supported: {string.Join(", ", BindingMetadata.SupportedTypes)})";
        }
        if (unsupported is null)
            Validate(bindings, file, name);
        var error = unsupported;
        if (error is null && !File.Exists(scriptPath))
            error = $"{file}: scriptFile \"{script}\" does not exist ({scriptPath})";
        return new FunctionDefinition
        {
            Name = name, Directory = folder, ScriptFile = scriptPath, EntryPoint = entry,
            Bindings = bindings, Disabled = disabled, DisabledBy = disabledBy, Error = error, DefinedIn = file,
        };
    }

    /// <summary>A binding's type as written and as FaaST knows it (null when it does not run that type).</summary>
    private static (string Written, string? Canonical) TypeOf(JsonElement b, string file, string where)
    {
        if (b.ValueKind != JsonValueKind.Object)
            throw new AppConfigException($"{file}: {where[..^1]} must be an object");
        var type = AppJson.GetString(b, "type", file, where)
            ?? throw new AppConfigException($"{file}: {where}type is missing");
        return (type, BindingMetadata.SupportedTypes.FirstOrDefault(t => t.Equals(type, StringComparison.OrdinalIgnoreCase)));
    }

    /// <summary>A binding's name for messages: as written, or "(no name)".</summary>
    private static string NameOf(JsonElement b) =>
        b.TryGetProperty("name", out var n) && n.ValueKind == JsonValueKind.String ? LogText.Escape(n.GetString()) : "(no name)";

    private static BindingMetadata ParseBinding(JsonElement b, string canonical, string file, string where, string function, AppSettings settings)
    {
        var name = AppJson.GetString(b, "name", file, where)
            ?? throw new AppConfigException($"{file}: {where}name is missing");
        if (name != BindingMetadata.ReturnName && (name.Length == 0 || !(char.IsLetter(name[0]) || name[0] == '_') ||
            !name.All(c => char.IsLetterOrDigit(c) || c == '_')))
            throw new AppConfigException($"{file}: {where}name \"{name}\" must be an identifier (letters, digits, _) or \"$return\"");
        var directionText = AppJson.GetString(b, "direction", file, where)
            ?? throw new AppConfigException($"{file}: {where}direction is missing (in or out)");
        var direction = directionText.ToLowerInvariant() switch
        {
            "in" => BindingDirection.In,
            "out" => BindingDirection.Out,
            "inout" => BindingDirection.InOut,
            _ => throw new AppConfigException($"{file}: {where}direction \"{directionText}\" must be in, out or inout"),
        };
        var dataType = AppJson.GetString(b, "dataType", file, where)?.ToLowerInvariant() ?? "";
        // "ifMatch" names the blob input whose version conditions this output; what it names is checked with the
        // function's other bindings (Validate).
        var ifMatch = AppJson.GetString(b, "ifMatch", file, where);
        if (ifMatch is not null && (canonical != BindingMetadata.Blob || direction != BindingDirection.Out))
            throw new AppConfigException($"{file}: {where}ifMatch: function '{LogText.Escape(function)}', binding \"{LogText.Escape(name)}\": " +
                $"ifMatch is for a blob output (it names the blob input whose version the output must still find), not a {canonical} binding " +
                $"with direction \"{directionText}\"");
        if (ifMatch is { Length: 0 })
            throw new AppConfigException($"{file}: {where}ifMatch: function '{LogText.Escape(function)}', binding \"{LogText.Escape(name)}\": " +
                "ifMatch must name a blob input binding of this function");
        if (dataType is not ("" or "binary" or "string" or "stream"))
            throw new AppConfigException($"{file}: {where}dataType \"{dataType}\" must be binary, string or stream");
        BindingTemplate? path = null;
        if (canonical is BindingMetadata.Blob or BindingMetadata.BlobTrigger)
        {
            var raw = AppJson.GetString(b, "path", file, where)
                ?? throw new AppConfigException($"{file}: {where}path is missing (\"container/blob\")");
            raw = BindingTemplate.ExpandAppSettings(raw, s => settings[s], $"{file}: {where}path");
            var slash = raw.IndexOf('/');
            if (slash <= 0 || slash == raw.Length - 1)
                throw new AppConfigException($"{file}: {where}path \"{raw}\" must be \"container/blob\"");
            var container = raw[..slash];
            if (container.Contains('{'))
            {
                // Input and output bindings may compute the container; a trigger watches a fixed one.
                if (canonical == BindingMetadata.BlobTrigger)
                    throw new AppConfigException($"{file}: {where}path \"{raw}\": a blobTrigger needs a literal container name");
            }
            else
            {
                try
                {
                    BlobNames.ValidateContainer(container);
                }
                catch (ArgumentException e)
                {
                    throw new AppConfigException($"{file}: {where}path \"{raw}\": {e.Message.Split(" (Parameter", 2)[0]}");
                }
            }
            path = BindingTemplate.Parse(raw, $"{file}: {where}path");
            // A trigger's path captures names from blob names; a property path has nothing to capture into.
            if (canonical == BindingMetadata.BlobTrigger && path.Expressions.FirstOrDefault(e => e.IsPath) is { } dotted)
                throw new AppConfigException(
                    $"{file}: {where}path \"{raw}\": a blobTrigger path captures plain names, not the property path {{{dotted.Text}}}");
        }
        BindingTemplate? queueName = null;
        if (canonical is BindingMetadata.Queue or BindingMetadata.QueueTrigger)
            queueName = ParseQueueName(b, file, where, canonical, settings);
        string? route = null;
        IReadOnlyList<string>? methods = null;
        var authLevel = AuthLevel.Function;
        if (canonical == BindingMetadata.HttpTrigger)
        {
            route = AppJson.GetString(b, "route", file, where)?.Trim('/') ?? function;
            RouteTemplates.Validate(route, file, $"{where}route");
            authLevel = AuthSettings.ParseAuthLevel(AppJson.GetString(b, "authLevel", file, where), file, $"{where}authLevel");
            if (b.TryGetProperty("methods", out var m) && m.ValueKind != JsonValueKind.Null)
            {
                if (m.ValueKind != JsonValueKind.Array || m.EnumerateArray().Any(x => x.ValueKind != JsonValueKind.String))
                    throw new AppConfigException($"{file}: {where}methods must be an array of HTTP method names");
                methods = m.EnumerateArray().Select(x => x.GetString()!.ToUpperInvariant()).ToArray();
                if (methods.Count == 0)
                    methods = null;
            }
        }
        TimerTriggerSettings? timer = null;
        if (canonical == BindingMetadata.TimerTrigger)
        {
            // One validation for every programming model (TimerTriggerSettings); a malformed schedule disables this
            // function only, with a message naming the expression.
            timer = TimerTriggerSettings.Resolve(function, AppJson.GetString(b, "schedule", file, where),
                GetBool(b, "runOnStartup", file, where), GetBool(b, "useMonitor", file, where), s => settings[s], out var timerError);
            if (timer is null)
                throw new AppConfigException($"{file}: {where[..^1]}: {timerError}");
        }
        TableBindingSettings? table = null;
        if (canonical == BindingMetadata.Table)
            table = ParseTable(b, file, where, direction, settings);
        var connection = AppJson.GetString(b, "connection", file, where);
        if (canonical is BindingMetadata.Blob or BindingMetadata.BlobTrigger && !string.IsNullOrEmpty(connection) &&
            StorageAccounts.ConnectionProblem(settings, connection) is { } problem)
            throw new AppConfigException($"{file}: {where}connection: {problem}");
        if (canonical is BindingMetadata.Queue or BindingMetadata.QueueTrigger && !string.IsNullOrEmpty(connection) &&
            StorageAccounts.QueueConnectionProblem(settings, connection) is { } queueProblem)
            throw new AppConfigException($"{file}: {where}connection: {queueProblem}");
        return new BindingMetadata
        {
            Name = name, Type = canonical, Direction = direction, DataType = dataType, Path = path, QueueName = queueName, IfMatch = ifMatch,
            Connection = string.IsNullOrEmpty(connection) ? "AzureWebJobsStorage" : connection,
            Route = route, Methods = methods, AuthLevel = authLevel, Timer = timer, TableSettings = table,
        };
    }

    /// <summary>
    /// A table binding's settings, as Azure's Tables extension names them: tableName (required; letters and digits,
    /// 3-63, not starting with a digit, once its {expressions} resolve), partitionKey and rowKey ({expressions} and
    /// %settings%), filter (an OData filter, %settings% expanded) and take (a positive count) for an input that queries.
    /// </summary>
    private static TableBindingSettings ParseTable(JsonElement b, string file, string where, BindingDirection direction, AppSettings settings)
    {
        BindingTemplate? Template(string key, bool required)
        {
            var raw = AppJson.GetString(b, key, file, where);
            if (raw is null || raw.Length == 0)
                return required ? throw new AppConfigException($"{file}: {where}{key} is missing") : null;
            raw = BindingTemplate.ExpandAppSettings(raw, s => settings[s], $"{file}: {where}{key}");
            return BindingTemplate.Parse(raw, $"{file}: {where}{key}");
        }
        var tableName = Template("tableName", required: true)!;
        if (!tableName.ParameterNames.Any() && TableNameProblem(tableName.Pattern) is { } problem)
            throw new AppConfigException($"{file}: {where}tableName \"{LogText.Escape(tableName.Pattern)}\": {problem}");
        var partitionKey = Template("partitionKey", required: false);
        var rowKey = Template("rowKey", required: false);
        var filter = AppJson.GetString(b, "filter", file, where) is { Length: > 0 } f
            ? BindingTemplate.ExpandAppSettings(f, s => settings[s], $"{file}: {where}filter") : null;
        int? take = null;
        if (b.TryGetProperty("take", out var t) && t.ValueKind != JsonValueKind.Null)
        {
            if (!(t.ValueKind == JsonValueKind.Number && t.TryGetInt32(out var n) || t.ValueKind == JsonValueKind.String && int.TryParse(t.GetString(), out n)) || n < 1)
                throw new AppConfigException($"{file}: {where}take must be a positive whole number, not {LogText.Escape(t.GetRawText())}");
            take = n;
        }
        if (direction == BindingDirection.Out && (filter is not null || take is not null))
            throw new AppConfigException($"{file}: {where}filter and take are for a table input; an output writes entities");
        if (direction == BindingDirection.In && rowKey is not null && partitionKey is null)
            throw new AppConfigException($"{file}: {where}rowKey needs a partitionKey (one entity is read by both keys)");
        return new TableBindingSettings(tableName, partitionKey, rowKey, filter, take);
    }

    /// <summary>Azure's rule for a table name: 3-63 letters and digits, not starting with a digit; null when it keeps it.</summary>
    public static string? TableNameProblem(string name) =>
        name.Length is < 3 or > 63 || !char.IsAsciiLetter(name[0]) || !name.All(char.IsAsciiLetterOrDigit)
            ? "a table name is 3 to 63 letters and digits and starts with a letter" : null;

    /// <summary>An optional boolean property: true/false, or "true"/"false" as some tools write them.</summary>
    private static bool? GetBool(JsonElement b, string name, string file, string where)
    {
        if (!b.TryGetProperty(name, out var v) || v.ValueKind == JsonValueKind.Null)
            return null;
        if (v.ValueKind is JsonValueKind.True or JsonValueKind.False)
            return v.GetBoolean();
        if (v.ValueKind == JsonValueKind.String && bool.TryParse(v.GetString(), out var parsed))
            return parsed;
        throw new AppConfigException($"{file}: {where}{name} must be true or false, not {LogText.Escape(v.GetRawText())}");
    }

    /// <summary>
    /// queueName of a queue binding: %settings% expanded; a trigger's must be a literal, valid queue name (Azure's
    /// rules), an output's may hold {expressions} (checked when they resolve, per invocation).
    /// </summary>
    private static BindingTemplate ParseQueueName(JsonElement b, string file, string where, string type, AppSettings settings)
    {
        var raw = AppJson.GetString(b, "queueName", file, where)
            ?? throw new AppConfigException($"{file}: {where}queueName is missing");
        raw = BindingTemplate.ExpandAppSettings(raw, s => settings[s], $"{file}: {where}queueName");
        var template = BindingTemplate.Parse(raw, $"{file}: {where}queueName");
        if (template.ParameterNames.Any())
        {
            if (type == BindingMetadata.QueueTrigger)
                throw new AppConfigException($"{file}: {where}queueName \"{raw}\": a queueTrigger needs a literal queue name");
            return template;
        }
        // Azure lower-cases a literal queue name.
        var name = raw.ToLowerInvariant();
        if (QueueNames.Problem(name) is { } problem)
            throw new AppConfigException($"{file}: {where}queueName: {problem}");
        return BindingTemplate.Parse(name, $"{file}: {where}queueName");
    }

    private static void Validate(List<BindingMetadata> bindings, string file, string function)
    {
        var triggers = bindings.Where(b => b.IsTrigger).ToList();
        if (triggers.Count != 1)
            throw new AppConfigException($"{file}: a function needs exactly one trigger binding, found {triggers.Count}");
        if (triggers[0].Direction != BindingDirection.In)
            throw new AppConfigException($"{file}: the trigger \"{triggers[0].Name}\" must have direction \"in\"");
        var duplicate = bindings.GroupBy(b => b.Name, StringComparer.OrdinalIgnoreCase).FirstOrDefault(g => g.Count() > 1);
        if (duplicate is not null)
            throw new AppConfigException($"{file}: binding name \"{duplicate.Key}\" is used twice");
        foreach (var b in bindings)
        {
            if (b.Type == BindingMetadata.Http && b.Direction != BindingDirection.Out)
                throw new AppConfigException($"{file}: the http binding \"{b.Name}\" must have direction \"out\"");
            if (b.Type == BindingMetadata.Http && triggers[0].Type != BindingMetadata.HttpTrigger)
                throw new AppConfigException($"{file}: the http output \"{b.Name}\" needs an httpTrigger");
            if (b.Type == BindingMetadata.Queue && b.Direction != BindingDirection.Out)
                throw new AppConfigException($"{file}: the queue binding \"{b.Name}\" must have direction \"out\" (a queueTrigger reads a queue)");
            if (b.Name == BindingMetadata.ReturnName && b.Direction != BindingDirection.Out)
                throw new AppConfigException($"{file}: \"$return\" must have direction \"out\"");
        }
        var outputs = bindings.Where(b => b.Type == BindingMetadata.Http).ToList();
        if (outputs.Count > 1)
            throw new AppConfigException($"{file}: only one http output binding is allowed, found {outputs.Count}");
        foreach (var output in bindings)
        {
            if (output.IfMatch is not { } named)
                continue;
            var what = $"{file}: function '{LogText.Escape(function)}', blob output \"{LogText.Escape(output.Name)}\": ifMatch \"{LogText.Escape(named)}\"";
            var input = bindings.FirstOrDefault(b => b.Name.Equals(named, StringComparison.OrdinalIgnoreCase))
                ?? throw new AppConfigException($"{what} is not a binding of this function (its bindings: " +
                    $"{string.Join(", ", bindings.Select(b => $"\"{LogText.Escape(b.Name)}\""))}); name the blob input whose version the output must still find");
            if (input.Type != BindingMetadata.Blob || input.Direction != BindingDirection.In)
                throw new AppConfigException($"{what} is a {input.Type} binding with direction \"{input.Direction.ToString().ToLowerInvariant()}\"; " +
                    "it must name a blob input (type \"blob\", direction \"in\"), whose version the output must still find");
        }
    }
}
