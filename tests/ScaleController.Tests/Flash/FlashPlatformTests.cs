using System.Collections.Concurrent;
using System.Diagnostics;
using System.Globalization;
using System.Net;
using System.Net.Sockets;
using System.Security.Cryptography;
using System.Text.Json.Nodes;
using FaaST.ScaleController.Tests.Platform;
using FaaST.Storage;

namespace FaaST.ScaleController.Tests.Flash;

/// <summary>
/// The flash tier end to end (issue 22), as a user runs it: `./faast start samples/flash-app` (the platform process, its
/// Azurite, the app's instance, and the flash server the platform starts because faast.json enables flash without an
/// address), a working set 4× the app's cache read twice through the frontend: the second pass's misses of evicted
/// objects are flash hits (the instance's /admin/flash), bytes identical; a new version written to storage is never
/// answered with the old flash copy; the flash server killed mid-load costs no read, the platform restarts it, and
/// flash hits resume.
/// </summary>
public sealed class FlashPlatformTests : IDisposable
{
    private const int ObjectBytes = 256 * 1024;
    // 32 MiB of objects through the sample's 8 MiB cache.
    private const int Objects = 128;

    private readonly TempDirectory _apps = new("faast-flash-");
    private readonly string _name = "flash-e2e-" + Guid.NewGuid().ToString("N")[..8];

    public void Dispose()
    {
        _apps.Dispose();
        // `./faast start` keeps its state (and the flash server's 1 GiB device file) under the checkout's .faast/platform.
        var platforms = Path.Combine(Repo.Root, ".faast", "platform");
        if (Directory.Exists(platforms))
            foreach (var state in Directory.GetDirectories(platforms, $"start-{_name}-*"))
                Directory.Delete(state, recursive: true);
    }

    private static string Expected(byte[] bytes) => $"{bytes.Length} {Convert.ToHexStringLower(SHA256.HashData(bytes))}";

    private static async Task<JsonNode> JsonAsync(HttpClient http, string path) =>
        JsonNode.Parse(await http.GetStringAsync(path)) ?? throw new InvalidOperationException(path + " answered null");

    private static async Task<(long Hits, long Stale, long Misses, long Fallbacks, long Skipped, long Demotions)> CountersAsync(HttpClient http)
    {
        var i = (await JsonAsync(http, "admin/flash"))["instance"]!;
        return ((long)i["hits"]!, (long)i["stale"]!, (long)i["misses"]!, (long)i["fallbacks"]!, (long)i["skippedReads"]!, (long)i["demotions"]!);
    }

    private static async Task ReadAllAsync(HttpClient http, IEnumerable<(string Name, byte[] Bytes)> blobs)
    {
        foreach (var (name, bytes) in blobs)
            Assert.Equal(Expected(bytes), await http.GetStringAsync($"api/read/{name}"));
    }

    [Fact]
    public async Task The_sample_app_reads_evicted_objects_from_flash_never_an_old_version_and_survives_the_flash_server_dying()
    {
        var app = Repo.CopySample("flash-app", Path.Combine(_apps.Path, _name));
        // The machine running the suites is shared and busy: a timeout that only a dead server reaches, and a short
        // retry period so the test sees the tier used again soon after the restart.
        File.WriteAllText(Path.Combine(app, "faast.json"), """
            { "cache": { "cacheCapacity": "8MiB" },
              "flash": { "enabled": true, "iopsSlo": 20000, "p95LatencyUs": 5000, "timeoutMs": 5000, "retryAfterSeconds": 1 } }
            """);
        var port = Ports.Free();
        var url = $"http://127.0.0.1:{port}";
        var output = new ConcurrentQueue<string>();
        using var platform = PlatformCommand.Start(["start", app, "--port", port.ToString(CultureInfo.InvariantCulture), "--azurite-in-memory", "--isolation", "off"], output);
        try
        {
            await Eventually.TrueAsync(() => output.Any(l => l.Contains("is served at", StringComparison.Ordinal)) || platform.HasExited,
                "the platform to serve the app", () => string.Join('\n', output), seconds: 180);
            Assert.False(platform.HasExited, string.Join('\n', output));
            using var http = AdminKey.Client(new Uri(url + "/"), AdminKey.Published(url), TimeSpan.FromSeconds(60));
            var flash = (await JsonAsync(http, "admin/platform"))["flash"]!;
            Assert.Equal(_name, Assert.Single(flash["apps"]!.AsArray())!.GetValue<string>());
            var serverPid = (int)flash["processId"]!;
            var flashPort = new Uri(flash["address"]!.GetValue<string>()).Port;

            using var store = new BlobStore(DevelopmentStorageFile.Read(app, out var problem) ?? throw new InvalidOperationException(problem));
            await store.CreateContainerIfNotExistsAsync("objects");
            var blobs = new List<(string Name, byte[] Bytes)>();
            for (var i = 0; i < Objects; i++)
            {
                var bytes = RandomNumberGenerator.GetBytes(ObjectBytes);
                await store.UploadAsync("objects", $"o{i:D3}", bytes);
                blobs.Add(($"o{i:D3}", bytes));
            }

            // First pass: storage reads; what the cache evicts is demoted.
            await ReadAllAsync(http, blobs);
            // A demotion the pump cannot start before a miss needs its memory is dropped (DemotionQueue): not all are demoted.
            await Eventually.TrueAsync(async () => (await CountersAsync(http)).Demotions >= Objects / 4, "a quarter of the working set was demoted");
            var first = await CountersAsync(http);

            // Second pass, same order: every read misses the cache (LRU over a scan); the demoted ones are flash hits.
            await ReadAllAsync(http, blobs);
            var second = await CountersAsync(http);
            Assert.True(second.Hits - first.Hits >= Objects / 4, $"{second.Hits - first.Hits} flash hits of {Objects} misses ({first.Demotions} demoted)");
            Assert.Equal((0L, 0L), (second.Stale, second.Fallbacks));

            // A new version of an object that flash holds (it was a hit, then evicted and demoted again): never the old copy.
            var fresh = RandomNumberGenerator.GetBytes(ObjectBytes);
            await store.UploadAsync("objects", blobs[0].Name, fresh);
            Assert.Equal(Expected(fresh), await http.GetStringAsync($"api/read/{blobs[0].Name}"));
            var afterWrite = await CountersAsync(http);
            Assert.Equal(second.Hits, afterWrite.Hits);
            blobs[0] = (blobs[0].Name, fresh);

            // The flash server killed in the middle of a pass: every read still succeeds, from storage.
            var load = Task.Run(() => ReadAllAsync(http, blobs.Skip(1)));
            await Eventually.TrueAsync(async () => (await CountersAsync(http)).Hits >= afterWrite.Hits + 8, "the third pass reached flash");
            Process.GetProcessById(serverPid).Kill();
            // While it is dead the platform holds its port (SharedPort), so the restart cannot find it taken: a CI run
            // once saw the restart fail with "address already in use". Checked once the process is gone; should the
            // restart have come first on a busy machine, the new server holds it, and ServerProcessTests checks the gap
            // deterministically.
            await Eventually.TrueAsync(() => !Directory.Exists($"/proc/{serverPid}"), "the killed flash server is gone");
            using (var other = new Socket(SocketType.Stream, ProtocolType.Tcp))
            {
                other.SetRawSocketOption(1, 2, BitConverter.GetBytes(1)); // SOL_SOCKET, SO_REUSEADDR: what a server sets
                var taken = Assert.Throws<SocketException>(() => other.Bind(new IPEndPoint(IPAddress.Loopback, flashPort)));
                Assert.Equal(SocketError.AddressAlreadyInUse, taken.SocketErrorCode);
            }
            await load;
            var down = await CountersAsync(http);
            Assert.True(down.Fallbacks + down.Skipped >= 1, "reads went around the dead server");

            // The platform restarts it (same port, state and device); the instance uses it again after its retry period.
            await Eventually.TrueAsync(async () => (await JsonAsync(http, "admin/platform"))["flash"]?["processId"] is { } pid && (int)pid != serverPid,
                "the platform restarted the flash server", seconds: 120);
            var next = 0;
            await Eventually.TrueAsync(async () =>
            {
                var (name, bytes) = blobs[1 + next++ % (blobs.Count - 1)];
                Assert.Equal(Expected(bytes), await http.GetStringAsync($"api/read/{name}"));
                return (await CountersAsync(http)).Hits > down.Hits;
            }, "flash hits resumed after the restart");
        }
        finally
        {
            await PlatformCommand.StopAsync(platform);
        }
        Assert.Equal(0, platform.ExitCode);
        // The flash server logged no failure: neither its own (dispatcher, store, a crash) nor gRPC's report of a handler
        // that ended with an unexpected exception. A CI run under a load average of 19 once showed the latter; its text
        // was not kept, but closing a channel under a running get or put reproduces such lines (an instance's channel
        // closes when it stops), and the server now ends those calls quietly (ClientGoneInterceptor, tested by
        // FlashBackend.Tests' ClientGoneTests), so any such line is a new failure.
        var failures = output.Where(l => l.Contains("[flash]", StringComparison.Ordinal) && l.Contains("fail:", StringComparison.Ordinal)).ToList();
        Assert.True(failures.Count == 0, "the flash server logged failures:\n" + string.Join('\n', failures)
            + "\n--- its whole output:\n" + string.Join('\n', output.Where(l => l.Contains("[flash]", StringComparison.Ordinal))));
    }
}
