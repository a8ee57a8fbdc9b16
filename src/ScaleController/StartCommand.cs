using System.Globalization;
using FaaST.ScaleController.Platform;
using FaaST.Storage;

namespace FaaST.ScaleController;

/// <summary>`./faast start APPDIR` and `./faast platform`: the platform process until Ctrl-C or SIGTERM.</summary>
internal static class StartCommand
{
    /// <summary>Options of `start` that every instance gets as they are (the rest are the frontend's or the platform's).</summary>
    private static readonly HashSet<string> InstanceFlags = ["--no-cache", "--no-peers"];

    private static readonly HashSet<string> InstanceOptions = ["--workers", "--isolation", "--peer-listen"];

    /// <summary>
    /// ./faast start APPDIR [the host's options]: the frontend on the app's HTTP port (the same URLs as one host
    /// before), the app deployed from the folder, its first instance(s) (--instances N, default the policy's
    /// minInstances), the scale controller. Exit codes as before: 2 bad arguments, 3 a bad app, 4 a taken port.
    /// </summary>
    public static async Task<int> RunAsync(string[] args, CancellationToken stop)
    {
        if (args.Any(a => a is "-h" or "--help"))
        {
            await Console.Out.WriteLineAsync(HostCommandLine.Usage);
            return 0;
        }
        HostArguments options;
        int instances;
        var instancesGiven = args.Contains("--instances");
        try
        {
            (var rest, instances) = HostCommandLine.TakeInstances(args);
            options = HostCommandLine.Parse(rest);
        }
        catch (ArgumentException e)
        {
            return await Program.UsageErrorAsync(e.Message, HostCommandLine.Usage);
        }
        FunctionApp app;
        try
        {
            // Before anything starts (Azurite, instances): a taken port is one line, not a half-started platform.
            if (HostCommandLine.PortProblem(options with { Peers = false }, 1) is { } taken)
            {
                await Console.Error.WriteLineAsync($"faast: {taken}");
                return 4;
            }
            app = FunctionApp.Load(options.AppDirectory);
            FaaST.Policy.CachePolicyFile.Load(options.AppDirectory);
        }
        catch (Exception e) when (e is AppConfigException or FaaST.Policy.PolicyFileException)
        {
            await Console.Error.WriteLineAsync($"faast: the app cannot start: {e.Message}");
            return 3;
        }

        var arguments = new List<string>();
        for (var i = 0; i < args.Length; i++)
        {
            if (InstanceFlags.Contains(args[i]))
                arguments.Add(args[i]);
            else if (InstanceOptions.Contains(args[i]) && i + 1 < args.Length)
                arguments.AddRange([args[i], args[++i]]);
        }
        var port = options.HttpPort ?? app.Settings.LocalHttpPort ?? HostCommandLine.DefaultHttpPort;
        var stateDirectory = StartStateDirectory(app);
        await using var storage = await StorageFor(app, options.AzuriteDataDirectory, stateDirectory, stop);
        if (storage is null)
            return 3;
        try
        {
            await using var platform = await PlatformHost.StartAsync(new PlatformOptions
            {
                ListenAddress = options.ListenAddress,
                Port = port,
                StateDirectory = stateDirectory,
                StorageConnectionString = storage.ConnectionString,
                DevelopmentStorage = storage.Development,
                // The app's own Azurite keeps its data in APP/.faast (delete it to start from empty storage), as the bare
                // host did, and is published there for `./faast blob`.
                AppStorage = _ => new AppStorageLocation(options.AzuriteDataDirectory,
                    Path.Combine(app.Directory, ".faast", "azurite-account"), PublishTo: app.Directory),
                InstanceArguments = arguments,
                SingleApp = app.Name,
                InitialInstances = instancesGiven ? instances : null,
                FlashDeviceProfile = FittedFlashProfile(),
            }, ct: stop);
            await platform.DeployDirectoryAsync(app.Directory, instancesGiven ? instances : null, stop);
            await Console.Error.WriteLineAsync($"faast: {app.Name} is served at {platform.Address} (platform status: {new Uri(platform.Address, "admin/platform")})");
            try
            {
                await Task.Delay(Timeout.Infinite, stop);
            }
            catch (OperationCanceledException)
            {
                await Console.Error.WriteLineAsync("faast: stopping");
            }
            return 0;
        }
        catch (OperationCanceledException) when (stop.IsCancellationRequested)
        {
            return 130;
        }
        catch (IOException e) when (e.InnerException is Microsoft.AspNetCore.Connections.AddressInUseException || e.Message.Contains("address already in use", StringComparison.OrdinalIgnoreCase))
        {
            await Console.Error.WriteLineAsync($"faast: {e.Message.Split('\n', 2)[0].TrimEnd()}; pass --port to use another port");
            return 4;
        }
        catch (Providers.InstanceStartException e)
        {
            await Console.Error.WriteLineAsync($"faast: the app cannot start: {e.Message}");
            return 3;
        }
        catch (AppStorageException e)
        {
            // Its Azurite's data is the app's own (APP/.faast/azurite): one line naming it, not a stack trace.
            await Console.Error.WriteLineAsync($"faast: the app cannot start: {e.Message}");
            return 3;
        }
        catch (Exception e) when (e is StorageUnavailableException or BlobStorageException)
        {
            // The app's own account (AzureWebJobsStorage) holds the platform's deployments: one line, not a stack trace.
            await Console.Error.WriteLineAsync($"faast: the app cannot start: its storage (AzureWebJobsStorage in {app.Settings.FilePath}) failed: {LogText.Escape(e.Message)}");
            return 5;
        }
    }

    /// <summary>
    /// Where `./faast start APP` extracts the app's packages: under the checkout's .faast (0755), not APP/.faast,
    /// which the runtime keeps 0700 (its peer secret, Azurite's data): the app's worker user must be able to read
    /// the extracted app, as it reads the app's own folder. One folder per app folder (a short hash of its path),
    /// so two apps of the same name in different folders never share an extraction.
    /// </summary>
    /// <summary>FAAST_HOME/.faast/flash/device-profile.json when `./faast flash fit` wrote it (its default --out): the
    /// disk this machine's flash server runs on, measured once, so the platform's server prices writes as the disk does
    /// (<see cref="PlatformOptions.FlashDeviceProfile"/>); null otherwise.</summary>
    private static string? FittedFlashProfile()
    {
        var path = Path.Combine(FaaSTHome.Find(), ".faast", "flash", "device-profile.json");
        return File.Exists(path) ? path : null;
    }

    private static string StartStateDirectory(FunctionApp app)
    {
        var hash = Convert.ToHexStringLower(System.Security.Cryptography.SHA256.HashData(System.Text.Encoding.UTF8.GetBytes(app.Directory)))[..8];
        return Path.Combine(FaaSTHome.Find(), ".faast", "platform", $"start-{app.Name}-{hash}");
    }

    public const string PlatformUsage = Program.PlatformUsage;

    /// <summary>./faast platform: an empty platform serving the apps deployed to it (and those already in its storage).</summary>
    public static async Task<int> RunPlatformAsync(string[] args, CancellationToken stop)
    {
        if (args.Any(a => a is "-h" or "--help"))
        {
            await Console.Out.WriteLineAsync(PlatformUsage);
            return 0;
        }
        var port = 7071;
        var controlPort = 0;
        var listen = "127.0.0.1";
        var controlListen = "127.0.0.1";
        string? state = null, azuriteData = null, masterKeyFile = null, tlsCert = null, tlsKey = null, clientCa = null;
        var adminHosts = new List<string>();
        var inMemory = false;
        var arguments = new List<string>();
        var defaults = new PlatformOptions { StateDirectory = "", StorageConnectionString = "" };
        int maxInstances = defaults.MaxInstances, maxWorkers = defaults.MaxWorkers;
        for (var i = 0; i < args.Length; i++)
        {
            string? Value() => i + 1 < args.Length ? args[++i] : null;
            switch (args[i])
            {
                case "--port" or "--control-port":
                    var name = args[i];
                    var text = Value();
                    if (!int.TryParse(text, NumberStyles.None, CultureInfo.InvariantCulture, out var n) || n > 65535)
                        return await Program.UsageErrorAsync($"{name} must be a whole number from 0 to 65535, not \"{text}\"", PlatformUsage);
                    if (name == "--port")
                        port = n;
                    else
                        controlPort = n;
                    break;
                case "--listen":
                    listen = Value() ?? "";
                    if (!System.Net.IPAddress.TryParse(listen, out _))
                        return await Program.UsageErrorAsync($"--listen must be an IP address, not \"{listen}\"", PlatformUsage);
                    break;
                case "--control-listen":
                    controlListen = Value() ?? "";
                    if (!System.Net.IPAddress.TryParse(controlListen, out _))
                        return await Program.UsageErrorAsync($"--control-listen must be an IP address, not \"{controlListen}\"", PlatformUsage);
                    break;
                case "--admin-host" or "--master-key-file" or "--control-tls-cert" or "--control-tls-key" or "--control-client-ca":
                    var flag = args[i];
                    if (Value() is not { Length: > 0 } given)
                        return await Program.UsageErrorAsync($"{flag} needs a value", PlatformUsage);
                    switch (flag)
                    {
                        case "--admin-host": adminHosts.Add(given); break;
                        case "--master-key-file": masterKeyFile = Path.GetFullPath(given); break;
                        case "--control-tls-cert": tlsCert = Path.GetFullPath(given); break;
                        case "--control-tls-key": tlsKey = Path.GetFullPath(given); break;
                        default: clientCa = Path.GetFullPath(given); break;
                    }
                    break;
                case "--max-instances" or "--max-workers":
                    var limit = args[i];
                    var count = Value();
                    if (!int.TryParse(count, NumberStyles.None, CultureInfo.InvariantCulture, out var most) || most is < 1 or > 100_000)
                        return await Program.UsageErrorAsync($"{limit} must be a whole number from 1 to 100000, not \"{count}\"", PlatformUsage);
                    if (limit == "--max-instances")
                        maxInstances = most;
                    else
                        maxWorkers = most;
                    break;
                case "--state": state = Value(); break;
                case "--azurite-data": azuriteData = Value(); break;
                case "--azurite-in-memory": inMemory = true; break;
                case "--no-cache": arguments.Add("--no-cache"); break;
                case "--workers" or "--isolation":
                    var option = args[i];
                    arguments.AddRange([option, Value() ?? ""]);
                    break;
                default:
                    return await Program.UsageErrorAsync($"unknown argument {args[i]}", PlatformUsage);
            }
        }
        state = Path.GetFullPath(state ?? Path.Combine(FaaSTHome.Find(), ".faast", "platform"));
        var options = new PlatformOptions
        {
            ListenAddress = listen,
            Port = port,
            ControlPort = controlPort,
            ControlListenAddress = controlListen,
            ControlTlsCertificateFile = tlsCert,
            ControlTlsKeyFile = tlsKey,
            ControlClientCaFile = clientCa,
            MasterKeyFile = masterKeyFile,
            AllowedAdminHosts = adminHosts,
            StateDirectory = state,
            StorageConnectionString = "",
            InstanceArguments = arguments,
            FlashDeviceProfile = FittedFlashProfile(),
        };
        try
        {
            // Before Azurite starts: a control port beyond loopback without TLS, or an unreadable certificate, is one line.
            ControlTls.Load(options);
        }
        catch (ArgumentException e)
        {
            return await Program.UsageErrorAsync(e.Message, PlatformUsage);
        }
        if (Cli.PortCheckProblem(listen, port) is { } taken)
        {
            await Console.Error.WriteLineAsync($"faast: {taken}");
            return 4;
        }
        await using var storage = await PlatformStorage.StartAsync(
            Environment.GetEnvironmentVariable("AzureWebJobsStorage") is { Length: > 0 } own && !own.Contains("UseDevelopmentStorage", StringComparison.OrdinalIgnoreCase) ? own : null,
            inMemory ? null : azuriteData ?? Path.Combine(state, "azurite"), stop);
        PlatformHost platformHost;
        try
        {
            platformHost = await PlatformHost.StartAsync(options with
            {
                StorageConnectionString = storage.ConnectionString,
                DevelopmentStorage = storage.Development,
                AppStorageInMemory = inMemory,
                MaxInstances = maxInstances,
                MaxWorkers = maxWorkers,
            }, ct: stop);
        }
        catch (InvalidDataException e)
        {
            // A key file that holds no usable key (PlatformKeys names it).
            await Console.Error.WriteLineAsync($"faast: the platform cannot start: {e.Message}");
            return 2;
        }
        catch (AppConfigException e)
        {
            // A bad OTEL_* variable of the platform's own telemetry: one line naming it.
            await Console.Error.WriteLineAsync($"faast: the platform cannot start: {e.Message}");
            return 2;
        }
        catch (Exception e) when (e is StorageUnavailableException or BlobStorageException)
        {
            // Its deployments and records live there: without them it would serve nothing it should. One line (the
            // message names the endpoint, never the key) and an exit an orchestrator restarts, not a stack trace.
            await Console.Error.WriteLineAsync($"faast: the platform cannot start: its storage (AzureWebJobsStorage) failed: {LogText.Escape(e.Message)}");
            return 5;
        }
        await using var platform = platformHost;
        await Console.Error.WriteLineAsync($"faast: platform at {platform.Address} with {platform.Apps.Count} app(s); deploy with ./faast deploy APPDIR --platform {platform.Address}");
        try
        {
            await Task.Delay(Timeout.Infinite, stop);
        }
        catch (OperationCanceledException)
        {
            await Console.Error.WriteLineAsync("faast: stopping");
        }
        return 0;
    }

    /// <summary>
    /// The platform's own storage for `./faast start APP` (faast-deployments): the app's account when it has one, else an
    /// Azurite of the platform's own (under the start state folder, or in memory with --azurite-in-memory) — never the
    /// app's Azurite, which the platform starts apart (<see cref="AppStorage"/>) and whose key is all the app gets.
    /// </summary>
    private static async Task<PlatformStorage?> StorageFor(FunctionApp app, string? azuriteData, string stateDirectory, CancellationToken stop)
    {
        if (!StorageAccounts.NeedsDevelopmentStorage(app.Settings))
        {
            if (app.Settings["AzureWebJobsStorage"] is not { Length: > 0 } own)
            {
                await Console.Error.WriteLineAsync($"faast: the app cannot start: the platform keeps its deployments in the app's storage and needs AzureWebJobsStorage as a connection string ({app.Settings.FilePath}); identity-based connections are not supported by the platform yet");
                return null;
            }
            return await PlatformStorage.StartAsync(own, null, stop);
        }
        return await PlatformStorage.StartAsync(null, azuriteData is null ? null : Path.Combine(stateDirectory, "azurite"), stop,
            Path.Combine(stateDirectory, "azurite-account"));
    }
}

/// <summary>A port check shared by `platform` (the host's own is in the runtime).</summary>
internal static class Cli
{
    public static string? PortCheckProblem(string listen, int port) => port == 0 ? null
        : PortCheck.Problem(System.Net.IPAddress.Parse(listen), port, "the platform, from --port", "stop what listens there, or pass --port N to use another port");
}

/// <summary>The platform's own storage: a connection string given, or an Azurite it started (and stops); never an app's.</summary>
internal sealed class PlatformStorage : IAsyncDisposable
{
    private AzuriteProcess? _azurite;

    public required string ConnectionString { get; init; }

    public bool Development => _azurite is not null;

    public static async Task<PlatformStorage> StartAsync(string? connectionString, string? azuriteData, CancellationToken ct, string? accountFile = null)
    {
        if (connectionString is not null)
            return new PlatformStorage { ConnectionString = connectionString };
        var account = azuriteData is null ? AzuriteAccount.Generate()
            : AzuriteAccount.LoadOrCreate(accountFile ?? Path.Combine(azuriteData, "..", "azurite-account"));
        var azurite = await AzuriteProcess.StartAsync(FaaSTHome.Find(), ct: ct, dataDirectory: azuriteData, account: account);
        await Console.Error.WriteLineAsync($"faast: Azurite for the platform at {azurite.BlobEndpoint}");
        return new PlatformStorage { ConnectionString = azurite.ConnectionString, _azurite = azurite };
    }

    public async ValueTask DisposeAsync()
    {
        if (_azurite is not null)
            await _azurite.DisposeAsync();
    }
}
