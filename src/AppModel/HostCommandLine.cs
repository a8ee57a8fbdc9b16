using System.Globalization;

namespace FaaST.AppModel;

/// <summary>
/// The runtime host's command line as `./faast start` takes it (the host process, FaaST.Runtime.dll, and the
/// platform's `start`, which passes part of it on to every instance). Part of the app model so that the platform
/// parses and checks it exactly as the host does without referencing the host.
/// </summary>
public sealed record HostArguments
{
    public required string AppDirectory { get; init; }

    /// <summary>--port: HTTP port for the functions (0 picks a free one); null: local.settings.json's, else 7071.</summary>
    public int? HttpPort { get; init; }

    /// <summary>--listen: the address HTTP listens on; loopback unless asked otherwise.</summary>
    public string ListenAddress { get; init; } = "127.0.0.1";

    /// <summary>--workers: worker processes; null reads FUNCTIONS_WORKER_PROCESS_COUNT (default 1).</summary>
    public int? WorkerProcessCount { get; init; }

    /// <summary>--azurite-data DIR (default APPDIR/.faast/azurite); null with --azurite-in-memory.</summary>
    public string? AzuriteDataDirectory { get; init; }

    /// <summary>--no-cache: false; null leaves faast.json's cache.enabled.</summary>
    public bool? CacheEnabled { get; init; }

    /// <summary>--isolation auto|required|off.</summary>
    public IsolationMode Isolation { get; init; } = IsolationMode.Auto;

    /// <summary>false with --no-peers.</summary>
    public bool Peers { get; init; } = true;

    /// <summary>--peer-port (0: a free one).</summary>
    public int PeerPort { get; init; }

    /// <summary>--peer-listen ADDR; null: <see cref="ListenAddress"/>.</summary>
    public string? PeerListenAddress { get; init; }

    /// <summary>--instance-id ID.</summary>
    public string? InstanceId { get; init; }

    /// <summary>--ready-file PATH (absolute).</summary>
    public string? ReadyFile { get; init; }
}

public static class HostCommandLine
{
    public const string Usage = "usage: faast start APPDIR [--port N] [--listen ADDR] [--workers N] [--azurite-data DIR | --azurite-in-memory] [--no-cache] [--isolation auto|required|off] [--no-peers] [--peer-port N] [--peer-listen ADDR] [--instance-id ID] [--instances N]";

    /// <summary>The functions' HTTP port when neither --port nor local.settings.json's Host.LocalHttpPort says one (Azure Functions Core Tools' too).</summary>
    public const int DefaultHttpPort = 7071;

    /// <summary>"1": the host stops when its standard input ends (its starter, the platform, died). Set by the platform.</summary>
    public const string ExitWithStdinVariable = "FAAST_EXIT_WITH_STDIN";

    /// <summary>Parses the host's arguments (without --instances); throws <see cref="ArgumentException"/> naming the option and what is wrong.</summary>
    public static HostArguments Parse(string[] args)
    {
        string? app = null, listen = null, azuriteData = null;
        int? port = null, workers = null;
        var inMemory = false;
        bool? cache = null;
        var isolation = IsolationMode.Auto;
        var peers = true;
        var peerPort = 0;
        string? peerListen = null, instanceId = null, readyFile = null;
        for (var i = 0; i < args.Length; i++)
        {
            string Value() => i + 1 < args.Length ? args[++i] : throw new ArgumentException($"{args[i]} needs a value");
            int Number(int min, int max)
            {
                var name = args[i];
                var text = Value();
                return int.TryParse(text, NumberStyles.None, CultureInfo.InvariantCulture, out var n) && n >= min && n <= max
                    ? n
                    : throw new ArgumentException($"{name} must be a whole number from {min} to {max}, not \"{text}\"");
            }
            switch (args[i])
            {
                case "--port": port = Number(0, 65535); break;
                case "--listen": listen = Value(); break;
                case "--workers": workers = Number(1, 64); break;
                case "--azurite-data": azuriteData = Value(); break;
                case "--azurite-in-memory": inMemory = true; break;
                case "--no-cache": cache = false; break;
                case "--no-peers": peers = false; break;
                case "--peer-port": peerPort = Number(0, 65535); break;
                case "--peer-listen": peerListen = Value(); break;
                case "--instance-id": instanceId = Value(); break;
                case "--ready-file": readyFile = Path.GetFullPath(Value()); break;
                case "--isolation":
                    var mode = Value();
                    isolation = mode switch
                    {
                        "auto" => IsolationMode.Auto,
                        "required" => IsolationMode.Required,
                        "off" => IsolationMode.Off,
                        _ => throw new ArgumentException($"--isolation must be auto, required or off, not \"{mode}\""),
                    };
                    break;
                case var a when a.StartsWith("--", StringComparison.Ordinal): throw new ArgumentException($"unknown option {a}");
                default:
                    if (app is not null)
                        throw new ArgumentException($"one app directory only (got \"{app}\" and \"{args[i]}\")");
                    app = args[i];
                    break;
            }
        }
        if (app is null)
            throw new ArgumentException("no app directory given");
        if (listen is not null && !System.Net.IPAddress.TryParse(listen, out _))
            throw new ArgumentException($"--listen must be an IP address, not \"{listen}\"");
        if (peerListen is not null && !System.Net.IPAddress.TryParse(peerListen, out _))
            throw new ArgumentException($"--peer-listen must be an IP address, not \"{peerListen}\"");
        var full = Path.GetFullPath(app);
        return new HostArguments
        {
            AppDirectory = full,
            HttpPort = port,
            ListenAddress = listen ?? "127.0.0.1",
            WorkerProcessCount = workers,
            AzuriteDataDirectory = inMemory ? null : azuriteData ?? Path.Combine(full, ".faast", "azurite"),
            CacheEnabled = cache,
            Isolation = isolation,
            Peers = peers,
            PeerPort = peerPort,
            PeerListenAddress = peerListen,
            InstanceId = instanceId,
            ReadyFile = readyFile,
        };
    }

    /// <summary>Removes "--instances N" from the arguments; N is 1 without it.</summary>
    public static (string[] Remaining, int Instances) TakeInstances(string[] args)
    {
        var i = Array.IndexOf(args, "--instances");
        if (i < 0)
            return (args, 1);
        if (i + 1 >= args.Length || !int.TryParse(args[i + 1], NumberStyles.None, CultureInfo.InvariantCulture, out var n) || n is < 1 or > 64)
            throw new ArgumentException($"--instances must be a whole number from 1 to 64, not \"{(i + 1 < args.Length ? args[i + 1] : "")}\"");
        return (args.Take(i).Concat(args.Skip(i + 2)).ToArray(), n);
    }

    /// <summary>
    /// The first port the host would listen on that another process holds, as one line; null when all are free.
    /// Checked: the HTTP port (each instance's, for --instances) and an explicit --peer-port; free ports (0) are not.
    /// </summary>
    /// <param name="environment">What the app's settings are read with (null: this process's environment).</param>
    public static string? PortProblem(HostArguments options, int instances, System.Collections.IDictionary? environment = null)
    {
        var settings = options.HttpPort is null ? AppSettings.Load(options.AppDirectory, environment) : null;
        var (first, source) = options.HttpPort is { } port ? (port, "--port")
            : settings!.LocalHttpPort is { } local ? (local, $"{settings.FilePath} Host.LocalHttpPort")
            : (DefaultHttpPort, "the default");
        var listen = System.Net.IPAddress.Parse(options.ListenAddress);
        for (var i = 0; i < instances && first != 0; i++)
        {
            var what = instances == 1 ? $"HTTP, from {source}" : $"HTTP of instance {i}, from {source} + {i}";
            if (PortCheck.Problem(listen, first + i, what,
                    "stop what listens there, or pass --port N (or set Host.LocalHttpPort in local.settings.json) to use another port") is { } problem)
                return problem;
        }
        if (instances == 1 && options.Peers && options.PeerPort != 0)
            return PortCheck.Problem(System.Net.IPAddress.Parse(options.PeerListenAddress ?? options.ListenAddress), options.PeerPort,
                "peers, from --peer-port", "stop what listens there, or pass another --peer-port (or leave it out for a free one)");
        return null;
    }
}
