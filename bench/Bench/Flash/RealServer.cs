using System.Diagnostics;
using System.Globalization;
using System.Net;
using System.Text.Json.Nodes;
using FaaST.Protos.Flash;
using Google.Protobuf;
using Grpc.Core;
using Grpc.Net.Client;

namespace FaaST.Bench.Flash;

/// <summary>What <see cref="RealServer.RunAsync"/> does: how many 4 KiB objects, for how long per queue depth.</summary>
internal sealed record RealServerOptions
{
    /// <summary>4 KiB objects filled before the load: 32,768 (128 MiB of values; each takes 8 KiB on the device, header
    /// and payload, so 256 MiB are read from): far larger than the page cache could hide, were O_DIRECT ever lost.</summary>
    public int Objects { get; init; } = 32_768;

    public TimeSpan Duration { get; init; } = TimeSpan.FromSeconds(8);

    /// <summary>1 and 32 (fio's depths in docs/flash.md), then 128 and 256: a server across a network pays a round
    /// trip per batch that a local fio job does not, so at equal depth fewer of its reads are at the device at any
    /// moment; clients of a remote store keep more in flight. The goal compares peaks: the server's best rate against
    /// the device's best (fio at the same depths), both reported beside the equal-depth figures.</summary>
    public IReadOnlyList<int> QueueDepths { get; init; } = [1, 32, 128, 256];

    /// <summary>GetMany streams the QD items are spread over: 2. Measured at QD 32 (--quick, 2026-11-28, io_uring
    /// server, machine at load 6-8): 1 stream 39.5K gets/s (32 results a reply: the load runs in lock-step, a whole
    /// batch's round trip with the device idle), 2 streams 42.4K (16 a reply, 24 µs of CPU per get on both sides),
    /// 4 streams 41.8K (8 a reply, 26 µs), 8 streams 39.6K (4 a reply, 31 µs).</summary>
    public int ManyStreams { get; init; } = 2;

    /// <summary>Where the device file goes (disk-backed: /dev/shm is tmpfs); removed at the end.</summary>
    public string Directory { get; init; } = "/var/tmp";
}

/// <summary>One queue depth: the server's 4 KiB gets and fio's 4 KiB O_DIRECT random reads of the same file.</summary>
internal sealed record RealServerPoint(int QueueDepth, double Iops, double P50Us, double P95Us, double FioIops, double FioP50Us, double FioP95Us)
{
    public double FractionOfFio => FioIops > 0 ? Iops / FioIops : 0;

    /// <summary>The same load through GetMany (items on a few streams instead of a call each).</summary>
    public double ManyIops { get; init; }
    public double ManyP50Us { get; init; }
    public double ManyP95Us { get; init; }
    public double ManyFractionOfFio => FioIops > 0 ? ManyIops / FioIops : 0;

    /// <summary>CPU µs per get (GetMany) in the server process and in the load generator: what the two shared cores
    /// bound the rate with, and less sensitive to other load on the machine than the rate itself.</summary>
    public double ManyServerCpuUs { get; init; }
    public double ManyClientCpuUs { get; init; }
}

/// <summary>
/// The real server under load (issue 22: <c>real_server_get_4k_iops</c> beside fio, goal within 80 %): the server as
/// its own process (`FaaST.FlashBackend.dll serve`, En4S) on a file in /var/tmp, one BE tenant, N 4 KiB objects put
/// through gRPC, then a closed loop of 4 KiB gets of random keys at each queue depth (QD concurrent callers, each
/// issuing its next get when the last returns) through real Grpc.Net.Client channels for a fixed time; then, with the
/// server stopped, fio 3.33 reads the same file the same way (<c>--direct=1 --rw=randread --bs=4k --ioengine=psync
/// --numjobs=QD</c>) in the same run. The server's --device-tokens is set far above the device, so the scheduler never
/// throttles the lone tenant and the figure measures the server's path (gRPC, dispatcher hand-offs, engine) against
/// the device's own rate. Engineer "bench" owns the scenario that calls this; the file is removed at the end.
/// </summary>
internal static class RealServer
{
    public static async Task<IReadOnlyList<RealServerPoint>> RunAsync(RealServerOptions options, TextWriter log)
    {
        string dir = System.IO.Directory.CreateDirectory(Path.Combine(options.Directory, $"faast-flash-realserver-{Environment.ProcessId}")).FullName;
        long capacity = Math.Max(256L << 20, (long)options.Objects * 8192 * 2 / (64L << 20) * (64L << 20) + (128L << 20));
        var points = new List<(int Qd, double Iops, double P50, double P95, double ManyIops, double ManyP50, double ManyP95, double ServerCpu, double ClientCpu)>();
        try
        {
            string device;
            await using (var server = await FlashServerProcess.StartAsync(dir, IPAddress.Loopback, capacity, "--ephemeral", "--device-tokens", "10000000"))
            {
                device = server.DevicePath;
                Uri address = server.Address;
                string admin = server.AdminKey;
                using var adminChannel = GrpcChannel.ForAddress(address);
                var reply = await new FlashAdmin.FlashAdminClient(adminChannel).RegisterTenantAsync(
                    new RegisterTenantRequest { Tenant = "bench" }, Bearer(admin));
                var auth = Bearer(reply.Token);
                int channelCount = 4;
                var channels = Enumerable.Range(0, channelCount).Select(_ => GrpcChannel.ForAddress(address)).ToArray();
                var clients = channels.Select(c => new FlashTier.FlashTierClient(c)).ToArray();
                int flow = (await clients[0].OpenFlowAsync(new OpenFlowRequest { Instance = "bench" }, auth)).Flow;
                await FillAsync(clients, auth, flow, options.Objects);
                log.WriteLine($"real server: {options.Objects} 4 KiB objects put");
                foreach (int qd in options.QueueDepths)
                {
                    var (iops, p50, p95) = await GetLoadAsync(clients, auth, flow, options.Objects, qd, options.Duration);
                    log.WriteLine($"real server QD {qd}: {iops:0} gets/s, p50 {p50:0} µs, p95 {p95:0} µs");
                    TimeSpan server0 = server.CpuTime, client0 = Process.GetCurrentProcess().TotalProcessorTime;
                    var clock = Stopwatch.StartNew();
                    var (many, manyP50, manyP95) = await GetManyLoadAsync(clients, auth, flow, options.Objects, qd, options.Duration, options.ManyStreams);
                    double gets = many * clock.Elapsed.TotalSeconds;
                    double serverCpu = (server.CpuTime - server0).TotalMicroseconds / Math.Max(1, gets);
                    double clientCpu = (Process.GetCurrentProcess().TotalProcessorTime - client0).TotalMicroseconds / Math.Max(1, gets);
                    log.WriteLine($"real server QD {qd}, GetMany: {many:0} gets/s, p50 {manyP50:0} µs, p95 {manyP95:0} µs; CPU per get: server {serverCpu:0.0} µs, load generator {clientCpu:0.0} µs; {LastResultsPerReply:0.0} results a reply");
                    points.Add((qd, iops, p50, p95, many, manyP50, manyP95, serverCpu, clientCpu));
                }
                foreach (var c in channels)
                    c.Dispose();
            }
            var result = new List<RealServerPoint>();
            foreach (var p in points)
            {
                // Only the log's written part: ext4 answers reads of preallocated, never-written blocks with zeros
                // without touching the disk, which would flatter fio. The log fills from offset 0 (an empty start).
                var fio = await FioAsync(device, (long)options.Objects * 8192, p.Qd, options.Duration);
                log.WriteLine($"fio QD {p.Qd}: {fio.Iops:0} reads/s, p50 {fio.P50:0} µs, p95 {fio.P95:0} µs");
                result.Add(new RealServerPoint(p.Qd, p.Iops, p.P50, p.P95, fio.Iops, fio.P50, fio.P95)
                {
                    ManyIops = p.ManyIops, ManyP50Us = p.ManyP50, ManyP95Us = p.ManyP95,
                    ManyServerCpuUs = p.ServerCpu, ManyClientCpuUs = p.ClientCpu,
                });
            }
            return result;
        }
        finally
        {
            System.IO.Directory.Delete(dir, recursive: true);
        }
    }

    /// <summary>The figures as the bench report names them: real_server_get_4k_iops is GetMany's best rate over the
    /// depths, fio_4k_iops fio's best, and real_server_fraction_of_fio their ratio (the goal: at least 0.8).</summary>
    public static JsonObject ToJson(IReadOnlyList<RealServerPoint> points)
    {
        var json = new JsonObject();
        foreach (var p in points)
        {
            json[$"qd{p.QueueDepth}"] = new JsonObject
            {
                ["real_server_get_4k_iops_unary"] = Math.Round(p.Iops), ["p50_us"] = Math.Round(p.P50Us), ["p95_us"] = Math.Round(p.P95Us),
                ["fio_4k_iops"] = Math.Round(p.FioIops), ["fio_p50_us"] = Math.Round(p.FioP50Us), ["fio_p95_us"] = Math.Round(p.FioP95Us),
                ["fraction_of_fio"] = Math.Round(p.FractionOfFio, 3),
                ["getmany_4k_iops"] = Math.Round(p.ManyIops), ["getmany_p50_us"] = Math.Round(p.ManyP50Us), ["getmany_p95_us"] = Math.Round(p.ManyP95Us),
                ["getmany_fraction_of_fio"] = Math.Round(p.ManyFractionOfFio, 3),
                ["getmany_server_cpu_us_per_get"] = Math.Round(p.ManyServerCpuUs, 1),
                ["getmany_load_generator_cpu_us_per_get"] = Math.Round(p.ManyClientCpuUs, 1),
            };
        }
        if (points.Count > 0)
        {
            var (server, fio) = Peaks(points);
            json["real_server_get_4k_iops"] = Math.Round(server.ManyIops);
            json["real_server_get_4k_iops_path"] = "GetMany";
            json["real_server_get_4k_iops_qd"] = server.QueueDepth;
            json["real_server_get_4k_iops_unary"] = Math.Round(points.Max(p => p.Iops));
            json["fio_4k_iops"] = Math.Round(fio.FioIops);
            json["fio_4k_iops_qd"] = fio.QueueDepth;
            json["real_server_fraction_of_fio"] = Math.Round(server.ManyIops / Math.Max(1, fio.FioIops), 3);
        }
        return json;
    }

    /// <summary>The depth at which GetMany was fastest, and the depth at which fio was.</summary>
    public static (RealServerPoint Server, RealServerPoint Fio) Peaks(IReadOnlyList<RealServerPoint> points) =>
        (points.MaxBy(p => p.ManyIops)!, points.MaxBy(p => p.FioIops)!);

    private static Metadata Bearer(string credential) => new() { { "authorization", "Bearer " + credential } };

    private static async Task FillAsync(FlashTier.FlashTierClient[] clients, Metadata auth, int flow, int objects)
    {
        int next = -1;
        await Task.WhenAll(Enumerable.Range(0, 32).Select(async w =>
        {
            var value = new byte[4096];
            for (int i; (i = Interlocked.Increment(ref next)) < objects;)
            {
                Random.Shared.NextBytes(value);
                using var call = clients[w % clients.Length].Put(auth);
                await call.RequestStream.WriteAsync(new PutRequest { Header = new PutHeader { Flow = flow, Key = Key(i), Etag = "\"1\"", Length = value.Length } });
                await call.RequestStream.WriteAsync(new PutRequest { Data = ByteString.CopyFrom(value) });
                await call.RequestStream.CompleteAsync();
                await call;
            }
        }));
    }

    private static ObjectKey Key(int i) => new() { Container = "bench", Blob = "k" + i.ToString(CultureInfo.InvariantCulture) };

    private static async Task<(double Iops, double P50Us, double P95Us)> GetLoadAsync(FlashTier.FlashTierClient[] clients, Metadata auth, int flow, int objects, int qd, TimeSpan duration)
    {
        var keys = Enumerable.Range(0, objects).Select(Key).ToArray();
        var latencies = new List<long>[qd];
        long deadline = Stopwatch.GetTimestamp() + (long)(duration.TotalSeconds * Stopwatch.Frequency);
        var clock = Stopwatch.StartNew();
        await Task.WhenAll(Enumerable.Range(0, qd).Select(w => Task.Run(async () =>
        {
            var mine = latencies[w] = new List<long>(1 << 16);
            var rng = new Random(w);
            var client = clients[w % clients.Length];
            while (Stopwatch.GetTimestamp() < deadline)
            {
                long start = Stopwatch.GetTimestamp();
                using var call = client.Get(new GetRequest { Flow = flow, Key = keys[rng.Next(objects)] }, auth);
                int bytes = 0;
                bool found = false;
                while (await call.ResponseStream.MoveNext(CancellationToken.None))
                {
                    if (call.ResponseStream.Current.PartCase == GetReply.PartOneofCase.Header)
                        found = call.ResponseStream.Current.Header.Found;
                    else
                        bytes += call.ResponseStream.Current.Data.Length;
                }
                if (!found || bytes != 4096)
                    throw new InvalidOperationException($"real server: a get answered found={found} with {bytes} bytes; every key was put with 4096");
                mine.Add(Stopwatch.GetTimestamp() - start);
            }
        })));
        double seconds = clock.Elapsed.TotalSeconds;
        var all = latencies.SelectMany(l => l).Order().ToArray();
        double Us(double q) => all.Length == 0 ? 0 : all[(int)Math.Min(all.Length - 1, Math.Ceiling(q * all.Length) - 1)] * 1e6 / Stopwatch.Frequency;
        return (all.Length / seconds, Us(0.50), Us(0.95));
    }

    /// <summary>
    /// The same closed loop through GetMany: <paramref name="manyStreams"/> streams, QD items in flight across them; each reply's results are answered by one request carrying as many new items, so the load
    /// generator pays a message per batch, not a call per get (it shares the 2 cores with the server).
    /// </summary>
    private static async Task<(double Iops, double P50Us, double P95Us)> GetManyLoadAsync(FlashTier.FlashTierClient[] clients, Metadata auth, int flow, int objects, int qd, TimeSpan duration, int manyStreams)
    {
        var keys = Enumerable.Range(0, objects).Select(Key).ToArray();
        int streams = Math.Min(qd, manyStreams);
        var latencies = new List<long>[streams];
        long replies = 0;
        long deadline = Stopwatch.GetTimestamp() + (long)(duration.TotalSeconds * Stopwatch.Frequency);
        var clock = Stopwatch.StartNew();
        await Task.WhenAll(Enumerable.Range(0, streams).Select(w => Task.Run(async () =>
        {
            var mine = latencies[w] = new List<long>(1 << 16);
            var rng = new Random(1000 + w);
            int depth = qd / streams + (w < qd % streams ? 1 : 0);
            // When each id was sent, by id modulo the ring (ids are sequential; far fewer than 65,536 are ever out at once):
            // an array, not a dictionary, since the load generator's CPU is taken from the server's two cores.
            var sent = new long[1 << 16];
            int outstanding = 0;
            ulong next = 0;
            using var call = clients[w % clients.Length].GetMany(auth);
            GetManyRequest Batch(int count)
            {
                var request = new GetManyRequest { Flow = flow };
                long now = Stopwatch.GetTimestamp();
                for (int i = 0; i < count; i++)
                {
                    sent[next & 0xFFFF] = now;
                    outstanding++;
                    request.Items.Add(new GetManyItem { Id = next++, Key = keys[rng.Next(objects)] });
                }
                return request;
            }
            await call.RequestStream.WriteAsync(Batch(depth));
            bool open = true;
            while (outstanding > 0 && await call.ResponseStream.MoveNext(CancellationToken.None))
            {
                long now = Stopwatch.GetTimestamp();
                int done = 0;
                Interlocked.Increment(ref replies);
                foreach (var r in call.ResponseStream.Current.Results)
                {
                    if (r.ErrorCode.Length > 0 || !r.Header.Found || r.Data.Length != 4096)
                        throw new InvalidOperationException($"real server: GetMany item {r.Id} answered {r.ErrorCode} {r.Error} found={r.Header?.Found} with {r.Data.Length} bytes; every key was put with 4096");
                    long at = sent[r.Id & 0xFFFF];
                    if (at == 0)
                        throw new InvalidOperationException($"real server: GetMany item {r.Id} answered twice or never asked");
                    sent[r.Id & 0xFFFF] = 0;
                    mine.Add(now - at);
                    outstanding--;
                    done++;
                }
                if (open && now < deadline)
                    await call.RequestStream.WriteAsync(Batch(done));
                else if (open)
                {
                    await call.RequestStream.CompleteAsync();
                    open = false;
                }
            }
            if (open)
                await call.RequestStream.CompleteAsync();
        })));
        double seconds = clock.Elapsed.TotalSeconds;
        var all = latencies.SelectMany(l => l).Order().ToArray();
        double Us(double q) => all.Length == 0 ? 0 : all[(int)Math.Min(all.Length - 1, Math.Ceiling(q * all.Length) - 1)] * 1e6 / Stopwatch.Frequency;
        LastResultsPerReply = replies == 0 ? 0 : (double)all.Length / replies;
        return (all.Length / seconds, Us(0.50), Us(0.95));
    }

    /// <summary>Results per reply message in the last GetMany load (how well the server batches).</summary>
    private static double LastResultsPerReply;

    private static async Task<(double Iops, double P50, double P95)> FioAsync(string file, long size, int qd, TimeSpan duration)
    {
        var psi = new ProcessStartInfo("fio") { UseShellExecute = false, RedirectStandardOutput = true, RedirectStandardError = true };
        foreach (string a in new[]
        {
            "--name=realserver", $"--filename={file}", "--direct=1", "--rw=randread", "--bs=4k", "--ioengine=psync",
            $"--numjobs={qd}", "--thread", "--group_reporting", "--time_based", $"--runtime={Math.Max(1, (int)duration.TotalSeconds)}",
            $"--size={size}", "--output-format=json",
        })
            psi.ArgumentList.Add(a);
        using Process p = Process.Start(psi) ?? throw new InvalidOperationException("fio did not start (Debian package fio)");
        Task<string> err = p.StandardError.ReadToEndAsync();
        string output = await p.StandardOutput.ReadToEndAsync();
        await p.WaitForExitAsync();
        if (p.ExitCode != 0)
            throw new InvalidOperationException($"fio on {file} exited with {p.ExitCode}: {await err}");
        JsonNode read = JsonNode.Parse(output[output.IndexOf('{', StringComparison.Ordinal)..])!["jobs"]![0]!["read"]!;
        JsonNode pct = read["clat_ns"]!["percentile"]!;
        return (read["iops"]!.GetValue<double>(), pct["50.000000"]!.GetValue<double>() / 1000, pct["95.000000"]!.GetValue<double>() / 1000);
    }
}
