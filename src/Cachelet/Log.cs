using Microsoft.Extensions.Logging;

namespace FaaST.Cachelet;

/// <summary>
/// The cachelet's log messages, source-generated (no boxing, no parsing of the template per call), with event ids
/// 2000-2099, 2150-2199 for demotion, and 2600-2649 for bandwidth scaling. Warnings that can come once per read go through a <see cref="LogGate"/> at the call site; the line
/// that passes after some were held back is preceded by <see cref="Suppressed"/>.
/// </summary>
internal static partial class Log
{
    [LoggerMessage(EventId = 2000, Level = LogLevel.Debug, Message = "Fetching {Container}/{Blob} for a reader that left failed: {Message}")]
    public static partial void AbandonedFetchFailed(ILogger logger, string container, string blob, string message);

    [LoggerMessage(EventId = 2001, Level = LogLevel.Warning, Message = "The eviction sink failed on {Container}/{Blob}")]
    public static partial void EvictionSinkFailed(ILogger logger, Exception exception, string container, string blob);

    [LoggerMessage(EventId = 2002, Level = LogLevel.Warning, Message = "Blob {Container}/{Blob} ({Length} bytes) is served without caching: no room in the cache")]
    public static partial void ServedUncached(ILogger logger, string container, string blob, long length);

    [LoggerMessage(EventId = 2003, Level = LogLevel.Warning, Message = "Write-behind of {Container}/{Blob} failed (attempt {Attempt}): {Message}")]
    public static partial void WriteBehindFailed(ILogger logger, string container, string blob, int attempt, string message);

    [LoggerMessage(EventId = 2004, Level = LogLevel.Error, Message = "Giving up the write-behind of {Container}/{Blob} at shutdown")]
    public static partial void WriteBehindAbandoned(ILogger logger, string container, string blob);

    [LoggerMessage(EventId = 2005, Level = LogLevel.Error, Message = "Write-behind uploads still pending at shutdown were abandoned")]
    public static partial void WriteBehindPending(ILogger logger);

    [LoggerMessage(EventId = 2006, Level = LogLevel.Warning, Message = "Reading {Container}/{Blob} from its owner {Owner} failed, reading storage instead: {Message}")]
    public static partial void OwnerReadFailed(ILogger logger, string container, string blob, string owner, string message);

    [LoggerMessage(EventId = 2007, Level = LogLevel.Warning, Message = "Writing {Container}/{Blob} to its owner {Owner} failed, writing to storage instead: {Message}")]
    public static partial void OwnerWriteFailed(ILogger logger, string container, string blob, string owner, string message);

    [LoggerMessage(EventId = 2008, Level = LogLevel.Debug, Message = "Invalidating {Container}/{Blob} at {Owner} failed: {Message}")]
    public static partial void OwnerInvalidateFailed(ILogger logger, string container, string blob, string owner, string message);

    [LoggerMessage(EventId = 2009, Level = LogLevel.Warning, Message = "Could not tell {Peer} that {Container}/{Blob} was written past its owner: {Message}")]
    public static partial void PeerNotTold(ILogger logger, string peer, string container, string blob, string message);

    [LoggerMessage(EventId = 2011, Level = LogLevel.Warning, Message = "Streaming {Blob} to a function failed after {Filled} of {Length} bytes; not cached: {Message}")]
    public static partial void StreamedFillFailed(ILogger logger, string blob, long filled, long length, string message);

    [LoggerMessage(EventId = 2010, Level = LogLevel.Information, Message = "{Count} more lines like the next ({Kind}) were suppressed in the last second")]
    public static partial void Suppressed(ILogger logger, long count, string kind);

    [LoggerMessage(EventId = 2600, Level = LogLevel.Information,
        Message = "Fetched {Container}/{Blob} ({Bytes} bytes) in {Ranges} parallel ranges in {Milliseconds:0.0} ms ({Fallbacks} fell back to storage here)")]
    public static partial void ParallelFetch(ILogger logger, string container, string blob, long bytes, int ranges, double milliseconds, int fallbacks);

    [LoggerMessage(EventId = 2601, Level = LogLevel.Warning, Message = "Range {Offset}+{Length} of {Container}/{Blob} from {Peer} failed, fetching it from storage here: {Message}")]
    public static partial void ParallelRangeFellBack(ILogger logger, string container, string blob, long offset, long length, string peer, string message);

    [LoggerMessage(EventId = 2602, Level = LogLevel.Information, Message = "{Container}/{Blob} changed in storage (no longer {Version}) during a parallel fetch: fetching it again whole")]
    public static partial void ParallelFetchVersionChanged(ILogger logger, string container, string blob, string version);

    [LoggerMessage(EventId = 2603, Level = LogLevel.Warning, Message = "Asking for {Planned} instances to fetch {Container}/{Blob} failed, using the instances there are: {Message}")]
    public static partial void ScaleOutFailed(ILogger logger, string container, string blob, int planned, string message);

    [LoggerMessage(EventId = 2604, Level = LogLevel.Information,
        Message = "Asked for {Planned} instances to fetch {Container}/{Blob}: {Granted} granted, {Have} in the view after {Milliseconds:0} ms")]
    public static partial void ScaledOut(ILogger logger, string container, string blob, int planned, int granted, int have, double milliseconds);

    [LoggerMessage(EventId = 2100, Level = LogLevel.Warning, Message = "Prefetching {Container}/{Blob} failed: {Message}")]
    public static partial void PrefetchFailed(ILogger logger, string container, string blob, string message);

    [LoggerMessage(EventId = 2150, Level = LogLevel.Warning, Message = "Demotion of {Container}/{Blob} ({Length} bytes) dropped, its memory freed: {Why}")]
    public static partial void DemotionDropped(ILogger logger, string container, string blob, long length, string why);

    [LoggerMessage(EventId = 2151, Level = LogLevel.Error, Message = "An eviction sink did not return within {Seconds} s while the cache stopped")]
    public static partial void DemotionSinkHung(ILogger logger, int seconds);

    [LoggerMessage(EventId = 2152, Level = LogLevel.Error, Message = "Evicting ahead to keep room for demotions failed")]
    public static partial void EvictAheadFailed(ILogger logger, Exception exception);
}
