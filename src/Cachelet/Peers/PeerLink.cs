using FaaST.Cachelet.Index;
using FaaST.Cachelet.Memory;
using FaaST.Cachelet.Ownership;
using Microsoft.Extensions.Logging;

namespace FaaST.Cachelet.Peers;

/// <summary>
/// The cachelet's calls to other instances (through the <see cref="IOwnerClient"/> src/Peers
/// implements): writes through to owners and invalidations. Every failed call is counted
/// (<see cref="Fallbacks"/>) and logged at most once a second per kind; the caller then goes to storage.
/// The owner link of the read chain (<see cref="Reads.OwnerSource"/>) uses <see cref="Client"/> too.
/// </summary>
internal sealed class PeerLink(CacheOwnership ownership, ILogger logger)
{
    private readonly LogGate _ownerReadLog = LogGate.PerSecond();
    private readonly LogGate _ownerWriteLog = LogGate.PerSecond();
    private readonly LogGate _peerNotToldLog = LogGate.PerSecond();
    private IOwnerClient? _client;
    private long _fallbacks;

    /// <summary>The client once peers are connected; null before.</summary>
    public IOwnerClient? Client => _client;

    /// <summary>Peer calls that failed, after which the read or write went to storage instead.</summary>
    public long Fallbacks => Interlocked.Read(ref _fallbacks);

    public void Connect(IOwnerClient client) => _client = client;

    /// <summary>Connections to instances that left the view are closed.</summary>
    public void RetainCurrentView()
    {
        if (ownership.Directory is { } owners && _client is { } client)
            client.RetainOnly(owners.Others);
    }

    /// <summary>An owner read failed (the chain goes on to storage): counted and logged.</summary>
    public void OwnerReadFailed(in BlobKey key, Peer owner, PeerException e)
    {
        Interlocked.Increment(ref _fallbacks);
        if (logger.IsEnabled(LogLevel.Warning) && _ownerReadLog.TryPass(out var suppressed))
        {
            if (suppressed > 0)
                Log.Suppressed(logger, suppressed, "owner read failed");
            Log.OwnerReadFailed(logger, key.Container, key.Blob, owner.Id, e.Message);
        }
    }

    /// <summary>
    /// Writes an extent through to its owner; the owner's version, or null (logged) if the owner could
    /// not take it, in which case the caller writes to storage itself. A conditional write the owner refused
    /// throws <see cref="FaaST.Storage.BlobConditionFailedException"/>.
    /// </summary>
    public async Task<string?> TryPutAsync(BlobKey key, Extent extent, Peer owner, bool uploadSync, CancellationToken ct,
        FaaST.Storage.BlobWriteCondition condition = default)
    {
        if (_client is not { } client)
            return null;
        try
        {
            return await client.PutAsync(owner, key, extent.Length, uploadSync, (offset, length) => extent.GetMemory(offset, length), ct, condition);
        }
        catch (PeerException e)
        {
            Interlocked.Increment(ref _fallbacks);
            if (logger.IsEnabled(LogLevel.Warning) && _ownerWriteLog.TryPass(out var suppressed))
            {
                if (suppressed > 0)
                    Log.Suppressed(logger, suppressed, "owner write failed");
                Log.OwnerWriteFailed(logger, key.Container, key.Blob, owner.Id, e.Message);
            }
            return null;
        }
    }

    /// <summary>Tells the owner (in the background, best effort) that storage has a new version it may not hold.</summary>
    public void InvalidateAtOwner(Peer owner, BlobKey key, string version)
    {
        if (_client is not { } client)
            return;
        _ = Task.Run(async () =>
        {
            try
            {
                await client.InvalidateAsync(owner, key, version, CancellationToken.None);
            }
            catch (PeerException e)
            {
                Log.OwnerInvalidateFailed(logger, key.Container, key.Blob, owner.Id, e.Message);
            }
        });
    }

    /// <summary>
    /// A write that could not reach the owner it saw went to storage: before it is acknowledged, every
    /// other instance of the view drops its copy and distrusts the rest (InvalidateFromPeer), since
    /// whichever of them serves the key next (the views may already disagree about who owns it) must
    /// see this version. The unreachable owner is told too, in the background, in case it comes back.
    /// An instance that cannot be told either is gone as well or will be once the views agree; logged.
    /// </summary>
    public async Task InvalidateEverywhereAsync(BlobKey key, string version, Peer unreachable)
    {
        if (_client is not { } client || ownership.Directory is not { } owners)
            return;
        var calls = new List<Task>();
        foreach (var peer in owners.Others)
        {
            var call = InvalidateAsync(client, peer, key, version);
            if (peer.Id != unreachable.Id)
                calls.Add(call);
        }
        if (!owners.Others.Any(p => p.Id == unreachable.Id))
            _ = InvalidateAsync(client, unreachable, key, version);
        await Task.WhenAll(calls);
    }

    private async Task InvalidateAsync(IOwnerClient client, Peer peer, BlobKey key, string version)
    {
        try
        {
            await client.InvalidateAsync(peer, key, version, CancellationToken.None);
        }
        catch (PeerException e)
        {
            if (logger.IsEnabled(LogLevel.Warning) && _peerNotToldLog.TryPass(out var suppressed))
            {
                if (suppressed > 0)
                    Log.Suppressed(logger, suppressed, "peer not told of a write");
                Log.PeerNotTold(logger, peer.Id, key.Container, key.Blob, e.Message);
            }
        }
    }
}
