using System.Diagnostics;
using System.Globalization;
using System.Net;
using System.Net.Sockets;
using FaaST.Bench.Net;

namespace FaaST.Runtime.Tests;

/// <summary>
/// A fact that builds network namespaces (bench/net/cloudnet.sh): skipped with the reason when the tests are not
/// root, iproute2 is missing, or this container does not permit namespaces (the benchmarks then fall back to
/// unshaped loopback and say so).
/// </summary>
[AttributeUsage(AttributeTargets.Method, AllowMultiple = false)]
public sealed class NamespacesFactAttribute : FactAttribute
{
    private static readonly Lazy<CloudNetworkAvailability> Availability =
        new(() => CloudNetwork.AvailableAsync(Repo.Root).GetAwaiter().GetResult());

    public NamespacesFactAttribute()
    {
        if (!Environment.IsPrivilegedProcess)
            Skip = $"needs root (network namespaces and tc); running as {Environment.UserName}";
        else if (!Availability.Value.IsAvailable)
            Skip = $"the shaped network cannot be built here: {Availability.Value.Reason}";
    }
}

/// <summary>
/// The benchmarks' cloud-like network for real: namespaces, veths, a bridge and HTB, on an address range of
/// their own (198.18.0.0/15). No absolute rate is asserted: a shaped transfer is compared with an unshaped one
/// of the same test.
/// </summary>
public sealed class CloudNetworkTests
{
    // Names and a subnet of this test run's own, so a benchmark's network (prefix fcn, subnet 0) is never touched.
    private static readonly string Prefix = string.Create(CultureInfo.InvariantCulture, $"fcnt{Environment.ProcessId % 10000}");
    private static readonly int Subnet = 100 + Environment.ProcessId % 100;

    [NamespacesFact]
    public async Task A_download_from_the_storage_address_into_an_instance_namespace_is_shaped_well_below_loopback()
    {
        const long size = 12L << 20;
        // 40 Mbit/s = 5 MB/s: 12 MB take about 2.5 s shaped, a small fraction of that on loopback; long enough
        // that a scheduling stall of a few hundred ms on a busy machine does not close the gap.
        var settings = new CloudNetworkSettings { Prefix = Prefix, Subnet = Subnet, StorageMbps = 40, PeerMbps = 800 };
        await using var network = await CloudNetwork.UpAsync(Repo.Root, 2, settings);
        using var storage = Serve(network.StorageAddress, size);
        using var loopback = Serve(IPAddress.Loopback, size);

        var unshaped = await FastestOfAsync(3, () => CurlAsync(network, null, Url(loopback), size));
        var shaped = await CurlAsync(network, 0, Url(storage), size);

        Assert.True(shaped * 4 < unshaped,
            $"storage → instance 0 ran at {shaped / 1e6:0.0} MB/s, not well under unshaped loopback's {unshaped / 1e6:0.0} MB/s");
    }

    [NamespacesFact]
    public async Task A_download_from_the_platform_address_is_not_shaped_like_storage()
    {
        const long size = 12L << 20;
        // Peers as slow as storage: the platform address is in the instances' subnet, and must not fall into
        // the peer class either.
        var settings = new CloudNetworkSettings { Prefix = Prefix, Subnet = Subnet, StorageMbps = 40, PeerMbps = 40 };
        await using var network = await CloudNetwork.UpAsync(Repo.Root, 2, settings);
        using var storage = Serve(network.StorageAddress, size);
        using var platform = Serve(network.PlatformAddress, size);

        var shaped = await CurlAsync(network, 0, Url(storage), size);
        var fromPlatform = await FastestOfAsync(3, () => CurlAsync(network, 0, Url(platform), size));

        Assert.True(shaped * 4 < fromPlatform,
            $"platform → instance 0 ran at {fromPlatform / 1e6:0.0} MB/s, not well above storage → instance 0's {shaped / 1e6:0.0} MB/s");
    }

    [NamespacesFact]
    public async Task Down_removes_every_namespace_veth_and_the_bridge_even_without_the_process_that_brought_them_up()
    {
        var script = Path.Combine(Repo.Root, "bench", "net", "cloudnet.sh");
        // Up by the script alone, as a benchmark that crashed would have left it: no CloudNetwork to dispose.
        var (up, upError) = await RunAsync(script, "up", "--instances", "2", "--prefix", Prefix, "--subnet", Subnet.ToString(CultureInfo.InvariantCulture));
        Assert.True(up == 0, $"up failed: {upError}");
        Assert.Equal(2, (await OursAsync("netns", "list")).Count);

        var (down, downError) = await RunAsync(script, "down", "--prefix", Prefix);
        var (again, againError) = await RunAsync(script, "down", "--prefix", Prefix);

        Assert.True(down == 0, $"down failed: {downError}");
        Assert.True(again == 0, $"a second down failed: {againError}");
        Assert.Empty(await OursAsync("netns", "list"));
        Assert.Empty(await OursAsync("-o", "link", "show"));
    }

    [Fact]
    public void Output_of_up_without_an_instance_line_is_refused_naming_the_missing_line()
    {
        const string output = "prefix=fcn\nstorage=198.18.0.1\nplatform=198.18.0.2\ninstances=2\ninstance.0=fcn-0 198.18.0.10\n";

        var error = Assert.Throws<InvalidOperationException>(() => CloudNetwork.Parse("cloudnet.sh", new CloudNetworkSettings(), 2, output));

        Assert.Contains("instance.1=NAMESPACE ADDRESS", error.Message, StringComparison.Ordinal);
    }

    /// <summary>
    /// The best of a few runs of a transfer that should be fast: what the path can do, not what a first run
    /// (JIT, a cold thread pool) or a stall of a busy machine let through once. The shaped side needs no such
    /// help: a limit only ever makes it slower.
    /// </summary>
    private static async Task<double> FastestOfAsync(int runs, Func<Task<double>> transfer)
    {
        var best = 0.0;
        for (var i = 0; i < runs; i++)
            best = Math.Max(best, await transfer());
        return best;
    }

    /// <summary>Lines of `ip ARGS` that name this run's prefix.</summary>
    private static async Task<List<string>> OursAsync(params string[] args)
    {
        var info = new ProcessStartInfo("ip") { RedirectStandardOutput = true, UseShellExecute = false };
        foreach (var arg in args)
            info.ArgumentList.Add(arg);
        using var process = Process.Start(info)!;
        var output = await process.StandardOutput.ReadToEndAsync();
        await process.WaitForExitAsync();
        return output.Split('\n').Where(line => line.Contains(Prefix, StringComparison.Ordinal)).ToList();
    }

    private static async Task<(int Code, string Error)> RunAsync(string file, params string[] args)
    {
        var info = new ProcessStartInfo(file) { RedirectStandardOutput = true, RedirectStandardError = true, UseShellExecute = false };
        foreach (var arg in args)
            info.ArgumentList.Add(arg);
        using var process = Process.Start(info)!;
        var output = process.StandardOutput.ReadToEndAsync();
        var error = await process.StandardError.ReadToEndAsync();
        await output;
        await process.WaitForExitAsync();
        return (process.ExitCode, error);
    }

    /// <summary>A listener that answers every connection with <paramref name="size"/> bytes over HTTP/1.0.</summary>
    private static TcpListener Serve(IPAddress address, long size)
    {
        var listener = new TcpListener(address, 0);
        listener.Start();
        _ = Task.Run(async () =>
        {
            var chunk = new byte[1 << 20];
            while (true)
            {
                TcpClient client;
                try
                {
                    client = await listener.AcceptTcpClientAsync();
                }
                catch (Exception e) when (e is ObjectDisposedException or SocketException)
                {
                    return;
                }
                _ = Task.Run(async () =>
                {
                    using (client)
                    {
                        try
                        {
                            var stream = client.GetStream();
                            // The request: read up to its blank line (curl sends a few short headers).
                            var request = new byte[4096];
                            var read = 0;
                            while (read < request.Length && !request.AsSpan(0, read).EndsWith("\r\n\r\n"u8))
                            {
                                var n = await stream.ReadAsync(request.AsMemory(read));
                                if (n == 0)
                                    return;
                                read += n;
                            }
                            await stream.WriteAsync(System.Text.Encoding.ASCII.GetBytes($"HTTP/1.0 200 OK\r\nContent-Length: {size}\r\n\r\n"));
                            for (var left = size; left > 0; left -= chunk.Length)
                                await stream.WriteAsync(chunk.AsMemory(0, (int)Math.Min(left, chunk.Length)));
                        }
                        catch (IOException)
                        {
                            // the client went away; its curl reports it
                        }
                    }
                });
            }
        });
        return listener;
    }

    private static Uri Url(TcpListener listener)
    {
        var endpoint = (IPEndPoint)listener.LocalEndpoint;
        return new Uri($"http://{endpoint.Address}:{endpoint.Port}/");
    }

    /// <summary>Bytes per second curl received, inside instance <paramref name="instance"/>'s namespace or here.</summary>
    private static async Task<double> CurlAsync(CloudNetwork network, int? instance, Uri url, long size)
    {
        var curl = new ProcessStartInfo("curl") { RedirectStandardOutput = true, RedirectStandardError = true, UseShellExecute = false };
        foreach (var arg in (string[])["-sS", "--fail", "--max-time", "60", "--noproxy", "*", "-o", "/dev/null", "-w", "%{size_download} %{time_total}", url.ToString()])
            curl.ArgumentList.Add(arg);
        using var process = Process.Start(instance is { } i ? network.InNamespace(i, curl) : curl)!;
        var output = await process.StandardOutput.ReadToEndAsync();
        var error = await process.StandardError.ReadToEndAsync();
        await process.WaitForExitAsync();
        Assert.True(process.ExitCode == 0, $"curl {url} failed (exit {process.ExitCode}): {error}");
        var parts = output.Split(' ');
        Assert.Equal(size, long.Parse(parts[0], CultureInfo.InvariantCulture));
        return size / double.Parse(parts[1], CultureInfo.InvariantCulture);
    }
}
