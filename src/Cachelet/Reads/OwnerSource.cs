using System.Diagnostics;
using FaaST.Cachelet.Bandwidth;
using FaaST.Cachelet.Peers;
using FaaST.Cachelet.Sources;

namespace FaaST.Cachelet.Reads;

/// <summary>
/// The owner link of the read chain: asks the key's owner for the object (a remote hit, or a remote
/// miss if it had to fetch it), streamed into the fetch's target. A failed or timed-out call is
/// logged and answered Unavailable (the chain goes on to storage); a partial transfer is never cached.
/// </summary>
internal sealed class OwnerSource(PeerLink peers, ParallelRangeFetch bandwidth) : IBlobSource
{
    public string Name => "owner";

    // The owner's word is the current version under the owner presets (and it validates with
    // storage when asked to).
    public bool Authoritative => true;

    public async ValueTask<SourceResult> FetchAsync(SourceRequest request, IFetchTarget target, CancellationToken ct)
    {
        if (peers.Client is not { } client || request.Owner is not { } owner)
            return SourceResult.Unavailable;
        var key = request.Key;
        try
        {
            var get = new PeerGet(key, request.IfVersion, Fetch: true, request.Validate);
            var started = Stopwatch.GetTimestamp();
            var answer = await client.GetAsync(owner, get, h =>
            {
                if (h.RangeLength != h.Length)
                    throw new PeerException($"{owner.Address} sent {h.RangeLength} of {h.Length} bytes of {key.Container}/{key.Blob} for a whole-object read");
                return target.Open(h.Length);
            }, ct);
            // A remote hit moved the object from the owner's memory: what bandwidth scaling plans
            // with as BW_Inst (Faa$T §4).
            if (answer is { Status: PeerStatus.Ok, Fetched: false })
                bandwidth.ObserveInstanceTransfer(answer.Length, Stopwatch.GetElapsedTime(started));
            return answer.Status switch
            {
                PeerStatus.NotModified => SourceResult.NotModified,
                PeerStatus.NotFound => SourceResult.NotFound,
                PeerStatus.Ok => new SourceResult(SourceOutcome.Found, answer.Version, answer.Length,
                    answer.Fetched ? ReadPath.RemoteMiss : ReadPath.RemoteHit),
                _ => throw new PeerException($"{owner.Address} answered {answer.Status} to a fetching Get of {key.Container}/{key.Blob}"),
            };
        }
        catch (PeerException e)
        {
            peers.OwnerReadFailed(key, owner, e);
            return SourceResult.Unavailable;
        }
    }
}
