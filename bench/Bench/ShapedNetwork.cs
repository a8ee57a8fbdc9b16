using System.Diagnostics;
using System.Net;
using System.Net.Http.Json;
using System.Security.Cryptography;
using System.Text.Json.Nodes;
using FaaST.Bench.Net;
using FaaST.Hosting.Status;
using FaaST.Runtime.Hosting;
using FaaST.ScaleController.Providers;
using FaaST.Storage;

namespace FaaST.Bench;

/// <summary>
/// The bandwidth scenario on bench/net/cloudnet.sh's shaped network (<see cref="CloudNetwork"/>): Azurite on
/// the storage address, each instance a runtime host inside its own namespace (<c>ip netns exec NS</c>, started
/// by the scale controller's <see cref="LocalProcessProvider"/> with its <c>CommandPrefix</c> and
/// <c>ListenAddress</c>) listening on that namespace's address, so its peer endpoint is advertised there and
/// its storage and peer traffic crosses the shaped veth. The bench client stays in the root namespace and
/// reaches the instances over the bridge from the platform address, which is not shaped.
/// Namespaces are slots: a group takes free ones and gives them back when its instances stop, so cold
/// starts (instances started during the measurement) land in namespaces the network already has.
/// </summary>
public sealed class ShapedNetwork : IBandwidthNetwork
{
    private readonly string _home;
    private readonly CloudNetwork _network;
    private readonly bool[] _taken;
    private readonly List<IAsyncDisposable> _groups = [];
    private readonly HashSet<string> _prepared = [];
    private AzuriteProcess? _azurite;
    private readonly AzuriteDataDirectory _data = new();

    /// <summary>The app's master key: an instance listening beyond loopback checks keys, and its admin API
    /// (status, the view) needs this one. Random per run, given to the app as a kubernetes-type secret in
    /// its settings (docs/scaling.md, "The benchmark network").</summary>
    private readonly string _masterKey = Convert.ToHexString(RandomNumberGenerator.GetBytes(24));

    private ShapedNetwork(string home, CloudNetwork network)
    {
        _home = home;
        _network = network;
        _taken = new bool[network.Instances];
    }

    /// <summary>Brings up <paramref name="instances"/> shaped namespaces (cloudnet.sh's defaults unless <paramref name="settings"/>).</summary>
    public static async Task<ShapedNetwork> UpAsync(string home, int instances, CloudNetworkSettings? settings, CancellationToken ct) =>
        new(home, await CloudNetwork.UpAsync(home, instances, settings, ct));

    public string Description => _network.Description;

    public bool Shaped => true;

    public (double StorageMBps, double PeerMBps)? Rates => (_network.Settings.StorageMbps / 8.0, _network.Settings.PeerMbps / 8.0);

    public IPAddress ServiceAddress => _network.PlatformAddress;

    public string? MasterKey => _masterKey;

    public async Task<string> StartStorageAsync(CancellationToken ct)
    {
        _azurite = await AzuriteProcess.StartAsync(_home, ct: ct, listenAddress: _network.StorageAddress, dataDirectory: _data.Path);
        return _azurite.ConnectionString;
    }

    /// <summary>In the first namespace no group holds (a process that runs and ends while the scenario waits for it).</summary>
    public System.Diagnostics.ProcessStartInfo WhereInstancesRun(System.Diagnostics.ProcessStartInfo inner)
    {
        int slot;
        lock (_taken)
            slot = Array.IndexOf(_taken, false);
        if (slot < 0)
            throw new InvalidOperationException($"every one of the shaped network's {_taken.Length} namespaces runs an instance; none is free for a baseline process");
        return _network.InNamespace(slot, inner);
    }

    public async Task<IBandwidthGroup> StartInstancesAsync(InstanceGroupOptions options, CancellationToken ct)
    {
        PrepareApp(options.AppDirectory);
        int[] slots;
        lock (_taken)
        {
            slots = Enumerable.Range(0, _taken.Length).Where(i => !_taken[i]).Take(options.Count).ToArray();
            if (slots.Length < options.Count)
                throw new InvalidOperationException($"the shaped network has {_taken.Length} namespaces and {_taken.Count(t => t)} are in use; {options.Count} more asked for");
            foreach (var slot in slots)
                _taken[slot] = true;
        }
        var group = new Group(this, options, slots);
        lock (_groups)
            _groups.Add(group);
        try
        {
            await group.StartAsync(ct);
            await group.WaitForViewAsync(options.ExpectedMembers ?? options.Count, ct);
            return group;
        }
        catch
        {
            await group.DisposeAsync();
            throw;
        }
    }

    /// <summary>
    /// Gives the app copy the settings an instance beyond loopback needs: keys from the app's settings
    /// (AzureWebJobsSecretStorageType = kubernetes) with this run's master key, so the admin API answers the
    /// bench (the functions it reads are anonymous). The copy is the scenario's own (HostProcess.CopyApp).
    /// </summary>
    private void PrepareApp(string appDirectory)
    {
        lock (_prepared)
        {
            if (!_prepared.Add(appDirectory))
                return;
        }
        var path = Path.Combine(appDirectory, "local.settings.json");
        var settings = (File.Exists(path) ? JsonNode.Parse(File.ReadAllText(path)) : null) as JsonObject ?? new JsonObject { ["IsEncrypted"] = false };
        if (settings["Values"] is not JsonObject values)
            settings["Values"] = values = new JsonObject();
        values["AzureWebJobsSecretStorageType"] = "kubernetes";
        values["host.master"] = _masterKey;
        File.WriteAllText(path, settings.ToJsonString());
    }

    private void Release(IEnumerable<int> slots)
    {
        lock (_taken)
            foreach (var slot in slots)
                _taken[slot] = false;
    }

    /// <summary>Stops every group still running (their processes must leave the namespaces before they go), Azurite, then the network.</summary>
    public async ValueTask DisposeAsync()
    {
        IAsyncDisposable[] groups;
        lock (_groups)
            groups = [.. _groups];
        foreach (var group in groups)
            await group.DisposeAsync();
        if (_azurite is not null)
            await _azurite.DisposeAsync();
        _data.Dispose();
        await _network.DisposeAsync();
    }

    /// <summary>Instances in namespace slots, one <see cref="LocalProcessProvider"/> per slot (its command prefix names the namespace).</summary>
    private sealed class Group(ShapedNetwork network, InstanceGroupOptions options, int[] slots) : IBandwidthGroup
    {
        private readonly GroupInstance?[] _instances = new GroupInstance?[slots.Length];
        private readonly InstanceHandle?[] _handles = new InstanceHandle?[slots.Length];
        private readonly LocalProcessProvider[] _providers = new LocalProcessProvider[slots.Length];
        // Which of the group's slots it still holds: a stopped instance gives its namespace back at once.
        private readonly bool[] _held = [.. slots.Select(_ => true)];
        private readonly List<StreamWriter> _logs = [];
        private readonly HttpClient _http = new() { Timeout = TimeSpan.FromSeconds(10) };
        private int _disposed;

        public IReadOnlyList<GroupInstance> Instances => _instances.OfType<GroupInstance>().ToArray();

        public GroupInstance this[int index] => _instances[index] ?? throw new InvalidOperationException($"instance {index} is not running");

        public async Task StartAsync(CancellationToken ct)
        {
            if (!File.Exists(options.RuntimeDll))
                throw new FileNotFoundException($"the runtime {options.RuntimeDll} does not exist; build it first", options.RuntimeDll);
            var environment = new Dictionary<string, string>(options.Environment)
            {
                ["AzureWebJobsStorage"] = options.StorageConnectionString,
                // The provider learns readiness from the host's ready file; the log lines (event 5003 "Host started",
                // 5013 its peer endpoint, Information of FaaST.Host) are kept for the benchmark's own logs.
                ["Logging__LogLevel__FaaST.Host"] = "Information",
            };
            for (var i = 0; i < slots.Length; i++)
            {
                var log = options.LogDirectory is { } dir ? OpenLog(dir, slots[i]) : null;
                _providers[i] = new LocalProcessProvider(new LocalProcessOptions
                {
                    RuntimeDll = options.RuntimeDll,
                    ListenAddress = network._network.InstanceAddress(slots[i]).ToString(),
                    // The group's wrapper first: `ip netns exec` mounts the namespace's own /sys, where a cgroup's
                    // files (a wrapper that joins a memory cgroup) are not.
                    CommandPrefix = [.. options.Wrapper?.Invoke(i) ?? [], "ip", "netns", "exec", network._network.Namespace(slots[i])],
                    StartupTimeout = options.StartupTimeout,
                    Output = log is null ? (_, line) => options.Output?.Invoke(line) : (_, line) => { lock (log) log.WriteLine(line); },
                });
            }
            // Together, as a scale-out starts them (the cold time is the slowest start, not the sum).
            await Task.WhenAll(Enumerable.Range(0, slots.Length).Select(async i =>
            {
                var spec = new InstanceSpec(Path.GetFileName(options.AppDirectory), 1, options.AppDirectory, environment, options.Arguments);
                var handle = await _providers[i].StartAsync(spec, ct);
                _handles[i] = handle;
                var peer = handle.PeerAddress ?? (await StatusAsync(handle.BaseAddress, ct))?.Instance?.PeerAddress
                    ?? throw new InvalidOperationException($"instance in {network._network.Namespace(slots[i])} serves no peer endpoint");
                _instances[i] = new GroupInstance(i, Process.GetProcessById(handle.ProcessId), handle.BaseAddress, handle.Id, peer);
            }));
        }

        private StreamWriter OpenLog(string directory, int slot)
        {
            Directory.CreateDirectory(directory);
            var log = new StreamWriter(Path.Combine(directory, $"instance-ns{slot}.log"), append: true) { AutoFlush = true };
            lock (_logs)
                _logs.Add(log);
            return log;
        }

        public async Task StopAsync(int index)
        {
            var handle = _handles[index] ?? throw new InvalidOperationException($"instance {index} is not running");
            _instances[index] = null;
            _handles[index] = null;
            await _providers[index].StopAsync(handle, TimeSpan.FromSeconds(20), CancellationToken.None);
            ReleaseSlot(index);
        }

        private void ReleaseSlot(int index)
        {
            lock (_held)
            {
                if (!_held[index])
                    return;
                _held[index] = false;
            }
            network.Release([slots[index]]);
        }

        public async Task WaitForViewAsync(int members, CancellationToken ct)
        {
            var deadline = DateTime.UtcNow + options.StartupTimeout;
            foreach (var instance in Instances)
            {
                while ((await StatusAsync(instance.BaseAddress, ct))?.Members.Count != members)
                {
                    if (instance.Process.HasExited)
                        throw new InvalidOperationException($"instance {instance.Index} exited with code {instance.Process.ExitCode}");
                    if (DateTime.UtcNow > deadline)
                        throw new TimeoutException($"instance {instance.Index} does not see {members} members after {options.StartupTimeout.TotalSeconds:0} s");
                    await Task.Delay(100, ct);
                }
            }
        }

        public async Task WaitForWorkersAsync(int workers, string logDirectory)
        {
            var deadline = DateTime.UtcNow.AddSeconds(60);
            foreach (var instance in Instances)
            {
                while (await StatusAsync(instance.BaseAddress, CancellationToken.None) is not { } status || status.ReadyWorkers < workers)
                {
                    if (DateTime.UtcNow > deadline)
                        throw new TimeoutException($"instance {instance.Index} has not {workers} ready worker(s) after 60 s (log: {logDirectory})");
                    await Task.Delay(100);
                }
            }
        }

        /// <summary>The instance's admin status (with the master key: keys are checked beyond loopback); null while it does not answer.</summary>
        private async Task<HostStatus?> StatusAsync(Uri address, CancellationToken ct)
        {
            try
            {
                using var request = new HttpRequestMessage(HttpMethod.Get, new Uri(address, "admin/host/status"));
                request.Headers.Add("x-functions-key", network._masterKey);
                using var response = await _http.SendAsync(request, ct);
                if (response.StatusCode == HttpStatusCode.Unauthorized)
                    throw new InvalidOperationException($"{address} refused the master key (are the app's key settings in place?)");
                return response.IsSuccessStatusCode ? await response.Content.ReadFromJsonAsync(StatusJsonContext.Default.HostStatus, ct) : null;
            }
            catch (Exception e) when (e is HttpRequestException or TaskCanceledException && !ct.IsCancellationRequested)
            {
                return null;
            }
        }

        public async ValueTask DisposeAsync()
        {
            if (Interlocked.Exchange(ref _disposed, 1) != 0)
                return;
            await Task.WhenAll(_providers.OfType<LocalProcessProvider>().Select(p => p.DisposeAsync().AsTask()));
            for (var i = 0; i < slots.Length; i++)
                ReleaseSlot(i);
            lock (network._groups)
                network._groups.Remove(this);
            foreach (var instance in _instances.OfType<GroupInstance>())
                instance.Process.Dispose();
            _http.Dispose();
            lock (_logs)
                foreach (var log in _logs)
                    log.Dispose();
        }
    }
}
