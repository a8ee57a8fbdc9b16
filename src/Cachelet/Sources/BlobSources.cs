using FaaST.Cachelet.Index;
using FaaST.Cachelet.Memory;
using FaaST.Cachelet.Peers;
using FaaST.Storage;

namespace FaaST.Cachelet.Sources;

/// <summary>
/// One link of the cache's read chain. A miss in the local index asks the sources in order — the
/// key's owner (another instance), any added tiers (e.g. a flash tier), storage — until one answers
/// <see cref="SourceOutcome.Found"/> or <see cref="SourceOutcome.NotFound"/>; a source that does not
/// hold the object, or cannot be reached, answers <see cref="SourceOutcome.Unavailable"/> and the
/// next one is asked. A source writes the object's bytes into the <see cref="IFetchTarget"/> the cache
/// gives it (a new extent of the arena when there is room), so the bytes are copied once.
/// </summary>
public interface IBlobSource
{
    /// <summary>A short name for logs and spans ("owner", "storage", "flash").</summary>
    string Name { get; }

    /// <summary>
    /// Whether this source's answer is the current version by the consistency preset's own rules
    /// (storage; the owner under owner presets). Another source's object is checked against storage
    /// (one HEAD) before it is served under the presets that check reads.
    /// </summary>
    bool Authoritative => false;

    /// <summary>
    /// Fetches <see cref="SourceRequest.Key"/>: on <see cref="SourceOutcome.Found"/> its bytes have been
    /// written to <paramref name="target"/>. Throwing fails the read (storage's errors do); a source
    /// that can be passed over answers <see cref="SourceOutcome.Unavailable"/> instead.
    /// </summary>
    ValueTask<SourceResult> FetchAsync(SourceRequest request, IFetchTarget target, CancellationToken ct);
}

/// <summary>What a read asks a source for.</summary>
/// <param name="Store">The storage account of the key.</param>
/// <param name="Owner">The key's owner in the current view, or null when it is this instance.</param>
/// <param name="IfVersion">The reader holds this version: a source may answer <see cref="SourceOutcome.NotModified"/> without bytes.</param>
/// <param name="Validate">The preset checks every read with storage: a source that answers from a copy should check it.</param>
public readonly record struct SourceRequest(IBlobStore Store, BlobKey Key, Peer? Owner, string? IfVersion, bool Validate);

public enum SourceOutcome
{
    /// <summary>The bytes are in the target.</summary>
    Found,
    /// <summary>The blob does not exist (an authoritative answer: the read returns nothing).</summary>
    NotFound,
    /// <summary>The reader's <see cref="SourceRequest.IfVersion"/> is current.</summary>
    NotModified,
    /// <summary>Not here, or not reachable: ask the next source.</summary>
    Unavailable,
}

/// <summary>A source's answer.</summary>
/// <param name="Version">The object's version (ETag, or an owner's pending version).</param>
/// <param name="Path">How the read is counted (e.g. a local miss for storage, a remote hit for the owner).</param>
/// <param name="Validated">Storage itself vouched for the version while it was fetched.</param>
public readonly record struct SourceResult(SourceOutcome Outcome, string Version = "", long Length = 0, ReadPath Path = ReadPath.LocalMiss, bool Validated = false)
{
    public static SourceResult Unavailable => new(SourceOutcome.Unavailable);
    public static SourceResult NotFound => new(SourceOutcome.NotFound);
    public static SourceResult NotModified => new(SourceOutcome.NotModified);
}

/// <summary>Where a source writes the object it found.</summary>
public interface IFetchTarget
{
    /// <summary>
    /// The stream for the object's <paramref name="length"/> bytes: a new extent of the arena (an
    /// <see cref="System.Buffers.IBufferWriter{T}"/>, so a socket can receive into it directly), or,
    /// when the cache has no room, a file or buffer of the read's own. Opening again discards what
    /// an earlier open received.
    /// </summary>
    Stream Open(long length);

    /// <summary>
    /// As <see cref="Open(long)"/>, from a source whose first response also fixed the object's
    /// <paramref name="version"/> (storage: every later byte is of it). The cache may then hand the object to a
    /// reader while the bytes still arrive (cache.streamThreshold); the bytes must be written in order from 0.
    /// </summary>
    Stream Open(long length, string version) => Open(length);
}

/// <summary>
/// Where the cache hands the objects it evicts for space or drops at their TTL, before their bytes are
/// freed (a demotion tier: flash, a peer, a log). Several sinks may be registered; each is called in
/// turn for every object, and the object's memory is freed only after the last one returned.
/// <para>
/// Called on the demotion pump (a background task; <see cref="Demotion.DemotionQueue"/>), never on a
/// reader's thread nor under the index's locks: eviction on a miss only queues the object. The bytes
/// are readable until the call returns and not after: copy or write what you need before returning.
/// A slow sink delays the others and fills the bounded queue, after which further demotions are
/// dropped (the object is still evicted; dropping a demotion loses nothing, since an evicted object
/// is never the only copy: write-behind objects stay pinned, so never evicted, until stored). A sink
/// that throws is logged and counted; eviction goes on. Objects removed as stale are never handed over.
/// </para>
/// </summary>
public interface IEvictionSink
{
    /// <summary>An object left the cache: <paramref name="bytes"/> holds version <paramref name="version"/> of <paramref name="key"/>.</summary>
    void OnEvicted(in BlobKey key, string version, in Extent bytes);

    /// <summary>The same, with why it left (<see cref="EvictionReason.Space"/> or <see cref="EvictionReason.Expired"/>):
    /// what the pump calls; by default it forwards to the other overload.</summary>
    void OnEvicted(EvictedObject evicted, in Extent bytes) => OnEvicted(evicted.Key, evicted.ETag, bytes);
}

/// <summary>The last source of every chain: the blob store (a download straight into the target).</summary>
internal sealed class StorageSource : IBlobSource
{
    public static StorageSource Instance { get; } = new();

    public string Name => "storage";

    public bool Authoritative => true;

    public async ValueTask<SourceResult> FetchAsync(SourceRequest request, IFetchTarget target, CancellationToken ct)
    {
        var properties = await request.Store.DownloadToAsync(request.Key.Container, request.Key.Blob, props => target.Open(props.Length, props.ETag), ct: ct);
        return properties is null
            ? SourceResult.NotFound
            : new SourceResult(SourceOutcome.Found, properties.ETag, properties.Length, ReadPath.LocalMiss, Validated: true);
    }
}
