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
    public const string Usage = "usage: FaaST.Runtime.dll check APPDIR [--listen ADDR] [--settings-from-stdin]";

    public static async Task<int> RunAsync(string[] args, TextReader input, TextWriter output, TextWriter error)
    {
        string? app = null;
        var listen = System.Net.IPAddress.Loopback;
        var fromStdin = false;
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
        await output.WriteLineAsync(JsonSerializer.Serialize(Hosting.StartChecks.Problems(loaded, listen)));
        return 0;
    }
}
