using System.Diagnostics;
using System.Globalization;
using System.Text.Json;
using System.Text.Json.Nodes;
using Azure.Storage.Blobs;
using Azure.Storage.Blobs.Models;
using FaaST.Storage;

namespace FaaST.Bench.Net;

/// <summary>
/// ./faast bench net: what the shaped network of bench/net/cloudnet.sh actually delivers on this machine. A blob
/// from Azurite on the storage address downloaded (curl) inside one instance namespace, then inside 4 at once;
/// one instance sending to another; and, beside them, the same download on unshaped loopback. Writes
/// bench/results/net.json. Not timed assertions: the numbers of one machine, to choose and check the shaping.
/// </summary>
internal static class NetScenario
{
    private const int Instances = 4;

    /// <param name="args">The command line: <c>--storage-mbps R</c> and <c>--peer-mbps R</c> override the defaults of
    /// <see cref="CloudNetworkSettings"/> (e.g. 720 and 6000 for the paper's absolute figures).</param>
    public static async Task RunAsync(string home, bool quick, IReadOnlyList<string> args)
    {
        var defaults = new CloudNetworkSettings();
        var settings = defaults with
        {
            StorageMbps = IntOption(args, "--storage-mbps") ?? defaults.StorageMbps,
            PeerMbps = IntOption(args, "--peer-mbps") ?? defaults.PeerMbps,
        };
        // The defaults' run is bench/results/net.json; another shape's run goes beside it, named after it.
        var file = settings == defaults ? "net.json" : string.Create(CultureInfo.InvariantCulture, $"net-{settings.StorageMbps}-{settings.PeerMbps}.json");
        var size = quick ? 50L << 20 : 200L << 20;
        var result = new JsonObject
        {
            ["scenario"] = "net",
            ["machine"] = $"{Environment.ProcessorCount} vCPUs, {Environment.OSVersion}",
            ["started"] = DateTime.UtcNow.ToString("O", CultureInfo.InvariantCulture),
            ["blob_bytes"] = size,
        };
        var availability = await CloudNetwork.AvailableAsync(home);
        if (!availability.IsAvailable)
        {
            result["network"] = CloudNetwork.LoopbackDescription(availability.Reason);
            await WriteAsync(home, file, result);
            Console.WriteLine($"net: the shaped network is unavailable here ({availability.Reason}); nothing to measure");
            return;
        }

        await using var network = await CloudNetwork.UpAsync(home, Instances, settings);
        result["network"] = network.Description;
        result["storage_mbps_setting"] = settings.StorageMbps;
        result["peer_mbps_setting"] = settings.PeerMbps;
        await using var azurite = await AzuriteProcess.StartAsync(home, listenAddress: network.StorageAddress);
        var url = await UploadPublicBlobAsync(azurite, size);

        // The unshaped baseline: the same URL from this namespace, where the storage address is local (it
        // goes over lo, which no qdisc of the script shapes; only the veths are).
        var unshaped = await CurlAsync(null, network, url);
        result["storage_unshaped_root_namespace_mbs"] = unshaped;
        Console.WriteLine($"net: storage → root namespace (unshaped): {unshaped:0.0} MB/s");

        var one = await CurlAsync(0, network, url);
        result["storage_to_1_instance_mbs"] = one;
        Console.WriteLine($"net: storage → 1 instance: {one:0.0} MB/s");

        var four = await Task.WhenAll(Enumerable.Range(0, Instances).Select(i => CurlAsync(i, network, url)));
        result["storage_to_4_instances_each_mbs"] = new JsonArray(four.Select(v => (JsonNode)v).ToArray());
        result["storage_to_4_instances_total_mbs"] = four.Sum();
        Console.WriteLine($"net: storage → 4 instances at once: {string.Join(", ", four.Select(v => v.ToString("0.0", CultureInfo.InvariantCulture)))} MB/s (total {four.Sum():0.0})");

        var peer = await PeerTransferAsync(network, from: 0, to: 1, size);
        result["instance_to_instance_mbs"] = peer;
        Console.WriteLine($"net: instance 0 → instance 1: {peer:0.0} MB/s");

        result["finished"] = DateTime.UtcNow.ToString("O", CultureInfo.InvariantCulture);
        await WriteAsync(home, file, result);
    }

    /// <summary>A blob of random bytes in a container readable without a key, so curl can fetch it by URL.</summary>
    private static async Task<Uri> UploadPublicBlobAsync(AzuriteProcess azurite, long size)
    {
        var container = new BlobContainerClient(azurite.ConnectionString, "netbench");
        await container.CreateIfNotExistsAsync(PublicAccessType.Blob);
        var blob = container.GetBlobClient("blob.bin");
        var path = Path.Combine(Path.GetTempPath(), $"faast-netbench-{Environment.ProcessId}.bin");
        try
        {
            await using (var file = File.Create(path))
            {
                var buffer = new byte[1 << 20];
                for (long written = 0; written < size; written += buffer.Length)
                {
                    Random.Shared.NextBytes(buffer);
                    await file.WriteAsync(buffer.AsMemory(0, (int)Math.Min(buffer.Length, size - written)));
                }
            }
            await blob.UploadAsync(path, overwrite: true);
        }
        finally
        {
            File.Delete(path);
        }
        return blob.Uri;
    }

    /// <summary>curl's average download speed in MB/s (10^6 bytes), inside instance <paramref name="instance"/> or here.</summary>
    private static async Task<double> CurlAsync(int? instance, CloudNetwork network, Uri url)
    {
        var curl = new ProcessStartInfo("curl") { RedirectStandardOutput = true, RedirectStandardError = true, UseShellExecute = false };
        foreach (var arg in (string[])["-sS", "--fail", "-o", "/dev/null", "-w", "%{size_download} %{time_total}", "--noproxy", "*", url.ToString()])
            curl.ArgumentList.Add(arg);
        var info = instance is { } i ? network.InNamespace(i, curl) : curl;
        using var process = Process.Start(info) ?? throw new InvalidOperationException("curl did not start");
        var output = await process.StandardOutput.ReadToEndAsync();
        var error = await process.StandardError.ReadToEndAsync();
        await process.WaitForExitAsync();
        if (process.ExitCode != 0)
            throw new InvalidOperationException($"curl {url} {(instance is null ? "" : $"in {network.Namespace(instance.Value)} ")}failed (exit {process.ExitCode}): {error.Trim()}");
        var parts = output.Split(' ');
        return double.Parse(parts[0], CultureInfo.InvariantCulture) / double.Parse(parts[1], CultureInfo.InvariantCulture) / 1e6;
    }

    /// <summary>
    /// Instance <paramref name="from"/> serves <paramref name="size"/> bytes once over HTTP/1.0 (a few lines of
    /// Debian's python, run in its namespace) and instance <paramref name="to"/> downloads them with curl.
    /// </summary>
    internal static async Task<double> PeerTransferAsync(CloudNetwork network, int from, int to, long size)
    {
        const int port = 18080;
        var server = new ProcessStartInfo("/usr/bin/python3") { RedirectStandardOutput = true, RedirectStandardError = true, UseShellExecute = false };
        foreach (var arg in (string[])["-c", SendOnceScript, network.InstanceAddress(from).ToString(), port.ToString(CultureInfo.InvariantCulture), size.ToString(CultureInfo.InvariantCulture)])
            server.ArgumentList.Add(arg);
        using var process = Process.Start(network.InNamespace(from, server)) ?? throw new InvalidOperationException("python3 did not start");
        try
        {
            // The server prints "ready" once it listens.
            var ready = await process.StandardOutput.ReadLineAsync().WaitAsync(TimeSpan.FromSeconds(30));
            if (ready != "ready")
                throw new InvalidOperationException($"the peer sender did not start: {await process.StandardError.ReadToEndAsync()}");
            return await CurlAsync(to, network, new Uri($"http://{network.InstanceAddress(from)}:{port}/"));
        }
        finally
        {
            if (!process.HasExited)
                process.Kill();
            await process.WaitForExitAsync();
        }
    }

    private const string SendOnceScript = """
        import socket, sys
        host, port, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
        s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind((host, port)); s.listen(1)
        print("ready", flush=True)
        c, _ = s.accept(); c.recv(65536)
        c.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n" % size)
        chunk = memoryview(bytes(1 << 20)); left = size
        while left > 0:
            n = min(left, len(chunk)); c.sendall(chunk[:n]); left -= n
        c.shutdown(socket.SHUT_WR); c.recv(1); c.close()
        """;

    private static int? IntOption(IReadOnlyList<string> args, string name)
    {
        for (var i = 0; i < args.Count; i++)
        {
            if (args[i] != name)
                continue;
            if (i + 1 < args.Count && int.TryParse(args[i + 1], NumberStyles.None, CultureInfo.InvariantCulture, out var value) && value > 0)
                return value;
            throw new ArgumentException($"{name}: want a whole number of Mbit/s above 0, got '{(i + 1 < args.Count ? args[i + 1] : "")}'");
        }
        return null;
    }

    private static async Task WriteAsync(string home, string file, JsonObject result)
    {
        var path = Path.Combine(home, "bench", "results", file);
        Directory.CreateDirectory(Path.GetDirectoryName(path)!);
        await File.WriteAllTextAsync(path, result.ToJsonString(new JsonSerializerOptions { WriteIndented = true }) + "\n");
        Console.WriteLine($"net: wrote {path}");
    }
}
