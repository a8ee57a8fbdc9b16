using System.Diagnostics;
using System.Globalization;
using System.Net;
using FaaST.Hosting.Status;
using FaaST.Cachelet;

namespace FaaST.Runtime.Hosting;

/// <summary>How to run several instances of one app on this machine.</summary>
public sealed record InstanceGroupOptions
{
    public required string AppDirectory { get; init; }

    public required int Count { get; init; }

    /// <summary>The storage every instance shares (membership, blobs).</summary>
    public required string StorageConnectionString { get; init; }

    /// <summary>FaaST.Runtime.dll; default the one this code runs from.</summary>
    public string RuntimeDll { get; init; } = typeof(InstanceGroup).Assembly.Location;

    /// <summary>More arguments for every instance (e.g. --workers 2, --isolation off).</summary>
    public IReadOnlyList<string> Arguments { get; init; } = [];

    /// <summary>More environment for every instance (e.g. FAAST_PEER_SECRET).</summary>
    public IReadOnlyDictionary<string, string> Environment { get; init; } = new Dictionary<string, string>();

    /// <summary>First HTTP port; instance i listens on FirstPort + i. 0 (default): free ports.</summary>
    public int FirstPort { get; init; }

    /// <summary>Where each instance's output goes (instance-N.log); null: forwarded to <see cref="Output"/>.</summary>
    public string? LogDirectory { get; init; }

    /// <summary>Receives "[i] line" for each output line when there is no log directory.</summary>
    public Action<string>? Output { get; init; }

    /// <summary>The view size to wait for at start; default <see cref="Count"/> (more when joining running instances).</summary>
    public int? ExpectedMembers { get; init; }

    /// <summary>How long an instance has to start and see all the others.</summary>
    public TimeSpan StartupTimeout { get; init; } = TimeSpan.FromSeconds(90);

    /// <summary>A command each instance is started through (<see cref="HostLaunchOptions.Wrapper"/>): e.g. one that puts
    /// it in a memory cgroup of its own. Index → command; null or an empty list: none.</summary>
    public Func<int, IReadOnlyList<string>>? Wrapper { get; init; }
}

/// <summary>One running instance of the group.</summary>
public sealed record GroupInstance(int Index, Process Process, Uri BaseAddress, string Id, Uri PeerAddress);

/// <summary>
/// N instances of one app as separate runtime host processes on loopback, sharing one storage: the
/// cooperative cache across processes, for <c>./faast start --instances N</c>, tests and benchmarks.
/// </summary>
public sealed class InstanceGroup : IAsyncDisposable
{
    private readonly InstanceGroupOptions _options;
    private readonly GroupInstance?[] _instances;
    private readonly HttpClient _http = new() { Timeout = TimeSpan.FromSeconds(10) };
    private readonly List<StreamWriter> _logs = [];

    private InstanceGroup(InstanceGroupOptions options)
    {
        _options = options;
        _instances = new GroupInstance?[options.Count];
    }

    /// <summary>The running instances (a killed one is absent until restarted).</summary>
    public IReadOnlyList<GroupInstance> Instances => _instances.OfType<GroupInstance>().ToArray();

    public GroupInstance this[int index] => _instances[index] ?? throw new InvalidOperationException($"instance {index} is not running");

    /// <summary>Starts every instance and waits until each is up and sees all of them.</summary>
    public static async Task<InstanceGroup> StartAsync(InstanceGroupOptions options, CancellationToken ct = default)
    {
        ArgumentOutOfRangeException.ThrowIfLessThan(options.Count, 1);
        if (!File.Exists(options.RuntimeDll))
            throw new FileNotFoundException($"the runtime {options.RuntimeDll} does not exist; build it first", options.RuntimeDll);
        var group = new InstanceGroup(options);
        try
        {
            // Without FirstPort each instance takes a free port (--port 0) and reports it in its ready file: no port is
            // looked at first and then taken by another process before the instance binds it.
            await Task.WhenAll(Enumerable.Range(0, options.Count).Select(i => group.StartInstanceAsync(i, options.FirstPort > 0 ? options.FirstPort + i : 0, ct)));
            await group.WaitForViewAsync(options.ExpectedMembers ?? options.Count, ct);
            return group;
        }
        catch
        {
            await group.DisposeAsync();
            throw;
        }
    }

    /// <summary>Kills instance <paramref name="index"/> at once (SIGKILL: a crash, no deregistration).
    /// Its shared-memory segments are then freed, as a supervisor would, rather than left until the
    /// app next starts.</summary>
    public async Task KillAsync(int index)
    {
        _ = this[index];
        _instances[index] = null;
        await Launched(index).KillAsync();
        BlobCache.CleanStaleSegments(FunctionApp.NameOf(_options.AppDirectory));
    }

    /// <summary>Stops instance <paramref name="index"/> cleanly (SIGTERM: it leaves the view and flushes).</summary>
    public async Task StopAsync(int index)
    {
        _ = this[index];
        _instances[index] = null;
        await Launched(index).StopAsync(StopGrace);
    }

    /// <summary>How long an instance has to exit on SIGTERM before it is killed.</summary>
    private static readonly TimeSpan StopGrace = TimeSpan.FromSeconds(30);

    // Every host the group started, by index (the last one of each): stopped and disposed with the group. Their
    // Process objects stay valid after a kill or stop, for callers that still hold a GroupInstance.
    private readonly List<LaunchedHost> _launched = [];
    private readonly Dictionary<int, LaunchedHost> _current = [];

    private LaunchedHost Launched(int index)
    {
        lock (_launched)
            return _current[index];
    }

    /// <summary>Starts instance <paramref name="index"/> again on its old port.</summary>
    public async Task<GroupInstance> RestartAsync(int index, CancellationToken ct = default)
    {
        if (_instances[index] is not null)
            throw new InvalidOperationException($"instance {index} is running");
        int port;
        lock (_launched)
            port = _lastPorts[index];
        return await StartInstanceAsync(index, port, ct);
    }

    private readonly Dictionary<int, int> _lastPorts = [];

    /// <summary>Waits until every running instance sees exactly <paramref name="members"/> members.</summary>
    public async Task WaitForViewAsync(int members, CancellationToken ct = default)
    {
        var deadline = DateTime.UtcNow + _options.StartupTimeout;
        foreach (var instance in Instances)
        {
            while (true)
            {
                if (instance.Process.HasExited)
                    throw new InvalidOperationException($"instance {instance.Index} exited with code {instance.Process.ExitCode}");
                if (await TryStatusAsync(instance.BaseAddress, ct) is { } status && status.Members.Count == members)
                    break;
                if (DateTime.UtcNow > deadline)
                    throw new TimeoutException($"instance {instance.Index} does not see {members} members after {_options.StartupTimeout.TotalSeconds:0} s");
                await Task.Delay(100, ct);
            }
        }
    }

    private async Task<GroupInstance> StartInstanceAsync(int index, int port, CancellationToken ct)
    {
        Action<string> sink;
        if (_options.LogDirectory is { } dir)
        {
            Directory.CreateDirectory(dir);
            var log = new StreamWriter(Path.Combine(dir, $"instance-{index}.log"), append: true) { AutoFlush = true };
            lock (_logs)
                _logs.Add(log);
            sink = line =>
            {
                lock (log)
                    log.WriteLine(line);
            };
        }
        else
        {
            sink = line => _options.Output?.Invoke($"[{index}] {line}");
        }
        var environment = new Dictionary<string, string> { ["AzureWebJobsStorage"] = _options.StorageConnectionString };
        foreach (var (name, value) in _options.Environment)
            environment[name] = value;
        LaunchedHost host;
        try
        {
            host = await LaunchedHost.StartAsync(new HostLaunchOptions
            {
                RuntimeDll = _options.RuntimeDll,
                AppDirectory = _options.AppDirectory,
                Arguments = ["--port", port.ToString(CultureInfo.InvariantCulture), .. _options.Arguments],
                Environment = environment,
                Label = $"instance {index}",
                Wrapper = _options.Wrapper?.Invoke(index) ?? [],
                StartupTimeout = _options.StartupTimeout,
                Output = sink,
            }, ct);
        }
        catch (HostStartException e) when (e.Failure == HostStartFailure.TimedOut)
        {
            throw new TimeoutException(e.Message, e);
        }
        catch (HostStartException e)
        {
            throw new InvalidOperationException(e.Message, e);
        }
        lock (_launched)
        {
            _launched.Add(host);
            _current[index] = host;
            _lastPorts[index] = host.Ready.Http.Port;
        }
        if (host.Ready.Peer is not { } peer)
            throw new InvalidOperationException($"instance {index} serves no peer endpoint (a group's instances share their cache through peers; drop --no-peers)");
        // Loopback, as the instances are asked for their status (they may listen on a wildcard address).
        var instance = new GroupInstance(index, host.Process, new Uri($"http://127.0.0.1:{host.Ready.Http.Port}/"), host.Ready.Instance, peer);
        _instances[index] = instance;
        return instance;
    }

    private string? _masterKey;

    private async Task<HostStatus?> TryStatusAsync(Uri address, CancellationToken ct)
    {
        try
        {
            using var request = new HttpRequestMessage(HttpMethod.Get, new Uri(address, "admin/host/status"));
            if (Volatile.Read(ref _masterKey) is { } key)
                request.Headers.Add(Http.HttpKeyCheck.HeaderName, key);
            using var response = await _http.SendAsync(request, ct);
            if (response.StatusCode == HttpStatusCode.Unauthorized)
            {
                // Instances that listen beyond loopback check keys: the admin API needs the app's master
                // key, which the instance has loaded (and created) by the time it answers; next poll sends it.
                Volatile.Write(ref _masterKey, await MasterKeyAsync(ct));
                return null;
            }
            if (!response.IsSuccessStatusCode)
                return null;
            return await response.Content.ReadFromJsonAsync(StatusJsonContext.Default.HostStatus, ct);
        }
        catch (Exception e) when (e is HttpRequestException or TaskCanceledException && !ct.IsCancellationRequested)
        {
            return null;
        }
    }

    /// <summary>The app's master key where its instances read it: app settings (kubernetes type) or storage.</summary>
    private async Task<string> MasterKeyAsync(CancellationToken ct)
    {
        var environment = new System.Collections.Hashtable();
        foreach (System.Collections.DictionaryEntry e in System.Environment.GetEnvironmentVariables())
            environment[e.Key] = e.Value;
        environment["AzureWebJobsStorage"] = _options.StorageConnectionString;
        foreach (var (name, value) in _options.Environment)
            environment[name] = value;
        var app = FunctionApp.Load(_options.AppDirectory, environment);
        if (app.Settings[Http.HttpKeyCheck.StorageTypeSetting]?.Equals("kubernetes", StringComparison.OrdinalIgnoreCase) == true)
            return Http.FunctionKeys.FromSettings(app.Settings).Master;
        using var store = new FaaST.Storage.BlobStore(_options.StorageConnectionString);
        return (await Http.FunctionKeys.FromStorageAsync(store, app, _ => { }, ct)).Master;
    }

    /// <summary>Stops every instance cleanly (SIGTERM), killing any that do not exit in 30 s.</summary>
    public async ValueTask DisposeAsync()
    {
        Array.Clear(_instances);
        LaunchedHost[] launched;
        lock (_launched)
            launched = [.. _launched];
        await Task.WhenAll(launched.Select(async h =>
        {
            await h.StopAsync(StopGrace);
            await h.DisposeAsync();
        }));
        _http.Dispose();
        lock (_logs)
            foreach (var log in _logs)
                log.Dispose();
    }
}
