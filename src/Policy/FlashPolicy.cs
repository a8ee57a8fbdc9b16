namespace FaaST.Policy;

/// <summary>
/// <c>faast.json</c>'s <c>flash</c> section (issue 22): whether the app's instances use the flash tier (a multi-tenant
/// object store on NVMe between the cache and blob storage, scheduled per tenant SLO as En4S does, SoCC'24 §4–§6), where
/// it is, the app's SLO there, and how a read falls back to storage when the tier is down or slow. Every key left out is
/// at its default; <see cref="Default"/> is the policy of an app without the section.
/// </summary>
/// <remarks>
/// This record is the one place the defaults live; <c>schemas/faast.schema.json</c> repeats them and a test keeps the
/// two in agreement. The parser checks every range and that <see cref="IopsSlo"/> and <see cref="P95LatencyUs"/> come
/// together (En4S §4.2.1: an LC tenant's SLO is both; a tenant with neither is best-effort).
/// </remarks>
public sealed record FlashPolicy
{
    /// <summary>The policy of an app without a <c>flash</c> section: off.</summary>
    public static FlashPolicy Default { get; } = new();

    /// <summary><c>flash.enabled</c>, default false: the tier is opt-in, since it needs a server (the platform starts one
    /// when an app asks) and an app without it behaves exactly as before.</summary>
    public bool Enabled { get; init; }

    /// <summary><c>flash.address</c>, default none: the platform's own flash server (it starts one for all its apps and
    /// hands each app's instances the address and the app's token). Set: an operator-run server at this absolute
    /// <c>http://</c> or <c>https://</c> URI; the app's token then comes from its settings (<c>FAAST_FLASH_TOKEN</c>).</summary>
    public Uri? Address { get; init; }

    /// <summary><c>flash.iopsSlo</c>, default none: the app's SLO in 4 KiB IOPS (En4S §4.2.1). With
    /// <see cref="P95LatencyUs"/> the app is a latency-critical (LC) tenant and goes through admission control; with
    /// neither it is best-effort (BE). Greater than 0, at most 10,000,000.</summary>
    public double? IopsSlo { get; init; }

    /// <summary><c>flash.p95LatencyUs</c>, default none: the SLO's p95 read latency in microseconds. 1 to 10,000,000.</summary>
    public int? P95LatencyUs { get; init; }

    /// <summary><c>flash.readRatio</c>, default none (the server measures it): the app's expected share of reads, which
    /// prices its writes (En4S §4.1's C*(type, read ratio)). 0 to 1.</summary>
    public double? ReadRatio { get; init; }

    /// <summary>
    /// <c>flash.timeoutMs</c>, default 250: how long a flash read may take to start answering (and, once streaming, to
    /// send its next chunk) before the read falls back to storage. The timeout only bounds what a hung server costs: a
    /// dead one refuses the connection at once, and after any failure the tier is skipped for <see cref="RetryAfter"/>,
    /// so a hung server costs one timeout per 5 s per instance (5 % of one reader's time at 250 ms). It must not cut off
    /// a working tier: a tier's first answer includes its queueing under the app's SLO, and on this 2-core VM a 1 MiB
    /// flash get took 98 ms at p50 and 185 ms at p95 (docs/flash.md, "Cache integration"); the first default, 10 ms
    /// (50× a 0.2 ms 4 KiB read), gave no flash hit at all in that run. 1 to 60,000.
    /// </summary>
    public TimeSpan Timeout { get; init; } = TimeSpan.FromMilliseconds(250);

    /// <summary><c>flash.retryAfterSeconds</c>, default 5: after a failure (an error or a timeout) flash is skipped this
    /// long and then tried again. Why 5 s: the platform restarts a dead server within a few seconds, and one failed read
    /// in 5 s costs an instance at most 1/20 of its time at the 250 ms timeout. 1 to 3,600.</summary>
    public TimeSpan RetryAfter { get; init; } = TimeSpan.FromSeconds(5);

    /// <summary><c>flash.demote</c>, default true: objects the cache evicts for space are written to flash (the tier's
    /// other half: reads then find there what the cache had to let go).</summary>
    public bool Demote { get; init; } = true;

    /// <summary><c>flash.minDemoteBytes</c>, default 1 KiB: smaller evicted objects are not demoted. Why: the tier stores
    /// every record padded to 4 KiB, so an object under 1 KiB would take at least 4× its size of flash, which larger
    /// objects (whose storage GETs cost more) use better. 0 to 1 GiB.</summary>
    public long MinDemoteBytes { get; init; } = 1024;

    /// <summary>True when the app has an SLO (LC); false: best-effort.</summary>
    public bool LatencyCritical => IopsSlo is not null;
}
