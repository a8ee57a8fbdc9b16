using FaaST.Runtime.Hosting;

namespace FaaST.Runtime;

/// <summary>faast-host APPDIR [--port N] [--listen ADDR] [--workers N] [--azurite-data DIR | --azurite-in-memory] [--no-cache] [--isolation auto|required|off] [--no-peers] [--peer-port N] [--peer-listen ADDR] [--instance-id ID] [--instances N]</summary>
public static class Program
{
    public const string Usage = HostCommandLine.Usage;

    /// <summary>"1": the host stops when its standard input ends (its starter, the platform, died). Set by the platform.</summary>
    public const string ExitWithStdinVariable = HostCommandLine.ExitWithStdinVariable;

    public static async Task<int> Main(string[] args)
    {
        if (args is ["blob", .. var blobArgs])
        {
            using var cancel = new CancellationTokenSource();
            Console.CancelKeyPress += (_, e) => { e.Cancel = true; cancel.Cancel(); };
            return await Cli.BlobCommand.RunAsync(blobArgs, Console.Out, Console.Error, Console.OpenStandardInput, Console.OpenStandardOutput, cancel.Token);
        }
        if (args is ["check", .. var checkArgs])
            return await Cli.CheckCommand.RunAsync(checkArgs, Console.In, Console.Out, Console.Error);
        if (args.Any(a => a is "-h" or "--help"))
        {
            await Console.Out.WriteLineAsync(Usage);
            return 0;
        }
        HostArguments arguments;
        int instances;
        try
        {
            (args, instances) = HostCommandLine.TakeInstances(args);
            arguments = HostCommandLine.Parse(args);
        }
        catch (ArgumentException e)
        {
            await Console.Error.WriteLineAsync($"faast: {e.Message}");
            await Console.Error.WriteLineAsync(Usage);
            return 2;
        }
        try
        {
            // Before anything starts (Azurite, workers): a port that is taken is one line, not a half-started host.
            if (HostCommandLine.PortProblem(arguments, instances) is { } taken)
            {
                await Console.Error.WriteLineAsync($"faast: {taken}");
                return 4;
            }
        }
        catch (AppConfigException e)
        {
            await Console.Error.WriteLineAsync($"faast: the app cannot start: {e.Message}");
            return 3;
        }

        var options = OptionsOf(arguments);
        using var stop = new CancellationTokenSource();
        using var signals = StopSignals.Register(stop);

        // An instance whose platform owns its storage (the Azurite it started) must not outlive the platform, even a
        // SIGKILLed one: the platform holds the write end of this process's stdin, the kernel closes it when the
        // platform dies, and end-of-file stops the host as SIGTERM would (the trick Azurite's guard uses).
        if (Environment.GetEnvironmentVariable(ExitWithStdinVariable) == "1")
            _ = Task.Run(async () =>
            {
                var buffer = new byte[64];
                using var input = Console.OpenStandardInput();
                try
                {
                    while (await input.ReadAsync(buffer) > 0)
                    {
                    }
                }
                catch (IOException)
                {
                    // a broken pipe is an end too
                }
                try
                {
                    stop.Cancel();
                }
                catch (ObjectDisposedException)
                {
                }
            });

        // A drain the scale controller sent ends like SIGTERM: the host stops and the process exits 0.
        options = options with
        {
            StopRequested = () =>
            {
                try
                {
                    stop.Cancel();
                }
                catch (ObjectDisposedException)
                {
                    // already past the host's life
                }
            },
        };

        if (instances > 1)
        {
            try
            {
                return await RunGroupAsync(args, options, instances, stop.Token);
            }
            catch (AppConfigException e)
            {
                // The group loads the app first; a bad app is the same start-up error as for one instance.
                await Console.Error.WriteLineAsync($"faast: the app cannot start: {e.Message}");
                return 3;
            }
        }

        RuntimeHost host;
        try
        {
            host = await RuntimeHost.StartAsync(options, stop.Token);
        }
        catch (AppConfigException e)
        {
            await Console.Error.WriteLineAsync($"faast: the app cannot start: {e.Message}");
            return 3;
        }
        catch (OperationCanceledException)
        {
            return 130;
        }
        catch (IOException e) when (e.InnerException is Microsoft.AspNetCore.Connections.AddressInUseException || e.Message.Contains("address already in use", StringComparison.OrdinalIgnoreCase))
        {
            // Taken between the check above and Kestrel's bind: still one line (the message's first).
            await Console.Error.WriteLineAsync($"faast: {e.Message.Split('\n', 2)[0].TrimEnd()}; pass --port to use another port");
            return 4;
        }
        await using (host)
        {
            try
            {
                await Task.Delay(Timeout.Infinite, stop.Token);
            }
            catch (OperationCanceledException)
            {
                await Console.Error.WriteLineAsync("faast: stopping");
            }
        }
        return 0;
    }

    /// <summary>
    /// ./faast start APP --instances N: N runtime host processes of the app on consecutive ports, sharing
    /// one storage (the app's, or an Azurite this process starts), until Ctrl-C or SIGTERM.
    /// </summary>
    private static async Task<int> RunGroupAsync(string[] args, RuntimeHostOptions options, int instances, CancellationToken stop)
    {
        var app = FunctionApp.Load(options.AppDirectory, options.Environment);
        FaaST.Storage.AzuriteProcess? azurite = null;
        DevelopmentStorageFile? published = null;
        var storage = app.Settings["AzureWebJobsStorage"];
        var development = new Dictionary<string, string>();
        if (StorageAccounts.UsesDevelopmentStorage(app.Settings))
        {
            // The instances get this Azurite's (private) key, so they cannot tell it is development storage: check here.
            if (options.Peers)
                PeerSecret.CheckExposure(app, developmentStorage: StorageAccounts.NeedsDevelopmentStorage(app.Settings), options.ListenAddress,
                    options.PeerListenAddress ?? options.ListenAddress);
            var account = options.AzuriteDataDirectory is null ? FaaST.Storage.AzuriteAccount.Generate()
                : FaaST.Storage.AzuriteAccount.LoadOrCreate(Path.Combine(app.Directory, ".faast", "azurite-account"));
            azurite = await FaaST.Storage.AzuriteProcess.StartAsync(RuntimeHostOptions.FindHome(options.HomeDirectory), ct: stop,
                dataDirectory: options.AzuriteDataDirectory, account: account, queues: true);
            // Every development-storage setting of every instance (named connections too) reaches this one Azurite.
            if (StorageAccounts.NeedsDevelopmentStorage(app.Settings))
                storage = azurite.ConnectionString;
            development[StorageAccounts.DevelopmentStorageVariable] = azurite.ConnectionString;
            await Console.Error.WriteLineAsync($"faast: Azurite for the instances at {azurite.BlobEndpoint}");
            try
            {
                published = DevelopmentStorageFile.Publish(app.Directory, azurite.ConnectionString);
            }
            catch (Exception e) when (e is IOException or UnauthorizedAccessException)
            {
                await Console.Error.WriteLineAsync($"faast: cannot write {DevelopmentStorageFile.PathOf(app.Directory)}, so `./faast blob` cannot find this Azurite: {e.Message}");
            }
        }
        // Every instance gets the same arguments, but its own port.
        var shared = new List<string>();
        for (var i = 0; i < args.Length; i++)
        {
            if (args[i] is "--port" or "--peer-port" or "--instance-id" or "--ready-file")
                i++;
            else if (args[i] != options.AppDirectory && Path.GetFullPath(args[i]) != options.AppDirectory)
                shared.Add(args[i]);
        }
        try
        {
            await using var group = await InstanceGroup.StartAsync(new InstanceGroupOptions
            {
                AppDirectory = options.AppDirectory,
                Count = instances,
                StorageConnectionString = storage!,
                Environment = development,
                Arguments = shared,
                FirstPort = options.HttpPort ?? app.Settings.LocalHttpPort ?? 7071,
                Output = Console.WriteLine,
            }, stop);
            foreach (var i in group.Instances)
                await Console.Error.WriteLineAsync($"faast: instance {i.Index}: {i.BaseAddress} (id {i.Id}, peers at {i.PeerAddress}, pid {i.Process.Id})");
            try
            {
                await Task.Delay(Timeout.Infinite, stop);
            }
            catch (OperationCanceledException)
            {
                await Console.Error.WriteLineAsync("faast: stopping the instances");
            }
            return 0;
        }
        catch (Exception e) when (e is InvalidOperationException or TimeoutException)
        {
            await Console.Error.WriteLineAsync($"faast: {e.Message}");
            return 5;
        }
        finally
        {
            published?.Dispose();
            if (azurite is not null)
                await azurite.DisposeAsync();
        }
    }

    /// <summary>The host's options as its command line gives them (tests parse with this too).</summary>
    internal static RuntimeHostOptions ParseArguments(string[] args) => OptionsOf(HostCommandLine.Parse(args));

    private static RuntimeHostOptions OptionsOf(HostArguments a) => new()
    {
        AppDirectory = a.AppDirectory,
        HttpPort = a.HttpPort,
        ListenAddress = a.ListenAddress,
        WorkerProcessCount = a.WorkerProcessCount,
        AzuriteDataDirectory = a.AzuriteDataDirectory,
        CacheEnabled = a.CacheEnabled,
        Isolation = a.Isolation,
        Peers = a.Peers,
        PeerPort = a.PeerPort,
        PeerListenAddress = a.PeerListenAddress,
        InstanceId = a.InstanceId,
        ReadyFile = a.ReadyFile,
    };
}
