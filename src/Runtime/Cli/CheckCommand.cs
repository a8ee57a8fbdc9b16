using System.Collections;
using System.Text.Json;

namespace FaaST.Runtime.Cli;

/// <summary>
/// `FaaST.Runtime.dll check APPDIR [--listen ADDR] [--settings-from-stdin]`: the checks an instance makes as it starts
/// (<see cref="Hosting.StartChecks"/>), without starting anything, for the platform to refuse at deploy what an
/// instance would refuse at start (issue 19, defect 7) by the host's own code and messages, while the platform does
/// not reference the host (issue 20: no executable references another).
/// Prints a JSON array of the problems on standard output (empty: none). Exit 0 when it ran (problems or not),
/// 3 when the app cannot be loaded at all (the message on standard error), 2 for bad arguments.
/// With --settings-from-stdin the settings on top of local.settings.json are a JSON object of strings read from
/// standard input, instead of this process's environment.
/// </summary>
internal static class CheckCommand
{
    public const string Usage = "usage: FaaST.Runtime.dll check APPDIR [--listen ADDR] [--settings-from-stdin] [--index]";

    public static async Task<int> RunAsync(string[] args, TextReader input, TextWriter output, TextWriter error)
    {
        string? app = null;
        var listen = System.Net.IPAddress.Loopback;
        var fromStdin = false;
        var index = false;
        for (var i = 0; i < args.Length; i++)
        {
            switch (args[i])
            {
                case "--listen" when i + 1 < args.Length && System.Net.IPAddress.TryParse(args[i + 1], out var address):
                    listen = address;
                    i++;
                    break;
                case "--settings-from-stdin":
                    fromStdin = true;
                    break;
                case "--index":
                    index = true;
                    break;
                case var a when a.StartsWith("--", StringComparison.Ordinal) || app is not null:
                    await error.WriteLineAsync($"faast: check: unexpected argument {a}");
                    await error.WriteLineAsync(Usage);
                    return 2;
                default:
                    app = args[i];
                    break;
            }
        }
        if (app is null)
        {
            await error.WriteLineAsync("faast: check: no app directory given");
            await error.WriteLineAsync(Usage);
            return 2;
        }
        IDictionary? environment = null;
        if (fromStdin)
        {
            try
            {
                var settings = JsonSerializer.Deserialize<Dictionary<string, string>>(await input.ReadToEndAsync()) ?? [];
                environment = new Hashtable(settings, StringComparer.Ordinal);
            }
            catch (JsonException e)
            {
                await error.WriteLineAsync($"faast: check: standard input is not a JSON object of strings: {e.Message}");
                return 2;
            }
        }
        FunctionApp loaded;
        try
        {
            loaded = FunctionApp.Load(Path.GetFullPath(app), environment);
        }
        catch (AppConfigException e)
        {
            await error.WriteLineAsync($"faast: the app cannot start: {e.Message}");
            return 3;
        }
        var problems = new List<string>(Hosting.StartChecks.Problems(loaded, listen));
        if (index && loaded.IndexedFrom is not null)
            problems.AddRange(await IndexProblemsAsync(loaded, environment, error));
        await output.WriteLineAsync(JsonSerializer.Serialize(problems));
        return 0;
    }

    /// <summary>
    /// --index: what a worker of this Python v2 / Node v4 app declares, validated as an instance validates it
    /// (<see cref="Workers.WorkerIndexer"/>): the indexing error, each function in error, or that none is declared.
    /// The worker runs as the app's own user when this runs as root (--isolation required: a deploy never runs a
    /// tenant's code as root), else as this process's user, as an instance would.
    /// </summary>
    private static async Task<IReadOnlyList<string>> IndexProblemsAsync(FunctionApp app, IDictionary? environment, TextWriter error)
    {
        // Nothing logged: standard output is the JSON answer, and what matters (the worker's error) is in the problems.
        var loggers = Microsoft.Extensions.Logging.Abstractions.NullLoggerFactory.Instance;
        var logger = loggers.CreateLogger("FaaST.Check");
        var options = new Hosting.RuntimeHostOptions
        {
            AppDirectory = app.Directory, Environment = environment,
            Isolation = Environment.IsPrivilegedProcess ? IsolationMode.Required : IsolationMode.Off,
        };
        Hosting.WorkerHostOptions workers;
        try
        {
            workers = Hosting.WorkerHostOptions.Choose(options, app, Hosting.RuntimeHostOptions.FindHome(null), logger);
        }
        catch (AppConfigException e)
        {
            return [$"{app.IndexedFrom}: the app's functions cannot be indexed as its own user: {e.Message}"];
        }
        var indexed = await Workers.WorkerIndexer.IndexAsync(app, Hosting.Components.WorkersComponent.OptionsFor(app, workers), loggers,
            Workers.WorkerIndexer.DefaultTimeout);
        if (indexed.IndexError is { } failed)
            return [failed];
        var problems = indexed.Functions.Where(f => f.Error is not null).Select(f => f.Error!).ToList();
        if (indexed.Functions.Count == 0)
            problems.Add($"{app.IndexedFrom}: declares no function; nothing to deploy");
        await error.FlushAsync();
        return problems;
    }
}
