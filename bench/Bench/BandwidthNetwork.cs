using System.Text.Json.Nodes;
using FaaST.Runtime.Hosting;
using FaaST.Storage;

namespace FaaST.Bench;

/// <summary>
/// Where the bandwidth scenario's storage and instances run: the one seam a shaped network plugs into
/// (issue 13 item 8: network namespaces and tc giving each instance a slow link to storage and a fast one
/// to the others, like the paper's VMs). <see cref="LoopbackNetwork"/> is plain loopback, unshaped;
/// <see cref="ShapedNetwork"/> is bench/net/cloudnet.sh's namespaces.
/// </summary>
public interface IBandwidthNetwork : IAsyncDisposable
{
    /// <summary>One line for the results: what the links are.</summary>
    string Description { get; }

    /// <summary>Whether storage and instance links are shaped like the paper's (false: loopback at memory speed).</summary>
    bool Shaped { get; }

    /// <summary>The shaped rates in MB/s per instance and direction (storage, between instances); null when unshaped.</summary>
    (double StorageMBps, double PeerMBps)? Rates { get; }

    /// <summary>Starts the blob storage (Azurite) the instances share; its connection string.</summary>
    Task<string> StartStorageAsync(CancellationToken ct);

    /// <summary>Where a service the instances reach over an unshaped link listens (the flash server of
    /// <c>./faast bench flash</c>): the platform address on the shaped network, 127.0.0.1 on loopback.</summary>
    System.Net.IPAddress ServiceAddress { get; }

    /// <summary>The master key the instances' admin API takes (null: keys are not checked, loopback).</summary>
    string? MasterKey { get; }

    /// <summary>Starts instances of an app (one more group; <see cref="InstanceGroupOptions.ExpectedMembers"/> says the view to wait for).</summary>
    Task<IBandwidthGroup> StartInstancesAsync(InstanceGroupOptions options, CancellationToken ct);

    /// <summary>A process started where an instance would run (the shaped network: in a free instance namespace, so its
    /// storage traffic is shaped as an instance's; loopback: as it is): a baseline outside the platform.</summary>
    System.Diagnostics.ProcessStartInfo WhereInstancesRun(System.Diagnostics.ProcessStartInfo inner);
}

/// <summary>
/// What the scenario does with a group of instances, whichever way they were started (<see cref="InstanceGroup"/>
/// on loopback; processes in network namespaces on the shaped network).
/// </summary>
public interface IBandwidthGroup : IAsyncDisposable
{
    /// <summary>The running instances.</summary>
    IReadOnlyList<GroupInstance> Instances { get; }

    GroupInstance this[int index] { get; }

    /// <summary>Stops instance <paramref name="index"/> cleanly (SIGTERM: it leaves the view).</summary>
    Task StopAsync(int index);

    /// <summary>Waits until every running instance of the group sees exactly <paramref name="members"/> members.</summary>
    Task WaitForViewAsync(int members, CancellationToken ct);

    /// <summary>Waits until every instance has <paramref name="workers"/> ready workers.</summary>
    Task WaitForWorkersAsync(int workers, string logDirectory);
}

/// <summary>Everything on 127.0.0.1: Azurite as a local process, instances as local processes. Unshaped.</summary>
public sealed class LoopbackNetwork(string home, string? reason = null) : IBandwidthNetwork
{
    private AzuriteProcess? _azurite;
    private readonly AzuriteDataDirectory _data = new();

    public string Description => Net.CloudNetwork.LoopbackDescription(
        (reason is null ? "" : reason + "; ") + "Azurite and the instances on 127.0.0.1, links at this machine's memory and CPU speed");

    public bool Shaped => false;

    public (double StorageMBps, double PeerMBps)? Rates => null;

    public System.Net.IPAddress ServiceAddress => System.Net.IPAddress.Loopback;

    public string? MasterKey => null;

    public async Task<string> StartStorageAsync(CancellationToken ct)
    {
        _azurite = await AzuriteProcess.StartAsync(home, ct: ct, dataDirectory: _data.Path);
        return _azurite.ConnectionString;
    }

    public async Task<IBandwidthGroup> StartInstancesAsync(InstanceGroupOptions options, CancellationToken ct) =>
        new Loopback(await InstanceGroup.StartAsync(options, ct));

    public System.Diagnostics.ProcessStartInfo WhereInstancesRun(System.Diagnostics.ProcessStartInfo inner) => inner;

    public async ValueTask DisposeAsync()
    {
        if (_azurite is not null)
            await _azurite.DisposeAsync();
        _data.Dispose();
    }

    private sealed class Loopback(InstanceGroup group) : IBandwidthGroup
    {
        public IReadOnlyList<GroupInstance> Instances => group.Instances;

        public GroupInstance this[int index] => group[index];

        public Task StopAsync(int index) => group.StopAsync(index);

        public Task WaitForViewAsync(int members, CancellationToken ct) => group.WaitForViewAsync(members, ct);

        public Task WaitForWorkersAsync(int workers, string logDirectory) => GroupReadiness.WaitForWorkersAsync(group, workers, logDirectory);

        public ValueTask DisposeAsync() => group.DisposeAsync();
    }
}

/// <summary>The JSON fields every bandwidth run writes about its network.</summary>
internal static class BandwidthNetworkReport
{
    public static void Write(Report report, IBandwidthNetwork network)
    {
        report.Config("network", network.Description);
        report.Config("network_shaped", network.Shaped);
        if (network.Rates is { } rates)
        {
            report.Config("storage_mb_per_s", rates.StorageMBps);
            report.Config("peer_mb_per_s", rates.PeerMBps);
            report.Config("rates_note", "per instance and per direction, HTB on both ends of each instance's veth (bench/net/cloudnet.sh); the paper's VMs: 90 MB/s to storage, 750 MB/s between instances (same 1:8.3 ratio)");
        }
        else
        {
            report.Config("storage_mb_per_s", (JsonNode?)null);
            report.Config("peer_mb_per_s", (JsonNode?)null);
        }
    }
}

/// <summary>
/// Azurite's blobs on disk for one run, removed afterwards. In memory, Azurite keeps a deleted blob's extents
/// until its periodic garbage collection, and a full run uploads some 20 GB of fresh blobs (one per read, so
/// that every read is a miss): its in-memory store (capped at half this machine's memory) filled up at the
/// 800 MB reads. On disk, the page cache still serves the reads; storage speed is the shaped link's.
/// </summary>
internal sealed class AzuriteDataDirectory : IDisposable
{
    public string Path { get; } = System.IO.Path.Combine(System.IO.Path.GetTempPath(), "faast-bench-bandwidth-azurite-" + Guid.NewGuid().ToString("N")[..8]);

    public void Dispose()
    {
        if (Directory.Exists(Path))
            Directory.Delete(Path, recursive: true);
    }
}
