using FaaST.Runtime.Hosting;
using FaaST.Storage;

namespace FaaST.Bench;

/// <summary>
/// Where the bandwidth scenario's storage and instances run: the one seam a shaped network plugs into
/// (issue 13 item 8: network namespaces and tc giving each instance about 90 MB/s to storage and
/// 750 MB/s to the others, like the paper's VMs). The default is plain loopback, unshaped.
/// </summary>
public interface IBandwidthNetwork : IAsyncDisposable
{
    /// <summary>One line for the results: what the links are.</summary>
    string Description { get; }

    /// <summary>Whether storage and instance links are shaped like the paper's (false: loopback at memory speed).</summary>
    bool Shaped { get; }

    /// <summary>Starts the blob storage (Azurite) the instances share; its connection string.</summary>
    Task<string> StartStorageAsync(CancellationToken ct);

    /// <summary>Starts instances of an app (one more group; <see cref="InstanceGroupOptions.ExpectedMembers"/> says the view to wait for).</summary>
    Task<InstanceGroup> StartInstancesAsync(InstanceGroupOptions options, CancellationToken ct);
}

/// <summary>Everything on 127.0.0.1: Azurite as a local process, instances as local processes. Unshaped.</summary>
public sealed class LoopbackNetwork(string home) : IBandwidthNetwork
{
    private AzuriteProcess? _azurite;

    public string Description => "loopback (unshaped): Azurite and the instances on 127.0.0.1, links at this machine's memory and CPU speed";

    public bool Shaped => false;

    public async Task<string> StartStorageAsync(CancellationToken ct)
    {
        _azurite = await AzuriteProcess.StartAsync(home, ct: ct);
        return _azurite.ConnectionString;
    }

    public Task<InstanceGroup> StartInstancesAsync(InstanceGroupOptions options, CancellationToken ct) => InstanceGroup.StartAsync(options, ct);

    public async ValueTask DisposeAsync()
    {
        if (_azurite is not null)
            await _azurite.DisposeAsync();
    }
}
