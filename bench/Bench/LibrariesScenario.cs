using System.Diagnostics;
using System.CommandLine;
using System.Globalization;
using Azure.Storage;
using Azure.Storage.Blobs.Models;
using Azure.Storage.Blobs.Specialized;
using FaaST.Storage;

namespace FaaST.Bench;

/// <summary>
/// `bench libs blob|cli|histogram`: the side-by-side runs behind docs/libraries.md (issue 20, "hand-written where a
/// maintained library fits"). Every comparison alternates A and B rounds in one run, since the machine is shared.
/// </summary>
internal static class LibrariesScenario
{
    public static async Task<int> RunAsync(string home, string[] args)
    {
        var what = args.Length > 1 ? args[1] : "";
        switch (what)
        {
            case "histogram": LatencySample.Accuracy(); return 0;
            case "blob": await BlobAsync(home, args.Skip(2).Select(a => int.Parse(a, CultureInfo.InvariantCulture)).DefaultIfEmpty(0).ToArray()); return 0;
            case "cli": await CliAsync(); return 0;
            case "cli-parse": return CliParse(args[2]);
            default: await Console.Error.WriteLineAsync("bench libs histogram|blob [MiB...]|cli"); return 2;
        }
    }

    private static string Range(List<double> xs) => $"median {Median(xs):0.00} (range {xs.Min():0.00}-{xs.Max():0.00})";

    private static double Median(List<double> xs)
    {
        var s = xs.Order().ToList();
        return s.Count % 2 == 1 ? s[s.Count / 2] : (s[s.Count / 2 - 1] + s[s.Count / 2]) / 2;
    }

    // ---- 2. block staging: BlobStore's own parallel StageBlock + CommitBlockList vs the SDK's UploadAsync ----

    private static async Task BlobAsync(string home, int[] sizesMiB)
    {
        var sizes = sizesMiB is [0] ? [8, 64, 256] : sizesMiB;
        using var data = new AzuriteDataDirectory();
        await using var azurite = await AzuriteProcess.StartAsync(home, dataDirectory: data.Path);
        // Both with the same block size and parallelism; the threshold lowered so that every size is staged in blocks.
        var options = new BlobStoreOptions { SingleUploadThreshold = 4 * 1024 * 1024 };
        using var store = new BlobStore(azurite.ConnectionString, options);
        await store.CreateContainerIfNotExistsAsync("libs");
        var sdk = new Azure.Storage.Blobs.BlobContainerClient(azurite.ConnectionString, "libs");
        var transfer = new StorageTransferOptions
        {
            MaximumConcurrency = options.BlockUploadConcurrency,
            InitialTransferSize = options.SingleUploadThreshold,
            MaximumTransferSize = options.BlockSize,
        };
        Console.WriteLine($"load {string.Join(' ', File.ReadAllText("/proc/loadavg").Split(' ').Take(3))}; block {options.BlockSize >> 20} MiB x {options.BlockUploadConcurrency}");
        foreach (var mib in sizes)
        {
            var bytes = new byte[mib << 20];
            Random.Shared.NextBytes(bytes);
            var ours = (MBps: new List<double>(), MiBAlloc: new List<double>());
            var theirs = (MBps: new List<double>(), MiBAlloc: new List<double>());
            var rounds = mib >= 256 ? 3 : 5;
            for (var round = 0; round < rounds; round++)
            {
                // Shared memory in the cachelet is unmanaged: both read it through a stream over the pointer-free
                // ReadOnlyMemory (ours) or a seekable stream over it (the SDK's API takes a Stream).
                await Measure(ours, bytes.Length, () => store.UploadAsync("libs", "ours", bytes));
                await Measure(theirs, bytes.Length, () => sdk.GetBlockBlobClient("sdk").UploadAsync(
                    new MemoryStream(bytes, writable: false), new BlobUploadOptions { TransferOptions = transfer }));
            }
            Console.WriteLine($"{mib,4} MiB  BlobStore  {Range(ours.MBps)} MB/s, allocated {Range(ours.MiBAlloc)} MiB per upload");
            Console.WriteLine($"{mib,4} MiB  SDK        {Range(theirs.MBps)} MB/s, allocated {Range(theirs.MiBAlloc)} MiB per upload");
        }
    }

    private static async Task Measure((List<double> MBps, List<double> MiBAlloc) into, long length, Func<Task> upload)
    {
        GC.Collect();
        var before = GC.GetTotalAllocatedBytes(precise: true);
        var clock = Stopwatch.StartNew();
        await upload();
        clock.Stop();
        into.MiBAlloc.Add((GC.GetTotalAllocatedBytes(precise: true) - before) / 1048576.0);
        into.MBps.Add(length / 1e6 / clock.Elapsed.TotalSeconds);
    }

    // ---- 4. argument parsing: HostCommandLine vs a System.CommandLine prototype of the same options ----

    private static readonly string[] InstanceArgs =
        ["/tmp/app", "--port", "0", "--listen", "127.0.0.1", "--workers", "2", "--azurite-in-memory", "--isolation", "auto",
         "--peer-port", "0", "--instance-id", "i-3", "--ready-file", "/tmp/app/ready"];

    /// <summary>One cold parse in this process (first call: the parser's code is jitted), then 10,000 warm ones.</summary>
    private static int CliParse(string which)
    {
        Func<string[], object> parse = which == "scl" ? SclPrototype.Parse : a => FaaST.AppModel.HostCommandLine.Parse(a);
        var clock = Stopwatch.StartNew();
        parse(InstanceArgs);
        var cold = clock.Elapsed.TotalMilliseconds;
        clock.Restart();
        for (var i = 0; i < 10_000; i++)
            parse(InstanceArgs);
        Console.WriteLine(FormattableString.Invariant($"{cold} {clock.Elapsed.TotalMilliseconds * 1000 / 10_000}"));
        return 0;
    }

    private static async Task CliAsync()
    {
        Console.WriteLine($"load {string.Join(' ', File.ReadAllText("/proc/loadavg").Split(' ').Take(3))}");
        var self = typeof(LibrariesScenario).Assembly.Location;
        var results = new Dictionary<string, (List<double> Process, List<double> Cold, List<double> Warm)>
        {
            ["ours"] = ([], [], []), ["scl"] = ([], [], []),
        };
        for (var round = 0; round < 10; round++)
        {
            foreach (var which in new[] { "ours", "scl" })
            {
                var clock = Stopwatch.StartNew();
                using var p = Process.Start(new ProcessStartInfo("dotnet", [self, "libs", "cli-parse", which]) { RedirectStandardOutput = true })!;
                var line = await p.StandardOutput.ReadToEndAsync();
                await p.WaitForExitAsync();
                clock.Stop();
                var parts = line.Trim().Split(' ');
                results[which].Process.Add(clock.Elapsed.TotalMilliseconds);
                results[which].Cold.Add(double.Parse(parts[0], CultureInfo.InvariantCulture));
                results[which].Warm.Add(double.Parse(parts[1], CultureInfo.InvariantCulture));
            }
        }
        foreach (var (which, r) in results)
            Console.WriteLine($"{which,-5} process start to exit {Range(r.Process)} ms; first parse {Range(r.Cold)} ms; warm parse {Range(r.Warm)} µs");
        foreach (var bad in new[] { new[] { "/tmp/app", "--port", "70000" }, ["/tmp/app", "--isolation", "maybe"], ["/tmp/app", "--bogus"], ["--port", "1"], ["/tmp/app", "--workers"] })
        {
            string Message(Func<string[], object> f) { try { f(bad); return "(accepted)"; } catch (ArgumentException e) { return e.Message; } }
            Console.WriteLine($"{string.Join(' ', bad)}\n  ours: {Message(a => FaaST.AppModel.HostCommandLine.Parse(a))}\n  scl:  {Message(SclPrototype.Parse)}");
        }
    }
}

/// <summary>The host's options declared with System.CommandLine 2.0, the same checks as custom parsers (a prototype).</summary>
internal static class SclPrototype
{
    private static Option<int> Number(string name, int min, int max) => new(name)
    {
        CustomParser = r =>
        {
            var text = r.Tokens.Count > 0 ? r.Tokens[0].Value : "";
            if (int.TryParse(text, NumberStyles.None, CultureInfo.InvariantCulture, out var n) && n >= min && n <= max)
                return n;
            r.AddError($"{name} must be a whole number from {min} to {max}, not \"{text}\"");
            return 0;
        },
    };

    public static object Parse(string[] args)
    {
        // Built per call, as the host would once per process.
        var app = new Argument<string>("APPDIR");
        var port = Number("--port", 0, 65535);
        var workers = Number("--workers", 1, 64);
        var peerPort = Number("--peer-port", 0, 65535);
        var listen = new Option<string>("--listen");
        var azuriteData = new Option<string>("--azurite-data");
        var inMemory = new Option<bool>("--azurite-in-memory");
        var noCache = new Option<bool>("--no-cache");
        var noPeers = new Option<bool>("--no-peers");
        var peerListen = new Option<string>("--peer-listen");
        var instanceId = new Option<string>("--instance-id");
        var readyFile = new Option<string>("--ready-file");
        var isolation = new Option<string>("--isolation");
        isolation.AcceptOnlyFromAmong("auto", "required", "off");
        var root = new RootCommand("faast start") { app, port, listen, workers, azuriteData, inMemory, noCache, isolation, noPeers, peerPort, peerListen, instanceId, readyFile };
        var result = root.Parse(args);
        if (result.Errors.Count > 0)
            throw new ArgumentException(string.Join("; ", result.Errors.Select(e => e.Message)));
        var full = Path.GetFullPath(result.GetValue(app)!);
        return new FaaST.AppModel.HostArguments
        {
            AppDirectory = full,
            HttpPort = result.GetResult(port) is null ? null : result.GetValue(port),
            ListenAddress = result.GetValue(listen) ?? "127.0.0.1",
            WorkerProcessCount = result.GetResult(workers) is null ? null : result.GetValue(workers),
            AzuriteDataDirectory = result.GetValue(inMemory) ? null : result.GetValue(azuriteData) ?? Path.Combine(full, ".faast", "azurite"),
            CacheEnabled = result.GetValue(noCache) ? false : null,
            Peers = !result.GetValue(noPeers),
            PeerPort = result.GetValue(peerPort),
            PeerListenAddress = result.GetValue(peerListen),
            InstanceId = result.GetValue(instanceId),
            ReadyFile = result.GetValue(readyFile) is { } f ? Path.GetFullPath(f) : null,
        };
    }
}
