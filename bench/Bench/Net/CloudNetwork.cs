using System.Diagnostics;
using System.Globalization;
using System.Net;

namespace FaaST.Bench.Net;

/// <summary>
/// The shape of the benchmarks' cloud-like network (bench/net/cloudnet.sh). The defaults are the paper's VMs
/// (Faa$T §6.1: about 90 MB/s from blob storage, 750 MB/s between instances) halved, keeping their 1:8.3
/// ratio, because the 2-vCPU machines these benchmarks run on cannot carry the absolute figures for 4
/// instances at once (docs/benchmarks.md, "A cloud-like network"). Rates are per instance and per direction.
/// </summary>
public sealed record CloudNetworkSettings
{
    /// <summary>Mbit/s each instance reads from (and writes to) the storage address; default 360 (45 MB/s).</summary>
    public int StorageMbps { get; init; } = 360;

    /// <summary>Mbit/s each instance receives from (and sends to) the other instances; default 3000 (375 MB/s).</summary>
    public int PeerMbps { get; init; } = 3000;

    /// <summary>One-way delay added to storage traffic (each direction, so a round trip gains twice this); default 0.</summary>
    public double StorageLatencyMs { get; init; }

    /// <summary>One-way delay added between instances; default 0.</summary>
    public double PeerLatencyMs { get; init; }

    /// <summary>The prefix of every name the script makes ([a-z][a-z0-9]{0,7}); default "fcn".</summary>
    public string Prefix { get; init; } = "fcn";

    /// <summary>K of 198.18.K.0/24 (the benchmarking range, never routed); default 0. Two networks need two subnets.</summary>
    public int Subnet { get; init; }

    /// <summary>bench/net/cloudnet.sh; default the one under the FaaST checkout.</summary>
    public string? Script { get; init; }
}

/// <summary>Whether this machine can build the shaped network, and if not why (the caller then runs on loopback).</summary>
public sealed record CloudNetworkAvailability(bool IsAvailable, string Reason);

/// <summary>
/// N network namespaces behind a shaped bridge (bench/net/cloudnet.sh): the storage address on the bridge in
/// this namespace, where Azurite listens (<c>AzuriteProcess.StartAsync(..., listenAddress: StorageAddress)</c>),
/// and one address per instance namespace, where an instance's processes run (<see cref="InNamespace"/>).
/// Disposing runs the script's <c>down</c>, which is idempotent; a process that dies without disposing leaves
/// names the next <c>up</c> of the same prefix removes first.
/// </summary>
public sealed class CloudNetwork : IAsyncDisposable
{
    private readonly string _script;
    private readonly string[] _namespaces;
    private readonly IPAddress[] _addresses;
    private int _disposed;

    private CloudNetwork(string script, CloudNetworkSettings settings, IPAddress storage, IPAddress platform, string[] namespaces, IPAddress[] addresses)
    {
        _script = script;
        Settings = settings;
        StorageAddress = storage;
        PlatformAddress = platform;
        _namespaces = namespaces;
        _addresses = addresses;
        AppDomain.CurrentDomain.ProcessExit += OnProcessExit;
    }

    /// <summary>The settings the network was brought up with.</summary>
    public CloudNetworkSettings Settings { get; }

    /// <summary>The storage address (on the bridge, in this process's namespace): where Azurite listens.</summary>
    public IPAddress StorageAddress { get; }

    /// <summary>
    /// The platform address (on the bridge, in this process's namespace, unshaped): where the frontend, the
    /// controller and a benchmark's client listen. A connection this namespace opens to an instance leaves from
    /// it, so only storage and instance-to-instance traffic carry the paper's limits.
    /// </summary>
    public IPAddress PlatformAddress { get; }

    /// <summary>How many instance namespaces there are.</summary>
    public int Instances => _namespaces.Length;

    /// <summary>The address of instance <paramref name="index"/> (its namespace's eth0): what its host listens on.</summary>
    public IPAddress InstanceAddress(int index) => _addresses[CheckIndex(index)];

    /// <summary>The network namespace of instance <paramref name="index"/>.</summary>
    public string Namespace(int index) => _namespaces[CheckIndex(index)];

    /// <summary>What a benchmark's JSON says under "network".</summary>
    public string Description => string.Create(CultureInfo.InvariantCulture,
        $"cloud-like: {Instances} namespaces; per instance {Settings.StorageMbps / 8.0:0.#} MB/s to storage, {Settings.PeerMbps / 8.0:0.#} MB/s between instances" +
        $"{(Settings.StorageLatencyMs > 0 || Settings.PeerLatencyMs > 0 ? $", +{Settings.StorageLatencyMs} ms storage / +{Settings.PeerLatencyMs} ms peer one-way" : "")} (bench/net/cloudnet.sh)");

    /// <summary>What a benchmark's JSON says under "network" when it ran without the shaped network.</summary>
    public static string LoopbackDescription(string reason) => $"loopback, unshaped: {reason}";

    /// <summary>
    /// Whether the shaped network can be built here: root, <c>ip</c> and <c>tc</c>, the script, and a network
    /// namespace actually created and removed (a container may refuse it even to root).
    /// </summary>
    public static async Task<CloudNetworkAvailability> AvailableAsync(string home, CancellationToken ct = default)
    {
        if (!OperatingSystem.IsLinux())
            return new(false, "network namespaces need Linux");
        if (!Environment.IsPrivilegedProcess)
            return new(false, $"not root (network namespaces and tc need it; running as {Environment.UserName})");
        foreach (var tool in (string[])["ip", "tc"])
            if (FindOnPath(tool) is null)
                return new(false, $"'{tool}' (iproute2) is not installed");
        var script = ScriptPath(home, null);
        if (!File.Exists(script))
            return new(false, $"{script} does not exist");
        var probe = string.Create(CultureInfo.InvariantCulture, $"fcnprobe{Environment.ProcessId % 100000}");
        var (code, _, error) = await RunAsync("ip", ["netns", "add", probe], ct);
        if (code != 0)
            return new(false, $"network namespaces are not permitted here (ip netns add: {error.Trim()})");
        await RunAsync("ip", ["netns", "del", probe], CancellationToken.None);
        return new(true, "root, iproute2 and network namespaces available");
    }

    /// <summary>
    /// Brings up <paramref name="instances"/> shaped instance namespaces (removing an earlier network of the same
    /// prefix first). Throws with the script's message when it fails.
    /// </summary>
    public static async Task<CloudNetwork> UpAsync(string home, int instances, CloudNetworkSettings? settings = null, CancellationToken ct = default)
    {
        settings ??= new CloudNetworkSettings();
        ArgumentOutOfRangeException.ThrowIfLessThan(instances, 1);
        var script = ScriptPath(home, settings.Script);
        var (code, output, error) = await RunAsync(script, [
            "up", "--instances", Invariant(instances), "--prefix", settings.Prefix, "--subnet", Invariant(settings.Subnet),
            "--storage-mbps", Invariant(settings.StorageMbps), "--peer-mbps", Invariant(settings.PeerMbps),
            "--storage-latency-ms", Invariant(settings.StorageLatencyMs), "--peer-latency-ms", Invariant(settings.PeerLatencyMs)], ct);
        if (code != 0)
            throw new InvalidOperationException($"{script} up failed (exit {code}): {error.Trim()}");
        try
        {
            return Parse(script, settings, instances, output);
        }
        catch
        {
            await RunAsync(script, ["down", "--prefix", settings.Prefix], CancellationToken.None);
            throw;
        }
    }

    /// <summary>
    /// The shaped network when <see cref="AvailableAsync"/> says it can be built, else null; with what the
    /// benchmark's JSON says under "network" either way (the fallback is plain loopback, and says so).
    /// </summary>
    public static async Task<(CloudNetwork? Network, string Description)> UpOrLoopbackAsync(string home, int instances,
        CloudNetworkSettings? settings = null, CancellationToken ct = default)
    {
        var availability = await AvailableAsync(home, ct);
        if (!availability.IsAvailable)
            return (null, LoopbackDescription(availability.Reason));
        var network = await UpAsync(home, instances, settings, ct);
        return (network, network.Description);
    }

    /// <summary>
    /// <paramref name="inner"/> run inside instance <paramref name="index"/>'s namespace: <c>ip netns exec NS
    /// FILE ARGS...</c> with the same environment, working directory and redirections. <c>ip netns exec</c>
    /// replaces itself with the command, so the started process is the command itself (its id, its exit code).
    /// </summary>
    public ProcessStartInfo InNamespace(int index, ProcessStartInfo inner)
    {
        ArgumentNullException.ThrowIfNull(inner);
        var info = new ProcessStartInfo("ip")
        {
            UseShellExecute = false,
            WorkingDirectory = inner.WorkingDirectory,
            RedirectStandardInput = inner.RedirectStandardInput,
            RedirectStandardOutput = inner.RedirectStandardOutput,
            RedirectStandardError = inner.RedirectStandardError,
            CreateNoWindow = inner.CreateNoWindow,
        };
        info.ArgumentList.Add("netns");
        info.ArgumentList.Add("exec");
        info.ArgumentList.Add(Namespace(index));
        info.ArgumentList.Add(inner.FileName);
        if (inner.ArgumentList.Count > 0)
        {
            foreach (var arg in inner.ArgumentList)
                info.ArgumentList.Add(arg);
        }
        else if (!string.IsNullOrWhiteSpace(inner.Arguments))
        {
            throw new ArgumentException("give the command's arguments in ArgumentList (Arguments would need a shell to split)", nameof(inner));
        }
        info.Environment.Clear();
        foreach (var (name, value) in inner.Environment)
            info.Environment[name] = value;
        return info;
    }

    /// <summary>Removes every namespace, veth and the bridge (the script's idempotent <c>down</c>). Stop the processes
    /// started with <see cref="InNamespace"/> first: a namespace whose name is removed lives on, unreachable,
    /// while a process still runs in it.</summary>
    public async ValueTask DisposeAsync()
    {
        if (Interlocked.Exchange(ref _disposed, 1) != 0)
            return;
        AppDomain.CurrentDomain.ProcessExit -= OnProcessExit;
        var (code, _, error) = await RunAsync(_script, ["down", "--prefix", Settings.Prefix], CancellationToken.None);
        if (code != 0)
            throw new InvalidOperationException($"{_script} down --prefix {Settings.Prefix} failed (exit {code}): {error.Trim()}");
    }

    /// <summary>A benchmark that exits (or gets SIGTERM) without disposing still takes its network down; after a
    /// SIGKILL the next <c>up</c> of the same prefix removes what is left.</summary>
    private void OnProcessExit(object? sender, EventArgs e)
    {
        if (Interlocked.Exchange(ref _disposed, 1) != 0)
            return;
        using var down = Process.Start(new ProcessStartInfo(_script, ["down", "--prefix", Settings.Prefix]) { UseShellExecute = false });
        down?.WaitForExit(30_000);
    }

    private int CheckIndex(int index) =>
        index >= 0 && index < _namespaces.Length ? index
            : throw new ArgumentOutOfRangeException(nameof(index), index, $"the network has instances 0..{_namespaces.Length - 1}");

    /// <summary>Reads the key=value lines the script prints (storage=ADDR, instance.I=NS ADDR).</summary>
    internal static CloudNetwork Parse(string script, CloudNetworkSettings settings, int instances, string output)
    {
        var values = new Dictionary<string, string>(StringComparer.Ordinal);
        foreach (var line in output.Split('\n', StringSplitOptions.RemoveEmptyEntries | StringSplitOptions.TrimEntries))
        {
            var eq = line.IndexOf('=', StringComparison.Ordinal);
            if (eq > 0)
                values[line[..eq]] = line[(eq + 1)..];
        }
        if (!values.TryGetValue("storage", out var storageText) || !IPAddress.TryParse(storageText, out var storage))
            throw new InvalidOperationException($"{script} up printed no valid storage=ADDRESS line:\n{output}");
        if (!values.TryGetValue("platform", out var platformText) || !IPAddress.TryParse(platformText, out var platform))
            throw new InvalidOperationException($"{script} up printed no valid platform=ADDRESS line:\n{output}");
        var namespaces = new string[instances];
        var addresses = new IPAddress[instances];
        for (var i = 0; i < instances; i++)
        {
            var key = string.Create(CultureInfo.InvariantCulture, $"instance.{i}");
            var parts = values.TryGetValue(key, out var v) ? v.Split(' ', StringSplitOptions.RemoveEmptyEntries) : [];
            if (parts.Length != 2 || !IPAddress.TryParse(parts[1], out var address))
                throw new InvalidOperationException($"{script} up printed no valid {key}=NAMESPACE ADDRESS line:\n{output}");
            namespaces[i] = parts[0];
            addresses[i] = address;
        }
        return new CloudNetwork(script, settings, storage, platform, namespaces, addresses);
    }

    private static string ScriptPath(string home, string? script) => script ?? Path.Combine(home, "bench", "net", "cloudnet.sh");

    private static string Invariant(IFormattable value) => value.ToString(null, CultureInfo.InvariantCulture);

    /// <summary>The tool's path on PATH (and the sbin directories root's tools live in), or null.</summary>
    internal static string? FindOnPath(string tool) =>
        (Environment.GetEnvironmentVariable("PATH") ?? "/usr/sbin:/usr/bin:/sbin:/bin")
            .Split(':', StringSplitOptions.RemoveEmptyEntries)
            .Append("/usr/sbin").Append("/sbin")
            .Select(dir => Path.Combine(dir, tool))
            .FirstOrDefault(File.Exists);

    private static async Task<(int Code, string Output, string Error)> RunAsync(string file, IEnumerable<string> args, CancellationToken ct)
    {
        var info = new ProcessStartInfo(file) { UseShellExecute = false, RedirectStandardOutput = true, RedirectStandardError = true };
        foreach (var arg in args)
            info.ArgumentList.Add(arg);
        using var process = Process.Start(info) ?? throw new InvalidOperationException($"{file} did not start");
        var output = process.StandardOutput.ReadToEndAsync(ct);
        var error = process.StandardError.ReadToEndAsync(ct);
        await process.WaitForExitAsync(ct);
        return (process.ExitCode, await output, await error);
    }
}
