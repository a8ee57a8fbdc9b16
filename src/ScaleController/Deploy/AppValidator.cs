using System.Collections;
using System.Text.RegularExpressions;
using FaaST.Policy;

namespace FaaST.ScaleController.Deploy;

/// <summary>An app that passed <see cref="AppValidator.Validate"/>: what the runtime will load from it.</summary>
public sealed record ValidatedApp
{
    /// <summary>The app's name: its folder's name, as the runtime names it.</summary>
    public required string Name { get; init; }

    /// <summary>python or node.</summary>
    public required string WorkerRuntime { get; init; }

    /// <summary>The functions' names (folders with a function.json that host.json lets load), in load order; empty for a
    /// worker-indexed app (<see cref="IndexedFrom"/>), whose functions the runtime's check finds by asking a worker.</summary>
    public required IReadOnlyList<string> Functions { get; init; }

    /// <summary>The file that declares the functions of a Python v2 / Node v4 app (no function.json); null otherwise.</summary>
    public string? IndexedFrom { get; init; }

    /// <summary>faast.json's cache policy (its defaults without the file).</summary>
    public required CachePolicy Policy { get; init; }

    /// <summary>The app model as the runtime loads it.</summary>
    public required FunctionApp App { get; init; }

    /// <summary>What the runtime would only warn about (host.json names a function the app does not have).</summary>
    public IReadOnlyList<string> Warnings { get; init; } = [];
}

/// <summary>
/// Checks an app folder the way the runtime reads it, before a deploy changes anything (issue 13, item 2). It uses the
/// runtime's own loaders (<see cref="HostConfig"/>, <see cref="AppSettings"/>, <see cref="FunctionApp"/>,
/// <see cref="CachePolicyFile"/>), so a deploy accepts exactly what an instance would start, with one difference:
/// a function the runtime would load in error and leave unserved (a bad function.json, a missing script, a route
/// conflict) refuses the deploy here. A function disabled on purpose ("disabled": true, or the
/// AzureWebJobs.NAME.Disabled setting) is not an error.
/// </summary>
public static partial class AppValidator
{
    private const string HostJson = "host.json";
    private const string SettingsJson = "local.settings.json";
    private const string FunctionJson = "function.json";

    // The top-level keys each runtime file knows, so that the first word of a message is taken for a key only when
    // it is one ("version \"1.0\" is not supported" names version; "the top level must be..." names none).
    private static readonly Dictionary<string, string[]> KnownKeys = new(StringComparer.Ordinal)
    {
        [HostJson] = ["version", "functionTimeout", "functions", "extensions"],
        [SettingsJson] = ["Values", "Host", "IsEncrypted"],
        [FunctionJson] = ["scriptFile", "entryPoint", "bindings", "disabled", "functionDirectory"],
    };

    /// <summary>
    /// Validates the app in <paramref name="appDirectory"/> with the settings the runtime would see: local.settings.json
    /// overridden by <paramref name="environment"/> (null: this process's environment, which the platform's local
    /// instances inherit). Throws <see cref="DeployValidationException"/> listing every bad file.
    /// </summary>
    public static ValidatedApp Validate(string appDirectory, IReadOnlyDictionary<string, string>? environment = null)
    {
        ArgumentNullException.ThrowIfNull(appDirectory);
        var dir = Path.TrimEndingDirectorySeparator(Path.GetFullPath(appDirectory));
        if (!Directory.Exists(dir))
            throw new DeployValidationException([new DeployProblem(".", null, $"{dir} is not a directory")]);
        IDictionary env = environment is null
            ? Environment.GetEnvironmentVariables()
            : new Hashtable(environment.ToDictionary(p => p.Key, p => p.Value), StringComparer.Ordinal);

        var problems = new List<DeployProblem>();
        HostConfig? host = null;
        try
        {
            host = HostConfig.Load(dir);
        }
        catch (AppConfigException e)
        {
            problems.Add(FromMessage(dir, HostJson, e.Message));
        }

        var settingsValid = false;
        try
        {
            AppSettings.Load(dir, env);
            settingsValid = true;
        }
        catch (AppConfigException e)
        {
            problems.Add(FromMessage(dir, SettingsJson, e.Message));
        }

        CachePolicy? policy = null;
        try
        {
            policy = CachePolicyFile.Load(dir);
        }
        catch (PolicyFileException e)
        {
            problems.Add(new DeployProblem(CachePolicyFile.FileName, e.KeyPath, Relative(dir, e.Reason)));
        }

        FunctionApp? app = null;
        if (host is not null && settingsValid)
        {
            try
            {
                app = FunctionApp.Load(dir, env);
            }
            catch (AppConfigException e)
            {
                // What Load checks beyond the two files: the storage connection, the worker runtime (settings).
                problems.Add(FromMessage(dir, SettingsJson, e.Message));
            }
        }

        if (app is not null)
        {
            foreach (var f in app.Functions.Where(f => f.Error is not null))
                problems.Add(FromMessage(dir, f.Name + "/" + FunctionJson, f.Error!));
            // A worker-indexed app's functions are checked by the runtime's check, which asks a worker (RuntimeChecks).
            if (app.Functions.Count == 0 && app.IndexedFrom is null)
                problems.Add(host!.Functions is null
                    ? new DeployProblem(".", null, "the app has no function (a folder with a function.json); nothing to deploy")
                    : new DeployProblem(HostJson, "functions", "lets no function of this app load; nothing to deploy"));
        }

        // Issue 19, defect 2: nothing in the app may lead out of it. The runtime refuses a function whose folder,
        // function.json or scriptFile does (above, through FunctionApp); a link anywhere else in the app that leads
        // out is refused too, after the functions' problems: the host or a later function.json could follow it.
        problems.AddRange(LinksLeadingOut(dir));
        if (problems.Count > 0)
            throw new DeployValidationException(problems);
        return new ValidatedApp
        {
            Name = app!.Name,
            WorkerRuntime = app.WorkerRuntime,
            Functions = app.Functions.Select(f => f.Name).ToList(),
            IndexedFrom = app.IndexedFrom,
            Policy = policy!,
            App = app,
            Warnings = app.Warnings.Select(w => Relative(dir, w)).ToList(),
        };
    }

    /// <summary>Every symbolic link under <paramref name="dir"/> whose real target is outside it (or a cycle), as a problem
    /// naming the link. Links are not followed while walking, so a link to a folder is judged, never entered.</summary>
    internal static List<DeployProblem> LinksLeadingOut(string dir)
    {
        var realRoot = AppPaths.RealPath(dir);
        var problems = new List<DeployProblem>();
        var pending = new Stack<string>();
        pending.Push(dir);
        while (pending.Count > 0)
        {
            IEnumerable<FileSystemInfo> entries;
            try
            {
                entries = new DirectoryInfo(pending.Pop()).EnumerateFileSystemInfos().ToList();
            }
            catch (Exception e) when (e is IOException or UnauthorizedAccessException)
            {
                continue; // an unreadable folder is the runtime's problem to report, not a link
            }
            foreach (var entry in entries)
            {
                if (entry.LinkTarget is not null)
                {
                    if (AppPaths.Outside(realRoot, entry.FullName) is { } outside)
                        problems.Add(new DeployProblem(Path.GetRelativePath(dir, entry.FullName).Replace(Path.DirectorySeparatorChar, '/'), null,
                            $"is a symbolic link leading outside the app folder (to {LogText.Escape(outside)}); an app holds only its own files"));
                }
                else if (entry is DirectoryInfo)
                {
                    pending.Push(entry.FullName);
                }
            }
        }
        problems.Sort((a, b) => string.CompareOrdinal(a.File, b.File));
        return problems;
    }

    /// <summary>
    /// A runtime message ("/abs/app/Hello/function.json: bindings[0].type \"x\" is not a supported binding") as file,
    /// key and reason. The file is the one the message starts with, relative to the app; when the message starts with
    /// none (a setting from the environment), <paramref name="file"/>. The key is the message's first word when it is
    /// a key path (has '.' or '[') or one of the file's top-level keys; the rest is the reason.
    /// </summary>
    internal static DeployProblem FromMessage(string dir, string file, string message)
    {
        var rest = message;
        var prefix = dir + Path.DirectorySeparatorChar;
        if (message.StartsWith(prefix, StringComparison.Ordinal) && message.IndexOf(": ", prefix.Length, StringComparison.Ordinal) is var colon and > 0)
        {
            file = message[prefix.Length..colon].Replace(Path.DirectorySeparatorChar, '/');
            rest = message[(colon + 2)..];
        }

        rest = Relative(dir, rest);
        var match = LeadingKey().Match(rest);
        if (match.Success)
        {
            var key = match.Groups["key"].Value;
            var known = KnownKeys.TryGetValue(Path.GetFileName(file), out var keys) && keys.Contains(key, StringComparer.Ordinal);
            if (known || key.Contains('.', StringComparison.Ordinal) || key.Contains('[', StringComparison.Ordinal))
            {
                var reason = rest[match.Length..].TrimStart(':', ' ');
                return new DeployProblem(file, key, reason.Length == 0 ? rest : reason);
            }
        }

        return new DeployProblem(file, null, rest);
    }

    /// <summary>Paths inside the app shown relative to it: an upload's temporary folder means nothing to the deployer.</summary>
    private static string Relative(string dir, string text) =>
        text.Replace(dir + Path.DirectorySeparatorChar, "", StringComparison.Ordinal);

    // A key path at the start: name, "name", name.sub, bindings[0].type; followed by a space, a colon or the end.
    [GeneratedRegex("""^"?(?<key>[A-Za-z_$][A-Za-z0-9_$]*(?:\[\d+\])?(?:\.[A-Za-z0-9_$]+(?:\[\d+\])?)*)"?(?=[ :;,]|$)""", RegexOptions.CultureInvariant)]
    private static partial Regex LeadingKey();
}
